#pragma once
// DecodeGraphRunner: CUDA graphs of the target decode step, one per batch-size bucket
// (spec/cuda_graph_buckets.hpp), captured once over one shared max-size workspace. A
// decode batch is padded up to the smallest captured bucket: padded rows read token 0 at
// position 0 and write the reserved dummy KV slot 0, with a context of that one slot;
// their logits are sliced away. Anything else (prefill, extend, custom masks, batches
// above the largest bucket) runs eagerly through LlamaModel::forward.
#include <map>
#include <memory>

#include "kernels/staging.hpp"
#include "model/forward_workspace.hpp"
#include "model/llama_model.hpp"
#include "spec/cuda_graph_buckets.hpp"

namespace aerie::spec {

class DecodeGraphRunner {
 public:
  // max_context: the longest context a request may have (sizes the attention splits).
  DecodeGraphRunner(model::LlamaModel& model, model::KvCache& kv, int64_t max_bs, int64_t max_context);
  ~DecodeGraphRunner();
  DecodeGraphRunner(const DecodeGraphRunner&) = delete;
  DecodeGraphRunner& operator=(const DecodeGraphRunner&) = delete;

  // True when the batch is a pure decode (one new token per sequence, no mask) that fits.
  bool can_run(const model::ForwardBatch& batch) const;
  // Replays the bucket's graph; returns the logits of the real rows [batch, vocab].
  TensorView replay(const model::ForwardBatch& batch);
  // Replays, and returns every row's greedy token: each graph ends with an argmax, so a
  // greedy batch needs no sampling launches after the graph, only the copy back.
  std::vector<int32_t> replay_greedy(const model::ForwardBatch& batch);
  // The bucket a batch of this size replays.
  int64_t bucket_for(int64_t batch_size) const;
  const std::vector<int64_t>& buckets() const { return schedule_.sizes(); }

 private:
  model::ForwardBatch padded(const model::ForwardBatch& batch, int64_t bucket) const;
  model::LlamaModel& model_;
  model::KvCache& kv_;
  BucketSchedule schedule_;
  std::unique_ptr<model::ForwardWorkspace> ws_;
  // The in-graph argmax: all-greedy sampling parameters, its scratch and output, and a
  // pinned landing area for the tokens.
  Buffer greedy_params_, greedy_top_p_, greedy_workspace_, greedy_tokens_;
  HostStaging greedy_host_;
  std::map<int64_t, void*> graphs_;   // bucket -> executable graph
  std::map<int64_t, int> splits_;     // bucket -> attention splits captured
};

}  // namespace aerie::spec
