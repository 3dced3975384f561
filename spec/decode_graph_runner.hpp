#pragma once
// DecodeGraphRunner: CUDA graphs of the target forward for batches where every sequence
// brings the same small number of new tokens q: a decode step (q = 1), the verify of a
// chain of q - 1 draft tokens (causal, no mask), or with `masked` the verify of a draft tree
// of q nodes under its custom mask (the mask and its offsets are data the graph reads, so
// any tree shape of q nodes replays). One graph per batch-size bucket
// (spec/cuda_graph_buckets.hpp), captured once over one shared max-size workspace. A
// batch is padded up to the smallest captured bucket: padded sequences read token 0 at
// positions 0..q-1 and write the reserved dummy KV slot 0, with a context of q copies of
// that slot (masked: under a mask of ones); their logits are sliced away. Anything else
// (prefill, extend, batches above the largest bucket) runs eagerly through LlamaModel::forward.
//
// Hidden states the model captures for a draft (LlamaModel::set_hidden_capture, set before
// the runner is made) are written by the graph into the runner's workspace; a replay points
// the model's captured_hidden() there.
#include <map>
#include <memory>

#include "kernels/staging.hpp"
#include "model/forward_workspace.hpp"
#include "model/llama_model.hpp"
#include "spec/bucket_graphs.hpp"
#include "spec/device_argmax.hpp"

namespace aerie::spec {

class DecodeGraphRunner {
 public:
  // max_context: the longest context a request may have (sizes the attention splits).
  // tokens_per_seq: q, the new tokens of every sequence (1: decode). masked: batches carry a
  // custom (tree) mask, and only such batches replay.
  DecodeGraphRunner(model::LlamaModel& model, model::KvCache& kv, int64_t max_bs, int64_t max_context, int64_t tokens_per_seq = 1,
                    bool masked = false);
  DecodeGraphRunner(const DecodeGraphRunner&) = delete;
  DecodeGraphRunner& operator=(const DecodeGraphRunner&) = delete;

  // True when every sequence has q new tokens, the batch has a mask exactly when the runner is
  // masked, every row wants logits in order, and the batch fits a bucket.
  bool can_run(const model::ForwardBatch& batch) const;
  // Replays the bucket's graph; returns the logits of the real rows [tokens, vocab].
  TensorView replay(const model::ForwardBatch& batch);
  // Every real row's greedy token of the last replay: each graph ends with an argmax, so a
  // greedy batch needs no sampling launches after the graph, only the copy back.
  std::vector<int32_t> last_greedy_tokens();
  // The same on the device, [real rows] i32, in stream order (until the next replay).
  TensorView last_greedy_on_device() const { return greedy_tokens_.view().slice_rows(0, last_tokens_); }
  // replay() and last_greedy_tokens().
  std::vector<int32_t> replay_greedy(const model::ForwardBatch& batch);
  // replay() without waiting: the in-graph argmax of every real row, [tokens] i32 on the
  // device, in stream order (valid until the next replay overwrites it).
  TensorView replay_greedy_on_device(const model::ForwardBatch& batch);
  // The bucket a batch of this many sequences replays.
  int64_t bucket_for(int64_t batch_size) const;
  const std::vector<int64_t>& buckets() const { return buckets_.buckets(); }
  int64_t tokens_per_seq() const { return q_; }
  bool masked() const { return masked_; }

 private:
  // A batch of `bs` padded sequences only (what the capture runs).
  model::ForwardBatch padding_only(int64_t bs) const;
  model::LlamaModel& model_;
  model::KvCache& kv_;
  const int64_t q_;
  const bool masked_;
  const int64_t max_context_;
  BucketGraphs buckets_;
  std::unique_ptr<model::ForwardWorkspace> ws_;
  // The in-graph argmax, its output, and a pinned landing area for the tokens.
  std::unique_ptr<DeviceArgmax> argmax_;
  Buffer greedy_tokens_;
  HostStaging greedy_host_;
  int64_t last_tokens_ = 0;                      // real rows of the last replay
  SideCopyStream side_;                          // the inputs' copies, beside the work before the replay
};

}  // namespace aerie::spec
