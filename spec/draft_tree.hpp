#pragma once
// Tree drafting (sglang's EAGLE with topk > 1): every draft step expands the best topk
// nodes of the previous step by their topk next tokens, scoring each candidate with its
// cumulative draft log-probability; at the end the best num_draft_tokens - 1 candidates
// form the verify tree under the root (the request's last committed token). A child
// never scores above its parent (log-probabilities are <= 0) and is created after it, so
// choosing by (score, then creation order) always keeps a chosen node's parent.
#include <cstdint>
#include <span>
#include <vector>

namespace aerie::spec {

// One drafted token, in creation order. parent: index of the parent candidate, or -1
// when the root (the last committed token) is the parent.
struct DraftCandidate {
  double score = 0.0;  // cumulative draft log-probability
  int32_t token = 0;
  int32_t parent = -1;
};

// A verify tree: node 0 is the root, nodes 1.. the chosen drafts, parents before children.
struct DraftTree {
  std::vector<int32_t> tokens;   // [nodes]
  std::vector<int32_t> parents;  // [nodes] parents[0] = -1, parents[i] < i
  int64_t size() const { return static_cast<int64_t>(tokens.size()); }
  // depth[i]: edges from the root (root 0); node i sits at position root + depth[i].
  std::vector<int32_t> depths() const;
  // children(i): the nodes whose parent is i, in index order.
  std::vector<int32_t> children(int32_t node) const;
  // A chain of drafts d_1..d_n under the root (topk = 1).
  static DraftTree chain(int32_t root, std::span<const int32_t> drafts);
  // Throws aerie::Error unless parents precede children and node 0 is the only root.
  void validate() const;
};

// The best `count` candidates (highest score, earlier on ties) as a tree under `root`.
DraftTree select_draft_tree(int32_t root, std::span<const DraftCandidate> candidates, int64_t count);

// Appends the tree's attention mask for verify: one row per node over prefix + size()
// keys (the context before the root, then the tree's nodes in index order); a node sees
// the whole prefix, its ancestors and itself.
void append_tree_mask(const DraftTree& tree, int64_t prefix, std::vector<uint8_t>& out);

// Positions a verify round reserves from the root's on: room for the verified nodes, for
// the draft's scratch rows while it expands (topk per step after the first, from one
// position past the root for a STANDALONE draft) and for the draft's extend over up to
// steps + 1 committed tokens (again one past the root for STANDALONE). Chain: steps + 2.
int64_t verify_reserve(int64_t steps, int64_t topk, int64_t draft_tokens);

}  // namespace aerie::spec
