// The CPU's products over GGUF blocks with int8 activations (kernels/cpu/int8_block_gemm.hpp):
// the tile order round-trips, a hand-computed block, the error against the f32 product stays
// within what rounding x to 8 bits allows, AMX gives the scalar loop's bits, and a row's result
// does not depend on the rows beside it.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/dtype.hpp"
#include "kernels/error.hpp"
#include "kernels/weight_blocks.hpp"
#include "tests/kernels/random_blocks.hpp"

using namespace aerie;
using namespace aerie::kernels;

namespace {

std::vector<float> random_x(std::mt19937& rng, int64_t m, int64_t k) {
  std::normal_distribution<float> nd(0.0f, 1.0f);
  std::vector<float> x(static_cast<size_t>(m * k));
  for (auto& v : x) v = nd(rng);
  // A block of zeros and one of a single large value: both edges of the scaling.
  if (k >= 64) {
    for (int64_t j = 0; j < 32; ++j) x[static_cast<size_t>(j)] = 0.0f;
    x[32 + 5] = 300.0f;
  }
  return x;
}

struct TiledWeight {
  std::vector<unsigned char> tiles;
  WeightBlocks view;
  TiledWeight(BlockFormat f, const std::vector<unsigned char>& rows, int64_t n, int64_t k) : tiles(rows.size()) {
    blocks_to_tile_order(f, rows.data(), n, k, tiles.data());
    view = WeightBlocks{TensorView(tiles.data(), DType::kU8, {n, block_row_bytes(f, k)}), f, BlockLayout::kTiles16};
  }
};

std::vector<float> product(cpu::Int8BlockPath path, int64_t m, int64_t n, int64_t k, const std::vector<float>& x, const WeightBlocks& w) {
  std::vector<float> y(static_cast<size_t>(m * n), -1.0f);
  cpu::int8_block_gemm_on(path, m, n, k, x.data(), w, y.data());
  return y;
}

}  // namespace

TEST(Int8BlockGemm, TileOrderPutsEachRowsScalesAndQuantDwordsSideBySideAndBack) {
  std::mt19937 rng(7);
  for (BlockFormat f : aerie::testing::kBlockFormats) {
    const int64_t n = 32, k = 96, bb = block_bytes(f), blocks = k / 32;
    const auto rows = aerie::testing::random_blocks(rng, f, n, k);
    std::vector<unsigned char> tiles(rows.size()), back(rows.size());
    blocks_to_tile_order(f, rows.data(), n, k, tiles.data());
    blocks_from_tile_order(f, tiles.data(), n, k, back.data());
    EXPECT_EQ(back, rows) << block_format_name(f);
    // Row 19 (group 1, lane 3), block 2: its d, and its quant dword 1, where the layout says.
    const unsigned char* row_block = rows.data() + 19 * blocks * bb + 2 * bb;
    const unsigned char* tile_block = tiles.data() + (1 * blocks + 2) * 16 * bb;
    EXPECT_EQ(std::memcmp(tile_block + 2 * 3, row_block, 2), 0) << block_format_name(f);
    const int64_t scales = f == BlockFormat::kQ4_1 ? 2 : 1;
    if (f == BlockFormat::kQ4_1) {
      EXPECT_EQ(std::memcmp(tile_block + 32 + 2 * 3, row_block + 2, 2), 0);
    }
    EXPECT_EQ(std::memcmp(tile_block + scales * 32 + 64 + 4 * 3, row_block + 2 * scales + 4, 4), 0) << block_format_name(f);
  }
}

// One Q8_0 block worked by hand: x = (1, 0.5, 0, ..., 0, -1) becomes d_x = 1/127 and q_x =
// (127, 64, 0, ..., -127) (63.5 rounds to the even 64); weights d = 2, q = (1, 2, 0, ..., 3) give
// the integer dot 127 + 128 - 381 = -126, scaled by 2 * (1/127).
TEST(Int8BlockGemm, AQ8BlockWorkedByHand) {
  const int64_t n = 16, k = 32;
  std::vector<unsigned char> rows(static_cast<size_t>(n * block_row_bytes(BlockFormat::kQ8_0, k)), 0);
  const uint16_t two = float_to_f16(2.0f);
  std::memcpy(rows.data(), &two, 2);
  rows[2 + 0] = 1;
  rows[2 + 1] = 2;
  rows[2 + 31] = 3;
  std::vector<float> x(32, 0.0f);
  x[0] = 1.0f;
  x[1] = 0.5f;
  x[31] = -1.0f;
  TiledWeight w(BlockFormat::kQ8_0, rows, n, k);
  const float want = std::fma(-126.0f, 2.0f * (1.0f / 127.0f), 0.0f);
  for (auto path : {cpu::Int8BlockPath::kScalar, cpu::int8_block_path()}) {
    const auto y = product(path, 1, n, k, x, w.view);
    EXPECT_EQ(y[0], want) << cpu::int8_block_path_name(path);
    for (int64_t j = 1; j < n; ++j) EXPECT_EQ(y[static_cast<size_t>(j)], 0.0f) << j;  // d = 0 rows
  }
}

