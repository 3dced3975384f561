#include "spec/greedy_accept.hpp"

#include "kernels/error.hpp"

namespace aerie::spec {

std::vector<int32_t> TreeAcceptance::committed(const DraftTree& tree) const {
  std::vector<int32_t> out;
  for (int32_t n : path) out.push_back(tree.tokens[static_cast<size_t>(n)]);
  out.push_back(bonus);
  return out;
}

TreeAcceptance greedy_accept_tree(const DraftTree& tree, std::span<const int32_t> target_argmax) {
  AERIE_CHECK(static_cast<int64_t>(target_argmax.size()) == tree.size(),
              "target_argmax holds " << target_argmax.size() << " tokens for a tree of " << tree.size());
  TreeAcceptance r;
  int32_t node = 0;
  for (;;) {
    const int32_t want = target_argmax[static_cast<size_t>(node)];
    int32_t next = -1;
    for (int32_t c : tree.children(node))
      if (tree.tokens[static_cast<size_t>(c)] == want) {
        next = c;
        break;
      }
    if (next < 0) {
      r.bonus = want;
      return r;
    }
    r.path.push_back(next);
    node = next;
  }
}

}  // namespace aerie::spec
