#include "kernels/cpu/small_batch_gemm.hpp"

#include <algorithm>
#include <cstdlib>

#include "kernels/cpu/parallel_for.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AERIE_HAVE_AVX512_PATH 1
#endif

namespace aerie::kernels::cpu {

#if AERIE_HAVE_AVX512_PATH

namespace {

constexpr int kWeightRows = 4;           // weight rows per tile: 4 x M accumulators in registers
constexpr int64_t kPrefetchFloats = 256;  // 1 KB ahead in each weight row (measured best of 64-1024)

// M rows of x against `rows` (<= 4) consecutive weight rows; y row i, column r at
// y[i * ldy + r]. One 16-wide accumulator per (x row, weight row); the k tail is masked.
template <int M>
__attribute__((target("avx512f"))) void tile(const float* x, int64_t k, const float* w, int rows, float* y, int64_t ldy) {
  __m512 acc[M][kWeightRows];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_setzero_ps();
  const float* wr[kWeightRows];
  for (int r = 0; r < kWeightRows; ++r) wr[r] = w + (r < rows ? r : 0) * k;  // missing rows repeat row 0, unused
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    __m512 wv[kWeightRows];
    for (int r = 0; r < kWeightRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[r] + c + kPrefetchFloats), _MM_HINT_T0);
      wv[r] = _mm512_loadu_ps(wr[r] + c);
    }
    for (int i = 0; i < M; ++i) {
      const __m512 xv = _mm512_loadu_ps(x + i * k + c);
      for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  if (c < k) {
    const auto mask = static_cast<__mmask16>((1u << (k - c)) - 1);
    __m512 wv[kWeightRows];
    for (int r = 0; r < kWeightRows; ++r) wv[r] = _mm512_maskz_loadu_ps(mask, wr[r] + c);
    for (int i = 0; i < M; ++i) {
      const __m512 xv = _mm512_maskz_loadu_ps(mask, x + i * k + c);
      for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
    }
  }
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < rows; ++r) {
      // The sixteen lanes summed as a fixed tree (the same order as the reference's dot).
      alignas(64) float lane[16];
      _mm512_store_ps(lane, acc[i][r]);
      for (int width = 8; width >= 1; width /= 2)
        for (int u = 0; u < width; ++u) lane[u] += lane[u + width];
      y[i * ldy + r] = lane[0];
    }
}

void tile_rows(int64_t m, const float* x, int64_t k, const float* w, int rows, float* y, int64_t ldy) {
  switch (m) {
    case 1: return tile<1>(x, k, w, rows, y, ldy);
    case 2: return tile<2>(x, k, w, rows, y, ldy);
    case 3: return tile<3>(x, k, w, rows, y, ldy);
    default: return tile<4>(x, k, w, rows, y, ldy);
  }
}

}  // namespace

bool small_batch_gemm_available() {
  static const bool avx512 = __builtin_cpu_supports("avx512f");
  return avx512;
}

void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y) {
  const int64_t tiles = (n + kWeightRows - 1) / kWeightRows;
  parallel_for(tiles, m * k * kWeightRows, [&](int64_t t) {
    const int64_t j = t * kWeightRows;
    const int rows = static_cast<int>(std::min<int64_t>(kWeightRows, n - j));
    // x rows in groups of up to four; the weight tile stays in L1 between groups.
    for (int64_t i = 0; i < m; i += 4) tile_rows(std::min<int64_t>(4, m - i), x + i * k, k, w + j * k, rows, y + i * n + j, n);
  });
}

#else

bool small_batch_gemm_available() { return false; }

void small_batch_gemm(int64_t, int64_t, int64_t, const float*, const float*, float*) {
  // Callers check small_batch_gemm_available() first; reaching this is a programming error.
  std::abort();
}

#endif

}  // namespace aerie::kernels::cpu
