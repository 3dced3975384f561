#include "kernels/cpu/small_batch_gemm.hpp"

#include <algorithm>
#include <cstdlib>
#include <vector>

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
// x rows an AVX-512 tile takes at most: 6 x 4 accumulators, 4 weight vectors and an x vector fill
// 29 of the 32 registers. A verify of 5-6 tokens is then one pass over the weights, not a pass of
// 4 rows and one of 1-2 (whose few FMAs a weight load left the tile load-bound).
constexpr int kMaxTileRows = 6;
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

// Sixteen columns of M x rows (row stride ldx) against kWeightRows weight rows already in
// registers: the one order of fused multiply-adds every weight format feeds.
template <int M>
__attribute__((target("avx512f"), always_inline)) inline void fma16(__m512 (&acc)[M][kWeightRows], const __m512 (&wv)[kWeightRows],
                                                                    const float* xp, int64_t ldx) {
  for (int i = 0; i < M; ++i) {
    const __m512 xv = _mm512_loadu_ps(xp + i * ldx);
    for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_fmadd_ps(xv, wv[r], acc[i][r]);
  }
}

// Sixteen columns of M x rows (row stride ldx) against kWeightRows weight rows.
template <int M, class W>
__attribute__((target("avx512f"), always_inline)) inline void step16(__m512 (&acc)[M][kWeightRows], const W* const* wp, const float* xp,
                                                                     int64_t ldx) {
  __m512 wv[kWeightRows];
  for (int r = 0; r < kWeightRows; ++r) wv[r] = load16(wp[r]);
  fma16<M>(acc, wv, xp, ldx);
}

// y[i * ldy + r] = the lane sum of acc[i][r] (the tree every CPU product sums by), for i < M
// (<= 6) and r < rows: sixteen trees at once (lane_folds.hpp), same bits as one at a time, at
// a fraction of their cost (the scalar trees were ~20% of a 576-column tile at 4 x rows).
template <int M>
__attribute__((target("avx512f"), always_inline)) inline void sum_lanes(const __m512 (&acc)[M][kWeightRows], int rows, float* y,
                                                                        int64_t ldy) {
  static_assert(kWeightRows == 4 && M <= kMaxTileRows, "four x rows a fold");
  for (int base = 0; base < M; base += 4) {
    __m512 v[16];
    for (int i = 0; i < 4; ++i)
      for (int r = 0; r < kWeightRows; ++r) v[4 * i + r] = base + i < M ? acc[base + i][r] : _mm512_setzero_ps();
    // Lane 4 * r + i holds v[4 * i + r]: x row base + i against weight row r.
    alignas(64) float out[16];
    _mm512_store_ps(out, lane_folds::sum16(v));
    for (int i = 0; i < 4 && base + i < M; ++i)
      for (int r = 0; r < rows; ++r) y[(base + i) * ldy + r] = out[r * 4 + i];
  }
}

// M (<= kMaxTileRows) rows of x against `rows` (<= 4) consecutive weight rows; y row i, column r at
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

// y[i * ldy] = x row i's sum for i < M (<= 4), of one weight row (rows > 0): the tree's first
// step is lo + hi (lane u += lane u + 8), the rest for four x rows at once (lane_folds.hpp): x row
// i's sum lands in lane kSum4Lane[i].
template <int M>
__attribute__((target("avx2,fma"), always_inline)) inline void sum_lanes_avx2(const __m256 (&lo)[M][1], const __m256 (&hi)[M][1], int rows,
                                                                             float* y, int64_t ldy) {
  __m256 v[4];
  for (int i = 0; i < 4; ++i) v[i] = i < M ? _mm256_add_ps(lo[i][0], hi[i][0]) : _mm256_setzero_ps();
  alignas(32) float out[8];
  _mm256_store_ps(out, lane_folds::sum4_avx2(v));
  for (int i = 0; i < M; ++i)
    if (rows > 0) y[i * ldy] = out[lane_folds::kSum4Lane[i]];
}

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
  sum_lanes_avx2<M>(lo, hi, rows, y, ldy);
}

