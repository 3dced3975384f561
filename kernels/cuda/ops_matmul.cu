// y = x w^T (+ bias) through cuBLAS with fp32 accumulation. One handle per host thread,
// with a fixed workspace so that calls are safe under CUDA-graph capture.
#include <cublas_v2.h>
#include <cuda_fp8.h>

#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/batch_invariant.hpp"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/gemv_args.cuh"
#include "kernels/cuda/matmul_lt.cuh"
#include "kernels/cuda/mma.cuh"
#include "kernels/env_knob.hpp"
#include "kernels/gemv_rules.hpp"

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
// Rows of x the GEMVs serve (9-16: the tensor-core GEMV only). At 32 rows it measured slower
// than cuBLAS on the H200 (8B gate/up 118 us against 73; with 32 weight rows per block, half
// the L2 traffic for x, still 121), at 16 faster (8B decode at batch 16: 5.29 ms against 5.64).
// A GEMM for 17-64 rows (weights streamed per warp, K split across a cluster) measured slower
// than cuBLASLt too (docs/performance.md, "Tried and not kept").
constexpr int kGemvMaxM = 16;
constexpr int kGemvCudaCoreMaxM = 8;  // rows of x the CUDA-core GEMV serves
constexpr int kGemvFp8ChunkM = 8;     // rows of x per fp8 GEMV launch

template <class T>
__device__ __forceinline__ void unpack8(const uint4& v, float* f) {
  const T* h = reinterpret_cast<const T*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) f[i] = to_float(h[i]);
}

// FP8 E4M3 weights (kernels/matmul.hpp): a 16-byte chunk holds 16 of them; the hardware
// converts pairs to half exactly (every E4M3 value is a half), and the row's scale is applied
// to the finished sum.
using Fp8 = __nv_fp8_e4m3;
template <class W>
constexpr bool kIsFp8 = std::is_same_v<W, Fp8>;

__device__ __forceinline__ float2 fp8x2_to_float2(uint16_t pair) {
  return __half22float2(__half2(__nv_cvt_fp8x2_to_halfraw2(static_cast<__nv_fp8x2_storage_t>(pair), __NV_E4M3)));
}
__device__ __forceinline__ void unpack16_fp8(const uint4& v, float* f) {
  const uint16_t* pairs = reinterpret_cast<const uint16_t*>(&v);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float2 p = fp8x2_to_float2(pairs[i]);
    f[2 * i] = p.x;
    f[2 * i + 1] = p.y;
  }
}
// The 16 weights of an fp8 chunk as the two 16-byte chunks of T the tensor-core GEMV's
// fragments take (exact: E4M3 values are representable in bf16 and f16).
template <class T>
__device__ __forceinline__ void widen_fp8(const uint4& v, uint4& lo, uint4& hi) {
  const uint16_t* pairs = reinterpret_cast<const uint16_t*>(&v);
  uint32_t w[8];
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float2 f = fp8x2_to_float2(pairs[i]);
    w[i] = pack2<T>(f.x, f.y);
  }
  lo = make_uint4(w[0], w[1], w[2], w[3]);
  hi = make_uint4(w[4], w[5], w[6], w[7]);
}

template <class T, class TO, class W, int M, int R, int THREADS, Epilogue EPI>
__global__ void __launch_bounds__(THREADS) gemv_kernel(const GemvArgs<T, TO, W> args) {
  constexpr int kWarps = THREADS / 32;
  constexpr int E = kIsFp8<W> ? 16 : 8;  // weights per 16-byte chunk
  // Loads in flight per thread, bounded by registers (weights in flight, widened weights
  // and R x M accumulators).
  constexpr int kUnroll = R == 1 ? 8 : (R * M > 16 ? 2 : 4);
  __shared__ float partial[kWarps][R * M];
  pdl_trigger();  // let the next kernel's blocks get scheduled behind this one's
  // At 8 rows, whole chunks of 8 more (batch-invariant products; gemv_block).
  const GemvBlock<T, TO, W> blk = gemv_block<M, 8, EPI>(args);
  const GemvArgs<T, TO, W>& a = blk.a;
  const int64_t n = a.n, k = a.k;
  const int64_t row0 = blk.tile * R;
  const int64_t chunks = k / E;
  float acc[R][M];
#pragma unroll
  for (int r = 0; r < R; ++r)
#pragma unroll
    for (int m = 0; m < M; ++m) acc[r][m] = 0.0f;
  const uint4* xr = reinterpret_cast<const uint4*>(a.x);
  const uint4* wr = reinterpret_cast<const uint4*>(a.w + row0 * k);
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
      // Each weight chunk is widened once and used for every input row: the widening would
      // otherwise cost as many instructions as the FMAs once M grows past a couple of rows.
      float wf[R][E];
#pragma unroll
      for (int r = 0; r < R; ++r) {
        if constexpr (kIsFp8<W>) unpack16_fp8(wv[u][r], wf[r]);
        else unpack8<T>(wv[u][r], wf[r]);
      }
#pragma unroll
      for (int m = 0; m < M; ++m) {
        float xf[E];
        const uint4* xm = xr + m * (k / 8) + c * (E / 8);
        unpack8<T>(load_from_previous_kernel(xm), xf);
        if constexpr (E == 16) unpack8<T>(load_from_previous_kernel(xm + 1), xf + 8);
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
          for (int i = 0; i < E; ++i) acc[r][m] += wf[r][i] * xf[i];
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
  auto row_sum = [&](int r, int m) {
    float v = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kWarps; ++wi) v += partial[wi][r * M + m];
    if constexpr (kIsFp8<W>) v *= a.w_scale[row0 + r];
    return a.bias ? v + to_float(a.bias[row0 + r]) : v;
  };
  gemv_epilogue<T, TO, M, R, THREADS, EPI>(a, row0, row_sum);
}

