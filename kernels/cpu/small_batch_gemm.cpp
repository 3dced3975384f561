#include "kernels/cpu/small_batch_gemm.hpp"

#include <algorithm>
#include <cstdlib>

#include "kernels/cpu/lane_folds.hpp"
#include "kernels/cpu/parallel_for.hpp"

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>
#define AERIE_HAVE_SIMD_PATH 1
#endif

namespace aerie::kernels::cpu {

#if AERIE_HAVE_SIMD_PATH

namespace {

constexpr int kWeightRows = 4;            // weight rows per tile: 4 x M accumulators in registers
constexpr int64_t kPrefetchBytes = 1024;  // ahead in each weight row (measured best of 256 B - 4 KB for f32)

// Weights are f32 or bf16 (uint16_t: the top half of an f32). A bf16 weight widens to f32
// exactly, so both give the same products and, summed in the same order, the same bits;
// bf16 halves the bytes a product streams (the draft heads ship in bf16).
template <class W>
constexpr int64_t prefetch_ahead = kPrefetchBytes / static_cast<int64_t>(sizeof(W));

__attribute__((target("avx512f"))) inline __m512 load16(const float* p) { return _mm512_loadu_ps(p); }
__attribute__((target("avx512f"))) inline __m512 load16(const uint16_t* p) {
  // The all-lanes masked forms: GCC 12's unmasked ones warn about their undefined source.
  constexpr __mmask16 kAll = 0xFFFF;
  const __m512i wide = _mm512_maskz_cvtepu16_epi32(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(p)));
  return _mm512_castsi512_ps(_mm512_maskz_slli_epi32(kAll, wide, 16));
}
__attribute__((target("avx2,fma"))) inline __m256 load8(const float* p) { return _mm256_loadu_ps(p); }
__attribute__((target("avx2,fma"))) inline __m256 load8(const uint16_t* p) {
  const __m256i wide = _mm256_cvtepu16_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(p)));
  return _mm256_castsi256_ps(_mm256_slli_epi32(wide, 16));
}

// The k tail (< 16 columns) copied into zero-padded blocks, so the tiles read it with full
// loads; the zeros add nothing to the lane sums (as masked loads would not).
template <int M, int R, class W>
struct TailBlocks {
  alignas(64) W w[R][16] = {};
  alignas(64) float x[M][16] = {};
  TailBlocks(const float* xs, int64_t k, const W* const* wr, int64_t c) {
    for (int r = 0; r < R; ++r)
      for (int64_t l = 0; c + l < k; ++l) w[r][l] = wr[r][c + l];
    for (int i = 0; i < M; ++i)
      for (int64_t l = 0; c + l < k; ++l) x[i][l] = xs[i * k + c + l];
  }
};

// Sixteen columns of M x rows (row stride ldx) against kWeightRows weight rows.
template <int M, class W>
__attribute__((target("avx512f"), always_inline)) inline void step16(__m512 (&acc)[M][kWeightRows], const W* const* wp, const float* xp,
                                                                     int64_t ldx) {
  __m512 wv[kWeightRows];
  for (int r = 0; r < kWeightRows; ++r) wv[r] = load16(wp[r]);
  for (int i = 0; i < M; ++i) {
    const __m512 xv = _mm512_loadu_ps(xp + i * ldx);
    for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
  }
}

// y[i * ldy + r] = the lane sum of acc[i][r] (the tree every CPU product sums by), for i < M
// (<= 4) and r < rows: sixteen trees at once (lane_folds.hpp), same bits as one at a time, at
// a fraction of their cost (the scalar trees were ~20% of a 576-column tile at 4 x rows).
template <int M>
__attribute__((target("avx512f"), always_inline)) inline void sum_lanes(const __m512 (&acc)[M][kWeightRows], int rows, float* y,
                                                                        int64_t ldy) {
  static_assert(kWeightRows == 4 && M <= 4, "sixteen accumulators at most");
  __m512 v[16];
  for (int i = 0; i < 4; ++i)
    for (int r = 0; r < kWeightRows; ++r) v[4 * i + r] = i < M ? acc[i][r] : _mm512_setzero_ps();
  // Lane 4 * r + i holds v[4 * i + r]: x row i against weight row r.
  alignas(64) float out[16];
  _mm512_store_ps(out, lane_folds::sum16(v));
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < rows; ++r) y[i * ldy + r] = out[r * 4 + i];
}

