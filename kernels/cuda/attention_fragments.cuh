#pragma once
// What the tensor-core attention kernels (ops_attention_decode.cu, ops_attention_prefill.cu)
// share: Q rows as mma A fragments, the online softmax of the two rows a lane holds in an
// m16n8 accumulator (rows g and g + 8, kernels/cuda/mma.cuh), and P re-packed as A fragments.
// CUDA-only header.
#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/mma.cuh"

namespace aerie::kernels::cuda {

// Rows lo and hi of a 16-row A operand over kSteps k-steps of 16, each row read from global
// memory at this lane's columns (pointers already offset by 2 (lane % 4)); missing rows are zeros.
// Q is the previous kernel's output: read after pdl_wait(), coherently (common.cuh).
template <class T, int kSteps>
__device__ __forceinline__ void load_a_rows(uint32_t (&a)[kSteps][4], const T* lo, const T* hi, bool lo_ok, bool hi_ok) {
  auto pair = [](const T* p) { return load_from_previous_kernel(reinterpret_cast<const unsigned int*>(p)); };
#pragma unroll
  for (int kk = 0; kk < kSteps; ++kk) {
    a[kk][0] = lo_ok ? pair(lo + kk * 16) : 0u;
    a[kk][1] = hi_ok ? pair(hi + kk * 16) : 0u;
    a[kk][2] = lo_ok ? pair(lo + kk * 16 + 8) : 0u;
    a[kk][3] = hi_ok ? pair(hi + kk * 16 + 8) : 0u;
  }
}

// 2^x in one MUFU.EX2 (ex2.approx.ftz: max relative error 2^-22, -inf gives +0); exp2f without
// --use_fast_math adds a denormal fix-up around it.
__device__ __forceinline__ float ex2_approx(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// The running max and sum of a lane's two rows; a row's columns lie on the four lanes of a
// quad, so the max is reduced over the quad at every tile and the sum (this lane's columns
// only) once at the end.
struct RowPairSoftmax {
  float m_lo = -INFINITY, m_hi = -INFINITY, l_lo = 0.0f, l_hi = 0.0f;

  // The rows' running max after this tile: the tile's max over the quad, and the max so far.
  template <int kTiles>
  __device__ __forceinline__ void new_max(const float (&s)[kTiles][4], float& mn_lo, float& mn_hi) const {
    float mx_lo = -INFINITY, mx_hi = -INFINITY;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      mx_lo = fmaxf(mx_lo, fmaxf(s[n][0], s[n][1]));
      mx_hi = fmaxf(mx_hi, fmaxf(s[n][2], s[n][3]));
    }
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 1));
    mx_lo = fmaxf(mx_lo, __shfl_xor_sync(0xffffffffu, mx_lo, 2));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 1));
    mx_hi = fmaxf(mx_hi, __shfl_xor_sync(0xffffffffu, mx_hi, 2));
    mn_lo = fmaxf(m_lo, mx_lo);
    mn_hi = fmaxf(m_hi, mx_hi);
  }

  // s: kTiles accumulators of scaled scores, -inf where unseen; they become probabilities
  // exp(s - max) in place. corr_*: what the output rows accumulated so far must be scaled by.
  template <int kTiles>
  __device__ __forceinline__ void step(float (&s)[kTiles][4], float& corr_lo, float& corr_hi) {
    float mn_lo, mn_hi;
    new_max(s, mn_lo, mn_hi);
    corr_lo = mn_lo == -INFINITY ? 1.0f : __expf(m_lo - mn_lo);
    corr_hi = mn_hi == -INFINITY ? 1.0f : __expf(m_hi - mn_hi);
    m_lo = mn_lo;
    m_hi = mn_hi;
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int n = 0; n < kTiles; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const bool hi = e >= 2;
        const float p = s[n][e] == -INFINITY ? 0.0f : __expf(s[n][e] - (hi ? mn_hi : mn_lo));
        s[n][e] = p;
        if (hi) sum_hi += p;
        else sum_lo += p;
      }
    l_lo = l_lo * corr_lo + sum_lo;
    l_hi = l_hi * corr_hi + sum_hi;
  }

  // The same on unscaled scores (-inf where unseen), FlashAttention-2's way: the running max is
  // kept unscaled and each probability is exp2(s * scale_log2 - max * scale_log2), one FFMA and
  // one MUFU.EX2 an element, where step() spends a multiply by the scale, a mask compare, a
  // subtract, __expf's multiply by log2(e) and a select. scale_log2 = softmax scale * log2(e) > 0,
  // so the max of the unscaled scores is the max of the scaled ones. A row with no key seen yet
  // (max -inf) subtracts 0, so its -inf scores give 0, not NaN.
  template <int kTiles>
  __device__ __forceinline__ void step_exp2(float (&s)[kTiles][4], float scale_log2, float& corr_lo, float& corr_hi) {
    float mn_lo, mn_hi;
    new_max(s, mn_lo, mn_hi);
    corr_lo = mn_lo == -INFINITY ? 1.0f : ex2_approx((m_lo - mn_lo) * scale_log2);
    corr_hi = mn_hi == -INFINITY ? 1.0f : ex2_approx((m_hi - mn_hi) * scale_log2);
    m_lo = mn_lo;
    m_hi = mn_hi;
    const float off_lo = mn_lo == -INFINITY ? 0.0f : mn_lo * scale_log2, off_hi = mn_hi == -INFINITY ? 0.0f : mn_hi * scale_log2;
    float sum_lo = 0.0f, sum_hi = 0.0f;
#pragma unroll
    for (int n = 0; n < kTiles; ++n) {
      s[n][0] = ex2_approx(fmaf(s[n][0], scale_log2, -off_lo));
      s[n][1] = ex2_approx(fmaf(s[n][1], scale_log2, -off_lo));
      s[n][2] = ex2_approx(fmaf(s[n][2], scale_log2, -off_hi));
      s[n][3] = ex2_approx(fmaf(s[n][3], scale_log2, -off_hi));
      sum_lo += s[n][0] + s[n][1];
      sum_hi += s[n][2] + s[n][3];
    }
    l_lo = l_lo * corr_lo + sum_lo;
    l_hi = l_hi * corr_hi + sum_hi;
  }

  // The rows' whole sums (every lane of the quad).
  __device__ __forceinline__ void finish() {
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 1);
    l_lo += __shfl_xor_sync(0xffffffffu, l_lo, 2);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 1);
    l_hi += __shfl_xor_sync(0xffffffffu, l_hi, 2);
  }
};

// Scales accumulators row-wise: elements 0-1 are row lo's, 2-3 row hi's.
template <int kTiles>
__device__ __forceinline__ void scale_rows(float (&o)[kTiles][4], float lo, float hi) {
#pragma unroll
  for (int n = 0; n < kTiles; ++n) {
    o[n][0] *= lo;
    o[n][1] *= lo;
    o[n][2] *= hi;
    o[n][3] *= hi;
  }
}

// P over keys 16 ks .. 16 ks + 15 (accumulators 2 ks and 2 ks + 1) as the A fragment of P V:
// the accumulator layout of S is the A layout of P.
template <class T, int kTiles>
__device__ __forceinline__ void p_fragment(const float (&s)[kTiles][4], int ks, uint32_t (&pa)[4]) {
  pa[0] = pack2<T>(s[2 * ks][0], s[2 * ks][1]);
  pa[1] = pack2<T>(s[2 * ks][2], s[2 * ks][3]);
  pa[2] = pack2<T>(s[2 * ks + 1][0], s[2 * ks + 1][1]);
  pa[3] = pack2<T>(s[2 * ks + 1][2], s[2 * ks + 1][3]);
}

}  // namespace aerie::kernels::cuda
