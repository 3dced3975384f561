#pragma once
// GenerationEngine: a SchedulerCore and a TargetWorkerCore driven in one loop, without
// actors: what tests and the single-process paths use to run a set of requests to
// completion. With overlap the loop plans as far ahead as the Scheduler allows before it
// runs the oldest batch, as the actors do while the worker is busy. Every request finishes with the tokens it would get alone (batching,
// chunking and preemption never change outputs).
#include <cstdint>
#include <vector>

#include "actors/core/generation_request.hpp"
#include "actors/core/scheduler_core.hpp"
#include "actors/core/target_worker_core.hpp"

namespace aerie::core {

struct EngineOptions {
  int64_t max_running_requests = 256;
  int64_t max_prefill_tokens = 16384;  // prompt tokens per iteration (longer prompts are chunked)
  int64_t cuda_graph_max_bs = 0;       // > 0 on CUDA: capture decode graphs up to this batch size
  int64_t prefill_graph_max_tokens = 0;  // > 0 on CUDA: one request's prefill of up to this many tokens replays a graph
  bool overlap = false;                // plan each batch before the last one's result (SchedulerOptions::overlap)
};

struct EngineStats {
  int64_t forward_steps = 0;
  int64_t preemptions = 0;
  int64_t max_batch = 0;
  int64_t graph_replays = 0;
  int64_t prefill_graph_replays = 0;
  int64_t prefill_chunks = 0;
};

class GenerationEngine {
 public:
  GenerationEngine(model::LlamaModel& model, model::KvCache& kv, EngineOptions options);

  // Results in the order of `requests`. A request that could never fit (prompt + output
  // longer than the KV pool or the context) throws aerie::Error before anything runs.
  std::vector<GenerationResult> generate(const std::vector<GenerationRequest>& requests);
  const EngineStats& stats() const { return stats_; }

 private:
  model::LlamaModel& model_;
  model::KvCache& kv_;
  EngineOptions options_;
  TargetWorkerCore worker_;
  EngineStats stats_;
};

// The scheduler options that match a model (vocabulary, context, EOS ids).
SchedulerOptions scheduler_options_for(const model::LlamaConfig& config, int64_t max_running_requests, int64_t chunked_prefill_size,
                                       bool overlap = false);

}  // namespace aerie::core