// Tensor-core GEMV for 3-16 input rows (verify batches, decode batches): one m16n8k16 MMA takes 16
// weight rows (A) against 8 input rows as the 8 columns of B, so the FMAs cost nothing
// next to the weight stream, which the CUDA-core GEMV above cannot say past two rows.
// The dot product does not care in which order k is visited, so each thread loads 16 bytes
// (8 consecutive k) of its two weight rows and of its input row and uses them as the
// fragments of two MMAs: with lane = 4g + t, thread t of group g holds A rows g and g + 8
// and B column g at k = 8t..8t+7 of a 32-wide step; MMA 1 takes k 8t+0..3 as the fragment
// columns {2t, 2t+1, 2t+8, 2t+9}, MMA 2 takes k 8t+4..7. The warps of a block split K; their
// 16 x 8 partial sums meet in shared memory and go through the usual epilogue
// (kernels/cuda/mma.cuh: the MMA and its fragment layouts).
// kVec: 16-byte chunks each thread loads per row and step (a step covers 32 x kVec of k),
// so that the 4 threads of a row read 64 x kVec contiguous bytes of it per instruction pair.
// FP8 weights (W = Fp8, kVec 2 only): one 16-byte load holds the 16 weights of a row the
// 16-bit layout loads as two chunks; they are widened to T in registers, so the fragments and
// MMAs are the same and only half the bytes come from memory.
template <class T, class TO, class W, int M, int kMmaWarps, int kVec, Epilogue EPI>
__global__ void __launch_bounds__(kMmaWarps * 32) gemv_mma_kernel(const GemvArgs<T, TO, W> args) {
  // Two sets of steps: the loads of one are in flight while the other's MMAs run (measured a
  // little faster than one set of 4 loaded after its MMAs; 8 steps in flight were slower:
  // registers). A set holds 2 / kVec steps, so the bytes in flight do not depend on kVec.
  // fp8: two steps per set, so that as many bytes are in flight as with 16-bit weights.
  // NT: tiles of 8 input rows (B columns); each weight fragment serves all of them, so 9-16
  // rows read the weights once as 1-8 do. M > 8 is a bucket: a.rows of them are real.
  constexpr int R = 16, THREADS = kMmaWarps * 32, kUnroll = kIsFp8<W> ? 2 : 2 / kVec, NT = (M + 7) / 8;
  static_assert(kVec == 1 || kVec == 2, "1 or 2 chunks per row and step");
  static_assert(!kIsFp8<W> || kVec == 2, "fp8 weights: 16 per row and step");
  __shared__ float partial[kMmaWarps][R * 8 * NT];
  pdl_trigger();
  // The 16-row bucket takes any number of rows in chunks of 16 (gemv_block): the chunked GEMV of
  // 17-128 rows and batch-invariant products.
  const GemvBlock<T, TO, W> blk = gemv_block<M, 16, EPI>(args);
  const GemvArgs<T, TO, W>& a = blk.a;
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, t = lane & 3;
  const int64_t n = a.n, k = a.k;
  const int64_t row0 = blk.tile * R;
  const int64_t steps = k / (32 * kVec), per = (steps + kMmaWarps - 1) / kMmaWarps;
  const int64_t s0 = std::min<int64_t>(steps, warp * per), s1 = std::min<int64_t>(steps, s0 + per);
  const bool ok_g = row0 + g < n, ok_h = row0 + g + 8 < n;
  const int live = M <= 8 ? M : static_cast<int>(a.rows);
  // 16-byte units of a weight row per thread and step: kVec of T, or one of fp8.
  constexpr int kWUnits = kIsFp8<W> ? 1 : kVec;
  const uint4* wg = reinterpret_cast<const uint4*>(a.w + (ok_g ? row0 + g : 0) * k) + t * kWUnits;
  const uint4* wh = reinterpret_cast<const uint4*>(a.w + (ok_h ? row0 + g + 8 : 0) * k) + t * kWUnits;
  bool ok_x[NT];
  const uint4* xg[NT];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    ok_x[nt] = g + 8 * nt < live;
    xg[nt] = reinterpret_cast<const uint4*>(a.x + (ok_x[nt] ? g + 8 * nt : 0) * k) + t * kVec;
  }
  const uint4 zero = make_uint4(0, 0, 0, 0);
  float c[NT][4];
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) c[nt][0] = c[nt][1] = c[nt][2] = c[nt][3] = 0.0f;
  // Steps past the warp's range load zeros, so every MMA of a set runs unconditionally and
  // the compiler can keep all of a set's loads in flight together.
  using Set = uint4[kUnroll][NT][kVec];
  using WSet = uint4[kUnroll][kWUnits];  // raw weight loads, widened (fp8) only when used
  auto load_weights = [&](WSet& rows_g, WSet& rows_h, int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t st = base + u;
#pragma unroll
      for (int v = 0; v < kWUnits; ++v) {
        rows_g[u][v] = (st < s1 && ok_g) ? __ldg(wg + st * 4 * kWUnits + v) : zero;
        rows_h[u][v] = (st < s1 && ok_h) ? __ldg(wh + st * 4 * kWUnits + v) : zero;
      }
    }
  };
  auto load_inputs = [&](Set& xs, int64_t base) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      const int64_t st = base + u;
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int v = 0; v < kVec; ++v) xs[u][nt][v] = (st < s1 && ok_x[nt]) ? load_from_previous_kernel(xg[nt] + st * 4 * kVec + v) : zero;
    }
  };
  auto compute = [&](const WSet& raw_g, const WSet& raw_h, const Set& xs) {
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      uint4 rows_g[kVec], rows_h[kVec];
      if constexpr (kIsFp8<W>) {
        widen_fp8<T>(raw_g[u][0], rows_g[0], rows_g[1]);
        widen_fp8<T>(raw_h[u][0], rows_h[0], rows_h[1]);
      } else {
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          rows_g[v] = raw_g[u][v];
          rows_h[v] = raw_h[u][v];
        }
      }
