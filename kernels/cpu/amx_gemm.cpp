#include "kernels/cpu/amx_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/parallel_for.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AERIE_HAVE_AMX_PATH 1
#endif

namespace aerie::kernels::cpu {

namespace {

// Off unless AERIE_CPU_AMX=1: measured slower than the AVX-512 tiles below 8-15 rows
// (docs/performance.md, "Tried and not kept: the small-batch products on AMX").
bool enabled_from_env() {
  const char* v = std::getenv("AERIE_CPU_AMX");
  return v && std::string(v) == "1";
}
std::atomic<bool> g_enabled{enabled_from_env()};

}  // namespace

#if AERIE_HAVE_AMX_PATH

namespace {

// CPUID leaf 7 (AMX-TILE, AMX-BF16, AVX512-BW; sub-leaf 1: AVX512-BF16), AVX-512 state enabled by
// the OS (cpu_has), then Linux's permission for the tile data (a process asks once; without it
// the first tile instruction faults).
bool ask_for_tiles() {
  if (!cpu_has(CpuIsa::kAvx512)) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool avx512bw = b & (1u << 30), amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  if (!__get_cpuid_count(7, 1, &a, &b, &c, &d)) return false;
  const bool avx512_bf16 = a & (1u << 5);
  if (!(avx512bw && amx_bf16 && amx_tile && avx512_bf16)) return false;
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
}

#define AERIE_AMX_TARGET __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512bf16")))

// GCC's tile intrinsics are asm statements that name no memory: the staging rows written before
// a tile load and the sums read after a tile store need a compiler barrier each.
inline void compiler_barrier() { asm volatile("" ::: "memory"); }

// Tile 0: 16 weight rows x 32 bf16 (one block of columns). Tiles 1-3: x, 16 column pairs x 16
// columns (5 rows x 3 parts each, the 16th column zero). Tiles 4-6: the f32 sums, 16 x 16.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

AERIE_AMX_TARGET void load_tile_config() {
  TileConfig cfg;
  for (int t = 0; t < 7; ++t) {
    cfg.rows[t] = 16;
    cfg.colsb[t] = 64;
  }
  compiler_barrier();
  _tile_loadconfig(&cfg);
}

// The configuration is per thread; each call loads it once on every thread that takes groups
// (another library may have loaded its own between calls).
std::atomic<uint64_t> g_call_serial{0};
void ensure_tile_config(uint64_t call) {
  thread_local uint64_t configured_for = 0;
  if (configured_for != call) {
    load_tile_config();
    configured_for = call;
  }
}

constexpr int kRowsPerTile = 5;   // x rows a tile of x takes (3 parts each)
constexpr int kMaxTiles = 3;      // tiles of x a pass takes (tiles 1-3)
constexpr int kColumns = 16;      // columns of a tile of x
constexpr int kTileElems = 512;   // bf16 of a tile of x: 16 column pairs x 16 columns x 2

// Which columns of a block of 32 a tile row's pairs hold: natural (pair p = columns 2p, 2p + 1:
// bf16 weights, Q8_0) or nibble order (pair p = columns p, p + 16: the two nibbles of a 4-bit
// block's byte p, which is how its decode lays them down without a shuffle).
enum class PairOrder { kNatural, kNibbles };

inline uint32_t bits_of(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// x = hi + mid + lo exactly: hi keeps x's sign, exponent and top 7 significand bits (bf16 by
// truncation), the remainder x - hi is exact in f32 and has at most 16 significant bits, mid its
// top 8, lo the last 8 (exact in bf16). Each part is returned as an f32 whose low 16 bits are 0.
AERIE_AMX_TARGET inline void split3(__m512 x, __m512 (&parts)[3]) {
  constexpr __mmask16 kAll16 = 0xFFFF;
  const __m512i top = _mm512_set1_epi32(static_cast<int>(0xFFFF0000u));
  parts[0] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(x), top));
  const __m512 r1 = _mm512_maskz_sub_ps(kAll16, x, parts[0]);
  parts[1] = _mm512_castsi512_ps(_mm512_and_si512(_mm512_castps_si512(r1), top));
  parts[2] = _mm512_maskz_sub_ps(kAll16, r1, parts[1]);
}

// x's rows [0, rows) of one pass as tiles: tile t holds rows 5t..5t+4, column part * 5 + i for
// row 5t + i. Q4_1 also needs each block's sum of each column's values.
struct XTiles {
  int tiles = 0;
  int64_t kblocks = 0;
  std::vector<uint16_t> b;   // [tiles][kblocks][16 pairs][16 columns][2]
  std::vector<float> sums;   // [tiles][kblocks][16 columns]
  const uint16_t* tile(int t, int64_t kb) const { return b.data() + (t * kblocks + kb) * kTileElems; }
  const float* block_sums(int t, int64_t kb) const { return sums.data() + (t * kblocks + kb) * kColumns; }