// M rows of x against `rows` (<= 4) consecutive weight rows; y row i, column r at
// y[i * ldy + r]. One 16-wide accumulator per (x row, weight row).
template <int M, class W>
__attribute__((target("avx512f"))) void tile(const float* x, int64_t k, const W* w, int rows, float* y, int64_t ldy) {
  __m512 acc[M][kWeightRows];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_setzero_ps();
  const W* wr[kWeightRows];
  for (int r = 0; r < kWeightRows; ++r) wr[r] = w + (r < rows ? r : 0) * k;  // missing rows repeat row 0, unused
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    const W* wp[kWeightRows];
    // Each row's prefetch runs on past its end into the same row of the next tile (the one
    // this thread reads next), not into the tile's next row, which is already being read:
    // with rows of 576 columns (SmolLM2's hidden size) half of a row's prefetches fell there,
    // and every tile began on cold lines (with the lane folds below: 4 x rows 21% faster, 1 x row 17%).
    const int64_t ahead = c + prefetch_ahead<W>, past_row = ahead >= k ? (kWeightRows - 1) * k : 0;
    for (int r = 0; r < kWeightRows; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[r] + ahead + past_row), _MM_HINT_T0);
      wp[r] = wr[r] + c;
    }
    step16<M>(acc, wp, x + c, k);
  }
  if (c < k) {
    const TailBlocks<M, kWeightRows, W> t(x, k, wr, c);
    const W* wp[kWeightRows];
    for (int r = 0; r < kWeightRows; ++r) wp[r] = t.w[r];
    step16<M>(acc, wp, &t.x[0][0], 16);
  }
  sum_lanes<M>(acc, rows, y, ldy);
}

// The AVX2 + FMA tile (CPUs without AVX-512, e.g. AMD Zen 2/3): each output keeps the
// sixteen lane sums of the AVX-512 tile as two 8-wide halves, fed the same products in the
// same order and summed by the same tree, so both ISAs give the same bits. Sixteen ymm
// registers hold up to 4 x rows x 2 halves accumulators for one weight row: measured on a
// 2-core EPYC (SmolLM2 decode), 1 weight row x 4 x rows beat 2 x 2 and 4 x 1 (batch 8:
// 70 ms against 98 and 93; oneDNN 84), and 8 x rows spill (74 ms). Two weight rows for the
// 2-3 x rows of a chain-2 verify (12 accumulators, each x load feeding two FMAs) were slower
// too: SmolLM2 chain 2 at 31.6-36.3 tok/s against 36.4-40.9, interleaved (2026-12-02).
constexpr int kAvx2WeightRows = 1;

// Sixteen columns (two 8-wide halves) of M x rows against R weight rows.
template <int M, int R, class W>
__attribute__((target("avx2,fma"), always_inline)) inline void step16_avx2(__m256 (&lo)[M][R], __m256 (&hi)[M][R], const W* const* wp,
                                                                           const float* xp, int64_t ldx) {
  __m256 wl[R], wh[R];
  for (int r = 0; r < R; ++r) {
    wl[r] = load8(wp[r]);
    wh[r] = load8(wp[r] + 8);
  }
  for (int i = 0; i < M; ++i) {
    const __m256 xl = _mm256_loadu_ps(xp + i * ldx), xh = _mm256_loadu_ps(xp + i * ldx + 8);
    for (int r = 0; r < R; ++r) {
      lo[i][r] = _mm256_fmadd_ps(xl, wl[r], lo[i][r]);
      hi[i][r] = _mm256_fmadd_ps(xh, wh[r], hi[i][r]);
    }
  }
}

