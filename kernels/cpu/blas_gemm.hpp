#pragma once
// The CPU backend's fast path for f32 products: oneDNN's sgemm (JIT kernels picked for the
// CPU at run time, AVX-512 where there is one; what PyTorch's CPU path uses), when Aerie was
// built with it (AERIE_WITH_ONEDNN). The blocked loop in matmul.cpp stays as the reference
// that tests compare against (set_cpu_gemm_reference); 16-bit weights reach oneDNN widened
// to f32 a block of rows at a time (kernels/cpu/matmul.cpp).
#include <cstdint>

#include "kernels/status.hpp"

namespace aerie::kernels::cpu {

/// Whether this build has the fast f32 product.
bool blas_available();

/// y[m, n] = x[m, k] w[n, k]^T, all f32 and row-major (nn.Linear's layout), on at most
/// thread_budget() threads. Only call when blas_available().
Status blas_sgemm_nt(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y);

/// c[m, n] = a[m, k] b (b is [k, n], or [n, k] read transposed when trans_b), row-major with
/// leading dimensions lda, ldb, ldc. Called inside parallel_for tasks it runs on the calling
/// thread only (oneDNN does not nest parallel regions).
Status blas_sgemm(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc);

}  // namespace aerie::kernels::cpu