#pragma unroll
      for (int nt = 0; nt < NT; ++nt)
#pragma unroll
        for (int v = 0; v < kVec; ++v) {
          mma_m16n8k16<T>(c[nt], rows_g[v].x, rows_h[v].x, rows_g[v].y, rows_h[v].y, xs[u][nt][v].x, xs[u][nt][v].y);
          mma_m16n8k16<T>(c[nt], rows_g[v].z, rows_h[v].z, rows_g[v].w, rows_h[v].w, xs[u][nt][v].z, xs[u][nt][v].w);
        }
    }
  };
  WSet ag, ah, bg, bh;
  Set ax, bx;
  load_weights(ag, ah, s0);  // weights do not depend on the previous kernel
  load_weights(bg, bh, s0 + kUnroll);
  pdl_wait();
  load_inputs(ax, s0);
  load_inputs(bx, s0 + kUnroll);
  for (int64_t base = s0; base < s1; base += 2 * kUnroll) {
    compute(ag, ah, ax);
    load_weights(ag, ah, base + 2 * kUnroll);
    load_inputs(ax, base + 2 * kUnroll);
    compute(bg, bh, bx);
    load_weights(bg, bh, base + 3 * kUnroll);
    load_inputs(bx, base + 3 * kUnroll);
  }
  // c[nt]: c0, c1: row g, input rows 8 nt + 2t, + 1; c2, c3: row g + 8.
  constexpr int kCols = 8 * NT;
#pragma unroll
  for (int nt = 0; nt < NT; ++nt) {
    partial[warp][g * kCols + 8 * nt + 2 * t] = c[nt][0];
    partial[warp][g * kCols + 8 * nt + 2 * t + 1] = c[nt][1];
    partial[warp][(g + 8) * kCols + 8 * nt + 2 * t] = c[nt][2];
    partial[warp][(g + 8) * kCols + 8 * nt + 2 * t + 1] = c[nt][3];
  }
  __syncthreads();
  auto row_sum = [&](int r, int m) {
    float v = 0.0f;
#pragma unroll
    for (int wi = 0; wi < kMmaWarps; ++wi) v += partial[wi][r * kCols + m];
    if constexpr (kIsFp8<W>) v *= a.w_scale[row0 + r];
    return a.bias ? v + to_float(a.bias[row0 + r]) : v;
  };
  gemv_epilogue<T, TO, M, R, THREADS, EPI>(a, row0, row_sum);
}

// The tensor-core path serves 3-16 rows when K is a multiple of 32 (AERIE_GEMV_MMA=0 turns
// it off, for measuring: kernels/gemv_rules.hpp).
bool gemv_mma_enabled() { return gemv_rules().tensor_cores; }

// Warps per block (they split K): measured on an H200 at 4 and 8 rows, 4 warps suit wide
// matrices (>= 384 blocks of 16 rows: q/k/v, gate/up, lm_head) and 8 the narrow ones
// (o_proj, down). A matrix of fewer blocks than SMs whose K gives 8 warps more than the two
// steps each that are loaded before the previous kernel ends (SmolLM2's down_proj in a verify:
// 36 blocks, 24 steps) takes 16 warps (16-bit weights, whole 128-byte lines), so that all its
// weights are in flight at once: SmolLM2's chain-5 verify 0.768 -> 0.742 ms on the H200
// (docs/performance.md). AERIE_GEMV_MMA_NARROW_WARPS=8 keeps 8 and AERIE_GEMV_MMA_WARPS (4 or 8)
// overrides everything, for measuring.
constexpr int64_t kNarrowBlocks = 128;
int gemv_mma_warps(int64_t blocks, int64_t steps) {
  static const int forced = env_knob("AERIE_GEMV_MMA_WARPS");
  static const int narrow = env_knob("AERIE_GEMV_MMA_NARROW_WARPS");
  if (forced > 0) return forced;
  if (blocks >= 384) return 4;
  return narrow != 8 && blocks <= kNarrowBlocks && steps > 2 * 8 ? 16 : 8;
}

// Chunks per row and step: 2 (whole 128-byte lines per row and instruction pair) where K
// allows, unless AERIE_GEMV_MMA_VEC=1 (for measuring).
int gemv_mma_vec(int64_t k) {
  static const int forced = env_knob("AERIE_GEMV_MMA_VEC");
  if (k % 64 != 0) return 1;
  return forced == 1 ? 1 : 2;
}

