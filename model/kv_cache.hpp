#pragma once
// The paged KV cache: per layer, K and V pools of [num_slots, kv_heads, head_dim], where a
// slot holds one token and slots are handed out a page (page_size slots) at a time.
// Page 0 is reserved: its slot 0 is the dummy slot that padded rows write to.
#include <cstdint>
#include <optional>
#include <unordered_map>
#include <vector>

#include "kernels/buffer.hpp"
#include "model/config.hpp"

namespace aerie::model {

struct KvCacheShape {
  int64_t num_pages = 0;
  int64_t page_size = 1;
  int64_t num_slots() const { return num_pages * page_size; }
  int64_t usable_tokens() const { return (num_pages - 1) * page_size; }  // minus the reserved page
};

// Bytes one token's K and V take over all layers.
int64_t kv_bytes_per_token(const LlamaConfig& config, DType kv_dtype);
// The largest pool that fits in `budget_bytes` (at least 2 pages, or an error).
KvCacheShape kv_shape_for_budget(const LlamaConfig& config, DType kv_dtype, int64_t budget_bytes, int64_t page_size);
// A pool holding `max_total_tokens` usable tokens (rounded up to whole pages).
KvCacheShape kv_shape_for_tokens(int64_t max_total_tokens, int64_t page_size);

class KvCache {
 public:
  KvCache(const LlamaConfig& config, KvCacheShape shape, Device device, DType dtype);
  const KvCacheShape& shape() const { return shape_; }
  const TensorView& k(int64_t layer) const { return k_[static_cast<size_t>(layer)].view(); }
  const TensorView& v(int64_t layer) const { return v_[static_cast<size_t>(layer)].view(); }

 private:
  KvCacheShape shape_;
  std::vector<Buffer> k_, v_;
};

// Hands out whole pages; page 0 is never handed out. A page may have several holders
// (requests sharing a prompt's KV): it is free again when the last one releases it.
class PageAllocator {
 public:
  explicit PageAllocator(int64_t num_pages);
  int64_t free_pages() const { return static_cast<int64_t>(free_.size()); }
  int64_t total_pages() const { return total_; }
  // n pages, or nothing (and no change) when fewer are free.
  std::optional<std::vector<int32_t>> allocate(int64_t n);
  // One more holder for each of these pages (all in use).
  void share(const std::vector<int32_t>& pages);
  // One holder fewer for each; a page with none left is free.
  void release(const std::vector<int32_t>& pages);
  int32_t holders(int32_t page) const;

 private:
  int64_t total_;
  std::vector<int32_t> free_;  // a stack: the most recently freed page is reused first
  std::vector<int32_t> refs_;  // holders per page
};

// Which pages each request holds, and so which slot each of its positions lives in.
class RequestPageTable {
 public:
  RequestPageTable(PageAllocator& allocator, int64_t page_size) : allocator_(allocator), page_size_(page_size) {}
  // Pages needed so that `rid` can hold `tokens` positions, beyond those it holds.
  int64_t pages_needed(uint64_t rid, int64_t tokens) const;
  // Makes room for `tokens` positions; false (and no change) when the pool is short.
  bool reserve(uint64_t rid, int64_t tokens);
  int32_t slot(uint64_t rid, int64_t position) const;
  // Appends the slots of positions [begin, end) to out.
  void append_slots(uint64_t rid, int64_t begin, int64_t end, std::vector<int32_t>& out) const;
  void release(uint64_t rid);
  // A request that holds no pages yet starts with the donor's pages for its first `tokens`
  // positions (whole pages only; the donor's K/V there must be final): they are shared, not
  // copied. Returns the positions adopted (a multiple of the page size).
  int64_t adopt_prefix(uint64_t rid, uint64_t donor, int64_t tokens);
  // Gives back the pages past those `tokens` positions need (rejected draft positions).
  void truncate(uint64_t rid, int64_t tokens);
  int64_t capacity(uint64_t rid) const;

 private:
  PageAllocator& allocator_;
  int64_t page_size_;
  std::unordered_map<uint64_t, std::vector<int32_t>> pages_;
};

}  // namespace aerie::model
