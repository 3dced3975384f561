#include "spec/draft_tree.hpp"

#include <algorithm>
#include <numeric>

#include "kernels/error.hpp"

namespace aerie::spec {

std::vector<int32_t> DraftTree::depths() const {
  std::vector<int32_t> d(tokens.size(), 0);
  for (size_t i = 1; i < d.size(); ++i) d[i] = d[static_cast<size_t>(parents[i])] + 1;
  return d;
}

std::vector<int32_t> DraftTree::children(int32_t node) const {
  std::vector<int32_t> out;
  for (size_t i = static_cast<size_t>(node) + 1; i < parents.size(); ++i)
    if (parents[i] == node) out.push_back(static_cast<int32_t>(i));
  return out;
}

DraftTree DraftTree::chain(int32_t root, std::span<const int32_t> drafts) {
  DraftTree t;
  t.tokens.push_back(root);
  t.parents.push_back(-1);
  for (size_t i = 0; i < drafts.size(); ++i) {
    t.tokens.push_back(drafts[i]);
    t.parents.push_back(static_cast<int32_t>(i));
  }
  return t;
}

void DraftTree::validate() const {
  AERIE_CHECK(!tokens.empty() && tokens.size() == parents.size() && parents[0] == -1, "a draft tree needs a root and one parent per node");
  for (size_t i = 1; i < parents.size(); ++i)
    AERIE_CHECK(parents[i] >= 0 && static_cast<size_t>(parents[i]) < i, "draft tree node " << i << " has parent " << parents[i]);
}

DraftTree select_draft_tree(int32_t root, std::span<const DraftCandidate> candidates, int64_t count) {
  const auto n = static_cast<int64_t>(candidates.size());
  count = std::min(count, n);
  std::vector<int32_t> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return candidates[static_cast<size_t>(a)].score > candidates[static_cast<size_t>(b)].score; });
  order.resize(static_cast<size_t>(count));
  std::sort(order.begin(), order.end());  // creation order: parents first
  std::vector<int32_t> node_of(static_cast<size_t>(n), -1);
  DraftTree t;
  t.tokens.push_back(root);
  t.parents.push_back(-1);
  for (int32_t c : order) {
    const auto& cand = candidates[static_cast<size_t>(c)];
    AERIE_CHECK(cand.parent < c, "draft candidate " << c << " was created before its parent " << cand.parent);
    const int32_t parent = cand.parent < 0 ? 0 : node_of[static_cast<size_t>(cand.parent)];
    AERIE_CHECK(parent >= 0, "draft candidate " << c << " (score " << cand.score << ") was chosen without its parent " << cand.parent);
    node_of[static_cast<size_t>(c)] = static_cast<int32_t>(t.tokens.size());
    t.tokens.push_back(cand.token);
    t.parents.push_back(parent);
  }
  return t;
}

void append_tree_mask(const DraftTree& tree, int64_t prefix, std::vector<uint8_t>& out) {
  const int64_t n = tree.size();
  for (int64_t i = 0; i < n; ++i) {
    const size_t row = out.size();
    out.resize(row + static_cast<size_t>(prefix + n), 0);
    std::fill_n(out.begin() + static_cast<std::ptrdiff_t>(row), prefix, 1);
    for (int64_t a = i; a >= 0; a = tree.parents[static_cast<size_t>(a)]) out[row + static_cast<size_t>(prefix + a)] = 1;
  }
}

int64_t verify_reserve(int64_t steps, int64_t topk, int64_t draft_tokens) {
  return std::max({draft_tokens, (steps - 1) * topk + 1, steps + 2});
}

}  // namespace aerie::spec
