#pragma once
// y = x w^T for a few rows of x (decode, verify): each weight row is read from memory once
// for all of them, with software prefetch ahead of the loads. oneDNN's sgemm packs the
// weights first at these shapes and streams them at half the bandwidth (measured on the
// CI machine: 8 rows over 566 MB of f32 weights, 52 ms in oneDNN, 31 ms here).
// AVX-512, or AVX2 + FMA (the same sums, so the same bits); elsewhere the caller uses the
// general path. Weights in f32, in bf16 (widened exactly in registers: the same bits as the
// f32 copy of the weight, from half the bytes), or as GGUF blocks (kernels/weight_blocks.hpp:
// decoded in registers to the same floats, the same bits from 4.5-8.5 bits a weight).
#include <cstdint>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/weight_blocks.hpp"

namespace aerie::kernels::cpu {

/// Rows of x this kernel takes at most.
constexpr int64_t kSmallBatchMaxRows = 16;

/// Whether the CPU this runs on has the instructions for small_batch_gemm.
bool small_batch_gemm_available();

/// The instruction sets the kernel is written for; small_batch_gemm takes cpu_isa() (the widest
/// the CPU has, at most the cap).
using SmallBatchIsa = CpuIsa;
SmallBatchIsa small_batch_gemm_isa();
bool small_batch_gemm_supports(SmallBatchIsa isa);
/// small_batch_gemm with a given instruction set (tests compare them); isa must be supported.
void small_batch_gemm_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y);
void small_batch_gemm_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y);
void small_batch_gemm_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y);

/// y[m, n] = x[m, k] w[n, k]^T, f32, m <= kSmallBatchMaxRows. Each output is summed in the
/// same order whatever m is and whichever instruction set runs it: sixteen lane sums, lane l
/// fused-multiply-adding the products of columns c = l (mod 16) in order (zeros past k), then
/// lanes u += u + w for w = 8, 4, 2, 1. So a row's result does not depend on its batch.
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y);
/// The same with bf16 weights (raw bits): equal, bit for bit, to small_batch_gemm on the
/// weight widened to f32.
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y);
/// The same with the weight as GGUF blocks (k a multiple of 32): each block decoded in registers
/// to the floats dequantize_blocks gives, so equal, bit for bit, to small_batch_gemm on the
/// dequantized f32 weight, from 4.5-8.5 bits a weight instead of 32.
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y);

}  // namespace aerie::kernels::cpu
