#include "kernels/weight_blocks.hpp"

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
}

}  // namespace aerie::kernels
