#include <gtest/gtest.h>

#include <set>

#include "kernels/error.hpp"
#include "model/kv_cache.hpp"

using namespace aerie;
using namespace aerie::model;

TEST(KvCache, BudgetSizesThePool) {
  auto c = LlamaConfig::named_shape("llama-3.1-8b");
  EXPECT_EQ(kv_bytes_per_token(c, DType::kBF16), 32 * 2 * 8 * 128 * 2);  // 128 KiB per token
  auto shape = kv_shape_for_budget(c, DType::kBF16, int64_t{1} << 30, 16);
  EXPECT_EQ(shape.num_pages, (int64_t{1} << 30) / (131072 * 16));
  EXPECT_EQ(shape.usable_tokens(), (shape.num_pages - 1) * 16);
  EXPECT_THROW(kv_shape_for_budget(c, DType::kBF16, 1000, 16), Error);
  EXPECT_EQ(kv_shape_for_tokens(100, 16).usable_tokens(), 112);
}

TEST(KvCache, BuffersHaveOneSlotPerToken) {
  auto c = LlamaConfig::named_shape("tiny");
  KvCache kv(c, {.num_pages = 3, .page_size = 4}, Device::kCpu, DType::kBF16);
  EXPECT_EQ(kv.k(0).dim(0), 12);
  EXPECT_EQ(kv.v(1).dim(1), c.num_kv_heads);
  EXPECT_EQ(kv.k(1).dtype, DType::kBF16);
}

TEST(PageAllocator, NeverHandsOutTheReservedPageAndFailsAtomically) {
  PageAllocator a(5);
  EXPECT_EQ(a.free_pages(), 4);
  auto got = a.allocate(3);
  ASSERT_TRUE(got);
  std::set<int32_t> pages(got->begin(), got->end());
  EXPECT_EQ(pages.size(), 3u);
  EXPECT_EQ(pages.count(0), 0u);
  EXPECT_FALSE(a.allocate(2));  // one left: nothing is taken
  EXPECT_EQ(a.free_pages(), 1);
  a.release(*got);
  EXPECT_EQ(a.free_pages(), 4);
  EXPECT_THROW(a.release({0}), Error);
}

TEST(RequestPageTable, MapsPositionsToSlotsPageByPage) {
  PageAllocator a(6);
  RequestPageTable t(a, 4);
  ASSERT_TRUE(t.reserve(1, 5));  // two pages
  EXPECT_EQ(t.capacity(1), 8);
  EXPECT_EQ(a.free_pages(), 3);
  ASSERT_TRUE(t.reserve(1, 8));  // still two
  EXPECT_EQ(a.free_pages(), 3);
  std::vector<int32_t> slots;
  t.append_slots(1, 0, 8, slots);
  std::set<int32_t> distinct(slots.begin(), slots.end());
  EXPECT_EQ(distinct.size(), 8u);
  EXPECT_EQ(slots[1], slots[0] + 1);  // consecutive within a page
  EXPECT_EQ(slots[5] % 4, 1);
  EXPECT_THROW(t.slot(1, 8), Error);
  EXPECT_FALSE(t.reserve(2, 13));  // needs 4 pages, 3 free: nothing changes
  EXPECT_EQ(a.free_pages(), 3);
  t.release(1);
  EXPECT_EQ(a.free_pages(), 5);
  EXPECT_THROW(t.slot(1, 0), Error);
}