  AERIE_AMX_TARGET void build(const float* x, int64_t rows, int64_t k, PairOrder order, bool with_sums) {
    tiles = static_cast<int>((rows + kRowsPerTile - 1) / kRowsPerTile);
    kblocks = k / 32;
    b.assign(static_cast<size_t>(tiles * kblocks * kTileElems), 0);
    sums.assign(with_sums ? static_cast<size_t>(tiles * kblocks * kColumns) : 0, 0.0f);
    constexpr __mmask16 kAll16 = 0xFFFF;
    // Dword p of a tile row set goes to tile row p, column col: 16 dwords a row.
    const __m512i rows_at = _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15), _mm512_set1_epi32(kColumns));
    for (int64_t r = 0; r < rows; ++r) {
      const int t = static_cast<int>(r / kRowsPerTile), i = static_cast<int>(r % kRowsPerTile);
      for (int64_t kb = 0; kb < kblocks; ++kb) {
        __m512 lo[3], hi[3];  // columns kb*32 + 0..15 and + 16..31, split
        split3(_mm512_loadu_ps(x + r * k + kb * 32), lo);
        split3(_mm512_loadu_ps(x + r * k + kb * 32 + 16), hi);
        auto* tile_b = reinterpret_cast<int*>(b.data() + (t * kblocks + kb) * kTileElems);
        for (int part = 0; part < 3; ++part) {
          const int col = part * kRowsPerTile + i;
          const __m512i l = _mm512_castps_si512(lo[part]), h = _mm512_castps_si512(hi[part]);
          __m512i pairs;
          if (order == PairOrder::kNibbles) {  // dword p = (x[p], x[p + 16])
            pairs = _mm512_or_si512(_mm512_maskz_srli_epi32(kAll16, l, 16), h);
          } else {  // dword p = (x[2p], x[2p + 1])
            const __m256i a = _mm512_maskz_cvtepi32_epi16(kAll16, _mm512_maskz_srli_epi32(kAll16, l, 16));
            const __m256i c = _mm512_maskz_cvtepi32_epi16(kAll16, _mm512_maskz_srli_epi32(kAll16, h, 16));
            pairs = _mm512_inserti64x4(_mm512_castsi256_si512(a), c, 1);
          }
          _mm512_mask_i32scatter_epi32(tile_b + col, kAll16, rows_at, pairs, 4);
          if (with_sums)
            sums[(t * kblocks + kb) * kColumns + col] = _mm512_reduce_add_ps(_mm512_maskz_add_ps(kAll16, lo[part], hi[part]));
        }
      }
    }
  }
};

// One block of x's tiles against the weight tile: tile 1 + t times tile 0 into tile 4 + t (the
// intrinsics name tiles by literal numbers).
template <int T>
AERIE_AMX_TARGET inline void load_x_tile(const uint16_t* b) {
  if constexpr (T == 0) _tile_loadd(1, b, 64);
  else if constexpr (T == 1) _tile_loadd(2, b, 64);
  else _tile_loadd(3, b, 64);
}
template <int T>
AERIE_AMX_TARGET inline void zero_sum_tile() {
  if constexpr (T == 0) _tile_zero(4);
  else if constexpr (T == 1) _tile_zero(5);
  else _tile_zero(6);
}
template <int T>
AERIE_AMX_TARGET inline void multiply_into_sum_tile() {
  if constexpr (T == 0) _tile_dpbf16ps(4, 0, 1);
  else if constexpr (T == 1) _tile_dpbf16ps(5, 0, 2);
  else _tile_dpbf16ps(6, 0, 3);
}
template <int T>
AERIE_AMX_TARGET inline void store_sum_tile(float* c) {
  if constexpr (T == 0) _tile_stored(4, c, 64);
  else if constexpr (T == 1) _tile_stored(5, c, 64);
  else _tile_stored(6, c, 64);
}