template <class T, class TO, class W, int M, Epilogue EPI>
void launch_gemv_mma(const GemvArgs<T, TO, W>& a, cudaStream_t s) {
  // The warps per block follow the weight's tiles, never the row chunks: a row's sums split K
  // among the same warps at every row count.
  const unsigned blocks = static_cast<unsigned>((a.n + 15) / 16);
  const unsigned grid = gemv_grid<M, 16>(a, blocks);
  auto with_vec = [&](auto vec) {
    constexpr int kVec = decltype(vec)::value;
    const int warps = gemv_mma_warps(blocks, a.k / (32 * kVec));
    if constexpr (kVec == 2 && !kIsFp8<W>) {
      if (warps == 16) return launch_pdl(gemv_mma_kernel<T, TO, W, M, 16, kVec, EPI>, dim3(grid), dim3(16 * 32), 0, s, a);
    }
    if (warps == 4) launch_pdl(gemv_mma_kernel<T, TO, W, M, 4, kVec, EPI>, dim3(grid), dim3(4 * 32), 0, s, a);
    else launch_pdl(gemv_mma_kernel<T, TO, W, M, 8, kVec, EPI>, dim3(grid), dim3(8 * 32), 0, s, a);
  };
  if constexpr (kIsFp8<W>) {
    with_vec(std::integral_constant<int, 2>{});  // mma_eligible: K is a multiple of 64
  } else {
    if (gemv_mma_vec(a.k) == 2) with_vec(std::integral_constant<int, 2>{});
    else with_vec(std::integral_constant<int, 1>{});
  }
}

template <class T, class TO, class W, int M, int R, Epilogue EPI>
void launch_gemv_rows(const GemvArgs<T, TO, W>& a, cudaStream_t s) {
  const unsigned blocks = gemv_grid<M, 8>(a, (a.n + R - 1) / R);
  if (a.k >= 8192) launch_pdl(gemv_kernel<T, TO, W, M, R, 256, EPI>, dim3(blocks), dim3(256), 0, s, a);
  else launch_pdl(gemv_kernel<T, TO, W, M, R, 128, EPI>, dim3(blocks), dim3(128), 0, s, a);
}

// Whether the tensor-core GEMV can take K: whole 32-wide steps (16-bit weights), whole
// 64-wide steps of 16-byte loads (fp8).
template <class W>
bool mma_eligible(int64_t k) {
  return gemv_mma_enabled() && k % (kIsFp8<W> ? 64 : 32) == 0;
}

// Rows per block for the CUDA-core GEMV: 2 for a single input row (launch_one_row: enough
// bytes in flight per block, still many blocks), more as M grows so that x is re-read less;
// always even for the pair epilogues. Which GEMV takes a product: kernels/gemv_rules.hpp
// (measured; tested on the CPU). A narrow product on the CUDA cores takes two weight rows a block
// at any M, so that it spreads over every SM.
template <class T, class TO, class W, int M, int R, Epilogue EPI>
void launch_gemv_m(const GemvArgs<T, TO, W>& a, cudaStream_t s) {
  const GemvRules& rules = gemv_rules();
  if (small_gemv_kernel(M, a.n, a.k, kIsFp8<W>, rules) == GemvKernel::kTensorCore) return launch_gemv_mma<T, TO, W, M, EPI>(a, s);
  if constexpr (!kIsFp8<W> && R != 2) {
    if (a.n <= rules.narrow_max_rows) return launch_gemv_rows<T, TO, W, M, 2, EPI>(a, s);
  }
  launch_gemv_rows<T, TO, W, M, R, EPI>(a, s);
}

// One or two rows (M, R: launch_one_row and launch_gemv's second row).
template <class T, class TO, class W, int M, int R, Epilogue EPI>
void launch_gemv_few(const GemvArgs<T, TO, W>& a, cudaStream_t s) {
  if (small_gemv_kernel(M, a.n, a.k, kIsFp8<W>, gemv_rules()) == GemvKernel::kTensorCore) launch_gemv_mma<T, TO, W, M, EPI>(a, s);
  else launch_gemv_rows<T, TO, W, M, R, EPI>(a, s);
}

// FP8 weights at one input row: a weight row holds half a bf16 row's bytes, so a block per row
// had half the bytes in flight per resident thread of a bf16 row's block; the draft head's
// products (K = 4096-8192) measured at ~2.6 TB/s that way (docs/performance.md). Weight rows per block:
// AERIE_GEMV_FP8_ROWS = 1 (stores only), 2 or 4, or 16 for the tensor-core GEMV (K a multiple
// of 64), for measuring; default kFp8OneRowRows.
constexpr int kFp8OneRowRows = 2;
int fp8_one_row_rows() {
  static const int forced = env_knob("AERIE_GEMV_FP8_ROWS");
  return forced == 1 || forced == 2 || forced == 4 || forced == 16 ? forced : kFp8OneRowRows;
}
template <class T, class TO, Epilogue EPI>
void launch_fp8_one_row(const GemvArgs<T, TO, Fp8>& a, cudaStream_t s) {
  const int r = fp8_one_row_rows();
  if (r == 16 && mma_eligible<Fp8>(a.k)) return launch_gemv_mma<T, TO, Fp8, 1, EPI>(a, s);
  if (r == 4) return launch_gemv_rows<T, TO, Fp8, 1, 4, EPI>(a, s);
  if constexpr (EPI == Epilogue::kStore) {  // the pair epilogues need an even count
    if (r == 1) return launch_gemv_rows<T, TO, Fp8, 1, 1, EPI>(a, s);
  }
  launch_gemv_rows<T, TO, Fp8, 1, 2, EPI>(a, s);
}

