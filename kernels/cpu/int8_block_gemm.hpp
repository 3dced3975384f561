#pragma once
// y = x w^T for a few rows of x (decode, verify) over GGUF blocks with x quantized to int8, as
// llama.cpp's CPU path multiplies its Q4/Q8 weights: each 32-column block of an x row becomes
// d_x = max|x| / 127 and q_x = rint(x * 127 / max|x|) (nearest even, in [-127, 127]), and a
// block's product is an exact integer dot product, scaled:
//   Q8_0: acc = fma(sum q_w q_x,            d_w * d_x, acc)
//   Q4_0: acc = fma(sum q_w q_x - 8 sum q_x, d_w * d_x, acc)
//   Q4_1: acc = fma(sum q_w q_x,            d_w * d_x, acc); acc = fma(m_w, d_x * sum q_x, acc)
// over the blocks in order. A row's result therefore depends on that row alone (greedy
// speculative answers stay plain decoding's), and every path gives the same bits.
//
// These are not the f32 model's numbers (x loses its low bits, about 0.4% of a block's largest
// value): an opt-in mode (kernels/weight_blocks.hpp, BlockLayout::kTiles16). Its weights are the
// GGUF blocks rearranged for AMX's tile unit, which multiplies 16 weight rows by up to 16 x rows
// of a block in one instruction, so a verify's extra rows cost little. Without AMX (CPUID, or
// Linux's permission refused) the scalar reference loop runs: the same bits, many times slower.
#include <cstdint>

#include "kernels/weight_blocks.hpp"

namespace aerie::kernels::cpu {

/// Rows of x a tile takes (an AMX tile's rows); products of more rows go a tile's rows at a time.
constexpr int64_t kInt8BlockMaxRows = 16;

enum class Int8BlockPath { kScalar, kAmx };
const char* int8_block_path_name(Int8BlockPath p);

/// Whether AMX-INT8 runs here: CPUID (AMX-TILE, AMX-INT8, AVX512-BW) and Linux's permission for
/// the tile state (asked once per process).
bool amx_int8_available();
/// kAmx when available, else kScalar.
Int8BlockPath int8_block_path();

/// y[m, n] = x[m, k] w^T with w as GGUF blocks in tile order (w.layout == kTiles16, n a multiple
/// of 16), any m (prefill too: a model in this mode multiplies every row so, so a request's
/// tokens do not depend on its batch), on the given path (kAmx needs amx_int8_available()).
void int8_block_gemm_on(Int8BlockPath path, int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y);
/// The same on int8_block_path().
void int8_block_gemm(int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y);

}  // namespace aerie::kernels::cpu