// GGUF blocks (kernels/weight_blocks.hpp) decoded in registers: a block's 32 weights as two
// 16-wide halves (AVX-512) or four 8-wide quarters (AVX2), each lane exactly the float the
// loader's dequantize_blocks gives (q * d is exact, so Q4_1's fused q * d + m is its rounding
// too), fed to the same fused multiply-adds in the same column order as the f32 tiles: the
// same bits from 4.5-8.5 bits a weight.
__attribute__((target("f16c"), always_inline)) inline float f16_at(const unsigned char* p) {
  uint16_t h;
  __builtin_memcpy(&h, p, 2);
  return _cvtsh_ss(h);
}

// A block's 32 weights as two 16-wide halves, given its scale d (and Q4_1's minimum m) as floats.
// The 4-bit formats look their 16 possible values up: a table of fma(i, d, m) (Q4_1) or
// (i - 8) * d (Q4_0) for i = 0..15, each exactly the loader's float for quant i, indexed by the
// nibbles (vpermps reads only an index's low 4 bits, so the low nibble needs no mask): two
// permutes instead of two int-to-float conversions and two FMAs a block.
template <BlockFormat F>
__attribute__((target("avx512f"), always_inline)) inline void decode_block16(const unsigned char* p, float d, float m, __m512& lo, __m512& hi) {
  constexpr __mmask16 kAll = 0xFFFF;
  const __m512 dv = _mm512_set1_ps(d);
  if constexpr (F == BlockFormat::kQ8_0) {
    lo = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 2)))), dv);
    hi = _mm512_mul_ps(_mm512_maskz_cvtepi32_ps(kAll, _mm512_maskz_cvtepi8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + 18)))), dv);
  } else {
    constexpr int kQs = F == BlockFormat::kQ4_1 ? 4 : 2;
    const __m512 quants = _mm512_setr_ps(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15);
    const __m512 table = F == BlockFormat::kQ4_1 ? _mm512_fmadd_ps(quants, dv, _mm512_set1_ps(m))
                                                 : _mm512_mul_ps(_mm512_sub_ps(quants, _mm512_set1_ps(8.0f)), dv);
    const __m512i bytes = _mm512_maskz_cvtepu8_epi32(kAll, _mm_loadu_si128(reinterpret_cast<const __m128i*>(p + kQs)));
    lo = _mm512_maskz_permutexvar_ps(kAll, bytes, table);
    hi = _mm512_maskz_permutexvar_ps(kAll, _mm512_maskz_srli_epi32(kAll, bytes, 4), table);
  }
}

// The scale (and Q4_1's minimum) of a block as floats.
template <BlockFormat F>
__attribute__((target("f16c"), always_inline)) inline void block_scales(const unsigned char* p, float& d, float& m) {
  d = f16_at(p);
  m = F == BlockFormat::kQ4_1 ? f16_at(p + 2) : 0.0f;
}

// The scales (and Q4_1's minimums) of n <= 16 consecutive blocks as floats: one gather of each
// block's first four bytes (d, and m after it in Q4_1) and two vector conversions, where a block
// at a time cost a third of a one-row product.
template <BlockFormat F>
__attribute__((target("avx512f"), always_inline)) inline void gather_scales16(const unsigned char* p, int n, float* d, float* m) {
  constexpr int kBytes = static_cast<int>(block_bytes(F));
  const __mmask16 live = static_cast<__mmask16>((1u << n) - 1u);
  const __m512i at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(kBytes));
  // Q8_0 and Q4_0 blocks (34, 18 bytes) put a block's d 2 bytes before the next one's: each
  // 4-byte load is whole inside the row (the last block has at least 16 more bytes).
  const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), live, at, p, 1);
  constexpr __mmask16 kAll = 0xFFFF;  // the masked forms: GCC 12's unmasked ones warn (see load16)
  _mm512_store_ps(d, _mm512_maskz_cvtph_ps(kAll, _mm512_maskz_cvtepi32_epi16(kAll, words)));
  if constexpr (F == BlockFormat::kQ4_1)
    _mm512_store_ps(m, _mm512_maskz_cvtph_ps(kAll, _mm512_maskz_cvtepi32_epi16(kAll, _mm512_maskz_srli_epi32(kAll, words, 16))));
}