// Tile 1 + U of x (block kb) against the weight tile into tile 4 + U: zeroed first and stored to
// c[U] after when kZeroAndStore (blocks: each block's sums are scaled apart), else left to sum
// on over k (bf16 weights).
template <int U, bool kZeroAndStore>
AERIE_AMX_TARGET inline void multiply_x_tile(const XTiles& xt, int64_t kb, float (*c)[16][16]) {
  load_x_tile<U>(xt.tile(U, kb));
  if constexpr (kZeroAndStore) zero_sum_tile<U>();
  multiply_into_sum_tile<U>();
  if constexpr (kZeroAndStore) store_sum_tile<U>(&c[U][0][0]);
}
template <int T, bool kZeroAndStore>
AERIE_AMX_TARGET inline void multiply_x_tiles(const XTiles& xt, int64_t kb, float (*c)[16][16]) {
  multiply_x_tile<0, kZeroAndStore>(xt, kb, c);
  if constexpr (T > 1) multiply_x_tile<1, kZeroAndStore>(xt, kb, c);
  if constexpr (T > 2) multiply_x_tile<2, kZeroAndStore>(xt, kb, c);
}

// The bf16 of a 4-bit block's 16 values, twice (vpermw reads an index's low 5 bits): q for Q4_1
// (its m is added through the block's x sums), q - 8 for Q4_0.
template <BlockFormat F>
AERIE_AMX_TARGET inline __m512i nibble_table() {
  alignas(64) uint16_t t[32];
  for (int i = 0; i < 32; ++i) t[i] = static_cast<uint16_t>(bits_of(static_cast<float>(F == BlockFormat::kQ4_0 ? (i & 15) - 8 : (i & 15))) >> 16);
  return _mm512_load_si512(t);
}

// One weight row's block as a tile row of 32 bf16. 4-bit: byte j's dword j | j << 12 puts the
// low nibble in the low word's index bits and the high nibble in the high word's, so one vpermw
// gives pairs (q_j, q_j+16) (PairOrder::kNibbles). Q8_0: q in natural order.
template <BlockFormat F>
AERIE_AMX_TARGET inline void decode_tile_row(const unsigned char* block, __m512i table, uint16_t* out) {
  constexpr __mmask16 kAll16 = 0xFFFF;
  if constexpr (F == BlockFormat::kQ8_0) {
    const __m512 lo = _mm512_maskz_cvtepi32_ps(kAll16, _mm512_maskz_cvtepi8_epi32(kAll16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 2))));
    const __m512 hi = _mm512_maskz_cvtepi32_ps(kAll16, _mm512_maskz_cvtepi8_epi32(kAll16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + 18))));
    const __m512bh both = _mm512_cvtne2ps_pbh(hi, lo);  // words 0-15 from lo, 16-31 from hi
    _mm512_store_si512(out, reinterpret_cast<const __m512i&>(both));
  } else {
    constexpr int kQs = F == BlockFormat::kQ4_1 ? 4 : 2;
    constexpr __mmask32 kAll32 = 0xFFFFFFFFu;
    const __m512i bytes = _mm512_maskz_cvtepu8_epi32(kAll16, _mm_loadu_si128(reinterpret_cast<const __m128i*>(block + kQs)));
    const __m512i idx = _mm512_or_si512(bytes, _mm512_maskz_slli_epi32(kAll16, bytes, 12));
    _mm512_store_si512(out, _mm512_maskz_permutexvar_epi16(kAll32, idx, table));
  }
}

// Bytes ahead in each weight row that the loops prefetch (the 16 rows of a group are 16 streams
// the hardware prefetcher follows poorly).
constexpr int64_t kPrefetchBytes = 1024;

