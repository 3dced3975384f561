// What each TP rank holds (model/tp_shard.hpp) and the layouts that are refused.
#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include "model/tp_shard.hpp"
#include "model/weight_layout.hpp"

using namespace aerie;
using model::TpShard;

namespace {
model::LlamaConfig eight_b() { return model::LlamaConfig::named_shape("llama-3.1-8b"); }
}  // namespace

TEST(TpShard, HeadsAndMlpRowsSplitEvenly) {
  const auto c = eight_b();  // 32 heads, 8 KV heads, intermediate 14336
  const TpShard s{.rank = 1, .size = 2};
  EXPECT_EQ(s.heads(c), 16);
  EXPECT_EQ(s.first_head(c), 16);
  EXPECT_EQ(s.kv_heads(c), 4);
  EXPECT_EQ(s.first_kv_head(c), 4);
  EXPECT_EQ(s.intermediate(c), 7168);
  EXPECT_EQ(s.first_intermediate(c), 7168);
  const auto l = s.local(c);
  EXPECT_EQ(l.num_heads, 16);
  EXPECT_EQ(l.num_kv_heads, 4);
  EXPECT_EQ(l.vocab_size, c.vocab_size);  // logits stay whole
  EXPECT_EQ(l.hidden_size, c.hidden_size);
}

TEST(TpShard, FewerKvHeadsThanRanksAreReplicated) {
  auto c = eight_b();
  c.num_kv_heads = 2;
  for (int r = 0; r < 8; ++r) {
    const TpShard s{.rank = r, .size = 8};
    EXPECT_EQ(s.kv_heads(c), 1);
    // Query heads [4r, 4r + 4) belong to KV head (4r) / 16 = r / 4.
    EXPECT_EQ(s.first_kv_head(c), s.first_head(c) / (c.num_heads / c.num_kv_heads)) << "rank " << r;
  }
}

TEST(TpShard, VocabularyRowsArePaddedOnTheLastRank) {
  const TpShard last{.rank = 3, .size = 4};
  EXPECT_EQ(last.vocab_rows(509), 128);
  EXPECT_EQ(last.first_vocab(509), 384);
  EXPECT_EQ(last.real_vocab_rows(509), 125);
  EXPECT_EQ((TpShard{.rank = 0, .size = 4}.real_vocab_rows(509)), 128);
  // More ranks than needed rows: a rank may hold only padding.
  EXPECT_EQ((TpShard{.rank = 3, .size = 4}.real_vocab_rows(7)), 1);
}

TEST(TpShard, QkvRowRangesPickTheRanksHeads) {
  auto c = eight_b();
  const auto rows = model::qkv_rows_of(c, {.rank = 1, .size = 4});
  ASSERT_EQ(rows.size(), 3u);
  EXPECT_EQ(rows[0].begin, 8 * 128);  // q heads 8..15
  EXPECT_EQ(rows[0].count, 8 * 128);
  EXPECT_EQ(rows[1].begin, c.q_size() + 2 * 128);  // k heads 2..3
  EXPECT_EQ(rows[2].begin, c.q_size() + c.kv_size() + 2 * 128);
}

TEST(TpShard, LayoutsThatDoNotDivideAreRefusedByName) {
  auto c = eight_b();
  EXPECT_NO_THROW(TpShard::check_divisible(c, 8, "the target"));
  try {
    TpShard::check_divisible(c, 3, "the target");
    FAIL();
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("32 attention heads"), std::string::npos) << e.what();
  }
  c.num_kv_heads = 3;
  c.num_heads = 24;
  EXPECT_THROW(TpShard::check_divisible(c, 2, "the target"), Error);  // 3 KV heads over 2 ranks
  c = eight_b();
  c.intermediate_size = 14337;
  EXPECT_THROW(TpShard::check_divisible(c, 2, "the target"), Error);
}

TEST(WeightLayout, CutBlockTakesRowsColumnsAndPads) {
  Buffer full(Device::kCpu, DType::kF32, {4, 3});
  std::vector<float> v(12);
  for (int i = 0; i < 12; ++i) v[static_cast<size_t>(i)] = static_cast<float>(i);
  full.copy_from_host(v.data(), 48);
  Buffer cut = model::cut_block(std::move(full), {{0, 1}, {2, 2}}, 1, 2, 4);
  ASSERT_EQ(cut.view().dim(0), 4);
  ASSERT_EQ(cut.view().dim(1), 2);
  std::vector<float> got(8);
  cut.copy_to_host(got.data(), 32);
  EXPECT_EQ(got, (std::vector<float>{1, 2, 7, 8, 10, 11, 0, 0}));
}