// tile() over block rows: k a multiple of 32, row r's bytes at w + r * row_bytes. The blocks'
// scales are converted a chunk of blocks at a time ahead of the products, off the FMA ports'
// critical path.
template <int M, BlockFormat F>
__attribute__((target("avx512f,f16c"))) void tile_blocks(const float* x, int64_t k, const unsigned char* w, int64_t row_bytes, int rows,
                                                         float* y, int64_t ldy) {
  constexpr int64_t kBytes = block_bytes(F);
  constexpr int64_t kChunk = 32;  // blocks whose scales are converted at once
  __m512 acc[M][kWeightRows];
  for (int i = 0; i < M; ++i)
    for (int r = 0; r < kWeightRows; ++r) acc[i][r] = _mm512_setzero_ps();
  const unsigned char* wr[kWeightRows];
  for (int r = 0; r < kWeightRows; ++r) wr[r] = w + (r < rows ? r : 0) * row_bytes;
  const int64_t blocks = k / kBlockElements;
  alignas(64) float ds[kWeightRows][kChunk], ms[kWeightRows][kChunk];
  for (int64_t b0 = 0; b0 < blocks; b0 += kChunk) {
    const int64_t nb = std::min(kChunk, blocks - b0);
    for (int r = 0; r < kWeightRows; ++r)
      for (int64_t b = 0; b < nb; b += 16) gather_scales16<F>(wr[r] + (b0 + b) * kBytes, static_cast<int>(std::min<int64_t>(16, nb - b)), ds[r] + b, ms[r] + b);
    for (int64_t b = 0; b < nb; ++b) {
      const int64_t c = (b0 + b) * kBlockElements, off = (b0 + b) * kBytes;
      // As tile(): each row's prefetch runs on past its end into the same row of the next tile.
      const int64_t ahead = off + kPrefetchBytes, past_row = ahead >= row_bytes ? (kWeightRows - 1) * row_bytes : 0;
      if constexpr (M <= 4) {
        __m512 lo[kWeightRows], hi[kWeightRows];
        for (int r = 0; r < kWeightRows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(wr[r] + ahead + past_row), _MM_HINT_T0);
          decode_block16<F>(wr[r] + off, ds[r][b], F == BlockFormat::kQ4_1 ? ms[r][b] : 0.0f, lo[r], hi[r]);
        }
        fma16<M>(acc, lo, x + c, k);
        fma16<M>(acc, hi, x + c + 16, k);
      } else {
        // 5 x rows: 4 x M accumulators leave registers for one weight row's block at a time,
        // each used as soon as it is decoded (every accumulator still takes columns c..c+15,
        // then c+16..c+31).
        for (int r = 0; r < kWeightRows; ++r) {
          _mm_prefetch(reinterpret_cast<const char*>(wr[r] + ahead + past_row), _MM_HINT_T0);
          __m512 lo, hi;
          decode_block16<F>(wr[r] + off, ds[r][b], F == BlockFormat::kQ4_1 ? ms[r][b] : 0.0f, lo, hi);
          for (int i = 0; i < M; ++i) acc[i][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + c), lo, acc[i][r]);
          for (int i = 0; i < M; ++i) acc[i][r] = _mm512_fmadd_ps(_mm512_loadu_ps(x + i * k + c + 16), hi, acc[i][r]);
        }
      }
    }
  }
  sum_lanes<M>(acc, rows, y, ldy);
}

// The AVX2 quarters: 8 weights of a block at column offset q * 8 (q = 0..3).
template <BlockFormat F>
__attribute__((target("avx2,fma,f16c"), always_inline)) inline void decode_block8(const unsigned char* p, __m256 (&out)[4]) {
  float ds, ms;
  block_scales<F>(p, ds, ms);
  const __m256 d = _mm256_set1_ps(ds), m = _mm256_set1_ps(ms);
  if constexpr (F == BlockFormat::kQ8_0) {
    for (int q = 0; q < 4; ++q)
      out[q] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + 2 + 8 * q)))), d);
  } else {
    constexpr int kQs = F == BlockFormat::kQ4_1 ? 4 : 2;
    for (int q = 0; q < 4; ++q) {
      // Quarters 0-1: low nibbles of bytes 0-7, 8-15; quarters 2-3: their high nibbles.
      const __m256i bytes = _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(p + kQs + 8 * (q & 1))));
      __m256i v = q < 2 ? _mm256_and_si256(bytes, _mm256_set1_epi32(0x0F)) : _mm256_srli_epi32(bytes, 4);
      if constexpr (F == BlockFormat::kQ4_0) {
        out[q] = _mm256_mul_ps(_mm256_cvtepi32_ps(_mm256_sub_epi32(v, _mm256_set1_epi32(8))), d);
      } else {
        out[q] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(v), d, m);
      }
    }
  }
}

