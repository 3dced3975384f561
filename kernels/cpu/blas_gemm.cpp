#include "kernels/cpu/blas_gemm.hpp"

#include <cstdlib>
#include <string>

#include "kernels/cpu/thread_budget.hpp"

#if AERIE_WITH_ONEDNN
#include <omp.h>
#include <oneapi/dnnl/dnnl.h>
#endif

namespace aerie::kernels::cpu {

#if AERIE_WITH_ONEDNN

bool blas_available() { return true; }

Status blas_sgemm(bool trans_b, int64_t m, int64_t n, int64_t k, const float* a, int64_t lda, const float* b, int64_t ldb, float* c,
                  int64_t ldc) {
  // oneDNN parallelises with OpenMP, whose default is every core of the machine; the thread
  // count is a per-thread setting, so set this process's share on the calling thread.
  if (!omp_in_parallel()) omp_set_num_threads(static_cast<int>(thread_budget()));
  const dnnl_status_t st = dnnl_sgemm('N', trans_b ? 'T' : 'N', m, n, k, 1.0f, a, lda, b, ldb, 0.0f, c, ldc);
  if (st != dnnl_success)
    return Status::error("oneDNN sgemm failed (status " + std::to_string(static_cast<int>(st)) + ") for [" + std::to_string(m) + ", " +
                         std::to_string(k) + "] x [" + std::to_string(k) + ", " + std::to_string(n) + "]");
  return Status::ok();
}

Status blas_sgemm_nt(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y) {
  return blas_sgemm(true, m, n, k, x, k, w, k, y, n);
}

#else

bool blas_available() { return false; }

// Callers check blas_available() first; reaching these is a programming error.
Status blas_sgemm(bool, int64_t, int64_t, int64_t, const float*, int64_t, const float*, int64_t, float*, int64_t) { std::abort(); }
Status blas_sgemm_nt(int64_t, int64_t, int64_t, const float*, const float*, float*) { std::abort(); }

#endif

}  // namespace aerie::kernels::cpu
