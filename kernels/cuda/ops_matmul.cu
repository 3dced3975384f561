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

// Small-batch GEMV: the weight stream dominates. A block owns R output rows and its threads
// split K; every 16-byte weight chunk is loaded once (several in flight per thread) and
// applied to all M (<= 8) input rows, and every x chunk to all R rows, so L2 traffic for x
// stays at M/R of the weight traffic. Partial sums meet in a block reduction.
constexpr int kGemvMaxM = 8;

template <class T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_float(h[i]);
}

// SILU_PAIRS: rows come in interleaved (gate, up) pairs and the block writes
// silu(gate) * up for each pair instead of the two products (each rounded to T first, as
// matmul + silu_mul would store them): the MLP's gate/up projection with its activation.
template <class T, class TO, int M, int R, int THREADS, bool SILU_PAIRS>
__global__ void __launch_bounds__(THREADS) gemv_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias,
                                                      TO* __restrict__ y, int64_t n, int64_t k) {
  constexpr int kWarps = THREADS / 32;
  constexpr int kUnroll = R == 1 ? 8 : 4;  // loads in flight per thread, bounded by registers
  __shared__ float partial[kWarps][R * M];
  pdl_trigger();  // let the next kernel's blocks get scheduled behind this one's
  const int64_t row0 = static_cast<int64_t>(blockIdx.x) * R;
  const int64_t chunks = k / 8;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  const uint4* xr = reinterpret_cast<const uint4*>(x);
  const uint4* wr = reinterpret_cast<const uint4*>(w + row0 * k);
  bool row_ok[R];
#pragma unroll
  for (int r = 0; r < R; ++r) row_ok[r] = row0 + r < n;
  uint4 wv[kUnroll][R];
  auto load_round = [&](int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + static_cast<int64_t>(u) * THREADS;
#pragma unroll
      for (int r = 0; r < R; ++r)
        wv[u][r] = (c < chunks && row_ok[r]) ? __ldg(wr + r * chunks + c) : make_uint4(0, 0, 0, 0);
    }
  };
  // Weights never depend on the previous kernel: the first round is in flight before
  // waiting for the previous kernel's output (x).
  load_round(threadIdx.x);
  pdl_wait();
  for (int64_t base = threadIdx.x; base < chunks; base += static_cast<int64_t>(THREADS) * kUnroll) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t c = base + static_cast<int64_t>(u) * THREADS;
      if (c >= chunks) break;
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[8];
        unpack8<T>(__ldg(xr + m * chunks + c), xf);
#pragma unroll
        for (int r = 0; r < R; ++r) {
          float wf[8];
          unpack8<T>(wv[u][r], wf);
#pragma unroll
          for (int i = 0; i < 8; ++i) acc[r][m] += wf[i] * xf[i];
        }
      }
    }
    const int64_t next = base + static_cast<int64_t>(THREADS) * kUnroll;
    if (next < chunks) load_round(next);
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) {
      const float v = warp_sum(acc[r][m]);
      if (lane == 0) partial[warp][r * M + m] = v;
    }
  __syncthreads();
  if constexpr (SILU_PAIRS) {
    static_assert(R % 2 == 0, "SiLU pairs need an even number of rows per block");
    for (int idx = threadIdx.x; idx < (R / 2) * M; idx += THREADS) {
      const int j = idx / M, m = idx % M;
      const int64_t gate_row = row0 + 2 * j;
      if (gate_row >= n) continue;
      float g = 0.0f, u = 0.0f;
#pragma unroll
      for (int wi = 0; wi < kWarps; ++wi) {
        g += partial[wi][(2 * j) * M + m];
        u += partial[wi][(2 * j + 1) * M + m];
      }
      if (bias) {
        g += to_float(bias[gate_row]);
        u += to_float(bias[gate_row + 1]);
      }
      g = to_float(from_float<T>(g));
      u = to_float(from_float<T>(u));
      y[m * (n / 2) + gate_row / 2] = from_float<TO>(g / (1.0f + __expf(-g)) * u);
    }
    return;
  }
  for (int idx = threadIdx.x; idx < R * M; idx += THREADS) {
    const int r = idx / M, m = idx % M;
    if (row0 + r >= n) continue;
    float v = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) v += partial[wi][idx];
    if (bias) v += to_float(bias[row0 + r]);
    y[m * n + row0 + r] = from_float<TO>(v);
  }
}

template <class T, class TO, int M, int R, bool SILU_PAIRS>
void launch_gemv_rows(const T* x, const T* w, const T* bias, TO* y, int64_t n, int64_t k, cudaStream_t s) {
  const unsigned blocks = static_cast<unsigned>((n + R - 1) / R);
  if (k >= 8192) launch_pdl(gemv_kernel<T, TO, M, R, 256, SILU_PAIRS>, dim3(blocks), dim3(256), 0, s, x, w, bias, y, n, k);
  else launch_pdl(gemv_kernel<T, TO, M, R, 128, SILU_PAIRS>, dim3(blocks), dim3(128), 0, s, x, w, bias, y, n, k);
}