// tile_avx2() over block rows (one weight row).
template <int M, BlockFormat F>
__attribute__((target("avx2,fma,f16c"))) void tile_blocks_avx2(const float* x, int64_t k, const unsigned char* w, int64_t /*row_bytes*/,
                                                               int rows, float* y, int64_t ldy) {
  constexpr int64_t kBytes = block_bytes(F);
  __m256 lo[M][1], hi[M][1];
  for (int i = 0; i < M; ++i) lo[i][0] = hi[i][0] = _mm256_setzero_ps();
  for (int64_t c = 0, off = 0; c < k; c += kBlockElements, off += kBytes) {
    _mm_prefetch(reinterpret_cast<const char*>(w + off + kPrefetchBytes), _MM_HINT_T0);
    __m256 q[4];
    decode_block8<F>(w + off, q);
    // Columns c..c+15 then c+16..c+31, each as the f32 tile's lo (8) and hi (8) halves.
    for (int half = 0; half < 2; ++half) {
      const float* xp = x + c + 16 * half;
      for (int i = 0; i < M; ++i) {
        lo[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + i * k), q[2 * half], lo[i][0]);
        hi[i][0] = _mm256_fmadd_ps(_mm256_loadu_ps(xp + i * k + 8), q[2 * half + 1], hi[i][0]);
      }
    }
  }
  sum_lanes_avx2<M>(lo, hi, rows, y, ldy);
}

// The size of the group of x rows starting at row i of m: groups of at most `most` rows, as
// even as they go (8 rows: 4 + 4, not 6 + 2), so each pass has FMAs enough per weight load.
inline int64_t x_group_at(int64_t m, int64_t i, int64_t most) {
  const int64_t left = m - i, groups = (left + most - 1) / most;
  return (left + groups - 1) / groups;
}

// Runs `tile(x_rows, x, w_tile, rows, y)` over tiles of `weight_rows` weight rows and groups
// of up to `x_group` x rows (x_group_at; the weight tile stays in L1 between groups).
// Weight row j starts at w + j * w_stride (k for f32/bf16 rows, a block row's bytes for blocks).
template <class W, class Tile>
void for_each_tile(int64_t m, int64_t n, int64_t k, const float* x, const W* w, int64_t w_stride, float* y, int weight_rows, int64_t x_group,
                   Tile tile) {
  const int64_t tiles = (n + weight_rows - 1) / weight_rows;
  parallel_for(tiles, m * k * weight_rows, [&](int64_t t) {
    const int64_t j = t * weight_rows;
    const int rows = static_cast<int>(std::min<int64_t>(weight_rows, n - j));
    for (int64_t i = 0, g; i < m; i += g) {
      g = x_group_at(m, i, x_group);
      tile(g, x + i * k, w + j * w_stride, rows, y + i * n + j);
    }
  });
}

// One group of g x rows (g <= kMaxTileRows on AVX-512, <= 4 on AVX2) against one weight tile.
template <class W>
void tile_group(bool avx512, int64_t g, const float* xs, int64_t k, const W* ws, int rows, float* ys, int64_t n) {
  if (avx512) {
    switch (g) {
      case 1: return tile<1>(xs, k, ws, rows, ys, n);
      case 2: return tile<2>(xs, k, ws, rows, ys, n);
      case 3: return tile<3>(xs, k, ws, rows, ys, n);
      case 4: return tile<4>(xs, k, ws, rows, ys, n);
      case 5: return tile<5>(xs, k, ws, rows, ys, n);
      default: return tile<6>(xs, k, ws, rows, ys, n);
    }
  }
  switch (g) {
    case 1: return tile_avx2<1, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
    case 2: return tile_avx2<2, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
    case 3: return tile_avx2<3, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
    default: return tile_avx2<4, kAvx2WeightRows>(xs, k, ws, rows, ys, n);
  }
}

