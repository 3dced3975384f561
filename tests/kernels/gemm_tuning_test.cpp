// The tuned cuBLASLt products' buckets (kernels/gemm_tuning.hpp); the GPU side is
// CudaOps.TunedCublasLtRowCountsShareTheirBucketsAlgorithm.
#include "kernels/gemm_tuning.hpp"

#include <gtest/gtest.h>

#include <random>
#include <thread>

#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;

TEST(GemmTuning, ABucketIsTheNextPowerOfTwo) {
  EXPECT_EQ(gemm_tuning_bucket(1), 1);
  EXPECT_EQ(gemm_tuning_bucket(2), 2);
  EXPECT_EQ(gemm_tuning_bucket(3), 4);
  EXPECT_EQ(gemm_tuning_bucket(17), 32);
  EXPECT_EQ(gemm_tuning_bucket(32), 32);
  EXPECT_EQ(gemm_tuning_bucket(33), 64);
  EXPECT_EQ(gemm_tuning_bucket(255), 256);
  EXPECT_EQ(gemm_tuning_bucket(256), 256);
  EXPECT_EQ(gemm_tuning_bucket(257), 512);
  // Every count shares with no more than twice itself, and a power of two is its own bucket.
  for (int64_t m = 1; m <= 4096; ++m) {
    const int64_t b = gemm_tuning_bucket(m);
    EXPECT_GE(b, m);
    EXPECT_LT(b, 2 * m);
    EXPECT_EQ(b & (b - 1), 0) << m;
  }
  EXPECT_THROW(gemm_tuning_bucket(0), Error);
}

TEST(GemmTuning, CpuProductsTuneNothing) {
  std::mt19937 rng(5);
  const GemmTuningCounts before = gemm_tuning_counts();
  Buffer x = aerie::testing::random_buffer(rng, DType::kBF16, {40, 64}), w = aerie::testing::random_buffer(rng, DType::kBF16, {96, 64});
  Buffer y(Device::kCpu, DType::kF32, {40, 96});
  ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .y = y.view()}, Stream::cpu()).is_ok());
  const GemmTuningCounts after = gemm_tuning_counts();
  EXPECT_EQ(after.tuned, before.tuned);
  EXPECT_EQ(after.reused, before.reused);
  EXPECT_EQ(after.retuned, before.retuned);
}

TEST(GemmTuning, BorrowedAlgorithmsAreRetimedAfterTheirRowCountRecurs) {
  // The default (AERIE_GEMM_LT_RETUNE_AFTER unset under ctest) and the setter tests use.
  EXPECT_EQ(gemm_retune_after(), kGemmRetuneAfterCalls);
  set_gemm_retune_after(3);
  EXPECT_EQ(gemm_retune_after(), 3);
  set_gemm_retune_after(0);
  EXPECT_EQ(gemm_retune_after(), 0) << "0: never retimed";
  set_gemm_retune_after(kGemmRetuneAfterCalls);
}

TEST(GemmTuning, RowCountsShareByBucketUnlessTurnedOff) {
  EXPECT_TRUE(gemm_tuning_buckets()) << "the default (AERIE_GEMM_LT_BUCKETS unset under ctest)";
  set_gemm_tuning_buckets(false);
  EXPECT_FALSE(gemm_tuning_buckets());
  set_gemm_tuning_buckets(true);
  EXPECT_TRUE(gemm_tuning_buckets());
}

TEST(GemmTuning, ExactTuningScopesNestOnTheirThread) {
  EXPECT_FALSE(ExactGemmTuning::active());
  {
    const ExactGemmTuning outer;
    EXPECT_TRUE(ExactGemmTuning::active());
    {
      const ExactGemmTuning inner;
      EXPECT_TRUE(ExactGemmTuning::active());
    }
    EXPECT_TRUE(ExactGemmTuning::active()) << "the outer scope still lives";
    bool elsewhere = true;
    std::thread([&] { elsewhere = ExactGemmTuning::active(); }).join();
    EXPECT_FALSE(elsewhere) << "another thread's products are not under this thread's scope";
  }
  EXPECT_FALSE(ExactGemmTuning::active());
}
