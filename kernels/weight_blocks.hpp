#pragma once
// GGUF's quantized blocks of 32 weights (llama.cpp's Q4_0, Q4_1 and Q8_0), kept beside a
// weight's f32 copy so the CPU's small-batch products read 4.5-8.5 bits a weight instead of
// 32. A block of row j covers columns 32b..32b+31 and decodes to exactly the floats the GGUF
// loader puts in the f32 copy (dequantize_blocks), so a product over the blocks equals the
// product over that copy bit for bit (kernels/cpu/small_batch_gemm.hpp).
//   Q4_0: f16 d, 16 bytes of nibbles: w = (q - 8) * d
//   Q4_1: f16 d, f16 m, 16 bytes of nibbles: w = q * d + m
//   Q8_0: f16 d, 32 x int8: w = q * d
// Byte j of a 4-bit block holds element j in its low nibble and element j + 16 in its high one.
// Every q * d is exact in f32 (an 11-bit f16 significand times at most 8 bits), so Q4_1's
// q * d + m rounds once whether or not the compiler fuses it.
#include <cstdint>

#include "kernels/batch_invariant.hpp"

#include "kernels/tensor.hpp"

namespace aerie::kernels {

enum class BlockFormat : uint8_t { kQ4_0, kQ4_1, kQ8_0 };

/// How a weight's blocks lie in memory.
///   kRows: GGUF's own order, row after row (each row's blocks by column): the exact f32
///     products read them (kernels/cpu/small_batch_gemm.hpp).
///   kTiles16: groups of 16 rows, each group's blocks by column; a group's block b holds the 16
///     rows' f16 d (then Q4_1's 16 f16 m), then their quants as an AMX tile of 16 columns
///     (kernels/cpu/int8_block_gemm.hpp): dword i of each row's quant bytes side by side,
///     i = 0..3 (4-bit) or 0..7 (Q8_0), 64 bytes each. The same bytes as kRows, rearranged; read
///     by the products over int8 activations only.
enum class BlockLayout : uint8_t { kRows, kTiles16 };
inline constexpr int64_t kTileGroupRows = 16;

inline constexpr int64_t kBlockElements = 32;
/// Bytes of one block of 32 weights: 18, 20, 34 (a constant, for the CPU tiles too).
constexpr int64_t block_bytes(BlockFormat f) {
  return f == BlockFormat::kQ4_0 ? 2 + 16      // f16 scale, 32 x 4-bit
         : f == BlockFormat::kQ4_1 ? 2 + 2 + 16  // f16 scale, f16 minimum, 32 x 4-bit
                                   : 2 + 32;     // Q8_0: f16 scale, 32 x int8
}
/// f16 scales at the head of a block: d (1), or Q4_1's d and m (2).
constexpr int64_t block_scales(BlockFormat f) { return f == BlockFormat::kQ4_1 ? 2 : 1; }
/// Where a group's block's quants start in tile order (BlockLayout::kTiles16): after its 16 rows'
/// scales.
constexpr int64_t tile_quants_offset(BlockFormat f) { return block_scales(f) * 2 * kTileGroupRows; }
/// "Q4_0", "Q4_1", "Q8_0".
const char* block_format_name(BlockFormat f);
/// Bytes of a row of k weights (k a multiple of 32).
inline int64_t block_row_bytes(BlockFormat f, int64_t k) { return k / kBlockElements * block_bytes(f); }
/// The 32 * blocks floats of `blocks` consecutive blocks.
void dequantize_blocks(BlockFormat f, const unsigned char* src, int64_t blocks, float* out);

/// A weight w [n, k] as blocks: bytes u8 [n, block_row_bytes(format, k)], on the CPU, each
/// row dequantizing to w's row exactly. An optional copy beside w that the CPU backend reads
/// for products of up to kBlocksMaxRows rows of x (decode, verify: the weight's bytes are the
/// cost there); larger products, and other devices, read w.
struct WeightBlocks {
  TensorView bytes;
  BlockFormat format = BlockFormat::kQ8_0;
  BlockLayout layout = BlockLayout::kRows;
  bool defined() const { return bytes.defined(); }
  /// Throws unless bytes is a CPU u8 [n, block_row_bytes(format, k)], k a multiple of 32, and for
  /// kTiles16 n a multiple of 16.
  void validate(int64_t n, int64_t k, const char* what) const;
};

/// n rows of k floats (k a multiple of 32) as Q8_0 blocks in row order, for weights that come
/// as floats (a bf16 EAGLE head) and are multiplied over int8 activations. Lossy: d = max|w| / 127
/// (as f16), q = rint(w / d) in [-127, 127] (llama.cpp's quantize_row_q8_0 up to its rounding:
/// nearest even here). Throws on a non-finite weight.
void quantize_q8_0_blocks(const float* w, int64_t n, int64_t k, unsigned char* out);

/// `rows` (kRows, u8 [n, block_row_bytes(f, k)], n a multiple of 16) rearranged into kTiles16
/// order in `out` (as many bytes; not the same memory).
void blocks_to_tile_order(BlockFormat f, const unsigned char* rows, int64_t n, int64_t k, unsigned char* out);
/// The inverse: kTiles16 back to kRows.
void blocks_from_tile_order(BlockFormat f, const unsigned char* tiles, int64_t n, int64_t k, unsigned char* out);
inline constexpr int64_t kBlocksMaxRows = 16;
/// The rule every op taking a block copy in row order follows: a product of `rows` rows of x on
/// the CPU reads the blocks when they are given and rows <= kBlocksMaxRows. Blocks in tile order
/// are read at every row count (kernels/cpu/matmul.cpp: int8 activations, prefill included), and
/// so are blocks in row order when products are batch-invariant (kernels/batch_invariant.hpp).
inline bool blocks_copy_serves(const WeightBlocks& b, int64_t rows) {
  return b.defined() && (rows <= kBlocksMaxRows || batch_invariant());
}

}  // namespace aerie::kernels
