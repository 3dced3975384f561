#pragma once
// y = x w^T for a few rows of x (decode, verify): each weight row is read from memory once
// for all of them, with software prefetch ahead of the loads. oneDNN's sgemm packs the
// weights first at these shapes and streams them at half the bandwidth (measured on the
// CI machine: 8 rows over 566 MB of f32 weights, 52 ms in oneDNN, 31 ms here).
// AVX-512 only; elsewhere the caller uses the general path.
#include <cstdint>

namespace aerie::kernels::cpu {

/// Rows of x this kernel takes at most.
constexpr int64_t kSmallBatchMaxRows = 16;

/// Whether the CPU this runs on has the instructions for small_batch_gemm.
bool small_batch_gemm_available();

/// y[m, n] = x[m, k] w[n, k]^T, f32, m <= kSmallBatchMaxRows. Each output is summed in the
/// same order whatever m is, so a row's result does not depend on its batch.
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y);

}  // namespace aerie::kernels::cpu
