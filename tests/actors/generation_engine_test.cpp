// The engine's batching, admission and preemption never change what a request produces.
#include <gtest/gtest.h>

#include <random>

#include "actors/core/generation_engine.hpp"
#include "kernels/error.hpp"

using namespace aerie;
using namespace aerie::core;

namespace {

struct Fixture {
  model::LlamaConfig config = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel model{config, model::random_llama_weights(config, 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32};

  std::vector<GenerationResult> run(const std::vector<GenerationRequest>& reqs, int64_t pool_tokens, int64_t page_size,
                                    EngineOptions opts = {}, EngineStats* stats = nullptr) {
    model::KvCache kv(config, model::kv_shape_for_tokens(pool_tokens, page_size), Device::kCpu, DType::kF32);
    GenerationEngine engine(model, kv, opts);
    auto out = engine.generate(reqs);
    if (stats) *stats = engine.stats();
    return out;
  }
};

std::vector<GenerationRequest> mixed_requests(int n, uint32_t seed, float temperature) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    const int len = 1 + static_cast<int>(rng() % 30);
    for (int t = 0; t < len; ++t) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    r.max_new_tokens = 4 + static_cast<int64_t>(rng() % 12);
    r.sampling.temperature = temperature;
    r.sampling.top_k = 50;
    r.sampling.seed = i;
    r.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

}  // namespace

TEST(GenerationEngine, BatchedOutputsEqualEachRequestAlone) {
  Fixture f;
  for (float temperature : {0.0f, 0.8f}) {
    auto reqs = mixed_requests(16, 21, temperature);
    auto batched = f.run(reqs, 4096, 4);
    for (size_t i = 0; i < reqs.size(); ++i) {
      auto alone = f.run({reqs[i]}, 4096, 4);
      EXPECT_EQ(batched[i].output_ids, alone[0].output_ids) << "request " << i << " temperature " << temperature;
      EXPECT_EQ(batched[i].finish_reason, "length");
      EXPECT_EQ(static_cast<int64_t>(batched[i].output_ids.size()), reqs[i].max_new_tokens);
    }
  }
}

TEST(GenerationEngine, PreemptsUnderKvPressureWithoutChangingOutputs) {
  Fixture f;
  auto reqs = mixed_requests(16, 22, 0.0f);
  auto roomy = f.run(reqs, 4096, 4);
  EngineStats stats;
  int64_t longest = 0;
  for (const auto& r : reqs) longest = std::max<int64_t>(longest, static_cast<int64_t>(r.prompt.size()) + r.max_new_tokens);
  auto tight = f.run(reqs, longest, 4, {}, &stats);
  EXPECT_GT(stats.preemptions, 0);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(tight[i].output_ids, roomy[i].output_ids) << i;
  // A cap on running requests changes the schedule, not the tokens.
  auto capped = f.run(reqs, 4096, 1, {.max_running_requests = 3, .max_prefill_tokens = 20}, &stats);
  EXPECT_LE(stats.max_batch, 3);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(capped[i].output_ids, roomy[i].output_ids) << i;
}

TEST(GenerationEngine, RejectsWhatCanNeverFit) {
  Fixture f;
  GenerationRequest r;
  r.prompt.assign(60, 5);
  r.max_new_tokens = 10;
  try {
    f.run({r}, 32, 4);
    FAIL() << "accepted a request larger than the KV pool";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("can never fit in the KV cache"), std::string::npos) << e.what();
  }
  r.max_new_tokens = 5000;  // beyond the context length
  EXPECT_THROW(f.run({r}, 8192, 4), Error);
  r.max_new_tokens = 4;
  r.prompt = {};
  EXPECT_THROW(f.run({r}, 64, 4), Error);
  r.prompt = {1, 100000};
  EXPECT_THROW(f.run({r}, 64, 4), Error);
  r.prompt = {1, 2};
  r.sampling.top_p = 0.0f;
  EXPECT_THROW(f.run({r}, 64, 4), Error);
}

TEST(GenerationEngine, StopsAtStopTokensAndEos) {
  Fixture f;
  GenerationRequest r;
  r.prompt = {1, 17, 29, 4};
  r.max_new_tokens = 12;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  auto full = f.run({r}, 256, 4)[0].output_ids;
  ASSERT_EQ(full.size(), 12u);
  r.stop_token_ids = {full[4]};
  auto stopped = f.run({r}, 256, 4)[0];
  const auto first = std::find(full.begin(), full.end(), full[4]) - full.begin();
  EXPECT_EQ(stopped.output_ids, std::vector<int32_t>(full.begin(), full.begin() + first + 1));
  EXPECT_EQ(stopped.finish_reason, "stop");
  // The model's EOS ids stop generation unless ignore_eos.
  f.config.eos_token_ids = {full[2]};
  model::LlamaModel eos_model(f.config, model::random_llama_weights(f.config, 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32);
  model::KvCache kv(f.config, model::kv_shape_for_tokens(256, 4), Device::kCpu, DType::kF32);
  r.stop_token_ids = {};
  r.ignore_eos = false;
  auto eos = GenerationEngine(eos_model, kv, {}).generate({r})[0];
  EXPECT_EQ(eos.output_ids.back(), full[2]);
  EXPECT_EQ(eos.finish_reason, "stop");
}