// |y - x w| is at most the sum over a row's columns of |w| times half x's step (d_x / 2), plus
// f32 rounding: the only approximation is x's rounding to int8.
TEST(Int8BlockGemm, ErrorAgainstTheF32ProductIsWithinHalfAStepOfX) {
  std::mt19937 rng(11);
  for (BlockFormat f : aerie::testing::kBlockFormats) {
    const int64_t m = 3, n = 48, k = 576;
    const auto rows = aerie::testing::random_blocks(rng, f, n, k);
    std::vector<float> w(static_cast<size_t>(n * k));
    dequantize_blocks(f, rows.data(), n * k / 32, w.data());
    const auto x = random_x(rng, m, k);
    TiledWeight tw(f, rows, n, k);
    const auto y = product(cpu::Int8BlockPath::kScalar, m, n, k, x, tw.view);
    for (int64_t i = 0; i < m; ++i)
      for (int64_t r = 0; r < n; ++r) {
        double exact = 0.0, bound = 0.0, mag = 0.0;
        for (int64_t b = 0; b < k / 32; ++b) {
          double amax = 0.0;
          for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(static_cast<double>(x[static_cast<size_t>(i * k + b * 32 + j)])));
          for (int64_t j = 0; j < 32; ++j) {
            const double wv = w[static_cast<size_t>(r * k + b * 32 + j)], xv = x[static_cast<size_t>(i * k + b * 32 + j)];
            exact += wv * xv;
            bound += std::fabs(wv) * amax / 127.0 * 0.5;
            mag += std::fabs(wv * xv);
          }
        }
        const double got = y[static_cast<size_t>(i * n + r)];
        EXPECT_LE(std::fabs(got - exact), bound * 1.001 + mag * 1e-5 + 1e-6) << block_format_name(f) << " row " << i << " out " << r;
      }
  }
}

TEST(Int8BlockGemm, AmxGivesTheScalarLoopsBitsForEveryRowCount) {
  if (!cpu::amx_int8_available()) GTEST_SKIP() << "no AMX-INT8 on this CPU (the scalar loop serves)";
  std::mt19937 rng(3);
  for (BlockFormat f : aerie::testing::kBlockFormats)
    for (int64_t k : {32, 576, 1536}) {
      const int64_t n = 64;
      const auto rows = aerie::testing::random_blocks(rng, f, n, k);
      TiledWeight w(f, rows, n, k);
      for (int64_t m = 1; m <= cpu::kInt8BlockMaxRows; ++m) {
        const auto x = random_x(rng, m, k);
        const auto a = product(cpu::Int8BlockPath::kAmx, m, n, k, x, w.view);
        const auto s = product(cpu::Int8BlockPath::kScalar, m, n, k, x, w.view);
        ASSERT_EQ(std::memcmp(a.data(), s.data(), a.size() * sizeof(float)), 0) << block_format_name(f) << " k " << k << " m " << m;
      }
    }
}

// A verify's rows get the one-row step's bits: row i of an m-row product equals the product of
// row i alone, on the path this CPU takes, past a tile's 16 rows too (a prefill).
TEST(Int8BlockGemm, ARowsResultDoesNotDependOnTheRowsBesideIt) {
  std::mt19937 rng(5);
  const auto path = cpu::int8_block_path();
  for (BlockFormat f : aerie::testing::kBlockFormats) {
    const int64_t n = 32, k = 576, m = f == BlockFormat::kQ4_1 ? 37 : 7;
    const auto rows = aerie::testing::random_blocks(rng, f, n, k);
    TiledWeight w(f, rows, n, k);
    const auto x = random_x(rng, m, k);
    const auto all = product(path, m, n, k, x, w.view);
    for (int64_t i = 0; i < m; ++i) {
      const std::vector<float> one_x(x.begin() + i * k, x.begin() + (i + 1) * k);
      const auto one = product(path, 1, n, k, one_x, w.view);
      EXPECT_EQ(std::memcmp(one.data(), all.data() + i * n, static_cast<size_t>(n) * sizeof(float)), 0) << block_format_name(f) << " row " << i;
    }
  }
}

TEST(Int8BlockGemm, RefusesWhatItCannotMultiply) {
  std::mt19937 rng(1);
  const int64_t n = 16, k = 64;
  const auto rows = aerie::testing::random_blocks(rng, BlockFormat::kQ4_1, n, k);
  TiledWeight w(BlockFormat::kQ4_1, rows, n, k);
  std::vector<float> x(17 * k, 0.5f), y(17 * n);
  WeightBlocks in_rows = w.view;
  in_rows.layout = BlockLayout::kRows;
  EXPECT_THROW(cpu::int8_block_gemm(1, n, k, x.data(), in_rows, y.data()), Error);  // not in tile order
  WeightBlocks ragged{TensorView(w.tiles.data(), DType::kU8, {8, block_row_bytes(BlockFormat::kQ4_1, k)}), BlockFormat::kQ4_1, BlockLayout::kTiles16};
  EXPECT_THROW(ragged.validate(8, k, "w"), Error);  // 8 rows: not whole groups of 16
  std::vector<unsigned char> out(rows.size());
  EXPECT_THROW(blocks_to_tile_order(BlockFormat::kQ4_1, rows.data(), 8, k, out.data()), Error);
}
