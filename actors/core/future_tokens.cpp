#include "actors/core/future_tokens.hpp"

#include <algorithm>

#include "kernels/error.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::core {

bool FutureTokenMap::references(std::span<const int32_t> input_ids) {
  return std::any_of(input_ids.begin(), input_ids.end(), [](int32_t id) { return id < 0; });
}

std::pair<int32_t, int32_t> FutureTokenMap::lookup(int32_t slot) const {
  AERIE_CHECK(static_cast<size_t>(slot) < tokens_.size() && tokens_[static_cast<size_t>(slot)] >= 0,
              "input names future token slot " << slot << ", which holds no token (its batch failed or never ran)");
  return {tokens_[static_cast<size_t>(slot)], counts_[static_cast<size_t>(slot)]};
}

void FutureTokenMap::resolve(std::vector<int32_t>& input_ids) const {
  for (int32_t& id : input_ids) {
    const int32_t slot = future_slot_of(id);
    if (slot < 0) continue;
    const auto [token, count] = lookup(slot);
    AERIE_CHECK(count == 1, "input names future slot " << slot << ", which holds a verify's " << count << " tokens, as one token");
    id = token;
  }
}

void FutureTokenMap::resolve(transport::BatchMessage& m) const {
  if (m.mode != transport::ForwardMode::kVerify) return resolve(m.input_ids);
  const size_t seqs = m.qo_indptr.empty() ? 0 : m.qo_indptr.size() - 1;
  AERIE_CHECK(m.kv_indptr.size() == seqs + 1 && m.sampling.size() == seqs && m.positions.size() == m.input_ids.size() &&
                  m.out_cache_loc.size() == m.input_ids.size(),
              "verify batch " << m.step_id << ": per-sequence fields disagree");
  const int64_t S = m.spec_steps, K = std::max<int32_t>(m.spec_topk, 1);
  const int64_t reserve = spec::verify_reserve(S, K, K > 1 ? m.spec_draft_tokens : S + 1);
  std::vector<int32_t> kv_indices, kv_indptr{0};
  for (size_t s = 0; s < seqs; ++s) {
    const auto q0 = static_cast<size_t>(m.qo_indptr[s]), q1 = static_cast<size_t>(m.qo_indptr[s + 1]);
    const auto k0 = static_cast<size_t>(m.kv_indptr[s]), k1 = static_cast<size_t>(m.kv_indptr[s + 1]);
    AERIE_CHECK(q0 < q1 && q1 <= m.input_ids.size() && k0 <= k1 && k1 <= m.kv_indices.size(), "verify batch " << m.step_id << ": bad sequence bounds");
    for (size_t q = q0 + 1; q < q1; ++q)
      AERIE_CHECK(m.input_ids[q] >= 0, "verify batch " << m.step_id << ": a future token past a sequence's first input");
    size_t keep = k1 - k0;
    const int32_t slot = future_slot_of(m.input_ids[q0]);
    if (slot >= 0) {
      const auto [token, count] = lookup(slot);
      // The context holds room for the extra tokens the request can commit and go on; a verify
      // that committed more reached max_new_tokens, so this row is stale: clamped, it still runs
      // within the request's own slots, and its result is dropped.
      const int64_t room = static_cast<int64_t>(k1 - k0) - reserve - m.positions[q0];
      AERIE_CHECK(room >= 0, "verify batch " << m.step_id << ": request " << (s < m.seq_rids.size() ? m.seq_rids[s] : 0) << "'s context of "
                                             << (k1 - k0) << " slots has no room for its verify planned ahead");
      const auto extra = static_cast<int32_t>(std::min<int64_t>(count - 1, room));
      const int64_t root = m.positions[q0] + extra;
      m.input_ids[q0] = token;
      for (size_t q = q0; q < q1; ++q) {
        m.positions[q] += extra;
        // The verified nodes' slots: those of positions root, root + 1, ... (tree depths are the worker's).
        m.out_cache_loc[q] = m.kv_indices[k0 + static_cast<size_t>(root) + (q - q0)];
      }
      m.sampling[s].step += extra;
      keep = static_cast<size_t>(root + reserve);
    }
    kv_indices.insert(kv_indices.end(), m.kv_indices.begin() + static_cast<std::ptrdiff_t>(k0),
                      m.kv_indices.begin() + static_cast<std::ptrdiff_t>(k0 + keep));
    kv_indptr.push_back(static_cast<int32_t>(kv_indices.size()));
  }
  m.kv_indices = std::move(kv_indices);
  m.kv_indptr = std::move(kv_indptr);
}

void FutureTokenMap::check_slots(std::span<const int32_t> slots, size_t values) {
  AERIE_CHECK(slots.size() == values, slots.size() << " future slots for " << values << " sampled requests");
  int32_t top = -1;
  for (int32_t s : slots) {
    AERIE_CHECK(s >= -1 && s < kMaxSlots, "future token slot " << s << " is outside [0, " << kMaxSlots << ")");
    top = std::max(top, s);
  }
  if (static_cast<size_t>(top + 1) > tokens_.size()) tokens_.resize(static_cast<size_t>(top + 1), -1), counts_.resize(tokens_.size(), 0);
}

void FutureTokenMap::record(std::span<const int32_t> slots, std::span<const int32_t> tokens) {
  if (slots.empty()) return;
  check_slots(slots, tokens.size());
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] >= 0) tokens_[static_cast<size_t>(slots[i])] = tokens[i], counts_[static_cast<size_t>(slots[i])] = 1;
}

void FutureTokenMap::record_verify(std::span<const int32_t> slots, std::span<const int32_t> counts, std::span<const int32_t> tokens) {
  if (slots.empty()) return;
  check_slots(slots, counts.size());
  size_t at = 0;
  for (size_t i = 0; i < slots.size(); ++i) {
    AERIE_CHECK(counts[i] >= 1 && at + static_cast<size_t>(counts[i]) <= tokens.size(), "verify result counts disagree with its tokens");
    at += static_cast<size_t>(counts[i]);
    if (slots[i] >= 0) tokens_[static_cast<size_t>(slots[i])] = tokens[at - 1], counts_[static_cast<size_t>(slots[i])] = counts[i];
  }
}

void FutureTokenMap::forget(std::span<const int32_t> slots) {
  for (int32_t s : slots)
    if (s >= 0 && static_cast<size_t>(s) < tokens_.size()) tokens_[static_cast<size_t>(s)] = -1;
}

}  // namespace aerie::core
