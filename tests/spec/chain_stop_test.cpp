// ChainStop (--speculative-chain-stop-probability): when a chain drafts another token, and the
// softmax top probability it reads from the draft's logits.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "kernels/error.hpp"
#include "spec/chain_stop.hpp"

using namespace aerie;

TEST(ChainStop, GoesOnWhileTheRequestsProductsReachTheThresholdOnAverage) {
  // Two requests: products 0.9 and 0.5 (mean 0.7), then x0.5 / x0.9 -> 0.45 and 0.45 (0.45),
  // then x0.2 / x1.0 -> 0.09 and 0.45 (0.27, though one request is still above 0.4).
  spec::ChainStop stop(0.4, std::vector<float>{0.9f, 0.5f});
  EXPECT_TRUE(stop.goes_on());
  EXPECT_EQ(stop.tokens(), 1);
  stop.add_step(std::vector<float>{0.5f, 0.9f});
  EXPECT_TRUE(stop.goes_on());
  stop.add_step(std::vector<float>{0.2f, 1.0f});
  EXPECT_FALSE(stop.goes_on()) << "a mean of 0.27 stops the batch's chain";
  EXPECT_EQ(stop.tokens(), 3);
  // One request: its own product.
  spec::ChainStop one(0.5, std::vector<float>{0.8f});
  one.add_step(std::vector<float>{0.7f});
  EXPECT_TRUE(one.goes_on());
  one.add_step(std::vector<float>{0.8f});
  EXPECT_FALSE(one.goes_on()) << "0.448 < 0.5";
}

TEST(ChainStop, AFirstTokenBelowTheThresholdEndsTheChainAtOneToken) {
  spec::ChainStop stop(0.3, std::vector<float>{0.29f, 0.1f});
  EXPECT_FALSE(stop.goes_on());
  EXPECT_TRUE(spec::ChainStop(0.3, std::vector<float>{0.5f, 0.1f}).goes_on()) << "a mean of exactly 0.3";
  EXPECT_EQ(stop.tokens(), 1);
  // The threshold is inclusive, and 1 keeps only certainties.
  EXPECT_TRUE(spec::ChainStop(0.3, std::vector<float>{0.3f}).goes_on() == (0.3f >= 0.3));
  EXPECT_FALSE(spec::ChainStop(1.0, std::vector<float>{0.999f}).goes_on());
}

TEST(ChainStop, RejectsThresholdsOutsideZeroToOneAndMismatchedSteps) {
  const std::vector<float> one = {0.5f};
  EXPECT_THROW(spec::ChainStop(0.0, one), Error);
  EXPECT_THROW(spec::ChainStop(1.5, one), Error);
  EXPECT_THROW(spec::ChainStop(std::nan(""), one), Error);
  EXPECT_THROW(spec::ChainStop(0.5, std::vector<float>{}), Error);
  spec::ChainStop stop(0.5, one);
  EXPECT_THROW(stop.add_step(std::vector<float>{0.5f, 0.5f}), Error);
}

TEST(ChainStop, TopTokenProbabilityIsTheSoftmaxOfTheLargestLogit) {
  std::mt19937 rng(5);
  std::normal_distribution<float> n(0.0f, 3.0f);
  // Vocabularies under and over sixteen (the vector body and its tail), rows with one clear winner.
  for (int64_t vocab : {1, 7, 16, 37, 16384}) {
    const int64_t rows = 3;
    std::vector<float> logits(static_cast<size_t>(rows * vocab));
    for (auto& x : logits) x = n(rng);
    logits[static_cast<size_t>(vocab - 1)] = 40.0f;  // row 0: nearly certain
    const auto got = spec::top_token_probabilities(logits.data(), rows, vocab);
    ASSERT_EQ(got.size(), static_cast<size_t>(rows));
    for (int64_t r = 0; r < rows; ++r) {
      const float* row = logits.data() + r * vocab;
      double mx = -INFINITY, sum = 0.0;
      for (int64_t j = 0; j < vocab; ++j) mx = std::max(mx, static_cast<double>(row[j]));
      for (int64_t j = 0; j < vocab; ++j) sum += std::exp(static_cast<double>(row[j]) - mx);
      EXPECT_NEAR(got[static_cast<size_t>(r)], 1.0 / sum, 2e-6 / sum + 1e-7) << "vocab " << vocab << " row " << r;
    }
    if (vocab > 1) {
      EXPECT_GT(got[0], 0.99f);
    }
  }
}

TEST(ChainStop, TopTokenProbabilityOfARowWithANanOrNoFiniteLogitIsZero) {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> logits = {1.0f, std::nanf(""), 2.0f, 0.5f, -inf, -inf, -inf, -inf, 3.0f, 3.0f, 3.0f, 3.0f};
  const auto got = spec::top_token_probabilities(logits.data(), 3, 4);
  EXPECT_EQ(got[0], 0.0f);
  EXPECT_EQ(got[1], 0.0f);
  EXPECT_NEAR(got[2], 0.25f, 1e-6f);
}