// 16-bit weights at one input row: two weight rows a block, as the pair epilogues always took.
// One row a block for stores measured slower on the H200, interleaved in one call
// (docs/performance.md): 1B shape decode at batch 1 1.01-1.03 -> 0.96 ms a step, 8B 4.32 -> 4.29;
// four rows 0.98 and 4.41. AERIE_GEMV_ONE_ROW_ROWS = 1 or 4 (stores) restores or tries those.
template <class T, class TO, class W, Epilogue EPI>
void launch_one_row(const GemvArgs<T, TO, W>& a, cudaStream_t s) {
  static const int forced = env_knob("AERIE_GEMV_ONE_ROW_ROWS");
  if constexpr (EPI == Epilogue::kStore) {
    if (forced == 1) return launch_gemv_few<T, TO, W, 1, 1, EPI>(a, s);
  }
  if (forced == 4) return launch_gemv_few<T, TO, W, 1, 4, EPI>(a, s);
  launch_gemv_few<T, TO, W, 1, 2, EPI>(a, s);
}

// M rows of a batch-invariant product on the GEMV its K picked; a CUDA-core block takes two
// weight rows of a narrow weight, as launch_gemv_m measured them.
template <class T, class TO, class W, int M, Epilogue EPI>
void launch_invariant_rows(GemvKernel kernel, const GemvArgs<T, TO, W>& a, cudaStream_t s) {
  if (kernel == GemvKernel::kTensorCore) return launch_gemv_mma<T, TO, W, M, EPI>(a, s);
  if (!kIsFp8<W> && a.n <= gemv_rules().narrow_max_rows) return launch_gemv_rows<T, TO, W, M, 2, EPI>(a, s);
  launch_gemv_rows<T, TO, W, M, (M <= 3 ? 2 : 4), EPI>(a, s);
}

// A batch-invariant product (kernels/batch_invariant.hpp) of any m rows, in chunks of the GEMV
// the weight's K picks: the tensor-core one sums a row the same way for every M it is
// instantiated for (its warps split K by N and K alone), the CUDA-core one for every M and R
// (its threads split K by K alone).
template <class T, class TO, Epilogue EPI, class W>
void launch_gemv_invariant(int64_t m, GemvArgs<T, TO, W> a, cudaStream_t s) {
  const GemvKernel kernel = batch_invariant_gemv_kernel(a.k, kIsFp8<W>, gemv_rules());
  const int64_t chunk_rows = batch_invariant_gemv_chunk_rows(kernel, kIsFp8<W>);
  a.rows = m;
  if constexpr (!kIsFp8<W>) {
    if (kernel == GemvKernel::kTensorCore && m > kGemvCudaCoreMaxM) {  // one launch, chunks of 16 in its grid
      static_assert(kGemvMaxM == 16, "the tensor-core GEMV's row bucket");
      a.row_chunks = (m + chunk_rows - 1) / chunk_rows;
      return launch_gemv_mma<T, TO, W, 16, EPI>(a, s);
    }
  }
  if (kernel == GemvKernel::kCudaCore && m >= 2 * chunk_rows) {  // whole chunks of 8 in one launch, the rest after
    static_assert(kGemvCudaCoreMaxM == 8, "the CUDA-core GEMV's chunk");
    GemvArgs<T, TO, W> whole = a;
    whole.row_chunks = m / chunk_rows;
    launch_invariant_rows<T, TO, W, 8, EPI>(kernel, whole, s);
    const int64_t done = whole.row_chunks * chunk_rows;
    if (done == m) return;
    a = from_input_row<EPI>(a, done);
    m -= done;
  }
  for (int64_t m0 = 0; m0 < m; m0 += chunk_rows) {
    const GemvArgs<T, TO, W> c = from_input_row<EPI>(a, m0);
    switch (std::min<int64_t>(chunk_rows, m - m0)) {
      case 1: launch_invariant_rows<T, TO, W, 1, EPI>(kernel, c, s); break;
      case 2: launch_invariant_rows<T, TO, W, 2, EPI>(kernel, c, s); break;
      case 3: launch_invariant_rows<T, TO, W, 3, EPI>(kernel, c, s); break;
      case 4: launch_invariant_rows<T, TO, W, 4, EPI>(kernel, c, s); break;
      case 5: launch_invariant_rows<T, TO, W, 5, EPI>(kernel, c, s); break;
      case 6: launch_invariant_rows<T, TO, W, 6, EPI>(kernel, c, s); break;
      case 7: launch_invariant_rows<T, TO, W, 7, EPI>(kernel, c, s); break;
      default: launch_invariant_rows<T, TO, W, 8, EPI>(kernel, c, s); break;
    }
  }
}