template <class W>
void run_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const W* w, float* y) {
  if (!small_batch_gemm_supports(isa)) std::abort();  // callers check it first
  const bool avx512 = isa == SmallBatchIsa::kAvx512;
  for_each_tile(m, n, k, x, w, k, y, avx512 ? kWeightRows : kAvx2WeightRows, avx512 ? kMaxTileRows : 4,
                [&](int64_t rows_x, const float* xs, const W* ws, int rows, float* ys) { tile_group(avx512, rows_x, xs, k, ws, rows, ys, n); });
}

// Decodes weight rows [0, rows) of a block tile into f32 rows of k (stride k), as the tiles'
// registers hold them.
template <BlockFormat F>
__attribute__((target("avx512f,f16c"))) void decode_rows_avx512(const unsigned char* w, int64_t row_bytes, int rows, int64_t k, float* out) {
  constexpr int64_t kBytes = block_bytes(F);
  for (int r = 0; r < rows; ++r)
    for (int64_t c = 0, off = 0; c < k; c += kBlockElements, off += kBytes) {
      __m512 lo, hi;
      float d, m;
      block_scales<F>(w + r * row_bytes + off, d, m);
      decode_block16<F>(w + r * row_bytes + off, d, m, lo, hi);
      _mm512_storeu_ps(out + r * k + c, lo);
      _mm512_storeu_ps(out + r * k + c + 16, hi);
    }
}
template <BlockFormat F>
__attribute__((target("avx2,fma,f16c"))) void decode_rows_avx2(const unsigned char* w, int64_t row_bytes, int rows, int64_t k, float* out) {
  constexpr int64_t kBytes = block_bytes(F);
  for (int r = 0; r < rows; ++r)
    for (int64_t c = 0, off = 0; c < k; c += kBlockElements, off += kBytes) {
      __m256 q[4];
      decode_block8<F>(w + r * row_bytes + off, q);
      for (int i = 0; i < 4; ++i) _mm256_storeu_ps(out + r * k + c + 8 * i, q[i]);
    }
}

// Up to 8 x rows: each weight tile decoded in registers as it is used, for every group of x rows
// (at most 5 a pass on AVX-512, 4 on AVX2; x_group_at splits them evenly). More rows (a 9-16-node
// tree verify, a decode batch of 9-16): each tile decoded once into f32 rows that stay in L1 while
// the f32 tiles take every group. Measured on the 2-core Xeon, SmolLM2's decode step (docs/
// performance.md): 5 / 8 rows 12.4-14.8 / 20.0-20.5 ms decoded in registers against 17.1-17.4 /
// 23.0-23.5 decoded once; 16 rows 39-43 against 36.9-37.1. 6 x rows a pass spilled registers.
constexpr int kMaxBlockTileRows = 5;
constexpr int64_t kBlocksDecodedInRegistersMaxRows = 8;

// One group of g x rows (g <= kMaxBlockTileRows on AVX-512, <= 4 on AVX2) against one tile of
// block rows, decoded in registers (tile_group's twin for blocks).
template <BlockFormat F>
void tile_blocks_group(bool avx512, int64_t g, const float* xs, int64_t k, const unsigned char* ws, int64_t rb, int rows, float* ys, int64_t n) {
  if (avx512) {
    switch (g) {
      case 1: return tile_blocks<1, F>(xs, k, ws, rb, rows, ys, n);
      case 2: return tile_blocks<2, F>(xs, k, ws, rb, rows, ys, n);
      case 3: return tile_blocks<3, F>(xs, k, ws, rb, rows, ys, n);
      case 4: return tile_blocks<4, F>(xs, k, ws, rb, rows, ys, n);
      default: return tile_blocks<5, F>(xs, k, ws, rb, rows, ys, n);
    }
  }
  switch (g) {
    case 1: return tile_blocks_avx2<1, F>(xs, k, ws, rb, rows, ys, n);
    case 2: return tile_blocks_avx2<2, F>(xs, k, ws, rb, rows, ys, n);
    case 3: return tile_blocks_avx2<3, F>(xs, k, ws, rb, rows, ys, n);
    default: return tile_blocks_avx2<4, F>(xs, k, ws, rb, rows, ys, n);
  }
}

