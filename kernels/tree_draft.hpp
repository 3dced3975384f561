#pragma once
// EAGLE tree drafting on the device (sglang's draft with topk > 1), so that the whole
// multi-step draft of a batch of trees runs without the host (spec/draft_tree_runner.hpp).
// Every request keeps k frontier nodes; each draft forward runs one query per frontier node
// and gives its k best next tokens; the k best of the k x k expansions, by cumulative draft
// log-probability (score), become the next frontier. Every node drafted, frontier or not, is
// a candidate for the verify tree, in creation order per request:
//   candidates [0, k): the request's k first tokens (parent -1, the root);
//   candidates [k + (s - 1) k^2, k + s k^2): step s's expansions, expansion f * k + c being
//   frontier node f's c-th best child.
// Ties keep creation order, exactly as a stable sort by descending score would (equal to
// spec::DraftWorkerCore's step-by-step drafting, which sums the same floats in the same order).
#include <cstdint>

#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

// The frontier of a batch of trees, [batch * k] each, node f of request b at b * k + f.
struct TreeFrontier {
  TensorView tokens;   // i32: the token the node's forward reads (target ids)
  TensorView scores;   // f32: its cumulative draft log-probability
  TensorView nodes;    // i32: its candidate index
  TensorView sources;  // i32: the row of the hidden states its forward reads
};

// The candidates of a batch of trees, [batch, candidates] each.
struct TreeCandidates {
  TensorView tokens;   // i32 (target ids)
  TensorView scores;   // f32
  TensorView parents;  // i32: a candidate index of the same request, or -1 (the root)
};

/// The first frontier from each request's state: its k best first tokens.
struct TreeDraftBeginParams {
  TensorView rows;        // [batch] i32: each request's state row
  TensorView top_tokens;  // [state rows, k] i32: each state's k best first tokens, best first
  TensorView top_logp;    // [state rows, k] f32: their draft log-probabilities
  TreeFrontier frontier;  // out; sources = the request's state row
  TreeCandidates candidates;  // out: columns [0, k)
  void validate() const;
};
Status tree_draft_begin(const TreeDraftBeginParams& p, const Stream& stream);

/// One expansion after draft forward `step` (1, 2, ...) over the frontier: the next frontier
/// (in place) and the step's k^2 candidates. The new nodes' paths go into the next forward's
/// context: a node of forward s attends to its request's context, then its path (s - 1 slots,
/// its ancestors' rows), then its own slot, so the last s entries of a frontier node's
/// context in forward `step` are what its children's contexts hold before their own slot.
struct TreeDraftExpandParams {
  int64_t step = 1;
  TensorView child_tokens;  // [batch * k, k] i32: each frontier node's k best next tokens (target ids), best first
  TensorView child_logp;    // [batch * k, k] f32: their draft log-probabilities
  TreeFrontier frontier;    // in and out; the new sources are the parents' rows of this forward (b * k + f)
  TreeCandidates candidates;  // out: columns [k + (step - 1) k^2, k + step k^2)
  TensorView kv_indptr;       // [batch * k + 1] i32: forward `step`'s context offsets
  TensorView kv_indices;      // [>= kv_indptr[batch * k]] i32: its context slots
  TensorView next_kv_indptr;  // [batch * k + 1] i32 of forward step + 1, or undefined after the last
  TensorView next_kv_indices; // its context slots: each node's entries [end - step - 1, end - 1) are written
  void validate() const;
};
Status tree_draft_expand(const TreeDraftExpandParams& p, const Stream& stream);

// Candidates a tree of `steps` draft forwards' worth of tokens has: k first tokens, then
// k^2 per forward after the first.
inline int64_t tree_draft_candidates(int64_t steps, int64_t k) { return k + (steps - 1) * k * k; }

}  // namespace aerie::kernels