template <class T, class TO, Epilogue EPI, class W>
void launch_gemv(int64_t m, GemvArgs<T, TO, W> a, cudaStream_t s) {
  if (batch_invariant()) return launch_gemv_invariant<T, TO, EPI>(m, a, s);
  a.rows = m;
  // 9-16 rows: the tensor-core GEMV with two tiles of 8 (gemv_eligible checked that K allows it);
  // more (gemv_takes_row_chunks) in chunks of 16 in one launch.
  if (m > kGemvCudaCoreMaxM) {
    static_assert(kGemvMaxM == 16, "one bucket past the CUDA-core GEMV's rows");
    a.row_chunks = (m + kGemvMaxM - 1) / kGemvMaxM;
    if constexpr (!kIsFp8<W>) launch_gemv_mma<T, TO, W, 16, EPI>(a, s);  // fp8 launches hold kGemvFp8ChunkM rows
    return;
  }
  switch (m) {
    case 1:
      if constexpr (kIsFp8<W>) launch_fp8_one_row<T, TO, EPI>(a, s);
      else launch_one_row<T, TO, W, EPI>(a, s);
      break;
    case 2: launch_gemv_few<T, TO, W, 2, 2, EPI>(a, s); break;
    case 3: launch_gemv_m<T, TO, W, 3, 2, EPI>(a, s); break;
    case 4: launch_gemv_m<T, TO, W, 4, 4, EPI>(a, s); break;
    case 5: launch_gemv_m<T, TO, W, 5, 4, EPI>(a, s); break;
    case 6: launch_gemv_m<T, TO, W, 6, 4, EPI>(a, s); break;
    case 7: launch_gemv_m<T, TO, W, 7, 4, EPI>(a, s); break;
    case 8: launch_gemv_m<T, TO, W, 8, 4, EPI>(a, s); break;
    default: break;
  }
}

// Measured on an H200 (docs/performance.md): Aerie's CUDA-core GEMV beats cuBLAS at one or
// two rows, its tensor-core GEMV from three to 16 (AERIE_GEMV_MAX_ROWS sets another default,
// for measuring).
int default_gemv_rows() {
  const int v = env_knob_or("AERIE_GEMV_MAX_ROWS", kGemvMaxM);
  return v < 0 ? 0 : (v > kGemvMaxM ? kGemvMaxM : v);
}
int max_gemv_rows = default_gemv_rows();

// Batch-invariant products take the GEMVs at every row count (launch_gemv_invariant); small
// weights up to the chunked rule's rows too (kernels/gemv_rules.hpp), unless the bench set it.
int64_t chunked_rows_forced = -1;  // set_gemv_chunked_rows: -1 the rules
bool takes_row_chunks(int64_t m, int64_t n, int64_t k) {
  if (chunked_rows_forced >= 0) return m > kGemvMaxM && m <= chunked_rows_forced && mma_eligible<__nv_bfloat16>(k);
  return max_gemv_rows >= kGemvMaxM && gemv_takes_row_chunks(m, n, k, gemv_rules());
}
bool gemv_eligible(const TensorView& x, const TensorView& w, const TensorView& bias, int64_t k) {
  const int64_t m = x.dim(0);
  const bool rows_ok = batch_invariant() || (m <= max_gemv_rows && (m <= kGemvCudaCoreMaxM || mma_eligible<__nv_bfloat16>(k))) ||
                       takes_row_chunks(m, w.dim(0), k);
  return rows_ok && x.dtype != DType::kF32 &&
         x.dtype == w.dtype && k % 8 == 0 && aligned16(x.data) && aligned16(w.data) && (!bias.defined() || bias.dtype == x.dtype);
}

// An fp8 copy of the weight (kernels/matmul.hpp) serves up to kFp8MaxRows (2 x 8) rows: the
// GEMVs take bf16 input 8 rows per launch, each launch reading the fp8 bytes once, so 16 rows
// still read no more than one bf16 pass. f16/f32 inputs and odd shapes dequantize (below).
static_assert(kFp8MaxRows <= 2 * kGemvFp8ChunkM, "the fp8 GEMVs serve two launches of 8 rows");
bool fp8_gemv_eligible(const TensorView& x, const TensorView& w_fp8, const TensorView& bias, int64_t k) {
  return (max_gemv_rows > 0 || batch_invariant()) && x.dtype == DType::kBF16 && k % 16 == 0 && aligned16(x.data) && aligned16(w_fp8.data) &&
         (!bias.defined() || bias.dtype == x.dtype);
}

template <class T, class TO, Epilogue EPI>
void launch_fp8_gemv(int64_t m, const GemvArgs<T, TO, Fp8>& a, cudaStream_t s) {
  for (int64_t m0 = 0; m0 < m; m0 += kGemvFp8ChunkM)
    launch_gemv<T, TO, EPI>(std::min<int64_t>(kGemvFp8ChunkM, m - m0), from_input_row<EPI>(a, m0), s);
}

// Dequantized tiles for cuBLAS: out[r, c] = w[r, c] * scale[r], rounded to T.
template <class T>
__global__ void dequantize_fp8_rows_kernel(const uint8_t* q, const float* scale, T* out, int64_t rows, int64_t k) {
  const int64_t total = rows * k;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < total; i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const __half h = __half(__nv_cvt_fp8_to_halfraw(static_cast<__nv_fp8_storage_t>(q[i]), __NV_E4M3));
    out[i] = from_float<T>(__half2float(h) * scale[i / k]);
  }
}

