// y = x w^T (+ bias) through cuBLAS with fp32 accumulation. One handle per host thread,
// with a fixed workspace so that calls are safe under CUDA-graph capture.
#include <cublas_v2.h>

#include <mutex>

#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

namespace {

constexpr size_t kCublasWorkspaceBytes = 32u << 20;

struct CublasHandle {
  cublasHandle_t handle = nullptr;
  void* workspace = nullptr;
  bool ok = false;
  CublasHandle() {
    if (cublasCreate(&handle) != CUBLAS_STATUS_SUCCESS) return;
    if (cudaMalloc(&workspace, kCublasWorkspaceBytes) != cudaSuccess) return;
    cublasSetWorkspace(handle, workspace, kCublasWorkspaceBytes);
    cublasSetMathMode(handle, CUBLAS_DEFAULT_MATH);  // no TF32 for f32: the reference is exact fp32
    ok = true;
  }
  ~CublasHandle() {
    if (handle) cublasDestroy(handle);
    if (workspace) cudaFree(workspace);
  }
};

CublasHandle& thread_handle() {
  thread_local CublasHandle h;
  return h;
}

cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

template <class T, class TB>
__global__ void add_bias_kernel(T* y, const TB* b, int64_t m, int64_t n) {
  for (int64_t idx = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; idx < m * n;
       idx += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[idx] = from_float<T>(to_float(y[idx]) + to_float(b[idx % n]));
}

}  // namespace

Status matmul(const MatmulParams& p, void* stream) {
  if (p.x.dtype != p.w.dtype) return Status::error("matmul (cuda): x and w must share a dtype, got " + p.x.describe() + " and " + p.w.describe());
  if (p.y.dtype != p.x.dtype && p.y.dtype != DType::kF32)
    return Status::error("matmul (cuda): y must have x's dtype or f32, got " + p.y.describe());
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (m == 0 || n == 0) return Status::ok();
  CublasHandle& h = thread_handle();
  if (!h.ok) return Status::error("matmul (cuda): cannot create a cuBLAS handle");
  cublasSetStream(h.handle, as_stream(stream));
  const float alpha = 1.0f, beta = 0.0f;
  // Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T[n,m] = w^T... i.e. op(W)=T on the
  // column-major [k,n] view of w, times the column-major [k,m] view of x.
  const cublasStatus_t st = cublasGemmEx(h.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(n), static_cast<int>(m),
                                         static_cast<int>(k), &alpha, p.w.data, cuda_type(p.w.dtype), static_cast<int>(k),
                                         p.x.data, cuda_type(p.x.dtype), static_cast<int>(k), &beta, p.y.data,
                                         cuda_type(p.y.dtype), static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return Status::error(std::string("matmul (cuda): cublasGemmEx failed: ") + cublasGetStatusString(st));
  if (p.bias.defined()) {
    const int64_t blocks = std::min<int64_t>((m * n + 255) / 256, 4096);
    AERIE_DISPATCH_FLOAT(p.y.dtype, T, [&] {
      AERIE_DISPATCH_FLOAT(p.bias.dtype, TB, [&] {
        add_bias_kernel<T, TB><<<static_cast<unsigned>(blocks), 256, 0, as_stream(stream)>>>(p.y.ptr<T>(), p.bias.ptr<TB>(), m, n);
      });
    });
  }
  return launch_status("matmul");
}

}  // namespace aerie::kernels::cuda
