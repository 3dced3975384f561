// Which GEMV takes a product of few rows (kernels/gemv_rules.hpp): the measured rules, and the
// property the bf16 verify relies on: for a small model's products one row and a verify's
// rows take the same GEMV, so each verify row is computed as the plain step computes it.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "kernels/gemv_rules.hpp"

using namespace aerie::kernels;

namespace {

constexpr GemvKernel kCuda = GemvKernel::kCudaCore, kTensor = GemvKernel::kTensorCore;

// Weights [n, k] of SmolLM2-135M (q/k/v, o_proj, gate/up, down_proj, LM head). (Its EAGLE-3
// head's q/k/v, 960 x 1152, takes the CUDA cores at one row and the tensor cores at 3-8: the
// draft's rows need not equal anything, they only propose.)
const std::vector<std::pair<int64_t, int64_t>> kSmolLm2 = {{960, 576}, {576, 576}, {3072, 576}, {576, 1536}, {49152, 576}};

}  // namespace

TEST(GemvRules, OneOrTwoRowsOverAShortKAndMoreThan576WeightRowsTakeTheTensorCores) {
  const GemvRules r;
  for (int64_t m : {1, 2}) {
    EXPECT_EQ(small_gemv_kernel(m, 3072, 576, false, r), kTensor) << m;   // SmolLM2's gate/up
    EXPECT_EQ(small_gemv_kernel(m, 960, 576, false, r), kTensor) << m;    // its q/k/v
    EXPECT_EQ(small_gemv_kernel(m, 577, 576, false, r), kTensor) << m;
    EXPECT_EQ(small_gemv_kernel(m, 49152, 576, false, r), kTensor) << m;  // its LM head
    EXPECT_EQ(small_gemv_kernel(m, 576, 576, false, r), kCuda) << m;      // o_proj: 36 blocks of 16
    EXPECT_EQ(small_gemv_kernel(m, 3072, 520, false, r), kCuda) << m;     // K not in whole 32-wide steps
    EXPECT_EQ(small_gemv_kernel(m, 4096, 4096, false, r), kCuda) << m;    // the 8B shape's o_proj
  }
  // K 1024-2048 (the 1B shape's q/k/v, o_proj, gate/up): the tensor cores at two rows only.
  EXPECT_EQ(small_gemv_kernel(1, 16384, 2048, false, r), kCuda);
  EXPECT_EQ(small_gemv_kernel(1, 3072, 1536, false, r), kCuda);
  EXPECT_EQ(small_gemv_kernel(2, 16384, 2048, false, r), kTensor);
  EXPECT_EQ(small_gemv_kernel(2, 3072, 1536, false, r), kTensor);
  EXPECT_EQ(small_gemv_kernel(2, 2048, 8192, false, r), kCuda);  // its down_proj
}

TEST(GemvRules, ThreeToEightRowsTakeTheTensorCoresUnlessTheWeightRowsAreFew) {
  const GemvRules r;
  for (int64_t m = 3; m <= 8; ++m) {
    EXPECT_EQ(small_gemv_kernel(m, 960, 576, false, r), kTensor) << m;
    EXPECT_EQ(small_gemv_kernel(m, 4096, 4096, false, r), kTensor) << m;  // the 8B shape's o_proj
    EXPECT_EQ(small_gemv_kernel(m, 576, 1536, false, r), kCuda) << m;     // SmolLM2's down_proj
    EXPECT_EQ(small_gemv_kernel(m, 576, 576, false, r), kCuda) << m;
    EXPECT_EQ(small_gemv_kernel(m, 1024, 520, false, r), kCuda) << m;
    // FP8 weights (the draft heads' copies) keep the tensor cores wherever K allows.
    EXPECT_EQ(small_gemv_kernel(m, 576, 1536, true, r), kTensor) << m;
    EXPECT_EQ(small_gemv_kernel(m, 576, 1568, true, r), kCuda) << m;  // not in 64-wide steps
  }
  for (int64_t m = 9; m <= 16; ++m) EXPECT_EQ(small_gemv_kernel(m, 576, 576, false, r), kTensor) << m;
}

TEST(GemvRules, ASmallModelsVerifyOfUpToEightTokensTakesItsPlainStepsGemvs) {
  const GemvRules r;
  for (const auto& [n, k] : kSmolLm2)
    for (int64_t m = 2; m <= 8; ++m)
      EXPECT_EQ(small_gemv_kernel(m, n, k, false, r), small_gemv_kernel(1, n, k, false, r)) << m << " rows of " << n << " x " << k;
  // For every short K the choice follows N alone, whatever the rows.
  for (int64_t n : {64, 576, 577, 700, 960, 3072, 9001})
    for (int64_t m = 2; m <= 8; ++m)
      EXPECT_EQ(small_gemv_kernel(m, n, 576, false, r), small_gemv_kernel(1, n, 576, false, r)) << m << " rows of " << n;
}

