#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include "parallel/dp_padding.hpp"
#include "parallel/process_group.hpp"
#include "spec/cuda_graph_buckets.hpp"

using namespace aerie;
using namespace aerie::parallel;

namespace {
const std::vector<int64_t> kBuckets = spec::cuda_graph_bucket_sizes(256);
}

TEST(DpPadding, BalancedDecodeUsesMaxLenAndTheBucketOfTheMax) {
  std::vector<int64_t> tokens = {5, 7, 6, 3};
  auto plan = plan_dp_padding(tokens, false, kBuckets);
  EXPECT_EQ(plan.mode, DpPaddingMode::kMaxLen);
  EXPECT_EQ(plan.max_tokens, 7);
  ASSERT_TRUE(plan.bucket);
  EXPECT_EQ(*plan.bucket, 7);
  EXPECT_EQ(plan.tokens_per_rank, 7);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 7, 14, 21}));
  EXPECT_EQ(plan.gathered_rows, 28);
  tokens = {9, 2};
  EXPECT_EQ(*plan_dp_padding(tokens, false, kBuckets).bucket, 10);  // 9 pads to the bucket of 10
}

TEST(DpPadding, SkewedDecodeAndAnyExtendUseSumLen) {
  std::vector<int64_t> skewed = {40, 0, 1, 0};  // sum*2 = 82 <= 40*4
  auto plan = plan_dp_padding(skewed, false, kBuckets);
  EXPECT_EQ(plan.mode, DpPaddingMode::kSumLen);
  EXPECT_EQ(plan.offsets, (std::vector<int64_t>{0, 40, 40, 41}));
  EXPECT_EQ(plan.gathered_rows, 41);
  EXPECT_FALSE(plan.bucket);
  std::vector<int64_t> even = {8, 8};
  auto ext = plan_dp_padding(even, true, kBuckets);
  EXPECT_EQ(ext.mode, DpPaddingMode::kSumLen);
  EXPECT_FALSE(ext.bucket);  // extends run eagerly
}

TEST(DpPadding, CaptureForcesMaxLenAndIdleRanksPad) {
  std::vector<int64_t> tokens = {40, 0, 1, 0};
  auto plan = plan_dp_padding(tokens, false, kBuckets, /*for_capture=*/true);
  EXPECT_EQ(plan.mode, DpPaddingMode::kMaxLen);
  EXPECT_EQ(*plan.bucket, 40);
  std::vector<int64_t> idle = {0, 0};
  EXPECT_TRUE(plan_dp_padding(idle, false, kBuckets).all_idle);
  std::vector<int64_t> huge = {300, 1};
  auto eager = plan_dp_padding(huge, false, kBuckets);
  EXPECT_FALSE(eager.bucket);
  EXPECT_EQ(eager.tokens_per_rank, 300);
  std::vector<int64_t> bad = {-1};
  EXPECT_THROW(plan_dp_padding(bad, false, kBuckets), Error);
}

TEST(SingleProcessGroup, CollectivesAreIdentities) {
  auto g = make_single_process_group();
  EXPECT_EQ(g->size(), 1);
  std::vector<float> v = {1.5f, 2.0f};
  g->all_reduce_sum(v);
  EXPECT_EQ(v, (std::vector<float>{1.5f, 2.0f}));
  EXPECT_EQ(g->all_gather(7), (std::vector<int64_t>{7}));
}

TEST(DpPadding, VerifyBucketsCountRequestsNotTokens) {
  // Verify steps of 4 tokens per request: 9 and 12 tokens are 3 requests at most.
  std::vector<int64_t> tokens = {12, 8};
  auto plan = plan_dp_padding(tokens, false, kBuckets, false, 4);
  ASSERT_TRUE(plan.bucket);
  EXPECT_EQ(*plan.bucket, 3);
  EXPECT_EQ(plan.tokens_per_rank, 12);
  EXPECT_EQ(plan.gathered_rows, 24);
  EXPECT_EQ(plan.global_num_tokens, tokens);
  std::vector<int64_t> nine = {36, 32};  // 9 requests pad to the bucket of 10: 40 rows per rank
  auto p9 = plan_dp_padding(nine, false, kBuckets, false, 4);
  EXPECT_EQ(*p9.bucket, 10);
  EXPECT_EQ(p9.tokens_per_rank, 40);
  EXPECT_THROW(plan_dp_padding(nine, false, kBuckets, false, 0), Error);
}