template <class T, class TO>
void launch_gemv(int64_t m, const T* x, const T* w, const T* bias, TO* y, int64_t n, int64_t k, cudaStream_t s) {
  switch (m) {
    case 1: launch_gemv_rows<T, TO, 1, 1, false>(x, w, bias, y, n, k, s); break;
    case 2: launch_gemv_rows<T, TO, 2, 2, false>(x, w, bias, y, n, k, s); break;
    case 3: launch_gemv_rows<T, TO, 3, 2, false>(x, w, bias, y, n, k, s); break;
    case 4: launch_gemv_rows<T, TO, 4, 4, false>(x, w, bias, y, n, k, s); break;
    case 5: launch_gemv_rows<T, TO, 5, 4, false>(x, w, bias, y, n, k, s); break;
    case 6: launch_gemv_rows<T, TO, 6, 4, false>(x, w, bias, y, n, k, s); break;
    case 7: launch_gemv_rows<T, TO, 7, 4, false>(x, w, bias, y, n, k, s); break;
    case 8: launch_gemv_rows<T, TO, 8, 4, false>(x, w, bias, y, n, k, s); break;
    default: break;
  }
}

// Row pairs per block for the fused gate/up + SiLU (R = 2 rows = one pair; 4 for M > 2).
template <class T>
void launch_gemv_silu_pairs(int64_t m, const T* x, const T* w, const T* bias, T* out, int64_t n, int64_t k, cudaStream_t s) {
  switch (m) {
    case 1: launch_gemv_rows<T, T, 1, 2, true>(x, w, bias, out, n, k, s); break;
    case 2: launch_gemv_rows<T, T, 2, 2, true>(x, w, bias, out, n, k, s); break;
    case 3: launch_gemv_rows<T, T, 3, 2, true>(x, w, bias, out, n, k, s); break;
    case 4: launch_gemv_rows<T, T, 4, 4, true>(x, w, bias, out, n, k, s); break;
    case 5: launch_gemv_rows<T, T, 5, 4, true>(x, w, bias, out, n, k, s); break;
    case 6: launch_gemv_rows<T, T, 6, 4, true>(x, w, bias, out, n, k, s); break;
    case 7: launch_gemv_rows<T, T, 7, 4, true>(x, w, bias, out, n, k, s); break;
    case 8: launch_gemv_rows<T, T, 8, 4, true>(x, w, bias, out, n, k, s); break;
    default: break;
  }
}

// Measured on an H200 (docs/performance.md): Aerie's GEMV beats cuBLAS at one or two rows;
// from four rows on, cuBLAS is as fast or faster.
int max_gemv_rows = 2;

bool gemv_eligible(const TensorView& x, const TensorView& w, const TensorView& bias, int64_t k) {
  auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  return x.dim(0) <= max_gemv_rows && x.dtype != DType::kF32 && x.dtype == w.dtype && k % 8 == 0 && aligned(x.data) &&
         aligned(w.data) && (!bias.defined() || bias.dtype == x.dtype);
}

}  // namespace

void set_gemv_max_rows(int rows) { max_gemv_rows = rows < 0 ? 0 : (rows > kGemvMaxM ? kGemvMaxM : rows); }
int gemv_max_rows() { return max_gemv_rows; }

Status matmul(const MatmulParams& p, void* stream) {
  if (p.x.dtype != p.w.dtype) return Status::error("matmul (cuda): x and w must share a dtype, got " + p.x.describe() + " and " + p.w.describe());
  if (p.y.dtype != p.x.dtype && p.y.dtype != DType::kF32)
    return Status::error("matmul (cuda): y must have x's dtype or f32, got " + p.y.describe());
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (m == 0 || n == 0) return Status::ok();
  if (gemv_eligible(p.x, p.w, p.bias, k)) {
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

Status gate_up_silu(const GateUpSiluParams& p, void* stream) {
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (m == 0 || n == 0) return Status::ok();
  if (p.out.dtype == p.x.dtype && gemv_eligible(p.x, p.w, p.bias, k)) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      launch_gemv_silu_pairs<T>(m, p.x.ptr<T>(), p.w.ptr<T>(), p.bias.defined() ? p.bias.ptr<T>() : nullptr, p.out.ptr<T>(), n, k,
                                as_stream(stream));
    };
    if (p.x.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("gate_up_silu (gemv)");
  }
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .y = p.gate_up}, stream);
  if (!s.is_ok()) return s;
  return silu_mul({.gate_up = p.gate_up, .out = p.out}, stream);
}

}  // namespace aerie::kernels::cuda