TEST(GemvRules, TheKnobsMoveTheThresholdsOrTurnThePathsOff) {
  GemvRules before;  // the rules before the measurement: short K from 8192 rows, no narrow rule
  before.short_k_min_rows = 8192;
  before.narrow_max_rows = 0;
  EXPECT_EQ(small_gemv_kernel(1, 3072, 576, false, before), kCuda);
  EXPECT_EQ(small_gemv_kernel(1, 49152, 576, false, before), kTensor);
  EXPECT_EQ(small_gemv_kernel(4, 576, 1536, false, before), kTensor);
  GemvRules no_short_k;
  no_short_k.short_k_on_tensor_cores = false;
  EXPECT_EQ(small_gemv_kernel(1, 49152, 576, false, no_short_k), kCuda);
  GemvRules no_tensor_cores;
  no_tensor_cores.tensor_cores = false;
  EXPECT_EQ(small_gemv_kernel(1, 49152, 576, false, no_tensor_cores), kCuda);
  EXPECT_EQ(small_gemv_kernel(5, 4096, 4096, false, no_tensor_cores), kCuda);
  GemvRules longer_k;
  longer_k.short_k_max = 2048;
  EXPECT_EQ(small_gemv_kernel(1, 16384, 2048, false, longer_k), kTensor);
  GemvRules two_rows_short;
  two_rows_short.short_k_max_two_rows = 1023;
  EXPECT_EQ(small_gemv_kernel(2, 16384, 2048, false, two_rows_short), kCuda);
  // Unset knobs give the measured defaults.
  const GemvRules& env = gemv_rules();
  const GemvRules defaults;
  EXPECT_EQ(env.short_k_min_rows, defaults.short_k_min_rows);
  EXPECT_EQ(env.short_k_max, defaults.short_k_max);
  EXPECT_EQ(env.short_k_max_two_rows, defaults.short_k_max_two_rows);
  EXPECT_EQ(env.narrow_max_rows, defaults.narrow_max_rows);
  EXPECT_EQ(env.tensor_cores, defaults.tensor_cores);
  EXPECT_EQ(env.short_k_on_tensor_cores, defaults.short_k_on_tensor_cores);
  EXPECT_EQ(env.chunked_max_rows, defaults.chunked_max_rows);
  EXPECT_EQ(env.chunked_max_weight_bytes, defaults.chunked_max_weight_bytes);
}

TEST(GemvRules, MoreThan16RowsOfASmallWeightTakeTheTensorCoreGemvInChunks) {
  const GemvRules r;
  // SmolLM2's products (up to 3.4 MiB) at a verify of 8 x 5 rows and a mixed batch of 128.
  for (const auto& [n, k] : kSmolLm2) {
    const bool small = n * k * 2 <= r.chunked_max_weight_bytes;
    EXPECT_EQ(gemv_takes_row_chunks(40, n, k, r), small) << n << " x " << k;
    EXPECT_EQ(gemv_takes_row_chunks(r.chunked_max_rows, n, k, r), small) << n << " x " << k;
    EXPECT_FALSE(gemv_takes_row_chunks(r.chunked_max_rows + 1, n, k, r)) << n << " x " << k;
    EXPECT_FALSE(gemv_takes_row_chunks(16, n, k, r)) << "16 rows are the GEMVs' anyway";
  }
  EXPECT_FALSE(gemv_takes_row_chunks(40, 49152, 576, r));  // SmolLM2's LM head: 54 MiB
  EXPECT_FALSE(gemv_takes_row_chunks(40, 4096, 4096, r));  // the 8B shape's o_proj: cuBLASLt
  EXPECT_FALSE(gemv_takes_row_chunks(40, 2048, 2048, r));  // the 1B shape's o_proj (8 MiB): slower past 32 rows
  EXPECT_FALSE(gemv_takes_row_chunks(40, 960, 584, r));    // K not in 32-wide steps
  GemvRules off;
  off.chunked_max_rows = 0;
  EXPECT_FALSE(gemv_takes_row_chunks(40, 960, 576, off));
  GemvRules no_tensor_cores;
  no_tensor_cores.tensor_cores = false;
  EXPECT_FALSE(gemv_takes_row_chunks(40, 960, 576, no_tensor_cores));
}
