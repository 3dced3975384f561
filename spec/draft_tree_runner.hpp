#pragma once
// DraftTreeRunner: the draft forwards of a tree proposal (topk > 1) as one device-side
// sequence, sglang's multi-step tree draft. The first frontier is each request's k best first
// tokens, which the draft extend left at the request's state row; every draft forward runs
// one query per frontier node (its request's context, then its path, then its own scratch
// slot), and kernels::tree_draft_expand keeps the k best of the k x k expansions as the next
// frontier, writing their paths into the next forward's context on the device. An EAGLE
// head's input hidden state is the parent's output row (the state row at the first forward).
// Every step's positions, own slots and contexts are uploaded before the first; one copy of
// the candidates comes back at the end, and the host picks the verify tree from them
// (spec/draft_tree.hpp: the best num_draft_tokens - 1 by score).
//
// With graphs (CUDA) the whole sequence is one CUDA graph per batch-size bucket, captured
// largest first over one set of max-size workspaces (one per forward); a padded request
// reads token 0 at state row `padding_row` and writes and attends to the dummy KV slot 0 only,
// and its candidates are sliced away. Without graphs (the CPU, --disable-cuda-graph) the same
// sequence runs eagerly over the same workspaces.
#include <cstdint>
#include <map>
#include <memory>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"
#include "model/eagle_head.hpp"
#include "model/forward_workspace.hpp"
#include "model/kv_cache.hpp"
#include "model/llama_model.hpp"
#include "spec/bucket_graphs.hpp"
#include "spec/draft_net.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::spec {

// One request of a tree proposal.
struct TreeSeq {
  int32_t first_position;  // where the first draft tokens sit (the first forward's position)
  // Slots of positions [0, first_position), then (steps - 1) * topk scratch slots: forward j's
  // node f writes slot (*context)[first_position + (j - 1) * topk + f].
  const std::vector<int32_t>* context;
  int32_t state_row;       // the request's row of the state pools
};

// The state pools a tree runner reads, one row per request, at fixed addresses for its life.
struct TreeStatePools {
  TensorView hidden;      // EAGLE: [rows, H] each request's state hidden (undefined for STANDALONE)
  TensorView top_tokens;  // [rows, topk] i32: each request's topk best first tokens (target ids)
  TensorView top_logp;    // [rows, topk] f32: their draft log-probabilities
  int32_t padding_row;    // a row no request owns: padded requests read it
};

class DraftTreeRunner {
 public:
  // net: an EAGLE head or a STANDALONE model. to_target: the head's draft -> target id map [draft
  // vocab, 1] i32 (empty: the same ids). steps: draft forwards + 1 (the first tokens come from
  // the state); max_bs: the largest batch (and bucket); max_context: the longest context a
  // node may have (fixes the attention splits per bucket). graphs: capture (CUDA only).
  DraftTreeRunner(DraftNet net, TreeStatePools pools, const TensorView& to_target, model::KvCache& kv,
                  const model::LlamaModel& target, int64_t steps, int64_t topk, int64_t max_bs, int64_t max_context, bool graphs);
  DraftTreeRunner(const DraftTreeRunner&) = delete;
  DraftTreeRunner& operator=(const DraftTreeRunner&) = delete;

  int64_t steps() const { return steps_; }
  int64_t topk() const { return k_; }
  // Whether a proposal of these requests fits (batch size, contexts); else the caller drafts
  // step by step.
  bool can_run(const std::vector<TreeSeq>& seqs) const;
  // Each request's candidates in creation order (kernels/tree_draft.hpp).
  std::vector<std::vector<DraftCandidate>> propose(const std::vector<TreeSeq>& seqs);
  // The bucket a batch of this many requests replays (-1: none captured).
  int64_t bucket_for(int64_t batch_size) const { return buckets_.bucket_for(batch_size); }
  bool graphs() const { return buckets_.graphs(); }

 private:
  // Every forward's batch for these requests padded to `bs` requests (seqs may be empty: all padding).
  void upload(const std::vector<TreeSeq>& seqs, int64_t bs);
  // Enqueues the whole tree draft for a batch of `bs` requests whose inputs are uploaded.
  void enqueue(int64_t bs);
  model::ForwardDims dims_for(int64_t bs) const;

  DraftNet net_;
  TreeStatePools pools_;
  TensorView to_target_;
  model::KvCache& kv_;
  const model::LlamaModel& target_;
  Stream stream_;
  DType act_;
  int64_t steps_, k_, max_bs_, max_context_, cols_;
  BucketGraphs buckets_;
  // A padded request's context: first position 1 over the dummy slot 0, its scratch slots the dummy too.
  const std::vector<int32_t> padding_context_;
  std::vector<std::unique_ptr<model::ForwardWorkspace>> ws_;  // one per draft forward
  Buffer rows_;                                    // [max_bs] i32: each request's state row
  Buffer front_tokens_, front_scores_, front_nodes_, front_sources_;  // [max_bs * k]
  Buffer cand_tokens_, cand_scores_, cand_parents_;  // [max_bs, cols]
  Buffer top_values_, top_ids_, child_tokens_;     // [max_bs * k, k]: a forward's best children
  Buffer in_hidden_;                               // [max_bs * k, H]: an EAGLE forward's input
  HostStaging rows_host_, cand_host_;
};

}  // namespace aerie::spec
