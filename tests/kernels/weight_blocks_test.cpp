// GGUF blocks of weights (kernels/weight_blocks.hpp) and the CPU's products over them: every
// product of up to 16 rows equals, bit for bit, the same product over the blocks' dequantized
// f32 weights, on every instruction set the CPU has, so a model decodes the same tokens with
// or without the blocks.
#include <gtest/gtest.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/cpu/small_batch_gemm.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/weight_blocks.hpp"
#include "tests/kernels/random_blocks.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;
using aerie::testing::random_buffer;
using aerie::testing::to_double;

namespace {

const Stream kCpu = Stream::cpu();

std::vector<float> dequantized(BlockFormat f, const std::vector<unsigned char>& bytes, int64_t n, int64_t k) {
  std::vector<float> w(static_cast<size_t>(n * k));
  dequantize_blocks(f, bytes.data(), n * k / kBlockElements, w.data());
  return w;
}

const char* isa_name(cpu::SmallBatchIsa isa) { return isa == cpu::SmallBatchIsa::kAvx2 ? "AVX2" : "AVX-512"; }

}  // namespace

// The block layouts as llama.cpp writes them (ggml-quants.c), one block each, by hand.
TEST(WeightBlocks, DequantizeEachFormatAsLlamaCppLaysItOut) {
  EXPECT_EQ(block_bytes(BlockFormat::kQ4_0), 18);
  EXPECT_EQ(block_bytes(BlockFormat::kQ4_1), 20);
  EXPECT_EQ(block_bytes(BlockFormat::kQ8_0), 34);
  EXPECT_EQ(block_row_bytes(BlockFormat::kQ4_1, 576), 18 * 20);
  float out[32];
  // Q4_1: d = 0.5, m = -1; byte j = (j + 1) in the low nibble, 15 - j in the high one.
  unsigned char q41[20];
  const uint16_t half = float_to_f16(0.5f), minus_one = float_to_f16(-1.0f);
  std::memcpy(q41, &half, 2);
  std::memcpy(q41 + 2, &minus_one, 2);
  for (int j = 0; j < 16; ++j) q41[4 + j] = static_cast<unsigned char>(((15 - j) << 4) | ((j + 1) & 0x0F));
  dequantize_blocks(BlockFormat::kQ4_1, q41, 1, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], ((j + 1) & 0x0F) * 0.5f - 1.0f) << j;
    EXPECT_EQ(out[j + 16], (15 - j) * 0.5f - 1.0f) << j + 16;
  }
  // Q4_0: (q - 8) * d.
  unsigned char q40[18];
  std::memcpy(q40, &half, 2);
  for (int j = 0; j < 16; ++j) q40[2 + j] = static_cast<unsigned char>((j << 4) | (15 - j));
  dequantize_blocks(BlockFormat::kQ4_0, q40, 1, out);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(out[j], (15 - j - 8) * 0.5f) << j;
    EXPECT_EQ(out[j + 16], (j - 8) * 0.5f) << j + 16;
  }
  // Q8_0: signed bytes times d.
  unsigned char q80[34];
  std::memcpy(q80, &half, 2);
  for (int j = 0; j < 32; ++j) q80[2 + j] = static_cast<unsigned char>(static_cast<int8_t>(j * 8 - 128));
  dequantize_blocks(BlockFormat::kQ8_0, q80, 1, out);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(out[j], static_cast<float>(j * 8 - 128) * 0.5f) << j;
}

