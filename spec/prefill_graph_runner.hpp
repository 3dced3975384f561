#pragma once
// PrefillGraphRunner: CUDA graphs of the target forward for the prefill of one request (a
// whole prompt or one chunk of it, after a cached prefix or not) of up to max_tokens new
// tokens, captured at token-count buckets (spec/cuda_graph_buckets.hpp: 16, 32, 64, ...).
// Eagerly, a short prompt's forward is bound by its launches, not by the GPU: SmolLM2's 30
// layers are ~300 kernels, each a few microseconds of host work; a replay is one launch. This
// is what a request's start costs at batch 1 (docs/performance.md), and what sglang's
// piecewise and vLLM's full prefill graphs save.
//
// The request's new tokens are padded up to the bucket inside the one sequence: a padded
// token reads token 0 at the last real position, writes the reserved dummy KV slot 0 and
// extends the sequence's context by a copy of that slot, so causal attention keeps every real
// token to the real context before it (a padded token only ever sees real keys and dummies
// behind them). Attention runs unsplit, so bf16/f16 prompts take the tensor-core prefill
// kernel (kernels/attention.hpp). At most one row's logits (the last token of a final
// chunk) come back; its index is data the graph reads. Hidden states the model captures for a
// draft (set before the runner is made) are written into the runner's workspace, the real
// rows first. Batches of several requests, with a mask, more logit rows, or more tokens run
// eagerly (LlamaModel::forward).
#include <memory>
#include <vector>

#include "kernels/staging.hpp"
#include "model/forward_workspace.hpp"
#include "model/llama_model.hpp"
#include "spec/bucket_graphs.hpp"

namespace aerie::spec {

class PrefillGraphRunner {
 public:
  // max_tokens: the most new tokens a replayed prefill has (the largest bucket); max_context:
  // the longest context a request may have (cached prefix included).
  PrefillGraphRunner(model::LlamaModel& model, model::KvCache& kv, int64_t max_tokens, int64_t max_context);
  PrefillGraphRunner(const PrefillGraphRunner&) = delete;
  PrefillGraphRunner& operator=(const PrefillGraphRunner&) = delete;

  // True for one sequence of 1..largest() new tokens whose context holds them, no mask, and
  // at most one logit row among its tokens.
  bool can_run(const model::ForwardBatch& batch) const;
  // Replays the bucket's graph; returns the logits of the batch's logit rows ([0 or 1, vocab]).
  TensorView replay(const model::ForwardBatch& batch);
  // The bucket a prefill of this many new tokens replays (-1: none).
  int64_t bucket_for(int64_t tokens) const { return buckets_.bucket_for(tokens); }
  const std::vector<int64_t>& buckets() const { return buckets_.buckets(); }
  int64_t largest() const { return buckets_.largest(); }

 private:
  // The batch as its bucket runs it: its one sequence padded to `bucket` new tokens.
  model::ForwardBatch padded_to(const model::ForwardBatch& batch, int64_t bucket) const;
  model::LlamaModel& model_;
  model::KvCache& kv_;
  BucketGraphs buckets_;
  std::unique_ptr<model::ForwardWorkspace> ws_;
  SideCopyStream side_;  // the inputs' copies, beside the work before the replay
};

}  // namespace aerie::spec
