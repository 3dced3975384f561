#pragma once
// Greedy verification of a draft tree (a chain is a tree whose nodes each have one child):
// from the root, the target's argmax at the current node is looked up among the node's
// children; a match is accepted and becomes the current node, no match ends the walk and
// the argmax is the bonus token. So every verify commits between 1 and depth + 1 tokens,
// exactly the tokens greedy decoding without speculation produces.
#include <cstdint>
#include <span>
#include <vector>

#include "spec/draft_tree.hpp"

namespace aerie::spec {

struct TreeAcceptance {
  std::vector<int32_t> path;  // accepted nodes, root excluded, root to leaf
  int32_t bonus = 0;          // the token after them
  // The committed tokens: the accepted drafts, then the bonus.
  std::vector<int32_t> committed(const DraftTree& tree) const;
};

// target_argmax[i]: the target's argmax after the committed tokens and node i's path.
TreeAcceptance greedy_accept_tree(const DraftTree& tree, std::span<const int32_t> target_argmax);

}  // namespace aerie::spec