template <int M, int R, class W>
__attribute__((target("avx2,fma"))) void tile_avx2(const float* x, int64_t k, const W* w, int rows, float* y, int64_t ldy) {
  __m256 lo[M][R], hi[M][R];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < R; ++r) lo[i][r] = hi[i][r] = _mm256_setzero_ps();
  const W* wr[R];
  for (int r = 0; r < R; ++r) wr[r] = w + (r < rows ? r : 0) * k;
  int64_t c = 0;
  for (; c + 16 <= k; c += 16) {
    const W* wp[R];
    for (int r = 0; r < R; ++r) {
      _mm_prefetch(reinterpret_cast<const char*>(wr[r] + c + prefetch_ahead<W>), _MM_HINT_T0);
      wp[r] = wr[r] + c;
    }
    step16_avx2<M, R>(lo, hi, wp, x + c, k);
  }
  if (c < k) {
    const TailBlocks<M, R, W> t(x, k, wr, c);
    const W* wp[R];
    for (int r = 0; r < R; ++r) wp[r] = t.w[r];
    step16_avx2<M, R>(lo, hi, wp, &t.x[0][0], 16);
  }
  static_assert(R == 1 && M <= 4, "four accumulators at most, one weight row");
  // The tree's first step is lo + hi (lane u += lane u + 8); the rest for four x rows at once
  // (lane_folds.hpp): x row i's sum lands in lane kSum4Lane[i].
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = i < M ? _mm256_add_ps(lo[i][0], hi[i][0]) : _mm256_setzero_ps();
  alignas(32) float out[8];
  _mm256_store_ps(out, lane_folds::sum4_avx2(v));
  for (int i = 0; i < M; ++i)
    if (rows > 0) y[i * ldy] = out[lane_folds::kSum4Lane[i]];
}

// Runs `tile(x_rows, x, w_tile, rows, y)` over tiles of `weight_rows` weight rows and groups
// of up to `x_group` x rows (the weight tile stays in L1 between groups).
template <class W, class Tile>
void for_each_tile(int64_t m, int64_t n, int64_t k, const float* x, const W* w, float* y, int weight_rows, int64_t x_group, Tile tile) {
  const int64_t tiles = (n + weight_rows - 1) / weight_rows;
  parallel_for(tiles, m * k * weight_rows, [&](int64_t t) {
    const int64_t j = t * weight_rows;
    const int rows = static_cast<int>(std::min<int64_t>(weight_rows, n - j));
    for (int64_t i = 0; i < m; i += x_group) tile(std::min<int64_t>(x_group, m - i), x + i * k, w + j * k, rows, y + i * n + j);
  });
}

template <class W>
void run_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const W* w, float* y) {
  if (!small_batch_gemm_supports(isa)) std::abort();  // callers check it first
  if (isa == SmallBatchIsa::kAvx512) {
    for_each_tile(m, n, k, x, w, y, kWeightRows, 4, [&](int64_t rows_x, const float* xs, const W* ws, int rows, float* ys) {
      switch (rows_x) {
        case 1: return tile<1>(xs, k, ws, rows, ys, n);
        case 2: return tile<2>(xs, k, ws, rows, ys, n);
        case 3: return tile<3>(xs, k, ws, rows, ys, n);
        default: return tile<4>(xs, k, ws, rows, ys, n);
      }
    });
    return;
  }
  for_each_tile(m, n, k, x, w, y, kAvx2WeightRows, 4, [&](int64_t rows_x, const float* xs, const W* ws, int rows, float* ys) {
    switch (rows_x) {
      case 1: return tile_avx2<1, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
      case 2: return tile_avx2<2, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
      case 3: return tile_avx2<3, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
      default: return tile_avx2<4, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
    }
  });
}

}  // namespace

SmallBatchIsa small_batch_gemm_isa() { return cpu_isa(); }

bool small_batch_gemm_supports(SmallBatchIsa isa) { return isa != SmallBatchIsa::kNone && cpu_has(isa); }

void small_batch_gemm_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y) {
  run_on(isa, m, n, k, x, w, y);
}
void small_batch_gemm_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y) {
  run_on(isa, m, n, k, x, w_bf16, y);
}

#else

SmallBatchIsa small_batch_gemm_isa() { return SmallBatchIsa::kNone; }
bool small_batch_gemm_supports(SmallBatchIsa) { return false; }
void small_batch_gemm_on(SmallBatchIsa, int64_t, int64_t, int64_t, const float*, const float*, float*) {
  std::abort();  // callers check small_batch_gemm_supports() first
}
void small_batch_gemm_on(SmallBatchIsa, int64_t, int64_t, int64_t, const float*, const uint16_t*, float*) { std::abort(); }

#endif

bool small_batch_gemm_available() { return small_batch_gemm_isa() != SmallBatchIsa::kNone; }

void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y) {
  small_batch_gemm_on(small_batch_gemm_isa(), m, n, k, x, w, y);
}
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y) {
  small_batch_gemm_on(small_batch_gemm_isa(), m, n, k, x, w_bf16, y);
}

}  // namespace aerie::kernels::cpu
