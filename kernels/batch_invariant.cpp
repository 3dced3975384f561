#include "kernels/batch_invariant.hpp"

#include <algorithm>
#include <atomic>

#include "kernels/attention.hpp"

namespace aerie::kernels {

namespace {
std::atomic<bool> invariant{false};
}

void set_batch_invariant(bool on) { invariant.store(on, std::memory_order_relaxed); }
bool batch_invariant() { return invariant.load(std::memory_order_relaxed); }

int batch_invariant_attention_splits(int64_t max_kv_len) {
  const int64_t keys = attention_min_split_keys();
  const int64_t splits = (std::max<int64_t>(max_kv_len, 1) + keys - 1) / keys;
  return static_cast<int>(std::clamp<int64_t>(splits, 2, kMaxAttentionSplits));
}

}  // namespace aerie::kernels