// A fixed per-thread tile buffer (like cuBLAS's workspace): allocated on first use, which the
// graph runners make eager (spec/graph_capture.hpp), never during a capture.
constexpr size_t kDequantTileBytes = 32u << 20;
struct DequantTile {
  void* data = nullptr;
  DequantTile() {
    if (cudaMalloc(&data, kDequantTileBytes) != cudaSuccess) data = nullptr;
  }
  ~DequantTile() {
    if (data) cudaFree(data);
  }
};

}  // namespace

void set_gemv_max_rows(int rows) { max_gemv_rows = rows < 0 ? 0 : (rows > kGemvMaxM ? kGemvMaxM : rows); }
void set_gemv_chunked_rows(int64_t rows) { chunked_rows_forced = rows < 0 ? -1 : rows; }
int gemv_max_rows() { return max_gemv_rows; }

namespace {

// Rows [r0, r0 + rows) of w (or a tile holding just them), times x, into those columns of y.
// Row-major y[m,n] = x[m,k] w[n,k]^T is column-major y^T[n,m] = op(W)=T on the column-major
// [k,n] view of w times the column-major [k,m] view of x; a block of w's rows fills rows r0..
// of every y^T column (ldc n).
Status cublas_rows(const MatmulParams& p, const void* w_rows, DType w_dtype, int64_t r0, int64_t rows, cudaStream_t stream) {
  CublasHandle& h = thread_handle();
  if (!h.ok) return Status::error("matmul (cuda): cannot create a cuBLAS handle");
  cublasSetStream(h.handle, stream);
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  const float alpha = 1.0f, beta = 0.0f;
  const cublasStatus_t st =
      cublasGemmEx(h.handle, CUBLAS_OP_T, CUBLAS_OP_N, static_cast<int>(rows), static_cast<int>(m), static_cast<int>(k), &alpha, w_rows,
                   cuda_type(w_dtype), static_cast<int>(k), p.x.data, cuda_type(p.x.dtype), static_cast<int>(k), &beta,
                   static_cast<char*>(p.y.data) + r0 * static_cast<int64_t>(dtype_size(p.y.dtype)), cuda_type(p.y.dtype),
                   static_cast<int>(n), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
  if (st != CUBLAS_STATUS_SUCCESS) return Status::error(std::string("matmul (cuda): cublasGemmEx failed: ") + cublasGetStatusString(st));
  return Status::ok();
}

// y = x (w_fp8 * scale)^T for inputs the fp8 GEMVs do not take (f32, f16, odd K): weight rows
// dequantized a tile at a time into x's dtype, each tile one cuBLAS product into its columns of y.
Status matmul_fp8_tiles(const MatmulParams& p, cudaStream_t stream) {
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  thread_local DequantTile tile;
  if (!tile.data) return Status::error("matmul (cuda): cannot allocate the fp8 dequantization tile");
  const size_t es = dtype_size(p.x.dtype);
  const int64_t tile_rows = std::max<int64_t>(1, static_cast<int64_t>(kDequantTileBytes / (static_cast<size_t>(k) * es)));
  for (int64_t r0 = 0; r0 < n; r0 += tile_rows) {
    const int64_t rows = std::min(tile_rows, n - r0);
    const int64_t blocks = std::min<int64_t>((rows * k + 255) / 256, 4096);
    AERIE_DISPATCH_FLOAT(p.x.dtype, T, [&] {
      dequantize_fp8_rows_kernel<T><<<static_cast<unsigned>(blocks), 256, 0, stream>>>(
          static_cast<const uint8_t*>(p.w_fp8.data) + r0 * k, p.w_scale.ptr<float>() + r0, static_cast<T*>(tile.data), rows, k);
    });
    if (Status st = cublas_rows(p, tile.data, p.x.dtype, r0, rows, stream); !st.is_ok()) return st;
  }
  return Status::ok();
}

}  // namespace

Status matmul(const MatmulParams& p, void* stream) {
  const bool fp8 = fp8_copy_serves(p.w_fp8, p.x.dim(0));
  if (!fp8 && p.x.dtype != p.w.dtype)
    return Status::error("matmul (cuda): x and w must share a dtype, got " + p.x.describe() + " and " + p.w.describe());
  if (p.y.dtype != p.x.dtype && p.y.dtype != DType::kF32)
    return Status::error("matmul (cuda): y must have x's dtype or f32, got " + p.y.describe());
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (m == 0 || n == 0) return Status::ok();
  if (fp8 && fp8_gemv_eligible(p.x, p.w_fp8, p.bias, k)) {
    using T = __nv_bfloat16;
    const T* bias = p.bias.defined() ? p.bias.ptr<T>() : nullptr;
    const Fp8* w = static_cast<const Fp8*>(p.w_fp8.data);
    const float* scale = p.w_scale.ptr<float>();
    if (p.y.dtype == DType::kF32) {
      GemvArgs<T, float, Fp8> a{p.x.ptr<T>(), w, bias, p.y.ptr<float>(), n, k};
      a.w_scale = scale;
      launch_fp8_gemv<T, float, Epilogue::kStore>(m, a, as_stream(stream));
    } else {
      GemvArgs<T, T, Fp8> a{p.x.ptr<T>(), w, bias, p.y.ptr<T>(), n, k};
      a.w_scale = scale;
      launch_fp8_gemv<T, T, Epilogue::kStore>(m, a, as_stream(stream));
    }
    return launch_status("matmul (fp8 gemv)");
  }
  if (!fp8 && gemv_eligible(p.x, p.w, p.bias, k)) {
    auto run = [&](auto tag) {  // bf16 and f16 only (gemv_eligible excludes f32)
      using T = decltype(tag);
      const T* bias = p.bias.defined() ? p.bias.ptr<T>() : nullptr;
      if (p.y.dtype == DType::kF32)
        launch_gemv<T, float, Epilogue::kStore>(m, GemvArgs<T, float>{p.x.ptr<T>(), p.w.ptr<T>(), bias, p.y.ptr<float>(), n, k},
                                                as_stream(stream));
      else
        launch_gemv<T, T, Epilogue::kStore>(m, GemvArgs<T, T>{p.x.ptr<T>(), p.w.ptr<T>(), bias, p.y.ptr<T>(), n, k}, as_stream(stream));
    };
    if (p.x.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("matmul (gemv)");
  }
  if (fp8) {
    if (Status st = matmul_fp8_tiles(p, as_stream(stream)); !st.is_ok()) return st;
  } else if (matmul_lt(p, as_stream(stream))) {
    // decode / verify sizes: the tuned cuBLASLt algorithm (ops_matmul_lt.cu)
  } else if (Status st = cublas_rows(p, p.w.data, p.w.dtype, 0, n, as_stream(stream)); !st.is_ok()) {
    return st;
  }
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
  const bool fp8 = fp8_copy_serves(p.w_fp8, m);
  if (fp8 && p.out.dtype == p.x.dtype && fp8_gemv_eligible(p.x, p.w_fp8, p.bias, k)) {
    using T = __nv_bfloat16;
    GemvArgs<T, T, Fp8> a{p.x.ptr<T>(), static_cast<const Fp8*>(p.w_fp8.data), p.bias.defined() ? p.bias.ptr<T>() : nullptr, p.out.ptr<T>(), n, k};
    a.w_scale = p.w_scale.ptr<float>();
    launch_fp8_gemv<T, T, Epilogue::kSiluPairs>(m, a, as_stream(stream));
    return launch_status("gate_up_silu (fp8 gemv)");
  }
  if (!fp8 && p.out.dtype == p.x.dtype && gemv_eligible(p.x, p.w, p.bias, k)) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      launch_gemv<T, T, Epilogue::kSiluPairs>(
          m, GemvArgs<T, T>{p.x.ptr<T>(), p.w.ptr<T>(), p.bias.defined() ? p.bias.ptr<T>() : nullptr, p.out.ptr<T>(), n, k},
          as_stream(stream));
    };
    if (p.x.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("gate_up_silu (gemv)");
  }
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .w_fp8 = p.w_fp8, .w_scale = p.w_scale, .y = p.gate_up}, stream);
  if (!s.is_ok()) return s;
  return silu_mul({.gate_up = p.gate_up, .out = p.out}, stream);
}

