#pragma once
// Sixteen 16-lane sums at once, each summed as the CPU kernels' fixed tree (lane u += lane
// u + w for w = 8, 4, 2, 1; the reference dot's order). The shuffles pair the same lanes as
// the scalar tree, so every sum is the same additions of the same values: the same bits, in
// ~45 vector instructions instead of sixteen store-and-add chains. x86-64 with AVX-512 only;
// callers check the CPU first.
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

namespace aerie::kernels::cpu::lane_folds {

// The all-lanes masked forms: GCC 12's unmasked shuffles warn about their undefined source.
constexpr __mmask16 kAllLanes = 0xFFFF;

// [a.lo8 + a.hi8 | b.lo8 + b.hi8]
__attribute__((target("avx512f"), always_inline)) inline __m512 fold8(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAllLanes, a, b, 0x44), _mm512_maskz_shuffle_f32x4(kAllLanes, a, b, 0xEE));
}
// a = [A8 | B8], b = [C8 | D8] -> [A4 | B4 | C4 | D4] (lanes u and u + 4 of each).
__attribute__((target("avx512f"), always_inline)) inline __m512 fold4(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_maskz_shuffle_f32x4(kAllLanes, a, b, 0x88), _mm512_maskz_shuffle_f32x4(kAllLanes, a, b, 0xDD));
}
// Per 128-bit quarter: a = X4, b = Y4 -> [X2 | Y2] (lanes u and u + 2).
__attribute__((target("avx512f"), always_inline)) inline __m512 fold2(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_maskz_shuffle_ps(kAllLanes, a, b, 0x44), _mm512_maskz_shuffle_ps(kAllLanes, a, b, 0xEE));
}
// Per quarter: a = [X2 | Y2], b = [Z2 | V2] -> [X1 Y1 Z1 V1] (lanes 0 and 1).
__attribute__((target("avx512f"), always_inline)) inline __m512 fold1(__m512 a, __m512 b) {
  return _mm512_add_ps(_mm512_maskz_shuffle_ps(kAllLanes, a, b, 0x88), _mm512_maskz_shuffle_ps(kAllLanes, a, b, 0xDD));
}

/// The tree sums of v[0..15] (each 16 lanes): lane 4 * r + m of the result is v[4 * m + r]'s.
__attribute__((target("avx512f"), always_inline)) inline __m512 sum16(const __m512 (&v)[16]) {
  __m512 q[4];
  for (int s = 0; s < 4; ++s) q[s] = fold4(fold8(v[4 * s], v[4 * s + 1]), fold8(v[4 * s + 2], v[4 * s + 3]));
  return fold1(fold2(q[0], q[1]), fold2(q[2], q[3]));
}

/// sum16 with the sums in order: lane i is v[i]'s.
__attribute__((target("avx512f"), always_inline)) inline __m512 sum16_in_order(const __m512 (&v)[16]) {
  const __m512i order = _mm512_setr_epi32(0, 4, 8, 12, 1, 5, 9, 13, 2, 6, 10, 14, 3, 7, 11, 15);
  return _mm512_maskz_permutexvar_ps(kAllLanes, order, sum16(v));
}

}  // namespace aerie::kernels::cpu::lane_folds
#endif
