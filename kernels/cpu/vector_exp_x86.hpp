#pragma once
// vector_exp (vector_exp.hpp) sixteen lanes at a time on AVX-512 and eight on AVX2 + FMA, with
// the multiply-adds the compiler fuses in vector_exp's scalar clones (read off the AVX-512
// clone): the same bits wherever e^x is a normal float. Returned as its two factors, e^r and
// 2^n, so a caller can fuse the last product as the scalar code would (silu_mul: 1 + 2^n e^r).
#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

#include "kernels/cpu/vector_exp.hpp"

namespace aerie::kernels::cpu {

struct ExpParts16 {
  __m512 er, scale;  // e^x = er * scale
};
struct ExpParts8 {
  __m256 er, scale;
};

__attribute__((target("avx512f"))) inline ExpParts16 exp_parts_avx512(__m512 x_in) {
  constexpr __mmask16 kAll = 0xFFFF;  // the masked forms: GCC 12's unmasked ones warn about their undefined source
  const __m512 one = _mm512_set1_ps(1.0f), half = _mm512_set1_ps(0.5f);
  const __m512 x = _mm512_maskz_min_ps(kAll, _mm512_maskz_max_ps(kAll, x_in, _mm512_set1_ps(exp_poly::kMin)), _mm512_set1_ps(exp_poly::kMax));
  const __m512 n = _mm512_maskz_roundscale_ps(kAll, _mm512_fmadd_ps(x, _mm512_set1_ps(exp_poly::kLog2e), half),
                                              _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_poly::kLn2Hi), x);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(exp_poly::kLn2Lo), r);
  __m512 p = _mm512_fmadd_ps(_mm512_set1_ps(exp_poly::kP0), r, _mm512_set1_ps(exp_poly::kP1));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_poly::kP2));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_poly::kP3));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_poly::kP4));
  p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(exp_poly::kP5));
  const __m512 er = _mm512_add_ps(_mm512_fmadd_ps(_mm512_mul_ps(p, r), r, r), one);
  const __m512i biased = _mm512_add_epi32(_mm512_maskz_cvttps_epi32(kAll, n), _mm512_set1_epi32(127));
  return {er, _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, biased, 23))};  // 2^n
}

__attribute__((target("avx2,fma"))) inline ExpParts8 exp_parts_avx2(__m256 x_in) {
  const __m256 one = _mm256_set1_ps(1.0f), half = _mm256_set1_ps(0.5f);
  const __m256 x = _mm256_min_ps(_mm256_max_ps(x_in, _mm256_set1_ps(exp_poly::kMin)), _mm256_set1_ps(exp_poly::kMax));
  const __m256 n = _mm256_round_ps(_mm256_fmadd_ps(x, _mm256_set1_ps(exp_poly::kLog2e), half), _MM_FROUND_TO_NEG_INF | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_poly::kLn2Hi), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(exp_poly::kLn2Lo), r);
  __m256 p = _mm256_fmadd_ps(_mm256_set1_ps(exp_poly::kP0), r, _mm256_set1_ps(exp_poly::kP1));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_poly::kP2));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_poly::kP3));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_poly::kP4));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(exp_poly::kP5));
  const __m256 er = _mm256_add_ps(_mm256_fmadd_ps(_mm256_mul_ps(p, r), r, r), one);
  const __m256i biased = _mm256_add_epi32(_mm256_cvttps_epi32(n), _mm256_set1_epi32(127));
  return {er, _mm256_castsi256_ps(_mm256_slli_epi32(biased, 23))};  // 2^n
}

}  // namespace aerie::kernels::cpu
#endif
