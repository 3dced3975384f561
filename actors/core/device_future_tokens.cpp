#include "actors/core/device_future_tokens.hpp"

#include <cstring>

#include "actors/core/future_tokens.hpp"
#include "kernels/error.hpp"
#include "kernels/future_tokens.hpp"

namespace aerie::core {

namespace {
constexpr int64_t kMaxRows = 4096;  // sampled rows per batch at most (slots staged per record)
}

DeviceFutureTokens::DeviceFutureTokens(Device device, int32_t slots)
    : table_(device, DType::kI32, {std::max<int64_t>(slots, 1)}),
      slots_device_(device, DType::kI32, {kMaxRows}),
      slots_host_(device, kMaxRows * 4),
      filled_(static_cast<size_t>(std::max<int32_t>(slots, 1)), false) {
  AERIE_CHECK(slots > 0 && slots <= FutureTokenMap::kMaxSlots, "future token table of " << slots << " slots");
  table_.zero();
}

void DeviceFutureTokens::check(std::span<const int32_t> input_ids) const {
  for (int32_t id : input_ids) {
    const int32_t slot = future_slot_of(id);
    if (slot < 0) continue;
    AERIE_CHECK(static_cast<size_t>(slot) < filled_.size() && filled_[static_cast<size_t>(slot)],
                "input names future token slot " << slot << ", which holds no token (its batch failed or never ran)");
  }
}

void DeviceFutureTokens::record(const TensorView& tokens, std::span<const int32_t> slots, const Stream& stream) {
  const auto rows = static_cast<int64_t>(slots.size());
  AERIE_CHECK(tokens.dim(0) == rows, "recording " << tokens.dim(0) << " future tokens into " << rows << " slots");
  AERIE_CHECK(rows <= kMaxRows, "recording " << rows << " future tokens at once (at most " << kMaxRows << ")");
  bool any = false;
  for (int32_t s : slots) {
    AERIE_CHECK(s >= -1 && static_cast<size_t>(s + 1) <= filled_.size(), "future slot " << s << " is outside the table of " << filled_.size());
    any = any || s >= 0;
  }
  if (!any) return;
  auto* host = slots_host_.acquire_as<int32_t>();
  std::memcpy(host, slots.data(), slots.size() * 4);
  copy_async(slots_device_.data(), host, slots.size() * 4, stream);
  slots_host_.release(stream);
  AERIE_CHECK_STATUS(kernels::record_future_tokens({.tokens = tokens, .slots = slots_device_.view().slice_rows(0, rows), .table = table_.view()}, stream));
  for (int32_t s : slots)
    if (s >= 0) filled_[static_cast<size_t>(s)] = true;
}

void DeviceFutureTokens::forget(std::span<const int32_t> slots) {
  for (int32_t s : slots)
    if (s >= 0 && static_cast<size_t>(s) < filled_.size()) filled_[static_cast<size_t>(s)] = false;
}

}  // namespace aerie::core
