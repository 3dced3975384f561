// Products on the tile unit (kernels/cpu/amx_gemm.hpp): within f32 rounding of the exact
// products for every block format and bf16 weights, and a row's result independent of the
// other rows of its batch (bit for bit), so a verify row equals the one-row decode step's.
// Skipped on CPUs without AMX-BF16.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/amx_gemm.hpp"
#include "kernels/cpu/small_batch_gemm.hpp"
#include "kernels/matmul.hpp"
#include "kernels/weight_blocks.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;

namespace {

constexpr BlockFormat kFormats[] = {BlockFormat::kQ4_0, BlockFormat::kQ4_1, BlockFormat::kQ8_0};

std::vector<unsigned char> random_blocks(std::mt19937& rng, BlockFormat f, int64_t n, int64_t k) {
  std::vector<unsigned char> bytes(static_cast<size_t>(n * block_row_bytes(f, k)));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(-0.05f, 0.05f);
  for (auto& b : bytes) b = static_cast<unsigned char>(byte(rng));
  const int64_t bb = block_bytes(f);
  for (int64_t b = 0; b < n * k / kBlockElements; ++b) {
    unsigned char* p = bytes.data() + b * bb;
    const uint16_t d = float_to_f16(mag(rng)), m = float_to_f16(mag(rng) * 8.0f);
    std::memcpy(p, &d, 2);
    if (f == BlockFormat::kQ4_1) std::memcpy(p + 2, &m, 2);
  }
  return bytes;
}

// x with every significand bit in play: values spread over 2^-20..2^20 of both signs, so a
// product that kept only the top 8 or 16 bits of x would miss by far more than f32 rounding.
std::vector<float> hard_x(std::mt19937& rng, int64_t m, int64_t k) {
  std::vector<float> x(static_cast<size_t>(m * k));
  std::uniform_real_distribution<float> unit(1.0f, 2.0f);
  std::uniform_int_distribution<int> octave(-20, 20), sign(0, 1);
  for (auto& v : x) v = std::ldexp(unit(rng), octave(rng)) * (sign(rng) ? -1.0f : 1.0f);
  return x;
}

// Checks got against the exact product (in double) of x and w: each output within a few f32
// roundings of the sum of |products| (the bound any f32 summation order meets).
void expect_within_f32_rounding(const std::vector<float>& got, const std::vector<float>& x, const std::vector<float>& w, int64_t m, int64_t n,
                                int64_t k, const std::string& what) {
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double exact = 0.0, magnitude = 0.0;
      for (int64_t c = 0; c < k; ++c) {
        const double p = static_cast<double>(x[i * k + c]) * static_cast<double>(w[j * k + c]);
        exact += p;
        magnitude += std::fabs(p);
      }
      const double bound = magnitude * 4.0 * static_cast<double>(k) * 0x1p-24 + 1e-30;
      ASSERT_LE(std::fabs(got[i * n + j] - exact), bound) << what << ", row " << i << ", output " << j << ": " << got[i * n + j] << " vs " << exact;
    }
}

// Each row alone, then all m together: the same bits.
template <class W>
void expect_rows_independent(const W& w, const std::vector<float>& x, int64_t m, int64_t n, int64_t k, const std::string& what) {
  std::vector<float> all(static_cast<size_t>(m * n), -1.0f);
  cpu::amx_gemm(m, n, k, x.data(), w, all.data());
  for (int64_t i = 0; i < m; ++i) {
    std::vector<float> one(static_cast<size_t>(n), -2.0f);
    cpu::amx_gemm(1, n, k, x.data() + i * k, w, one.data());
    for (int64_t j = 0; j < n; ++j)
      ASSERT_EQ(std::bit_cast<uint32_t>(all[i * n + j]), std::bit_cast<uint32_t>(one[j])) << what << ", row " << i << " of " << m << ", output " << j;
  }
}

}  // namespace

TEST(AmxGemm, BlockProductsAreWithinF32RoundingAndEachRowIsItsOneRowProduct) {
  if (!cpu::amx_supported()) GTEST_SKIP() << "this CPU (or its OS) gives no AMX-BF16 tiles";
  std::mt19937 rng(41);
  for (const BlockFormat f : kFormats)
    for (const int64_t k : {int64_t{32}, int64_t{576}, int64_t{1536}}) {
      const int64_t n = 37;  // two groups of 16 and a tail of 5
      const auto bytes = random_blocks(rng, f, n, k);
      std::vector<float> w(static_cast<size_t>(n * k));
      dequantize_blocks(f, bytes.data(), n * k / kBlockElements, w.data());
      const WeightBlocks blocks{.bytes = TensorView(const_cast<unsigned char*>(bytes.data()), DType::kU8, {n, block_row_bytes(f, k)}), .format = f};
      for (const int64_t m : {1, 2, 4, 5, 6, 11, 15, 16}) {
        const auto x = hard_x(rng, m, k);
        const std::string what = std::string(block_format_name(f)) + " k " + std::to_string(k) + ", " + std::to_string(m) + " rows";
        std::vector<float> got(static_cast<size_t>(m * n), -3.0f);
        cpu::amx_gemm(m, n, k, x.data(), blocks, got.data());
        expect_within_f32_rounding(got, x, w, m, n, k, what);
        expect_rows_independent(blocks, x, m, n, k, what);
      }
    }
}

TEST(AmxGemm, Bf16ProductsAreWithinF32RoundingAndEachRowIsItsOneRowProduct) {
  if (!cpu::amx_supported()) GTEST_SKIP() << "this CPU (or its OS) gives no AMX-BF16 tiles";
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  for (const int64_t k : {int64_t{32}, int64_t{576}, int64_t{4608}})
    for (const int64_t n : {int64_t{16}, int64_t{45}}) {
      std::vector<uint16_t> wb(static_cast<size_t>(n * k));
      std::vector<float> w(wb.size());
      for (size_t e = 0; e < wb.size(); ++e) {
        wb[e] = static_cast<uint16_t>(std::bit_cast<uint32_t>(normal(rng)) >> 16);
        w[e] = std::bit_cast<float>(static_cast<uint32_t>(wb[e]) << 16);
      }
      for (const int64_t m : {1, 3, 5, 10, 15, 16}) {
        const auto x = hard_x(rng, m, k);
        const std::string what = "bf16 k " + std::to_string(k) + " n " + std::to_string(n) + ", " + std::to_string(m) + " rows";
        std::vector<float> got(static_cast<size_t>(m * n), -3.0f);
        cpu::amx_gemm(m, n, k, x.data(), wb.data(), got.data());
        expect_within_f32_rounding(got, x, w, m, n, k, what);
        expect_rows_independent(wb.data(), x, m, n, k, what);
      }
    }
}

// A weight row with one 1 picks one x value: the three parts must add back to it exactly
// (a product that dropped x's low 16 or 8 significand bits would not).
TEST(AmxGemm, APickingWeightGivesBackEveryBitOfX) {
  if (!cpu::amx_supported()) GTEST_SKIP() << "this CPU (or its OS) gives no AMX-BF16 tiles";
  std::mt19937 rng(43);
  const int64_t k = 64, n = 64, m = 7;
  std::vector<uint16_t> wb(static_cast<size_t>(n * k), 0);
  for (int64_t j = 0; j < n; ++j) wb[j * k + j] = 0x3F80;  // 1.0
  const auto x = hard_x(rng, m, k);
  std::vector<float> got(static_cast<size_t>(m * n));
  cpu::amx_gemm(m, n, k, x.data(), wb.data(), got.data());
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) ASSERT_EQ(got[i * n + j], x[i * k + j]) << "row " << i << ", column " << j;
}
