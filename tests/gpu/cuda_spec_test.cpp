// Speculative decoding on a GPU: greedy output with speculation equals greedy output
// without it for EAGLE, EAGLE3 and STANDALONE at batch sizes 1, 16 and 64 (tiny shape, f32
// activations, so the only difference between the runs is the algorithm), and the
// STANDALONE self-draft accepts every draft token. Skips without a CUDA device.
#include <gtest/gtest.h>


#include "kernels/buffer.hpp"
#include "launch/deployment.hpp"
#include "launch/deployment_flags.hpp"
#include "tests/launch/random_requests.hpp"

using namespace aerie;

namespace {

std::vector<core::GenerationRequest> mixed(int n, uint32_t seed) { return aerie::testing::random_requests(n, seed, 60, 1, 24); }

std::vector<launch::RequestOutcome> run(const std::string& alg, const std::vector<core::GenerationRequest>& reqs, int64_t topk = 1,
                                        int64_t draft_tokens = 0, int64_t page = 1) {
  auto world = parallel::make_single_process_group();
  launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny", .device = "cuda", .dtype = "f32", .max_total_tokens = 16384,
                              .page_size = page, .max_running_requests = 64, .chunked_prefill_size = 64};
  o.speculative_algorithm = alg;
  o.speculative_num_steps = 3;
  o.speculative_eagle_topk = topk;
  o.speculative_num_draft_tokens = draft_tokens;
  if (!alg.empty()) launch::check_deployment_flags(o);
  launch::Deployment d(o, *world);
  return d.run(reqs);
}

}  // namespace

TEST(CudaSpeculative, GreedyOutputEqualsPlainGreedy) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int batch : {1, 16, 64}) {
    const auto reqs = mixed(batch, 500 + static_cast<uint32_t>(batch));
    const auto plain = run("", reqs);
    for (const std::string alg : {"EAGLE", "EAGLE3", "STANDALONE"}) {
      const auto spec = run(alg, reqs);
      int differ = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
        if (spec[i].result.output_ids != plain[i].result.output_ids) ++differ;
        if (alg == "STANDALONE") {
          EXPECT_EQ(spec[i].result.spec_verify_ct, (static_cast<int64_t>(reqs[i].max_new_tokens) - 1 + 3) / 4) << "request " << i;
        }
      }
      EXPECT_EQ(differ, 0) << alg << " batch " << batch << ": " << differ << " of " << reqs.size() << " outputs differ";
    }
  }
}

TEST(CudaSpeculative, TreeGreedyOutputEqualsPlainGreedy) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int batch : {1, 16, 64}) {
    const auto reqs = mixed(batch, 700 + static_cast<uint32_t>(batch));
    const auto plain = run("", reqs);
    for (const std::string alg : {"EAGLE", "EAGLE3", "STANDALONE"}) {
      const auto spec = run(alg, reqs, 4, 10, 4);
      int differ = 0;
      int64_t verifies = 0, tokens = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
        if (spec[i].result.output_ids != plain[i].result.output_ids) ++differ;
        verifies += spec[i].result.spec_verify_ct;
        tokens += static_cast<int64_t>(spec[i].result.output_ids.size()) - 1;
      }
      EXPECT_EQ(differ, 0) << alg << " tree batch " << batch << ": " << differ << " of " << reqs.size() << " outputs differ";
      if (alg == "STANDALONE" && batch >= 16) {  // the self-draft's greedy path is in the tree: several tokens per verify
        EXPECT_GT(static_cast<double>(tokens) / static_cast<double>(verifies), 2.0) << "batch " << batch;
      }
    }
  }
}

TEST(CudaSpeculative, LogprobsEqualPlainLogprobs) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto reqs = mixed(16, 900);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].logprobs = i % 2 == 0 ? 2 : 0;
  const auto plain = run("", reqs);
  for (int64_t topk : {1, 4}) {
    const auto spec = run("STANDALONE", reqs, topk, topk == 1 ? 0 : 10, 4);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
      ASSERT_EQ(spec[i].result.output_ids, plain[i].result.output_ids) << "request " << i;
      ASSERT_EQ(spec[i].result.output_logprobs.size(), plain[i].result.output_logprobs.size());
      for (size_t k = 0; k < spec[i].result.output_logprobs.size(); ++k) {
        EXPECT_NEAR(spec[i].result.output_logprobs[k].logprob, plain[i].result.output_logprobs[k].logprob, 1e-3)
            << "topk " << topk << " request " << i << " token " << k;
        EXPECT_EQ(spec[i].result.output_logprobs[k].top_ids, plain[i].result.output_logprobs[k].top_ids);
      }
    }
  }
}

