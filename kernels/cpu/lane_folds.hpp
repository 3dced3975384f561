#pragma once
// Many 16-lane sums at once, each summed as the CPU kernels' fixed tree (lane u += lane u + w
// for w = 8, 4, 2, 1; the reference dot's order). The shuffles pair the same lanes as the
// scalar tree, so every sum is the same additions of the same values: the same bits, in a few
// vector instructions instead of one store-and-add chain per sum. AVX-512 (sixteen sums of
// sixteen lanes) and AVX2 (sums whose first step, lo + hi, is done: eight lanes each); callers
// check the CPU first.
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

// AVX2: eight-lane vectors, each what is left of a sum after its first step (lanes u and u + 8).
// [a.lo4 + a.hi4 | b.lo4 + b.hi4]
__attribute__((target("avx2,fma"), always_inline)) inline __m256 fold4_avx2(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_permute2f128_ps(a, b, 0x20), _mm256_permute2f128_ps(a, b, 0x31));
}
// Per 128-bit half: a = X4, b = Y4 -> [X2 | Y2].
__attribute__((target("avx2,fma"), always_inline)) inline __m256 fold2_avx2(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x44), _mm256_shuffle_ps(a, b, 0xEE));
}
// Per half: a = [X2 | Y2], b = [Z2 | V2] -> [X1 Y1 Z1 V1].
__attribute__((target("avx2,fma"), always_inline)) inline __m256 fold1_avx2(__m256 a, __m256 b) {
  return _mm256_add_ps(_mm256_shuffle_ps(a, b, 0x88), _mm256_shuffle_ps(a, b, 0xDD));
}

/// The rest of the tree for eight sums v[0..7]: lane 4 * h + m of the result is v[2 * m + h]'s.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 sum8_avx2(const __m256 (&v)[8]) {
  const __m256 a0 = fold4_avx2(v[0], v[1]), a1 = fold4_avx2(v[2], v[3]), a2 = fold4_avx2(v[4], v[5]), a3 = fold4_avx2(v[6], v[7]);
  return fold1_avx2(fold2_avx2(a0, a1), fold2_avx2(a2, a3));
}

/// sum8_avx2 with the sums in order: lane i is v[i]'s.
__attribute__((target("avx2,fma"), always_inline)) inline __m256 sum8_in_order_avx2(const __m256 (&v)[8]) {
  return _mm256_permutevar8x32_ps(sum8_avx2(v), _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
}

/// The rest of the tree for four sums v[0..3]; v[i]'s sum is in lane kSum4Lane[i].
constexpr int kSum4Lane[4] = {0, 4, 1, 5};
__attribute__((target("avx2,fma"), always_inline)) inline __m256 sum4_avx2(const __m256 (&v)[4]) {
  return fold1_avx2(fold2_avx2(fold4_avx2(v[0], v[1]), fold4_avx2(v[2], v[3])), _mm256_setzero_ps());
}

}  // namespace aerie::kernels::cpu::lane_folds
#endif
