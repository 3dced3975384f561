#include "kernels/weight_blocks.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "kernels/error.hpp"

namespace aerie::kernels {

const char* block_format_name(BlockFormat f) {
  switch (f) {
    case BlockFormat::kQ4_0: return "Q4_0";
    case BlockFormat::kQ4_1: return "Q4_1";
    case BlockFormat::kQ8_0: return "Q8_0";
  }
  return "unknown";
}

namespace {
float f16_at(const unsigned char* p) {
  uint16_t h;
  std::memcpy(&h, p, 2);
  return f16_to_float(h);
}
}  // namespace

void dequantize_blocks(BlockFormat f, const unsigned char* src, int64_t blocks, float* out) {
  const int64_t bb = block_bytes(f);
  for (int64_t b = 0; b < blocks; ++b) {
    const unsigned char* p = src + b * bb;
    float* o = out + b * kBlockElements;
    switch (f) {
      case BlockFormat::kQ4_0: {
        const float d = f16_at(p);
        for (int j = 0; j < 16; ++j) {
          o[j] = static_cast<float>((p[2 + j] & 0x0F) - 8) * d;
          o[j + 16] = static_cast<float>((p[2 + j] >> 4) - 8) * d;
        }
        break;
      }
      case BlockFormat::kQ4_1: {
        const float d = f16_at(p), m = f16_at(p + 2);
        for (int j = 0; j < 16; ++j) {
          o[j] = static_cast<float>(p[4 + j] & 0x0F) * d + m;
          o[j + 16] = static_cast<float>(p[4 + j] >> 4) * d + m;
        }
        break;
      }
      case BlockFormat::kQ8_0: {
        const float d = f16_at(p);
        for (int j = 0; j < 32; ++j) o[j] = static_cast<float>(static_cast<int8_t>(p[2 + j])) * d;
        break;
      }
    }
  }
}

void WeightBlocks::validate(int64_t n, int64_t k, const char* what) const {
  if (!defined()) return;
  AERIE_CHECK(bytes.device == Device::kCpu, what << " " << bytes.describe() << ": weight blocks are read by the CPU backend only");
  AERIE_CHECK(bytes.dtype == DType::kU8 && bytes.ndim == 2, what << " " << bytes.describe() << " must be u8 [rows, row bytes]");
  AERIE_CHECK(k % kBlockElements == 0, what << ": " << k << " columns is not a whole number of blocks of 32");
  AERIE_CHECK(bytes.dim(0) == n && bytes.dim(1) == block_row_bytes(format, k),
              what << " " << bytes.describe() << " must be u8 [" << n << ", " << block_row_bytes(format, k) << "] (" << block_format_name(format)
                   << " blocks of a [" << n << ", " << k << "] weight)");
  AERIE_CHECK(layout == BlockLayout::kRows || n % kTileGroupRows == 0,
              what << ": blocks in tile order need a multiple of " << kTileGroupRows << " rows, not " << n);
}

namespace {

// Where row r's block b goes in tile order: its scales and quants scattered over the group's
// block as the layout says (weight_blocks.hpp). `to_tiles` copies one way, else the other.
void move_block(BlockFormat f, const unsigned char* from, unsigned char* to, int64_t n, int64_t k, bool to_tiles) {
  const int64_t bb = block_bytes(f), blocks = k / kBlockElements, row_bytes = blocks * bb;
  const int64_t scales = block_scales(f), dwords = (bb - 2 * scales) / 4;
  for (int64_t r = 0; r < n; ++r) {
    const int64_t g = r / kTileGroupRows, lane = r % kTileGroupRows;
    for (int64_t b = 0; b < blocks; ++b) {
      const int64_t row_at = r * row_bytes + b * bb;
      const int64_t tile_at = (g * blocks + b) * kTileGroupRows * bb;
      auto copy = [&](int64_t row_off, int64_t tile_off, int64_t len) {
        if (to_tiles) std::memcpy(to + tile_at + tile_off, from + row_at + row_off, static_cast<size_t>(len));
        else std::memcpy(to + row_at + row_off, from + tile_at + tile_off, static_cast<size_t>(len));
      };
      for (int64_t s = 0; s < scales; ++s) copy(2 * s, s * 2 * kTileGroupRows + 2 * lane, 2);
      for (int64_t i = 0; i < dwords; ++i) copy(2 * scales + 4 * i, tile_quants_offset(f) + i * 4 * kTileGroupRows + 4 * lane, 4);
    }
  }
}

}  // namespace

void quantize_q8_0_blocks(const float* w, int64_t n, int64_t k, unsigned char* out) {
  AERIE_CHECK(k % kBlockElements == 0, "quantize_q8_0_blocks: " << k << " columns is not a whole number of blocks of 32");
  const int64_t bb = block_bytes(BlockFormat::kQ8_0);
  for (int64_t b = 0; b < n * k / kBlockElements; ++b) {
    const float* x = w + b * kBlockElements;
    unsigned char* p = out + b * bb;
    const AbsMax m = abs_max(x, kBlockElements);
    AERIE_CHECK(m.finite, "quantize_q8_0_blocks: a weight is not finite (block " << b << ")");
    const uint16_t d = float_to_f16(m.value / 127.0f);
    std::memcpy(p, &d, 2);
    const float dq = f16_to_float(d), inv = dq > 0.0f ? 1.0f / dq : 0.0f;
    for (int64_t j = 0; j < kBlockElements; ++j)
      p[2 + j] = static_cast<unsigned char>(static_cast<int8_t>(std::clamp(std::nearbyint(x[j] * inv), -127.0f, 127.0f)));
  }
}

void blocks_to_tile_order(BlockFormat f, const unsigned char* rows, int64_t n, int64_t k, unsigned char* out) {
  AERIE_CHECK(n % kTileGroupRows == 0 && k % kBlockElements == 0, "blocks_to_tile_order: [" << n << ", " << k << "] is not whole tiles");
  move_block(f, rows, out, n, k, true);
}

void blocks_from_tile_order(BlockFormat f, const unsigned char* tiles, int64_t n, int64_t k, unsigned char* out) {
  AERIE_CHECK(n % kTileGroupRows == 0 && k % kBlockElements == 0, "blocks_from_tile_order: [" << n << ", " << k << "] is not whole tiles");
  move_block(f, tiles, out, n, k, false);
}

}  // namespace aerie::kernels
