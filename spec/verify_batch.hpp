#pragma once
// The target forward of a verify: every request's draft tree (a chain when topk is 1),
// node i at position root + depth(i) in the slot of position root + i, logits for every
// node, and for a tree the attention mask that lets a node see only its ancestors (a
// chain's causal mask is the same thing).
#include <cstdint>
#include <vector>

#include "model/forward_batch.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::spec {

struct VerifySequence {
  const spec::DraftTree* tree = nullptr;
  int32_t root_position = 0;         // the position of the request's last committed token
  const std::vector<int32_t>* slots = nullptr;  // slots of positions [0, root + reserve)
};

model::ForwardBatch verify_forward_batch(const std::vector<VerifySequence>& seqs, bool tree_mask);

}  // namespace aerie::spec
