// A TP group's results merged into one (actors/core/tp_results.hpp).
#include <gtest/gtest.h>

#include "actors/core/tp_results.hpp"
#include "kernels/error.hpp"

using namespace aerie;

namespace {
transport::BatchResult result(std::vector<int32_t> tokens, std::string error = "") {
  transport::BatchResult r;
  r.step_id = 9;
  r.rids = {1, 2};
  r.next_tokens = std::move(tokens);
  r.error = std::move(error);
  return r;
}
}  // namespace

TEST(TpResults, AnswersOnceEveryRankHasAnswered) {
  core::TpResults t(3);
  EXPECT_FALSE(t.add(2, result({5, 6})));
  EXPECT_FALSE(t.add(0, result({5, 6})));
  auto merged = t.add(1, result({5, 6}));
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->next_tokens, (std::vector<int32_t>{5, 6}));
  EXPECT_TRUE(merged->error.empty());
}

TEST(TpResults, RanksThatDisagreeFailTheStep) {
  core::TpResults t(2);
  EXPECT_FALSE(t.add(0, result({5, 6})));
  auto merged = t.add(1, result({5, 7}));
  ASSERT_TRUE(merged);
  EXPECT_NE(merged->error.find("disagree"), std::string::npos) << merged->error;
  EXPECT_TRUE(merged->next_tokens.empty());
}

TEST(TpResults, AnyRanksErrorIsTheGroupsNamingTheRank) {
  core::TpResults t(2);
  EXPECT_FALSE(t.add(0, result({5, 6})));
  auto merged = t.add(1, result({}, "out of memory"));
  ASSERT_TRUE(merged);
  EXPECT_EQ(merged->error, "TP rank 1: out of memory");
}

TEST(TpResults, ARankAnsweringTwiceIsABug) {
  core::TpResults t(2);
  EXPECT_FALSE(t.add(0, result({1})));
  EXPECT_THROW(t.add(0, result({1})), Error);
  EXPECT_THROW(t.add(5, result({1})), Error);
}
