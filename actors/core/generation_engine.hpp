#pragma once
// GenerationEngine: runs a set of requests to completion on one model replica with
// continuous batching: waiting prompts are admitted (prefilled) while running requests
// decode, in one mixed forward per step. KV pages are taken per request as it grows; when
// the pool runs out, the newest running request is preempted (its pages freed, its
// prompt + output recomputed later), so every request finishes with the tokens it would
// get alone.
#include <cstdint>
#include <deque>
#include <vector>

#include "actors/core/generation_request.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "spec/decode_graph_runner.hpp"

namespace aerie::core {

struct EngineOptions {
  int64_t max_running_requests = 256;
  int64_t max_prefill_tokens = 16384;  // prompt tokens admitted per step (at least one prompt)
  int64_t cuda_graph_max_bs = 0;       // > 0 on CUDA: capture decode graphs up to this batch size
};

struct EngineStats {
  int64_t forward_steps = 0;
  int64_t preemptions = 0;
  int64_t max_batch = 0;
  int64_t graph_replays = 0;
};

class GenerationEngine {
 public:
  GenerationEngine(model::LlamaModel& model, model::KvCache& kv, EngineOptions options);

  // Results in the order of `requests`. A request that could never fit (prompt + output
  // longer than the KV pool or the context) throws aerie::Error before anything runs.
  std::vector<GenerationResult> generate(const std::vector<GenerationRequest>& requests);
  const EngineStats& stats() const { return stats_; }

 private:
  struct Running {
    size_t index;                  // into the request list
    std::vector<int32_t> tokens;   // prompt + generated so far
    int64_t computed = 0;          // tokens whose K/V are in the cache
  };
  void check_fits(const GenerationRequest& r) const;
  bool step(const std::vector<GenerationRequest>& requests, std::vector<GenerationResult>& results);

  model::LlamaModel& model_;
  model::KvCache& kv_;
  EngineOptions options_;
  std::unique_ptr<spec::DecodeGraphRunner> graphs_;
  model::Sampler sampler_;
  model::PageAllocator allocator_;
  model::RequestPageTable pages_;
  std::deque<Running> waiting_;
  std::vector<Running> running_;
  EngineStats stats_;
};

}  // namespace aerie::core
