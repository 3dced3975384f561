#include <cmath>

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#endif

#include "kernels/backends.hpp"
#include "kernels/cpu/cpu_clones.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/parallel_for.hpp"
#include "kernels/cpu/vector_exp.hpp"
#include "kernels/cpu/vector_exp_x86.hpp"

namespace aerie::kernels::cpu {

namespace {
// One f32 row: gate_up holds (gate, up) pairs, out gets silu(gate) * up. The compiler keeps
// this loop scalar (the clamps become branches), with the multiply-adds fused as below.
AERIE_CPU_CLONES void silu_mul_row_loop(const float* gate_up, float* out, int64_t inter) {
  for (int64_t i = 0; i < inter; ++i) {
    const float g = gate_up[2 * i], u = gate_up[2 * i + 1];
    out[i] = g / (1.0f + vector_exp(-g)) * u;
  }
}

#if defined(__x86_64__) && defined(__GNUC__)
// Sixteen at a time on AVX-512 (eight on AVX2, below): vector_exp's steps with the
// multiply-adds the compiler fuses in the loop above (vector_exp_x86.hpp), so the same bits
// wherever e^-g is a normal float (|g| < 87.3; past that the loop's branches take constants the
// compiler folded, which may differ in the last place). The scalar loop cost ~60
// cycles an element: ~1.5% of a SmolLM2 decode step at one row, 4.5% at four.
__attribute__((target("avx512f"))) void silu_mul_row_avx512(const float* gate_up, float* out, int64_t inter) {
  const __m512i gates = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
  const __m512i ups = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= inter; i += 16) {
    const __m512 lo = _mm512_loadu_ps(gate_up + 2 * i), hi = _mm512_loadu_ps(gate_up + 2 * i + 16);
    const __m512 g = _mm512_permutex2var_ps(lo, gates, hi), u = _mm512_permutex2var_ps(lo, ups, hi);
    const ExpParts16 e = exp_parts_avx512(_mm512_sub_ps(_mm512_setzero_ps(), g));  // e^-g
    _mm512_storeu_ps(out + i, _mm512_mul_ps(_mm512_div_ps(g, _mm512_fmadd_ps(e.scale, e.er, one)), u));
  }
  if (i < inter) silu_mul_row_loop(gate_up + 2 * i, out + i, inter - i);
}

// AVX2 + FMA: the same steps eight at a time.
__attribute__((target("avx2,fma"))) void silu_mul_row_avx2(const float* gate_up, float* out, int64_t inter) {
  const __m256 one = _mm256_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 8 <= inter; i += 8) {
    const __m256 lo = _mm256_loadu_ps(gate_up + 2 * i), hi = _mm256_loadu_ps(gate_up + 2 * i + 8);
    // shuffle_ps picks within 128-bit halves (g0 g1 g4 g5 | g2 g3 g6 g7): put the quarters in order.
    const __m256 g = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0x88)), 0xD8));
    const __m256 u = _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(_mm256_shuffle_ps(lo, hi, 0xDD)), 0xD8));
    const ExpParts8 e = exp_parts_avx2(_mm256_sub_ps(_mm256_setzero_ps(), g));  // e^-g
    _mm256_storeu_ps(out + i, _mm256_mul_ps(_mm256_div_ps(g, _mm256_fmadd_ps(e.scale, e.er, one)), u));
  }
  if (i < inter) silu_mul_row_loop(gate_up + 2 * i, out + i, inter - i);
}

void silu_mul_row_f32(const float* gate_up, float* out, int64_t inter) {
  const CpuIsa isa = cpu_isa();
  if (isa == CpuIsa::kAvx512) return silu_mul_row_avx512(gate_up, out, inter);
  if (isa == CpuIsa::kAvx2) return silu_mul_row_avx2(gate_up, out, inter);
  silu_mul_row_loop(gate_up, out, inter);
}
#else
void silu_mul_row_f32(const float* gate_up, float* out, int64_t inter) { silu_mul_row_loop(gate_up, out, inter); }
#endif
}  // namespace

Status silu_mul(const SiluMulParams& p) {
  const int64_t rows = p.out.dim(0), inter = p.out.dim(1);
  const bool f32 = p.gate_up.dtype == DType::kF32 && p.out.dtype == DType::kF32;
  parallel_for(rows, inter * 16, [&](int64_t r) {  // rows are independent; exp is the cost
    if (f32) {
      silu_mul_row_f32(p.gate_up.ptr<float>() + r * 2 * inter, p.out.ptr<float>() + r * inter, inter);
      return;
    }
    for (int64_t i = 0; i < inter; ++i) {
      const float g = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + 2 * i);
      const float u = load_as_float(p.gate_up.data, p.gate_up.dtype, r * 2 * inter + 2 * i + 1);
      store_from_float(p.out.data, p.out.dtype, r * inter + i, g / (1.0f + std::exp(-g)) * u);
    }
  });
  return Status::ok();
}

Status gate_up_silu(const GateUpSiluParams& p) {
  Status s = matmul({.x = p.x, .w = p.w, .bias = p.bias, .w_fp8 = p.w_fp8, .w_scale = p.w_scale, .w_blocks = p.w_blocks, .y = p.gate_up});
  if (!s.is_ok()) return s;
  return silu_mul({.gate_up = p.gate_up, .out = p.out});
}

}  // namespace aerie::kernels::cpu
