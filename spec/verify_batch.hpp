#pragma once
// The target forward of a verify: every request's draft tree (a chain when topk is 1),
// node i at position root + depth(i) in the slot of position root + i, logits for every
// node, and for a tree the attention mask that lets a node see only its ancestors (a
// chain's causal mask is the same thing).
#include <cstdint>
#include <vector>

#include "model/forward_batch.hpp"
#include "spec/draft_port.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::spec {

struct VerifySequence {
  const spec::DraftTree* tree = nullptr;
  int32_t root_position = 0;         // the position of the request's last committed token
  const std::vector<int32_t>* slots = nullptr;  // slots of positions [0, root + reserve)
};

model::ForwardBatch verify_forward_batch(const std::vector<VerifySequence>& seqs, bool tree_mask);

// Each request's chain (roots[i], then `steps` drafts) whose drafts name the tokens of a chain
// proposal still on the device as future-token ids (-1 - slot) into chains.table, for a verify
// whose batch carries that table: the tokens are resolved on the device when it is uploaded.
std::vector<spec::DraftTree> chains_naming_device_tokens(const DeviceChains& chains, const std::vector<int32_t>& roots, int64_t steps);

}  // namespace aerie::spec
