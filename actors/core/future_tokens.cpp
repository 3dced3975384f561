#include "actors/core/future_tokens.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::core {

bool FutureTokenMap::references(std::span<const int32_t> input_ids) {
  return std::any_of(input_ids.begin(), input_ids.end(), [](int32_t id) { return id < 0; });
}

void FutureTokenMap::resolve(std::vector<int32_t>& input_ids) const {
  for (int32_t& id : input_ids) {
    const int32_t slot = future_slot_of(id);
    if (slot < 0) continue;
    AERIE_CHECK(static_cast<size_t>(slot) < tokens_.size() && tokens_[static_cast<size_t>(slot)] >= 0,
                "input names future token slot " << slot << ", which holds no token (its batch failed or never ran)");
    id = tokens_[static_cast<size_t>(slot)];
  }
}

void FutureTokenMap::record(std::span<const int32_t> slots, std::span<const int32_t> tokens) {
  if (slots.empty()) return;
  AERIE_CHECK(slots.size() == tokens.size(), slots.size() << " future slots for " << tokens.size() << " sampled tokens");
  int32_t top = -1;
  for (int32_t s : slots) {
    AERIE_CHECK(s >= -1 && s < kMaxSlots, "future token slot " << s << " is outside [0, " << kMaxSlots << ")");
    top = std::max(top, s);
  }
  if (static_cast<size_t>(top + 1) > tokens_.size()) tokens_.resize(static_cast<size_t>(top + 1), -1);
  for (size_t i = 0; i < slots.size(); ++i)
    if (slots[i] >= 0) tokens_[static_cast<size_t>(slots[i])] = tokens[i];
}

void FutureTokenMap::forget(std::span<const int32_t> slots) {
  for (int32_t s : slots)
    if (s >= 0 && static_cast<size_t>(s) < tokens_.size()) tokens_[static_cast<size_t>(s)] = -1;
}

}  // namespace aerie::core