// Every row count a decode or verify takes (tiles of 4 x rows and their remainders), rows of
// weights not a multiple of the tile's 4, a short and a long row: the blocks' product is the
// f32 product's, bit for bit, on each instruction set.
TEST(WeightBlocks, SmallBatchProductsEqualTheDequantizedWeightsBitForBitOnEveryIsa) {
  std::mt19937 rng(31);
  int ran = 0;
  for (const BlockFormat f : aerie::testing::kBlockFormats)
    for (const int64_t k : {int64_t{32}, int64_t{576}, int64_t{1536}}) {
      const int64_t n = 37;
      const auto bytes = aerie::testing::random_blocks(rng, f, n, k);
      const auto w = dequantized(f, bytes, n, k);
      const WeightBlocks blocks{.bytes = TensorView(const_cast<unsigned char*>(bytes.data()), DType::kU8, {n, block_row_bytes(f, k)}), .format = f};
      for (const int64_t m : {1, 2, 3, 4, 5, 8, 16}) {
        Buffer x = random_buffer(rng, DType::kF32, {m, k});
        const float* xp = x.view().ptr<float>();
        for (auto isa : {cpu::SmallBatchIsa::kAvx2, cpu::SmallBatchIsa::kAvx512}) {
          if (!cpu::small_batch_gemm_supports(isa)) continue;
          ++ran;
          std::vector<float> want(static_cast<size_t>(m * n), -1.0f), got(static_cast<size_t>(m * n), -2.0f);
          cpu::small_batch_gemm_on(isa, m, n, k, xp, w.data(), want.data());
          cpu::small_batch_gemm_on(isa, m, n, k, xp, blocks, got.data());
          for (size_t e = 0; e < got.size(); ++e)
            ASSERT_EQ(std::bit_cast<uint32_t>(got[e]), std::bit_cast<uint32_t>(want[e]))
                << block_format_name(f) << " k " << k << ", " << m << " rows, " << isa_name(isa) << ", output " << e;
        }
      }
    }
  if (ran == 0) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512";
}

// Through the op: up to 16 rows read the blocks and give exactly the f32 weight's products;
// more rows (a prefill) read the f32 weight, as the rule says (blocks_copy_serves).
TEST(WeightBlocks, MatmulReadsTheBlocksUpTo16RowsAndTheF32WeightPastThem) {
  std::mt19937 rng(32);
  const BlockFormat f = BlockFormat::kQ4_1;
  const int64_t n = 70, k = 576;
  auto bytes = aerie::testing::random_blocks(rng, f, n, k);
  auto w = dequantized(f, bytes, n, k);
  const TensorView wv(w.data(), DType::kF32, {n, k});
  const WeightBlocks blocks{.bytes = TensorView(bytes.data(), DType::kU8, {n, block_row_bytes(f, k)}), .format = f};
  EXPECT_TRUE(blocks_copy_serves(blocks, 16));
  EXPECT_FALSE(blocks_copy_serves(blocks, 17));
  EXPECT_FALSE(blocks_copy_serves(WeightBlocks{}, 1));
  for (const int64_t m : {1, 6, 16, 17}) {
    Buffer x = random_buffer(rng, DType::kF32, {m, k});
    Buffer want(Device::kCpu, DType::kF32, {m, n}), got(Device::kCpu, DType::kF32, {m, n});
    ASSERT_TRUE(matmul({.x = x.view(), .w = wv, .y = want.view()}, kCpu).is_ok());
    ASSERT_TRUE(matmul({.x = x.view(), .w = wv, .w_blocks = blocks, .y = got.view()}, kCpu).is_ok());
    EXPECT_EQ(to_double(got.view()), to_double(want.view())) << m << " rows";
  }
  // Blocks that do not decode to w would show past 16 rows only if the op read them there:
  // zero every block's scale (all weights 0 or Q4_1's minimum) and check 17 rows still match.
  std::vector<unsigned char> other = bytes;
  for (int64_t b = 0; b < n * k / kBlockElements; ++b) std::memset(other.data() + b * block_bytes(f), 0, 4);
  const WeightBlocks wrong{.bytes = TensorView(other.data(), DType::kU8, {n, block_row_bytes(f, k)}), .format = f};
  Buffer x = random_buffer(rng, DType::kF32, {17, k});
  Buffer want(Device::kCpu, DType::kF32, {17, n}), got(Device::kCpu, DType::kF32, {17, n});
  ASSERT_TRUE(matmul({.x = x.view(), .w = wv, .y = want.view()}, kCpu).is_ok());
  ASSERT_TRUE(matmul({.x = x.view(), .w = wv, .w_blocks = wrong, .y = got.view()}, kCpu).is_ok());
  EXPECT_EQ(to_double(got.view()), to_double(want.view()));
  if (cpu::small_batch_gemm_available()) {  // and that 1 row does read them
    Buffer x1 = random_buffer(rng, DType::kF32, {1, k});
    Buffer a(Device::kCpu, DType::kF32, {1, n}), b(Device::kCpu, DType::kF32, {1, n});
    ASSERT_TRUE(matmul({.x = x1.view(), .w = wv, .y = a.view()}, kCpu).is_ok());
    ASSERT_TRUE(matmul({.x = x1.view(), .w = wv, .w_blocks = wrong, .y = b.view()}, kCpu).is_ok());
    EXPECT_NE(to_double(a.view()), to_double(b.view()));
  }
}

