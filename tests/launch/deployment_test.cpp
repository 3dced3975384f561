// The whole actor path in one process: 64 concurrent requests of mixed lengths through
// Router -> Scheduler -> TargetWorker give each request exactly what it gets alone, also
// when the KV pool is too small for all of them at once, with overlap scheduling on and off.
#include <gtest/gtest.h>


#include "actors/core/generation_engine.hpp"
#include "kernels/error.hpp"
#include "launch/deployment.hpp"
#include "tests/launch/random_requests.hpp"

using namespace aerie;

namespace {

std::vector<core::GenerationRequest> mixed(int n, uint32_t seed) {
  auto reqs = aerie::testing::random_requests(n, seed, 48, 2, 14);
  for (int i = 0; i < n; ++i) {
    reqs[static_cast<size_t>(i)].sampling.temperature = i % 4 == 0 ? 0.8f : 0.0f;  // some sampled (seeded), most greedy
    reqs[static_cast<size_t>(i)].sampling.seed = i;
  }
  return reqs;
}

std::vector<int32_t> alone(const core::GenerationRequest& r) {
  auto cfg = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel m(cfg, model::random_llama_weights(cfg, 0, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32);
  model::KvCache kv(cfg, model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
  return core::GenerationEngine(m, kv, {}).generate({r})[0].output_ids;
}

}  // namespace

TEST(Deployment, SixtyFourConcurrentRequestsEqualEachAlone) {
  auto world = parallel::make_single_process_group();
  const auto reqs = mixed(64, 31);
  std::vector<std::vector<int32_t>> expected;
  for (const auto& r : reqs) expected.push_back(alone(r));
  for (bool overlap : {true, false})                      // overlap scheduling on (the default) and off
    for (int64_t pool : {int64_t{8192}, int64_t{256}}) {  // roomy, then preemption territory
      launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny", .max_total_tokens = pool, .page_size = 4,
                                  .max_running_requests = 64, .chunked_prefill_size = 96};
      o.disable_overlap_schedule = !overlap;
      launch::Deployment d(o, *world);
      const auto out = d.run(reqs);
      ASSERT_EQ(out.size(), reqs.size());
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(out[i].error.empty()) << out[i].error;
        EXPECT_EQ(out[i].result.output_ids, expected[i]) << "request " << i << " pool " << pool << " overlap " << overlap;
      }
    }
}

TEST(Deployment, ARequestThatCanNeverFitIsRejectedClearly) {
  auto world = parallel::make_single_process_group();
  launch::Deployment d({.load_format = "dummy", .model_shape = "tiny", .max_total_tokens = 32, .page_size = 4}, *world);
  core::GenerationRequest big;
  big.prompt.assign(40, 7);
  big.max_new_tokens = 4;
  core::GenerationRequest small;
  small.prompt = {1, 2, 3};
  small.max_new_tokens = 4;
  small.sampling.temperature = 0.0f;
  const auto out = d.run({big, small});
  EXPECT_NE(out[0].error.find("can never fit in the KV cache"), std::string::npos) << out[0].error;
  EXPECT_TRUE(out[1].error.empty());
  EXPECT_EQ(out[1].result.output_ids.size(), 4u);
}

TEST(Deployment, RejectsLayoutsThatDoNotMatchTheLaunch) {
  EXPECT_THROW(launch::check_parallel_layout(1, 2, 1), Error);
  EXPECT_THROW(launch::check_parallel_layout(2, 2, 2), Error);  // tp 2 x dp 2 needs 4 ranks
  EXPECT_NO_THROW(launch::check_parallel_layout(2, 1, 2));
  EXPECT_NO_THROW(launch::check_parallel_layout(1, 2, 2));
}
