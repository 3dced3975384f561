#pragma once
// SpecWorkerCore: one speculative iteration on a rank, target and draft together
// (sglang's EAGLE worker, chain drafting). For an EXTEND batch it runs the target over the
// prompt chunks (capturing hidden states), samples where a chunk ends the prompt, and runs
// the draft over the same positions. For a VERIFY batch (spec_steps = S) it proposes S
// draft tokens per request, verifies them in one target forward over S + 1 tokens, accepts
// greedily (temperature 0) or by target-only rejection sampling (exact in distribution),
// and runs the draft over the committed tokens. The result lists each request's committed
// tokens (accepted drafts + one bonus); rejected positions are left for the Scheduler to free.
#include <memory>

#include "actors/core/draft_worker_core.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

class SpecWorkerCore {
 public:
  SpecWorkerCore(model::LlamaModel& target, model::KvCache& kv, DraftWorkerCore& draft, int64_t max_batch);
  // The target stops capturing hidden states (a CUDA-graph capture must not allocate them).
  ~SpecWorkerCore();
  SpecWorkerCore(const SpecWorkerCore&) = delete;
  SpecWorkerCore& operator=(const SpecWorkerCore&) = delete;
  // Throws aerie::Error on a malformed batch (the TargetWorkerCore turns it into a result error).
  transport::BatchResult execute(const transport::BatchMessage& m);
  void forget(const std::vector<uint64_t>& rids) { for (uint64_t r : rids) draft_.forget(r); }

 private:
  transport::BatchResult extend(const transport::BatchMessage& m);
  transport::BatchResult verify(const transport::BatchMessage& m);
  std::vector<int32_t> argmax_rows(const TensorView& logits);

  model::LlamaModel& target_;
  model::KvCache& kv_;
  DraftWorkerCore& draft_;
  model::Sampler sampler_;
  std::unique_ptr<model::Sampler> argmax_;
  int64_t argmax_rows_ = 0;
};

}  // namespace aerie::core
