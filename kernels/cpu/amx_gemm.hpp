#pragma once
// Small-batch products (decode, verify, a draft head's steps) on Intel's tile unit (AMX-BF16:
// Sapphire Rapids and later Xeons), for weights stored as GGUF blocks or in bf16.
//
// Why: on the AVX-512 path every x row costs one FMA per weight, so a verify of 4 rows costs
// about twice a one-row step and speculative decoding gains little on the CPU. The tile unit
// multiplies 16 weight rows by 16 bf16 columns at once; here the columns are x's rows, each split
// exactly into three bf16 parts (x = hi + mid + lo, truncated 8-bit slices of its 24-bit
// significand), so one tile instruction serves up to five x rows at f32 accuracy, and a verify
// costs about what a one-row step does.
//
// Numerics: a weight enters as an exact bf16 (a block's integer q, or q - 8 for Q4_0, and a
// bf16 weight itself); every product of it with a part of x is exact, summed in f32 by the tile
// unit over a block of 32 columns. A block's sums are scaled by its d (Q4_1: plus its m times
// the block's sum of x) in f32, block after block; the three parts are added at the end,
// (hi + mid) + lo. bf16 weights have no scales: the tile unit sums them over all of k. A row's
// result never depends on the other rows of x, so a verify row equals the one-row step's bit
// for bit; against small_batch_gemm's AVX-512 sums it agrees within f32 rounding, not bit for bit.
#include <cstdint>

#include "kernels/weight_blocks.hpp"

namespace aerie::kernels::cpu {

/// Rows of x one pass over the weights takes (three tiles of five rows: 3 x 3 parts x 5 = 45
/// columns); more rows (up to any count) take further passes.
constexpr int64_t kAmxRowsPerPass = 15;

/// Whether this CPU has AMX-BF16 with AVX512-BW/BF16 and the OS let this process use the tiles
/// (asked once: Linux's arch_prctl(ARCH_REQ_XCOMP_PERM)).
bool amx_supported();

/// Whether the products take the tile unit: amx_supported(), turned on (AERIE_CPU_AMX=1 at
/// start-up, set_amx_enabled(true)) and the kernels not capped below AVX-512 (AERIE_CPU_ISA).
bool amx_enabled();

/// Turns the tile path on or off (tests and benchmarks compare it with the AVX-512 path);
/// returns the setting before. Not meant to change while ops run.
bool set_amx_enabled(bool on);

/// Whether amx_gemm takes a product of this k (a multiple of 32: a block, a tile's depth).
inline bool amx_gemm_takes(int64_t k) { return k > 0 && k % 32 == 0; }

/// y[m, n] = x[m, k] w[n, k]^T on the tile unit, the weight as GGUF blocks. Requires
/// amx_supported() and amx_gemm_takes(k).
void amx_gemm(int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y);
/// The same with bf16 weights (raw bits, row-major [n, k]).
void amx_gemm(int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y);

}  // namespace aerie::kernels::cpu