template <BlockFormat F>
void run_blocks_format(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const unsigned char* w, float* y) {
  const int64_t rb = block_row_bytes(F, k);
  const bool avx512 = isa == SmallBatchIsa::kAvx512;
  if (m <= kBlocksDecodedInRegistersMaxRows) {
    for_each_tile(m, n, k, x, w, rb, y, avx512 ? kWeightRows : kAvx2WeightRows, avx512 ? kMaxBlockTileRows : 4,
                  [&](int64_t rows_x, const float* xs, const unsigned char* ws, int rows, float* ys) {
                    tile_blocks_group<F>(avx512, rows_x, xs, k, ws, rb, rows, ys, n);
                  });
    return;
  }
  const int weight_rows = avx512 ? kWeightRows : kAvx2WeightRows;
  const int64_t tiles = (n + weight_rows - 1) / weight_rows;
  parallel_for(tiles, m * k * weight_rows, [&](int64_t t) {
    const int64_t j = t * weight_rows;
    const int rows = static_cast<int>(std::min<int64_t>(weight_rows, n - j));
    thread_local std::vector<float> decoded;
    decoded.resize(static_cast<size_t>(weight_rows * k));
    if (avx512) decode_rows_avx512<F>(w + j * rb, rb, rows, k, decoded.data());
    else decode_rows_avx2<F>(w + j * rb, rb, rows, k, decoded.data());
    for (int64_t i = 0, g; i < m; i += g) {
      g = x_group_at(m, i, avx512 ? kMaxTileRows : 4);
      tile_group(avx512, g, x + i * k, k, decoded.data(), rows, y + i * n + j, n);
    }
  });
}

void run_blocks_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  if (!small_batch_gemm_supports(isa) || k % kBlockElements != 0) std::abort();  // callers check both first
  const auto* bytes = static_cast<const unsigned char*>(w.bytes.data);
  switch (w.format) {
    case BlockFormat::kQ4_0: return run_blocks_format<BlockFormat::kQ4_0>(isa, m, n, k, x, bytes, y);
    case BlockFormat::kQ4_1: return run_blocks_format<BlockFormat::kQ4_1>(isa, m, n, k, x, bytes, y);
    case BlockFormat::kQ8_0: return run_blocks_format<BlockFormat::kQ8_0>(isa, m, n, k, x, bytes, y);
  }
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
void small_batch_gemm_on(SmallBatchIsa isa, int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  run_blocks_on(isa, m, n, k, x, w, y);
}

#else

SmallBatchIsa small_batch_gemm_isa() { return SmallBatchIsa::kNone; }
bool small_batch_gemm_supports(SmallBatchIsa) { return false; }
void small_batch_gemm_on(SmallBatchIsa, int64_t, int64_t, int64_t, const float*, const float*, float*) {
  std::abort();  // callers check small_batch_gemm_supports() first
}
void small_batch_gemm_on(SmallBatchIsa, int64_t, int64_t, int64_t, const float*, const uint16_t*, float*) { std::abort(); }
void small_batch_gemm_on(SmallBatchIsa, int64_t, int64_t, int64_t, const float*, const WeightBlocks&, float*) { std::abort(); }

#endif

bool small_batch_gemm_available() { return small_batch_gemm_isa() != SmallBatchIsa::kNone; }

void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const float* w, float* y) {
  small_batch_gemm_on(small_batch_gemm_isa(), m, n, k, x, w, y);
}
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y) {
  small_batch_gemm_on(small_batch_gemm_isa(), m, n, k, x, w_bf16, y);
}
void small_batch_gemm(int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  small_batch_gemm_on(small_batch_gemm_isa(), m, n, k, x, w, y);
}

}  // namespace aerie::kernels::cpu
