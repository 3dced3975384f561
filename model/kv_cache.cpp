#include "model/kv_cache.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::model {

int64_t kv_bytes_per_token(const LlamaConfig& c, DType kv_dtype) {
  return c.num_layers * 2 * c.num_kv_heads * c.head_dim * static_cast<int64_t>(dtype_size(kv_dtype));
}

KvCacheShape kv_shape_for_budget(const LlamaConfig& c, DType kv_dtype, int64_t budget_bytes, int64_t page_size) {
  AERIE_CHECK(page_size > 0, "page size must be positive, got " << page_size);
  const int64_t per_page = kv_bytes_per_token(c, kv_dtype) * page_size;
  const int64_t pages = budget_bytes / per_page;
  AERIE_CHECK(pages >= 2, "a KV budget of " << budget_bytes << " bytes holds " << pages << " pages of " << page_size
                                            << " tokens; at least 2 are needed (" << 2 * per_page << " bytes)");
  return {.num_pages = pages, .page_size = page_size};
}

KvCacheShape kv_shape_for_tokens(int64_t max_total_tokens, int64_t page_size) {
  AERIE_CHECK(page_size > 0, "page size must be positive, got " << page_size);
  AERIE_CHECK(max_total_tokens > 0, "max total tokens must be positive, got " << max_total_tokens);
  return {.num_pages = (max_total_tokens + page_size - 1) / page_size + 1, .page_size = page_size};
}

KvCache::KvCache(const LlamaConfig& c, KvCacheShape shape, Device device, DType dtype) : shape_(shape) {
  AERIE_CHECK(shape.num_pages >= 2 && shape.page_size > 0, "KV cache needs at least 2 pages");
  for (int64_t l = 0; l < c.num_layers; ++l) {
    k_.emplace_back(device, dtype, std::initializer_list<int64_t>{shape.num_slots(), c.num_kv_heads, c.head_dim});
    v_.emplace_back(device, dtype, std::initializer_list<int64_t>{shape.num_slots(), c.num_kv_heads, c.head_dim});
    k_.back().zero();
    v_.back().zero();
  }
}

PageAllocator::PageAllocator(int64_t num_pages) : total_(num_pages - 1) {
  AERIE_CHECK(num_pages >= 2, "page allocator needs at least 2 pages");
  refs_.assign(static_cast<size_t>(num_pages), 0);
  for (int64_t p = num_pages - 1; p >= 1; --p) free_.push_back(static_cast<int32_t>(p));
}

std::optional<std::vector<int32_t>> PageAllocator::allocate(int64_t n) {
  if (n < 0 || n > free_pages()) return std::nullopt;
  std::vector<int32_t> out(free_.end() - n, free_.end());
  free_.resize(free_.size() - static_cast<size_t>(n));
  for (int32_t p : out) refs_[static_cast<size_t>(p)] = 1;
  return out;
}

void PageAllocator::share(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    AERIE_CHECK(p >= 1 && p <= total_ && refs_[static_cast<size_t>(p)] > 0, "shared page " << p << " is not in use");
    ++refs_[static_cast<size_t>(p)];
  }
}

void PageAllocator::release(const std::vector<int32_t>& pages) {
  for (int32_t p : pages) {
    AERIE_CHECK(p >= 1 && p <= total_ && refs_[static_cast<size_t>(p)] > 0, "released page " << p << " was never handed out");
    if (--refs_[static_cast<size_t>(p)] == 0) free_.push_back(p);
  }
}

int32_t PageAllocator::holders(int32_t page) const {
  return page >= 1 && page <= total_ ? refs_[static_cast<size_t>(page)] : 0;
}

int64_t RequestPageTable::capacity(uint64_t rid) const {
  auto it = pages_.find(rid);
  return it == pages_.end() ? 0 : static_cast<int64_t>(it->second.size()) * page_size_;
}

int64_t RequestPageTable::pages_needed(uint64_t rid, int64_t tokens) const {
  const int64_t have = capacity(rid) / page_size_;
  const int64_t want = (tokens + page_size_ - 1) / page_size_;
  return want > have ? want - have : 0;
}

bool RequestPageTable::reserve(uint64_t rid, int64_t tokens) {
  const int64_t need = pages_needed(rid, tokens);
  if (need == 0) {
    pages_[rid];  // a request with no tokens yet still has an entry
    return true;
  }
  auto got = allocator_.allocate(need);
  if (!got) return false;
  auto& list = pages_[rid];
  list.insert(list.end(), got->begin(), got->end());
  return true;
}

int32_t RequestPageTable::slot(uint64_t rid, int64_t position) const {
  auto it = pages_.find(rid);
  AERIE_CHECK(it != pages_.end(), "request " << rid << " holds no KV pages");
  const int64_t page = position / page_size_;
  AERIE_CHECK(position >= 0 && page < static_cast<int64_t>(it->second.size()),
              "position " << position << " of request " << rid << " is beyond its KV pages");
  return static_cast<int32_t>(it->second[static_cast<size_t>(page)] * page_size_ + position % page_size_);
}

void RequestPageTable::append_slots(uint64_t rid, int64_t begin, int64_t end, std::vector<int32_t>& out) const {
  for (int64_t p = begin; p < end; ++p) out.push_back(slot(rid, p));
}

void RequestPageTable::truncate(uint64_t rid, int64_t tokens) {
  auto it = pages_.find(rid);
  if (it == pages_.end()) return;
  const size_t keep = static_cast<size_t>((std::max<int64_t>(tokens, 0) + page_size_ - 1) / page_size_);
  if (it->second.size() <= keep) return;
  allocator_.release(std::vector<int32_t>(it->second.begin() + static_cast<std::ptrdiff_t>(keep), it->second.end()));
  it->second.resize(keep);
}

int64_t RequestPageTable::adopt_prefix(uint64_t rid, uint64_t donor, int64_t tokens) {
  AERIE_CHECK(capacity(rid) == 0, "request " << rid << " already holds KV pages");
  auto it = pages_.find(donor);
  if (it == pages_.end() || tokens < page_size_) return 0;
  const size_t n = std::min(it->second.size(), static_cast<size_t>(tokens / page_size_));
  std::vector<int32_t> shared(it->second.begin(), it->second.begin() + static_cast<std::ptrdiff_t>(n));
  allocator_.share(shared);
  pages_[rid] = std::move(shared);
  return static_cast<int64_t>(n) * page_size_;
}

void RequestPageTable::release(uint64_t rid) {
  auto it = pages_.find(rid);
  if (it == pages_.end()) return;
  allocator_.release(it->second);
  pages_.erase(it);
}

}  // namespace aerie::model
