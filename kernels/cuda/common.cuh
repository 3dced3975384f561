#pragma once
// Shared helpers of the CUDA kernels: element types, fp32 load/store, reductions, launch
// checks. CUDA-only header (never included by host headers).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <string>

#include "kernels/backends.hpp"

namespace aerie::kernels::cuda {

inline cudaStream_t as_stream(void* s) { return static_cast<cudaStream_t>(s); }

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
template <class T>
__device__ __forceinline__ T from_float(float v);
template <>
__device__ __forceinline__ float from_float<float>(float v) { return v; }
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) { return __float2bfloat16(v); }
template <>
__device__ __forceinline__ __half from_float<__half>(float v) { return __float2half(v); }

__host__ __device__ __forceinline__ int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
__host__ __device__ __forceinline__ int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

__device__ __forceinline__ float warp_sum(float v) {
  for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
  return v;
}
__device__ __forceinline__ float warp_max(float v) {
  for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
  return v;
}

// Sum over the block; every thread gets the result. `scratch` holds 32 floats.
__device__ __forceinline__ float block_sum(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_sum(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(v);
}
__device__ __forceinline__ float block_max(float v, float* scratch) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, warps = (blockDim.x + 31) >> 5;
  v = warp_max(v);
  __syncthreads();
  if (lane == 0) scratch[warp] = v;
  __syncthreads();
  v = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(v);
}

// Programmatic dependent launch (Hopper): a kernel launched with launch_pdl() may be
// scheduled while its predecessor in the stream finishes; it must call pdl_begin() before
// touching global memory, which waits for the predecessor's writes. In a kernel launched
// normally pdl_begin() costs nothing. Cuts the gap between the many small kernels of a
// decode step (also inside CUDA graphs).
__device__ __forceinline__ void pdl_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_trigger() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}
__device__ __forceinline__ void pdl_begin() {
  pdl_wait();
  pdl_trigger();
}

template <class... KernelArgs, class... Args>
inline void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  cudaLaunchKernelEx(&cfg, kernel, static_cast<KernelArgs>(args)...);
}

inline Status launch_status(const char* op) {
  const cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) return Status::ok();
  return Status::error(std::string(op) + ": " + cudaGetErrorString(e));
}

// The sequence of a ragged batch that query token t belongs to: the last b < batch with
// qo_indptr[b] <= t (binary search).
__device__ __forceinline__ int find_sequence(const int32_t* qo_indptr, int batch, int t) {
  int lo = 0, hi = batch - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qo_indptr[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

// Asynchronous 16-byte copies from global to shared memory (sm_80+), grouped: a group is
// committed, and wait<N> returns once at most N groups are still in flight. valid = false
// fills the 16 bytes with zeros instead of reading.
__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool valid) {
  const auto s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(s), "l"(gmem), "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending)); }
// cp_async_wait for a count known at run time (0, 1, or 2 and more: the tile pipelines keep
// at most three buffers): waits until at most `pending` groups are in flight.
__device__ __forceinline__ void cp_async_wait_at_most(int pending) {
  if (pending >= 2) cp_async_wait<2>();
  else if (pending == 1) cp_async_wait<1>();
  else cp_async_wait<0>();
}

// Weights the next kernel reads, asked of L2 while a kernel that reads little memory runs
// (attention at small batch, a norm), so that HBM keeps streaming between a step's weight
// products (kernels/l2_prefetch.hpp). mode 1: Hopper's bulk prefetch (no registers, nothing
// to wait for); 2: one prefetch instruction per 128-byte line; 0: none.
struct L2Hint {
  const char* data = nullptr;
  int64_t bytes = 0;
  int mode = 0;
};

// Share `part` of `parts` of the hinted bytes, issued by this block's threads; returns at
// once (the lines arrive while the block goes on, and stay for the next kernel).
__device__ __forceinline__ void l2_prefetch_share(const L2Hint& h, int64_t part, int64_t parts) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  if (h.mode == 0 || h.bytes < 128) return;
  const int64_t lines = h.bytes / 128;  // whole lines (the hinted bytes are 16-byte aligned)
  const int64_t per = (lines + parts - 1) / parts;
  const int64_t l0 = part * per, l1 = min(lines, l0 + per);
  if (h.mode == 1) {
    constexpr int64_t kPieceLines = 256;  // 32 KB per bulk prefetch
    for (int64_t l = l0 + threadIdx.x * kPieceLines; l < l1; l += static_cast<int64_t>(blockDim.x) * kPieceLines) {
      const auto size = static_cast<uint32_t>(min(kPieceLines, l1 - l) * 128);
      asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" ::"l"(h.data + l * 128), "r"(size) : "memory");
    }
  } else {
    for (int64_t l = l0 + threadIdx.x; l < l1; l += blockDim.x) asm volatile("prefetch.global.L2 [%0];" ::"l"(h.data + l * 128));
  }
#endif
}

// The hint for a tensor (its leading bytes), as the launches pass it. For measuring: off with
// AERIE_L2_PREFETCH=0 (2: line prefetches), only some sites with AERIE_L2_PREFETCH_SITES (a
// mask of L2Site), capped at AERIE_L2_PREFETCH_MB (default: three quarters of this GPU's L2,
// so that the lines survive until they are read).
enum class L2Site { kAttention = 1, kNorm = 2 };
L2Hint l2_hint(const TensorView& t, L2Site site);

}  // namespace aerie::kernels::cuda

// Calls FN<T>(args...) with T the CUDA element type of a floating DType.
#define AERIE_DISPATCH_FLOAT(dtype, T, ...)                          \
  [&] {                                                              \
    switch (dtype) {                                                 \
      case ::aerie::DType::kBF16: { using T = __nv_bfloat16; return __VA_ARGS__(); } \
      case ::aerie::DType::kF16: { using T = __half; return __VA_ARGS__(); }         \
      default: { using T = float; return __VA_ARGS__(); }            \
    }                                                                \
  }()
