#pragma once
// The 16-byte vectorized RMSNorm of one row (2-byte types), shared by the rms_norm kernels
// (ops_elementwise.cu) and the GEMVs that normalise their input themselves (ops_matmul.cu,
// kernels/rms_norm.hpp's InputNorm): the same inverse from a sum of squares and the same
// rounding of each normalised element. CUDA-only header.
#include <cstdint>

#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

// Each of the norm kernel's threads keeps its (<= kNormMaxChunks) chunks of the row in
// registers between the two passes, so the row is read once.
constexpr int kNormThreads = 512;
constexpr int kNormMaxChunks = 4;
constexpr int kNormWarps = kNormThreads / 32;

// One thread's running sum of squares over a 16-byte chunk of T, in element order.
template <class T>
__device__ __forceinline__ float norm_sum_squares(const uint4& chunk, float ss) {
  const T* e = reinterpret_cast<const T*>(&chunk);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const float v = to_float(e[i]);
    ss = __fmaf_rn(v, v, ss);
  }
  return ss;
}

__device__ __forceinline__ float norm_inverse(float ss, int64_t hidden, float eps) {
  return rsqrtf(ss / static_cast<float>(hidden) + eps);
}

// weight * (x * inv) for the 8 elements of a chunk, rounded to T (Hugging Face's order).
template <class T, class TW>
__device__ __forceinline__ uint4 norm_scale_chunk(const uint4& x, const uint4& w, float inv) {
  uint4 out;
  T* oe = reinterpret_cast<T*>(&out);
  const T* xe = reinterpret_cast<const T*>(&x);
  const TW* we = reinterpret_cast<const TW*>(&w);
#pragma unroll
  for (int i = 0; i < 8; ++i) oe[i] = from_float<T>(to_float(we[i]) * (to_float(xe[i]) * inv));
  return out;
}

// The norm weight's chunks of this thread: they never depend on the previous kernel, so they
// are fetched while that kernel ends.
template <class TW>
__device__ __forceinline__ void load_norm_weight(const TW* w, int64_t chunks, uint4 (&wv)[kNormMaxChunks]) {
#pragma unroll
  for (int u = 0; u < kNormMaxChunks; ++u) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(u) * kNormThreads;
    wv[u] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(w) + c) : make_uint4(0, 0, 0, 0);
  }
}

// One row of the norm kernel (kNormThreads threads): x_row (+ res_row, updated in place)
// normalised into y_row; copy_row (optional) gets x_row as read.
template <class T, class TW>
__device__ __forceinline__ void norm_row_vec(const T* x_row, const uint4 (&wv)[kNormMaxChunks], T* res_row, T* y_row, T* copy_row,
                                             int64_t hidden, float eps, float* scratch) {
  const int64_t chunks = hidden / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x_row);
  uint4* rr = reinterpret_cast<uint4*>(res_row);
  uint4 h[kNormMaxChunks];  // the row as the next layer reads it
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kNormMaxChunks; ++u) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(u) * kNormThreads;
    if (c >= chunks) break;
    const uint4 xv = xr[c];
    if (copy_row) reinterpret_cast<uint4*>(copy_row)[c] = xv;
    h[u] = xv;
    if (rr) {
      uint4 rv = rr[c];
      T* re = reinterpret_cast<T*>(&rv);
      const T* xe = reinterpret_cast<const T*>(&xv);
#pragma unroll
      for (int i = 0; i < 8; ++i) re[i] = from_float<T>(to_float(xe[i]) + to_float(re[i]));
      rr[c] = rv;
      h[u] = rv;
    }
    ss = norm_sum_squares<T>(h[u], ss);
  }
  ss = block_sum(ss, scratch);
  const float inv = norm_inverse(ss, hidden, eps);
  uint4* yr = reinterpret_cast<uint4*>(y_row);
#pragma unroll
  for (int u = 0; u < kNormMaxChunks; ++u) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(u) * kNormThreads;
    if (c >= chunks) break;
    yr[c] = norm_scale_chunk<T, TW>(h[u], wv[u], inv);
  }
}

// Whether norm_row_vec takes a row of `hidden` elements.
inline bool norm_row_vec_fits(int64_t hidden) { return hidden % 8 == 0 && hidden / 8 <= static_cast<int64_t>(kNormThreads) * kNormMaxChunks; }

}  // namespace aerie::kernels::cuda
