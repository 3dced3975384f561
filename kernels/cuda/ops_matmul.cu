// y = x w^T (+ bias) through cuBLAS with fp32 accumulation. One handle per host thread,
// with a fixed workspace so that calls are safe under CUDA-graph capture.
#include <cublas_v2.h>

#include <algorithm>
#include <cstdint>

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

// Small-batch GEMV: the weight stream dominates, so one warp owns an output row, reads it
// with 16-byte loads (several in flight per lane) and applies it to all M (<= 8) input
// rows at once, reading each weight byte exactly once.
constexpr int kGemvMaxM = 8;
constexpr int kGemvWarpsPerBlock = 8;
constexpr int kGemvUnroll = 4;

template <class T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_float(h[i]);
}

template <class T, class TO, int M>
__global__ void __launch_bounds__(kGemvWarpsPerBlock * 32) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w,
                                                                      const T* __restrict__ bias, TO* __restrict__ y, int64_t n,
                                                                      int64_t k) {
  const int lane = threadIdx.x & 31;
  const int64_t warp = (static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) >> 5;
  const int64_t warps = (static_cast<int64_t>(gridDim.x) * blockDim.x) >> 5;
  const int64_t chunks = k / 8;  // 16-byte chunks per row
  for (int64_t row = warp; row < n; row += warps) {
    const uint4* wr = reinterpret_cast<const uint4*>(w + row * k);
    float acc[M];
#pragma unroll
    for (int m = 0; m < M; ++m) acc[m] = 0.0f;
    int64_t c = lane;
    for (; c + (kGemvUnroll - 1) * 32 < chunks; c += kGemvUnroll * 32) {
      uint4 wv[kGemvUnroll];
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) wv[u] = __ldg(wr + c + u * 32);  // all loads issued before use
#pragma unroll
      for (int u = 0; u < kGemvUnroll; ++u) {
        float wf[8];
        unpack8<T>(wv[u], wf);
#pragma unroll
        for (int m = 0; m < M; ++m) {
          float xf[8];
          unpack8<T>(__ldg(reinterpret_cast<const uint4*>(x + m * k) + c + u * 32), xf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[m] += wf[i] * xf[i];
        }
      }
    }
    for (; c < chunks; c += 32) {
      float wf[8];
      unpack8<T>(__ldg(wr + c), wf);
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        unpack8<T>(__ldg(reinterpret_cast<const uint4*>(x + m * k) + c), xf);
#pragma unroll
        for (int i = 0; i < 8; ++i) acc[m] += wf[i] * xf[i];
      }
    }
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[m]);
      if (lane == 0) y[m * n + row] = from_float<TO>(v + (bias ? to_float(bias[row]) : 0.0f));
    }
  }
}

template <class T, class TO>
void launch_gemv(int64_t m, const T* x, const T* w, const T* bias, TO* y, int64_t n, int64_t k, cudaStream_t s) {
  const int64_t blocks = std::min<int64_t>((n + kGemvWarpsPerBlock - 1) / kGemvWarpsPerBlock, 132 * 16);
  const dim3 grid(static_cast<unsigned>(blocks)), block(kGemvWarpsPerBlock * 32);
  switch (m) {
#define AERIE_GEMV_CASE(M) \
  case M: gemv_kernel<T, TO, M><<<grid, block, 0, s>>>(x, w, bias, y, n, k); break;
    AERIE_GEMV_CASE(1) AERIE_GEMV_CASE(2) AERIE_GEMV_CASE(3) AERIE_GEMV_CASE(4)
    AERIE_GEMV_CASE(5) AERIE_GEMV_CASE(6) AERIE_GEMV_CASE(7) AERIE_GEMV_CASE(8)
#undef AERIE_GEMV_CASE
    default: break;
  }
}

bool gemv_eligible(const MatmulParams& p) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return p.x.dim(0) <= kGemvMaxM && p.x.dtype != DType::kF32 && p.x.dim(1) % 8 == 0 && aligned(p.x.data) && aligned(p.w.data) &&
         (!p.bias.defined() || p.bias.dtype == p.x.dtype);
}

}  // namespace

Status matmul(const MatmulParams& p, void* stream) {
  if (p.x.dtype != p.w.dtype) return Status::error("matmul (cuda): x and w must share a dtype, got " + p.x.describe() + " and " + p.w.describe());
  if (p.y.dtype != p.x.dtype && p.y.dtype != DType::kF32)
    return Status::error("matmul (cuda): y must have x's dtype or f32, got " + p.y.describe());
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (m == 0 || n == 0) return Status::ok();
  if (gemv_eligible(p)) {
    auto run = [&](auto tag) {  // bf16 and f16 only (gemv_eligible excludes f32)
      using T = decltype(tag);
      const T* bias = p.bias.defined() ? p.bias.ptr<T>() : nullptr;
      if (p.y.dtype == DType::kF32) launch_gemv<T, float>(m, p.x.ptr<T>(), p.w.ptr<T>(), bias, p.y.ptr<float>(), n, k, as_stream(stream));
      else launch_gemv<T, T>(m, p.x.ptr<T>(), p.w.ptr<T>(), bias, p.y.ptr<T>(), n, k, as_stream(stream));
    };
    if (p.x.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("matmul (gemv)");
  }
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
