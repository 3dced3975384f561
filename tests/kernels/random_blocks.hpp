#pragma once
// Random GGUF blocks for the tests of the products over them (weight_blocks_test,
// int8_block_gemm_test).
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "kernels/dtype.hpp"
#include "kernels/weight_blocks.hpp"

namespace aerie::testing {

inline constexpr kernels::BlockFormat kBlockFormats[] = {kernels::BlockFormat::kQ4_0, kernels::BlockFormat::kQ4_1, kernels::BlockFormat::kQ8_0};

// n rows of k weights as random blocks: f16 scales (and Q4_1 minimums) of either sign spanning
// a few octaves, random quants.
inline std::vector<unsigned char> random_blocks(std::mt19937& rng, kernels::BlockFormat f, int64_t n, int64_t k) {
  std::vector<unsigned char> bytes(static_cast<size_t>(n * kernels::block_row_bytes(f, k)));
  std::uniform_int_distribution<int> byte(0, 255);
  std::uniform_real_distribution<float> mag(-0.05f, 0.05f);
  for (auto& b : bytes) b = static_cast<unsigned char>(byte(rng));
  const int64_t bb = kernels::block_bytes(f);
  for (int64_t b = 0; b < n * k / kernels::kBlockElements; ++b) {
    unsigned char* p = bytes.data() + b * bb;
    const uint16_t d = float_to_f16(mag(rng)), m = float_to_f16(mag(rng) * 8.0f);
    std::memcpy(p, &d, 2);
    if (f == kernels::BlockFormat::kQ4_1) std::memcpy(p + 2, &m, 2);
  }
  return bytes;
}

}  // namespace aerie::testing
