#include "spec/verify_batch.hpp"

#include "kernels/error.hpp"

namespace aerie::spec {

model::ForwardBatch verify_forward_batch(const std::vector<VerifySequence>& seqs, bool tree_mask) {
  model::ForwardBatch b;
  if (tree_mask) b.mask_indptr.push_back(0);
  for (const auto& s : seqs) {
    const auto& t = *s.tree;
    const auto& full = *s.slots;
    const int64_t n = t.size();
    AERIE_CHECK(static_cast<int64_t>(full.size()) >= s.root_position + n, "verify of " << n << " nodes at position " << s.root_position
                                                                                        << " has only " << full.size() << " slots");
    const auto depth = t.depths();
    for (int64_t i = 0; i < n; ++i) {
      b.input_ids.push_back(t.tokens[static_cast<size_t>(i)]);
      b.positions.push_back(s.root_position + depth[static_cast<size_t>(i)]);
      b.out_cache_loc.push_back(full[static_cast<size_t>(s.root_position + i)]);
      b.logit_rows.push_back(static_cast<int32_t>(b.input_ids.size()) - 1);
    }
    b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.kv_indices.insert(b.kv_indices.end(), full.begin(), full.begin() + s.root_position + n);
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
    if (tree_mask) {
      spec::append_tree_mask(t, s.root_position, b.custom_mask);
      b.mask_indptr.push_back(static_cast<int32_t>(b.custom_mask.size()));
    }
  }
  return b;
}

std::vector<spec::DraftTree> chains_naming_device_tokens(const DeviceChains& chains, const std::vector<int32_t>& roots, int64_t steps) {
  AERIE_CHECK(chains.rows.size() == roots.size(), "chains on the device for " << chains.rows.size() << " of " << roots.size() << " requests");
  std::vector<spec::DraftTree> trees;
  for (size_t i = 0; i < roots.size(); ++i) {
    std::vector<int32_t> ids;
    for (int64_t j = 0; j < steps; ++j) ids.push_back(static_cast<int32_t>(-1 - (j * chains.stride + chains.rows[i])));
    trees.push_back(spec::DraftTree::chain(roots[i], ids));
  }
  return trees;
}

}  // namespace aerie::spec