// 16 weight rows (rows past `rows` repeat row 0, their sums dropped) of GGUF blocks against T
// tiles of x; out[t][r][col] gets the scaled sums. A chunk of blocks at a time in three phases,
// each without a chain through the next block: decode the chunk's 16-row tiles (and gather the
// scales), run the tile unit over them, then scale and add the sums.
template <BlockFormat F, int T>
AERIE_AMX_TARGET void blocks_group(const unsigned char* w, int64_t row_bytes, int rows, const XTiles& xt, float* out) {
  constexpr int64_t kBytes = block_bytes(F);
  constexpr int kChunk = 8;  // blocks a phase takes: 8 KB of tiles and 8 x T KB of sums stay in L1
  constexpr __mmask16 kAll16 = 0xFFFF;
  alignas(64) uint16_t a[kChunk][16][32];
  alignas(64) float c[kChunk][T][16][16];
  alignas(64) float ds[kChunk][16];
  [[maybe_unused]] alignas(64) float ms[kChunk][16];
  alignas(64) int32_t row_at_i[16];
  for (int r = 0; r < 16; ++r) row_at_i[r] = static_cast<int32_t>((r < rows ? r : 0) * row_bytes);
  const __m512i row_at = _mm512_load_si512(row_at_i);
  const __m512i table = F == BlockFormat::kQ8_0 ? _mm512_setzero_si512() : nibble_table<F>();
  __m512 acc[T][16];
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < 16; ++r) acc[t][r] = _mm512_setzero_ps();
  for (int64_t kb0 = 0; kb0 < xt.kblocks; kb0 += kChunk) {
    const int nb = static_cast<int>(std::min<int64_t>(kChunk, xt.kblocks - kb0));
    for (int b = 0; b < nb; ++b) {
      const unsigned char* blk = w + (kb0 + b) * kBytes;
      // Each block's first four bytes: d (and Q4_1's m after it); whole inside the row for every
      // format (a block has at least 16 bytes after its d).
      const __m512i words = _mm512_mask_i32gather_epi32(_mm512_setzero_si512(), kAll16, row_at, blk, 1);
      _mm512_store_ps(ds[b], _mm512_maskz_cvtph_ps(kAll16, _mm512_maskz_cvtepi32_epi16(kAll16, words)));
      if constexpr (F == BlockFormat::kQ4_1)
        _mm512_store_ps(ms[b], _mm512_maskz_cvtph_ps(kAll16, _mm512_maskz_cvtepi32_epi16(kAll16, _mm512_maskz_srli_epi32(kAll16, words, 16))));
      const bool fetch = (kb0 + b) * kBytes % 64 < kBytes;  // once a cache line of each row
      for (int r = 0; r < 16; ++r) {
        if (fetch) _mm_prefetch(reinterpret_cast<const char*>(blk + row_at_i[r] + kPrefetchBytes), _MM_HINT_T0);
        decode_tile_row<F>(blk + row_at_i[r], table, a[b][r]);
      }
    }
    compiler_barrier();
    for (int b = 0; b < nb; ++b) {
      _tile_loadd(0, a[b], 64);
      multiply_x_tiles<T, true>(xt, kb0 + b, c[b]);
    }
    compiler_barrier();
    for (int b = 0; b < nb; ++b)
      for (int t = 0; t < T; ++t) {
        const __m512 sx = F == BlockFormat::kQ4_1 ? _mm512_loadu_ps(xt.block_sums(t, kb0 + b)) : _mm512_setzero_ps();
#pragma GCC unroll 16
        for (int r = 0; r < 16; ++r) {
          acc[t][r] = _mm512_fmadd_ps(_mm512_load_ps(c[b][t][r]), _mm512_set1_ps(ds[b][r]), acc[t][r]);
          if constexpr (F == BlockFormat::kQ4_1) acc[t][r] = _mm512_fmadd_ps(sx, _mm512_set1_ps(ms[b][r]), acc[t][r]);
        }
      }
  }
  for (int t = 0; t < T; ++t)
    for (int r = 0; r < 16; ++r) _mm512_storeu_ps(out + (t * 16 + r) * kColumns, acc[t][r]);
}

// 16 bf16 weight rows (stride ld elements) against T tiles of x, summed by the tile unit over
// all of k; out[t][r][col].
template <int T>
AERIE_AMX_TARGET void bf16_group(const uint16_t* w, int64_t ld, const XTiles& xt, float* out) {
  zero_sum_tile<0>();
  if constexpr (T > 1) zero_sum_tile<1>();
  if constexpr (T > 2) zero_sum_tile<2>();
  for (int64_t kb = 0; kb < xt.kblocks; ++kb) {
    for (int r = 0; r < 16; ++r) _mm_prefetch(reinterpret_cast<const char*>(w + r * ld + kb * 32) + kPrefetchBytes, _MM_HINT_T0);
    _tile_loadd(0, w + kb * 32, ld * 2);
    multiply_x_tiles<T, false>(xt, kb, nullptr);
  }
  store_sum_tile<0>(out);
  if constexpr (T > 1) store_sum_tile<1>(out + 16 * kColumns);
  if constexpr (T > 2) store_sum_tile<2>(out + 2 * 16 * kColumns);
  compiler_barrier();
}

// y rows [0, rows) of this pass, columns j0.. j0 + live: the three parts' sums added in one order.
void finish_group(const float* out, int64_t rows, int live, float* y, int64_t n, int64_t j0) {
  for (int64_t r = 0; r < rows; ++r) {
    const int t = static_cast<int>(r / kRowsPerTile), i = static_cast<int>(r % kRowsPerTile);
    for (int j = 0; j < live; ++j) {
      const float* s = out + (t * 16 + j) * kColumns;
      y[r * n + j0 + j] = (s[i] + s[kRowsPerTile + i]) + s[2 * kRowsPerTile + i];
    }
  }
}

