#include <gtest/gtest.h>

#include "kernels/error.hpp"
#include "spec/cuda_graph_buckets.hpp"
#include "spec/greedy_accept.hpp"

using namespace aerie;
using namespace aerie::spec;

TEST(CudaGraphBuckets, FollowsSglangSchedule) {
  auto s = cuda_graph_bucket_sizes(256);
  EXPECT_EQ(s.size(), 8u + 12u + 7u + 24u);  // 1..8, 10..32 by 2, 40..64 by 4, 72..256 by 8
  EXPECT_EQ(std::vector<int64_t>(s.begin(), s.begin() + 10), (std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7, 8, 10, 12}));
  EXPECT_EQ(s.back(), 256);
  EXPECT_EQ(cuda_graph_bucket_sizes(20).back(), 20);
  EXPECT_EQ(cuda_graph_bucket_sizes(33).back(), 32);
  EXPECT_THROW(cuda_graph_bucket_sizes(0), Error);
}

TEST(CudaGraphBuckets, PicksTheSmallestBucketThatFits) {
  BucketSchedule b(64);
  EXPECT_EQ(*b.bucket_for(1), 1);
  EXPECT_EQ(*b.bucket_for(9), 10);
  EXPECT_EQ(*b.bucket_for(33), 40);
  EXPECT_EQ(*b.bucket_for(64), 64);
  EXPECT_FALSE(b.bucket_for(65));  // eager
  EXPECT_FALSE(b.bucket_for(0));
}

TEST(GreedyAccept, AcceptsTheMatchingPrefixPlusTheBonusToken) {
  // Three requests, three draft tokens each.
  std::vector<int32_t> draft = {5, 6, 7,   5, 9, 7,   1, 2, 3};
  std::vector<int32_t> target = {5, 6, 7, 8,   5, 6, 7, 8,   4, 2, 3, 4};
  auto a = greedy_accept_chain(draft, target, 3, 3);
  EXPECT_EQ(a.accept_length, (std::vector<int32_t>{3, 1, 0}));
  EXPECT_EQ(a.committed, (std::vector<int32_t>{5, 6, 7, 8, 5, 6, 4}));
  EXPECT_EQ(a.committed_indptr, (std::vector<int32_t>{0, 4, 6, 7}));
  EXPECT_THROW(greedy_accept_chain(draft, target, 3, 2), Error);
}
