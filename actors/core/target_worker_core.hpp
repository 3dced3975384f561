#pragma once
// TargetWorkerCore: the CAF-free part of a TargetWorker. It runs one BatchMessage on its
// rank's model and KV cache (a captured CUDA graph when the batch is a decode that fits a
// bucket, eagerly otherwise), samples the requested rows and reports the tokens. Errors
// become a BatchResult with `error` set; the worker stays usable. Under overlap scheduling
// a batch's decodes may name tokens of the batch before it by future slots: the worker keeps
// each batch's sampled tokens where its message says (FutureTokenMap) and resolves them
// before the next batch runs.
#include <memory>

#include "actors/core/forward_timeline.hpp"
#include "actors/core/future_tokens.hpp"
#include "actors/core/logit_adjustments.hpp"
#include "actors/core/logprob_reader.hpp"
#include "actors/core/spec_worker_core.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "spec/decode_graph_runner.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

struct WorkerOptions {
  int64_t max_batch = 256;          // sequences per batch at most (sampler capacity)
  int64_t cuda_graph_max_bs = 0;    // > 0 on CUDA: capture decode graphs up to this batch size
};

struct WorkerStats {
  int64_t batches = 0;
  int64_t graph_replays = 0;
  int64_t errors = 0;
};

class TargetWorkerCore {
 public:
  TargetWorkerCore(model::LlamaModel& model, model::KvCache& kv, WorkerOptions options);
  transport::BatchResult execute(const transport::BatchMessage& batch);
  // Every batch but IDLE goes to `spec` from now on (a speculative engine plans EXTEND and VERIFY).
  void enable_speculation(std::unique_ptr<SpecWorkerCore> spec) { spec_ = std::move(spec); }
  const WorkerStats& stats() const { return stats_; }

 private:
  // Runs a batch whose future tokens are resolved; throws on what it refuses.
  void run(const transport::BatchMessage& m, transport::BatchResult& r);
  model::LlamaModel& model_;
  model::KvCache& kv_;
  WorkerOptions options_;
  model::Sampler sampler_;
  LogprobReader logprobs_;
  LogitAdjuster adjuster_;
  std::unique_ptr<spec::DecodeGraphRunner> graphs_;
  std::unique_ptr<SpecWorkerCore> spec_;
  FutureTokenMap futures_;
  ForwardTimeline timeline_;
  WorkerStats stats_;
  int cuda_device_ = -1;  // the GPU this worker's model lives on (set on whatever thread runs it)
};

}  // namespace aerie::core