// Blocks that do not fit the weight are refused with a message naming the expected shape.
TEST(WeightBlocks, MatmulRefusesBlocksOfTheWrongShape) {
  std::mt19937 rng(33);
  const int64_t n = 8, k = 64;
  Buffer x = random_buffer(rng, DType::kF32, {1, k}), w = random_buffer(rng, DType::kF32, {n, k}), y(Device::kCpu, DType::kF32, {1, n});
  std::vector<unsigned char> bytes(static_cast<size_t>(n * block_row_bytes(BlockFormat::kQ8_0, k)));
  const WeightBlocks short_rows{.bytes = TensorView(bytes.data(), DType::kU8, {n, block_row_bytes(BlockFormat::kQ4_1, k)}),
                                .format = BlockFormat::kQ8_0};
  try {
    (void)matmul({.x = x.view(), .w = w.view(), .w_blocks = short_rows, .y = y.view()}, kCpu);
    ADD_FAILURE() << "blocks of Q4_1's row size taken as Q8_0";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("u8 [8, 68] (Q8_0 blocks of a [8, 64] weight)"), std::string::npos) << e.what();
  }
  const WeightBlocks too_few{.bytes = TensorView(bytes.data(), DType::kU8, {n - 1, block_row_bytes(BlockFormat::kQ8_0, k)}),
                             .format = BlockFormat::kQ8_0};
  EXPECT_THROW((void)matmul({.x = x.view(), .w = w.view(), .w_blocks = too_few, .y = y.view()}, kCpu), Error);
  const WeightBlocks as_floats{.bytes = TensorView(bytes.data(), DType::kF32, {n, block_row_bytes(BlockFormat::kQ8_0, k) / 4}),
                               .format = BlockFormat::kQ8_0};
  EXPECT_THROW((void)matmul({.x = x.view(), .w = w.view(), .w_blocks = as_floats, .y = y.view()}, kCpu), Error);
  Buffer w_odd = random_buffer(rng, DType::kF32, {n, 48}), x_odd = random_buffer(rng, DType::kF32, {1, 48});
  EXPECT_THROW((void)matmul({.x = x_odd.view(), .w = w_odd.view(), .w_blocks = too_few, .y = y.view()}, kCpu), Error);  // 48 columns
}

// Floats as Q8_0 blocks (an EAGLE head's weights for the int8 products): d = max|w| / 127 in f16,
// q = rint(w / d); each weight comes back within half a step, the largest exactly up to d's f16
// rounding.
TEST(WeightBlocks, FloatsQuantizeToQ8_0WithinHalfAStep) {
  std::mt19937 rng(9);
  std::normal_distribution<float> nd(0.0f, 0.05f);
  const int64_t n = 3, k = 96;
  std::vector<float> w(static_cast<size_t>(n * k));
  for (auto& v : w) v = nd(rng);
  for (int64_t j = 0; j < 32; ++j) w[static_cast<size_t>(j)] = 0.0f;  // a block of zeros: d = 0, q = 0
  std::vector<unsigned char> bytes(static_cast<size_t>(n * block_row_bytes(BlockFormat::kQ8_0, k)));
  quantize_q8_0_blocks(w.data(), n, k, bytes.data());
  const auto back = dequantized(BlockFormat::kQ8_0, bytes, n, k);
  for (int64_t b = 0; b < n * k / 32; ++b) {
    uint16_t h;
    std::memcpy(&h, bytes.data() + b * 34, 2);
    const float d = f16_to_float(h);
    float amax = 0.0f;
    for (int64_t j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(w[static_cast<size_t>(b * 32 + j)]));
    EXPECT_NEAR(d, amax / 127.0f, amax / 127.0f * 1e-3f + 1e-9f) << "block " << b;
    for (int64_t j = 0; j < 32; ++j) {
      const size_t i = static_cast<size_t>(b * 32 + j);
      EXPECT_LE(std::fabs(back[i] - w[i]), 0.5f * d * 1.01f + 1e-7f) << "block " << b << " element " << j;
    }
  }
  std::vector<float> bad(32, 1.0f);
  bad[3] = std::numeric_limits<float>::infinity();
  EXPECT_THROW(quantize_q8_0_blocks(bad.data(), 1, 32, bytes.data()), Error);
  EXPECT_THROW(quantize_q8_0_blocks(w.data(), 1, 48, bytes.data()), Error);  // not whole blocks
}