template <class GroupFn>
void for_each_pass(int64_t m, int64_t n, int64_t k, const float* x, float* y, PairOrder order, bool with_sums, GroupFn group) {
  thread_local XTiles xt;  // the caller's: workers only read it during the call
  const int64_t groups = (n + 15) / 16;
  for (int64_t r0 = 0; r0 < m; r0 += kAmxRowsPerPass) {
    const int64_t rows = std::min<int64_t>(kAmxRowsPerPass, m - r0);
    xt.build(x + r0 * k, rows, k, order, with_sums);
    const uint64_t call = g_call_serial.fetch_add(1, std::memory_order_relaxed) + 1;
    const XTiles& tiles = xt;
    parallel_for(groups, 16 * k, [&](int64_t g) {
      ensure_tile_config(call);
      alignas(64) float out[kMaxTiles * 16 * kColumns];
      const int64_t j0 = g * 16;
      const int live = static_cast<int>(std::min<int64_t>(16, n - j0));
      group(tiles, j0, live, out);
      finish_group(out, rows, live, y + r0 * n, n, j0);
    });
  }
}

template <BlockFormat F>
void blocks_product(int64_t m, int64_t n, int64_t k, const float* x, const unsigned char* w, float* y) {
  const int64_t rb = block_row_bytes(F, k);
  const PairOrder order = F == BlockFormat::kQ8_0 ? PairOrder::kNatural : PairOrder::kNibbles;
  for_each_pass(m, n, k, x, y, order, F == BlockFormat::kQ4_1, [&](const XTiles& xt, int64_t j0, int live, float* out) {
    const unsigned char* wg = w + j0 * rb;
    switch (xt.tiles) {
      case 1: return blocks_group<F, 1>(wg, rb, live, xt, out);
      case 2: return blocks_group<F, 2>(wg, rb, live, xt, out);
      default: return blocks_group<F, 3>(wg, rb, live, xt, out);
    }
  });
}

}  // namespace

bool amx_supported() {
  static const bool ok = ask_for_tiles();
  return ok;
}

void amx_gemm(int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  if (!amx_supported() || !amx_gemm_takes(k)) std::abort();  // callers check both first
  const auto* bytes = static_cast<const unsigned char*>(w.bytes.data);
  switch (w.format) {
    case BlockFormat::kQ4_0: return blocks_product<BlockFormat::kQ4_0>(m, n, k, x, bytes, y);
    case BlockFormat::kQ4_1: return blocks_product<BlockFormat::kQ4_1>(m, n, k, x, bytes, y);
    case BlockFormat::kQ8_0: return blocks_product<BlockFormat::kQ8_0>(m, n, k, x, bytes, y);
  }
}

void amx_gemm(int64_t m, int64_t n, int64_t k, const float* x, const uint16_t* w_bf16, float* y) {
  if (!amx_supported() || !amx_gemm_takes(k)) std::abort();  // callers check both first
  for_each_pass(m, n, k, x, y, PairOrder::kNatural, false, [&](const XTiles& xt, int64_t j0, int live, float* out) {
    const uint16_t* wg = w_bf16 + j0 * k;
    const int64_t ld = k;
    thread_local std::vector<uint16_t> padded;
    if (live < 16) {  // the last rows, copied beside zero rows so the tile load stays inside w
      padded.assign(static_cast<size_t>(16 * k), 0);
      std::memcpy(padded.data(), wg, static_cast<size_t>(live * k) * sizeof(uint16_t));
      wg = padded.data();
    }
    switch (xt.tiles) {
      case 1: return bf16_group<1>(wg, ld, xt, out);
      case 2: return bf16_group<2>(wg, ld, xt, out);
      default: return bf16_group<3>(wg, ld, xt, out);
    }
  });
}

#else

bool amx_supported() { return false; }
void amx_gemm(int64_t, int64_t, int64_t, const float*, const WeightBlocks&, float*) { std::abort(); }
void amx_gemm(int64_t, int64_t, int64_t, const float*, const uint16_t*, float*) { std::abort(); }

#endif

bool amx_enabled() { return g_enabled.load(std::memory_order_relaxed) && cpu_isa() == CpuIsa::kAvx512 && amx_supported(); }

bool set_amx_enabled(bool on) { return g_enabled.exchange(on, std::memory_order_relaxed); }

}  // namespace aerie::kernels::cpu
