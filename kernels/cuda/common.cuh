#pragma once
// Shared helpers of the CUDA kernels: element types, fp32 load/store, reductions, launch
// checks. CUDA-only header (never included by host headers).
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <library_types.h>

#include <string>

#include "kernels/backends.hpp"
#include "kernels/env_knob.hpp"

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

// A load of what an earlier kernel of the stream wrote, made after pdl_wait(). Never through
// the non-coherent path (__ldg, ld.global.nc): it assumes the data stay constant for the
// kernel's whole life, and under programmatic launch the previous kernel writes them while
// this one is already resident, so ptxas may move such a load above griddepcontrol.wait. The
// small-batch tensor-core decode attention read a stale q that way and decoded wrong tokens in
// CUDA graphs (docs/performance.md); it stayed hidden in op tests, where nothing runs before
// the kernel. An ordinary load cached at all levels (.ca): L1 still serves the blocks of an SM
// that read the same input (an L2-only .cg load cost 8B's batch-1 decode 10% of the floor).
template <class V>
__device__ __forceinline__ V load_from_previous_kernel(const V* p) {
  return __ldca(p);
}

// AERIE_PDL_OFF (for measuring what programmatic launch buys, and for isolating an ordering
// fault): a bit mask of kernels launched without it. Bit 0 every kernel; the others name one
// kernel (PdlKernel), whose launch site asks launch_pdl_unless for it.
enum PdlKernel : int { kPdlEvery = 1, kPdlDecodeAttentionTc = 2, kPdlAttentionCombine = 4, kPdlDecodeAttention = 8 };
inline bool pdl_turned_off(int kernel_bit) {
  static const int mask = env_knob("AERIE_PDL_OFF");
  return (mask & (kPdlEvery | kernel_bit)) != 0;
}

template <class... KernelArgs, class... Args>
inline void launch_pdl_unless(int kernel_bit, void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream,
                              Args... args) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cudaLaunchAttribute attr[1];
  attr[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attr[0].val.programmaticStreamSerializationAllowed = 1;
  cfg.attrs = attr;
  cfg.numAttrs = pdl_turned_off(kernel_bit) ? 0 : 1;
  cudaLaunchKernelEx(&cfg, kernel, static_cast<KernelArgs>(args)...);
}

template <class... KernelArgs, class... Args>
inline void launch_pdl(void (*kernel)(KernelArgs...), dim3 grid, dim3 block, size_t smem, cudaStream_t stream, Args... args) {
  launch_pdl_unless(kPdlEvery, kernel, grid, block, smem, stream, args...);
}

// Whether a pointer allows 16-byte vector loads and stores.
inline bool aligned16(const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; }

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

// The cuBLAS type of a floating DType (f32 for anything but bf16 / f16).
inline cudaDataType_t cuda_type(DType t) {
  switch (t) {
    case DType::kBF16: return CUDA_R_16BF;
    case DType::kF16: return CUDA_R_16F;
    default: return CUDA_R_32F;
  }
}

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