Status qkv_rope(const QkvRopeParams& p, void* stream) {
  const int64_t m = p.x.dim(0), k = p.x.dim(1), n = p.w.dim(0);
  if (m == 0) return Status::ok();
  const bool same = p.q_out.dtype == p.x.dtype && p.k_cache.dtype == p.x.dtype;
  const bool fp8 = fp8_copy_serves(p.w_fp8, m);
  if (fp8 && same && fp8_gemv_eligible(p.x, p.w_fp8, p.bias, k)) {
    using T = __nv_bfloat16;
    GemvArgs<T, T, Fp8> a{p.x.ptr<T>(), static_cast<const Fp8*>(p.w_fp8.data), p.bias.defined() ? p.bias.ptr<T>() : nullptr, nullptr, n, k,
                          p.positions.ptr<int32_t>(), p.inv_freq.ptr<float>(), p.slots.ptr<int32_t>(), p.q_out.ptr<T>(),
                          p.k_cache.ptr<T>(), p.v_cache.ptr<T>(), p.q_out.dim(1), p.k_cache.dim(1), p.k_cache.dim(2), p.k_cache.dim(0),
                          p.attention_scaling, p.w_scale.ptr<float>()};
    launch_fp8_gemv<T, T, Epilogue::kRope>(m, a, as_stream(stream));
    return launch_status("qkv_rope (fp8 gemv)");
  }
  if (!fp8 && same && gemv_eligible(p.x, p.w, p.bias, k)) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      GemvArgs<T, T> a{p.x.ptr<T>(), p.w.ptr<T>(), p.bias.defined() ? p.bias.ptr<T>() : nullptr, nullptr, n, k,
                       p.positions.ptr<int32_t>(), p.inv_freq.ptr<float>(), p.slots.ptr<int32_t>(), p.q_out.ptr<T>(),
                       p.k_cache.ptr<T>(), p.v_cache.ptr<T>(), p.q_out.dim(1), p.k_cache.dim(1), p.k_cache.dim(2), p.k_cache.dim(0),
                       p.attention_scaling};
      launch_gemv<T, T, Epilogue::kRope>(m, a, as_stream(stream));
    };
    if (p.x.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("qkv_rope (gemv)");
  }
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .w_fp8 = p.w_fp8, .w_scale = p.w_scale, .y = p.qkv}, stream);
  if (!s.is_ok()) return s;
  return rope_kv_write({.qkv = p.qkv, .positions = p.positions, .inv_freq = p.inv_freq, .slots = p.slots, .q_out = p.q_out,
                        .k_cache = p.k_cache, .v_cache = p.v_cache, .attention_scaling = p.attention_scaling}, stream);
}

}  // namespace aerie::kernels::cuda
