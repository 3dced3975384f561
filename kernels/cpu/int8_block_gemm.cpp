#include "kernels/cpu/int8_block_gemm.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/parallel_for.hpp"
#include "kernels/dtype.hpp"
#include "kernels/error.hpp"

#if defined(__x86_64__) && defined(__GNUC__) && defined(__linux__)
#include <cpuid.h>
#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>
#define AERIE_HAVE_AMX_PATH 1
#endif

namespace aerie::kernels::cpu {

const char* int8_block_path_name(Int8BlockPath p) { return p == Int8BlockPath::kAmx ? "amx" : "scalar"; }

namespace {

constexpr int64_t kGroup = kTileGroupRows;

// x's rows as int8 blocks: q [m, k] (row stride k, so a block of all rows is an AMX tile of x),
// and per row and block d_x, the integer sum of q and d_x times it.
struct QuantizedRows {
  int64_t m = 0, k = 0, blocks = 0;
  std::vector<int8_t> q;
  std::vector<float> d, ds;      // [m, blocks]
  std::vector<int32_t> sum;      // [m, blocks]
  QuantizedRows(const float* x, int64_t rows, int64_t cols, bool vector) : m(rows), k(cols), blocks(cols / kBlockElements) {
    q.resize(static_cast<size_t>(m * k));
    d.resize(static_cast<size_t>(m * blocks));
    ds.resize(d.size());
    sum.resize(d.size());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t b = 0; b < blocks; ++b) {
        const size_t at = static_cast<size_t>(i * blocks + b);
        const float* xb = x + i * k + b * kBlockElements;
        int8_t* qb = q.data() + i * k + b * kBlockElements;
        sum[at] = vector ? quantize_block_vector(xb, qb, d[at]) : quantize_block(xb, qb, d[at]);
        ds[at] = d[at] * static_cast<float>(sum[at]);
      }
  }

  // One block: d = max|x| / 127 and q = rint(x * (127 / max|x|)) (nearest even, in [-127, 127]);
  // a block of zeros, or one with an infinity or NaN, gives d = 0 and q = 0. Returns sum q.
  static int32_t quantize_block(const float* xb, int8_t* qb, float& d) {
    const AbsMax m = abs_max(xb, kBlockElements);
    const float amax = m.value;
    const bool usable = m.finite && amax > 0.0f;
    const float inv = usable ? 127.0f / amax : 0.0f;
    int32_t s = 0;
    for (int64_t j = 0; j < kBlockElements; ++j) {
      const int32_t qi = usable ? static_cast<int32_t>(std::clamp(std::nearbyint(xb[j] * inv), -127.0f, 127.0f)) : 0;
      qb[j] = static_cast<int8_t>(qi);
      s += qi;
    }
    d = usable ? amax / 127.0f : 0.0f;
    return s;
  }
  static int32_t quantize_block_vector(const float* xb, int8_t* qb, float& d);
};

// Quant j (0..31) of lane `lane` of a group's block in tile order (weight_blocks.hpp).
int32_t quant_at(BlockFormat f, const unsigned char* quants, int64_t lane, int64_t j) {
  if (f == BlockFormat::kQ8_0) return static_cast<int8_t>(quants[(j / 4) * 64 + lane * 4 + j % 4]);
  const int64_t byte = j % 16;  // element j < 16 in the low nibble of byte j, j >= 16 in the high one of byte j - 16
  const unsigned char v = quants[(byte / 4) * 64 + lane * 4 + byte % 4];
  return j < 16 ? (v & 0x0F) : (v >> 4);
}

// The reference: every block's integer dot product, then the scaling in the documented order.
void scalar_group(BlockFormat f, const QuantizedRows& qx, const unsigned char* group, int64_t g, float* y, int64_t n) {
  const int64_t tile_bytes = kGroup * block_bytes(f), quants_at = tile_quants_offset(f);
  for (int64_t i = 0; i < qx.m; ++i)
    for (int64_t lane = 0; lane < kGroup; ++lane) {
      float acc = 0.0f;
      for (int64_t b = 0; b < qx.blocks; ++b) {
        const unsigned char* blk = group + b * tile_bytes;
        const int8_t* xq = qx.q.data() + i * qx.k + b * kBlockElements;
        int32_t dot = 0;
        for (int64_t j = 0; j < kBlockElements; ++j) dot += quant_at(f, blk + quants_at, lane, j) * xq[j];
        const size_t at = static_cast<size_t>(i * qx.blocks + b);
        if (f == BlockFormat::kQ4_0) dot -= 8 * qx.sum[at];
        const float scale = load_as_float(blk, DType::kF16, lane) * qx.d[at];
        acc = std::fma(static_cast<float>(dot), scale, acc);
        if (f == BlockFormat::kQ4_1) acc = std::fma(load_as_float(blk, DType::kF16, kGroup + lane), qx.ds[at], acc);
      }
      y[i * n + g * kGroup + lane] = acc;
    }
}

}  // namespace

#if AERIE_HAVE_AMX_PATH

namespace {

bool ask_for_tiles() {
  if (!cpu_has(CpuIsa::kAvx512)) return false;
  unsigned a = 0, b = 0, c = 0, d = 0;
  if (!__get_cpuid_count(7, 0, &a, &b, &c, &d)) return false;
  const bool avx512bw = b & (1u << 30), amx_tile = d & (1u << 24), amx_int8 = d & (1u << 25);
  if (!(avx512bw && amx_tile && amx_int8)) return false;
  // Linux hands out the tile state (8 KB of XSAVE area) to processes that ask; without it the
  // first tile instruction faults.
  constexpr long kArchReqXcompPerm = 0x1023, kXfeatureXtileData = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtileData) == 0;
}

#define AERIE_AMX_TARGET __attribute__((target("amx-tile,amx-int8,avx512f,avx512bw,avx512vl,f16c")))

// GCC's tile intrinsics are asm statements that name no memory: the staging written before a
// tile load and the sums read after a tile store need a compiler barrier each.
inline void compiler_barrier() { asm volatile("" ::: "memory"); }

// Tiles 0/3: x's block, m rows x 32 int8. Tiles 1/4: the weights' block, 8 rows (4 columns each)
// x 16 weight rows. Tiles 2/5: the int32 sums, m x 16. Two of each, so two blocks are in flight.
struct alignas(64) TileConfig {
  uint8_t palette = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

AERIE_AMX_TARGET void load_tile_config(int64_t m) {
  TileConfig cfg;
  for (int t : {0, 3}) {
    cfg.rows[t] = static_cast<uint8_t>(m);
    cfg.colsb[t] = 32;
    cfg.rows[t + 1] = 8;
    cfg.colsb[t + 1] = 64;
    cfg.rows[t + 2] = static_cast<uint8_t>(m);
    cfg.colsb[t + 2] = 64;
  }
  compiler_barrier();
  _tile_loadconfig(&cfg);
}

// A tile configuration is per thread, and another library (oneDNN) may load its own between
// calls: every call loads it once on each thread that takes groups.
std::atomic<uint64_t> g_call_serial{0};
void ensure_tile_config(uint64_t call, int64_t m) {
  thread_local uint64_t configured_for = 0;
  if (configured_for != call) {
    load_tile_config(m);
    configured_for = call;
  }
}

constexpr int64_t kMaxBlocks = 16;  // blocks a pass (k = 512): its unpacked quants and sums stay in L1
// Weights are streamed once a product (the model does not stay in the caches between steps):
// each block's bytes are asked for this far ahead of its use. The prefetches are issued only
// while a pass unpacks (or, for Q8_0, loads) its blocks, so the distance must carry the memory
// through the pass's tile and scaling phases: about a pass of Q4_1 blocks (16 x 320 bytes).
// 2048 -> 6144 measured a SmolLM2 decode step 4.5-5.2 -> 4.1-4.9 ms on 2 cores (paired runs).
constexpr int64_t kPrefetchBytes = 6144;

// Per thread: a group's 4-bit quants unpacked to bytes (512 a block) and its blocks' int32 sums.
// Each phase runs over all of a pass's blocks before the next reads them, so no tile load waits
// for the vector stores just before it (nor a vector load for the tile store).
struct GroupScratch {
  alignas(64) unsigned char unpacked[kMaxBlocks][8][64];
  alignas(64) int32_t sums[kMaxBlocks][kInt8BlockMaxRows][kGroup];
};

}  // namespace

// quantize_block with AVX-512: the same products x * inv and the same rounding (the MXCSR's
// nearest even, as nearbyint), so the same bytes.
AERIE_AMX_TARGET int32_t QuantizedRows::quantize_block_vector(const float* xb, int8_t* qb, float& d) {
  constexpr __mmask16 kAll = 0xFFFF;
  const __m512 lo = _mm512_loadu_ps(xb), hi = _mm512_loadu_ps(xb + 16);
  // The all-lanes masked forms and reductions through memory: GCC 12's unmasked forms (and its
  // reduce macros) warn about their undefined sources.
  alignas(64) float lanes[16];
  _mm512_store_ps(lanes, _mm512_maskz_max_ps(kAll, _mm512_abs_ps(lo), _mm512_abs_ps(hi)));
  float amax = 0.0f;
  for (float v : lanes) amax = std::max(amax, v);
  // An infinity or NaN anywhere: x - x is NaN there, 0 elsewhere.
  const __mmask16 bad = _mm512_cmp_ps_mask(_mm512_sub_ps(lo, lo), _mm512_setzero_ps(), _CMP_NEQ_UQ) |
                        _mm512_cmp_ps_mask(_mm512_sub_ps(hi, hi), _mm512_setzero_ps(), _CMP_NEQ_UQ);
  if (bad || !(amax > 0.0f)) {
    std::memset(qb, 0, kBlockElements);
    d = 0.0f;
    return 0;
  }
  const __m512 inv = _mm512_set1_ps(127.0f / amax), top = _mm512_set1_ps(127.0f), bottom = _mm512_set1_ps(-127.0f);
  const __m512i qlo = _mm512_maskz_cvtps_epi32(kAll, _mm512_maskz_max_ps(kAll, _mm512_maskz_min_ps(kAll, _mm512_mul_ps(lo, inv), top), bottom));
  const __m512i qhi = _mm512_maskz_cvtps_epi32(kAll, _mm512_maskz_max_ps(kAll, _mm512_maskz_min_ps(kAll, _mm512_mul_ps(hi, inv), top), bottom));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qb), _mm512_maskz_cvtepi32_epi8(kAll, qlo));
  _mm_storeu_si128(reinterpret_cast<__m128i*>(qb + 16), _mm512_maskz_cvtepi32_epi8(kAll, qhi));
  d = amax / 127.0f;
  alignas(64) int32_t sums[16];
  _mm512_store_si512(sums, _mm512_add_epi32(qlo, qhi));
  int32_t s = 0;
  for (int32_t v : sums) s += v;
  return s;
}

namespace {

template <BlockFormat F>
AERIE_AMX_TARGET void amx_group(const QuantizedRows& qx, const unsigned char* group, int64_t g, float* y, int64_t n) {
  constexpr int64_t bb = block_bytes(F), tile_bytes = kGroup * bb;
  constexpr int64_t quants_at = tile_quants_offset(F);
  constexpr __mmask16 kAll = 0xFFFF;  // the all-lanes masked forms: GCC 12's unmasked ones warn about their undefined source
  thread_local GroupScratch scratch;
  __m512 acc[kInt8BlockMaxRows];
  const int64_t m = qx.m;
  for (int64_t i = 0; i < m; ++i) acc[i] = _mm512_setzero_ps();
  const __m512i low4 = _mm512_set1_epi8(0x0F);
  for (int64_t first = 0; first < qx.blocks; first += kMaxBlocks) {
    const int64_t count = std::min(kMaxBlocks, qx.blocks - first);
    // Weights: Q8_0's tile-order quants are a tile as they lie; a 4-bit block's become rows 0-3
    // of low nibbles (elements 0-15) and rows 4-7 of high ones (16-31).
    auto weights_of = [&](int64_t b) -> const void* {
      const unsigned char* blk = group + (first + b) * tile_bytes;
      return F == BlockFormat::kQ8_0 ? static_cast<const void*>(blk + quants_at) : static_cast<const void*>(scratch.unpacked[b]);
    };
    if constexpr (F != BlockFormat::kQ8_0) {
      for (int64_t b = 0; b < count; ++b) {
        const unsigned char* blk = group + (first + b) * tile_bytes;
        for (int64_t ahead = 0; ahead < tile_bytes; ahead += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + ahead), _MM_HINT_T0);
        for (int i = 0; i < 4; ++i) {
          const __m512i v = _mm512_loadu_si512(blk + quants_at + 64 * i);
          _mm512_store_si512(scratch.unpacked[b][i], _mm512_and_si512(v, low4));
          _mm512_store_si512(scratch.unpacked[b][4 + i], _mm512_and_si512(_mm512_srli_epi16(v, 4), low4));
        }
      }
      compiler_barrier();
    }
    const int8_t* xq = qx.q.data() + first * kBlockElements;
    // Two blocks in flight, on tiles 0-2 and 3-5. The tile numbers are written out: GCC's tile
    // intrinsics paste them into the instruction's text, so they cannot be template arguments.
    int64_t b = 0;
    for (; b + 1 < count; b += 2) {
      if constexpr (F == BlockFormat::kQ8_0) {
        const unsigned char* blk = group + (first + b) * tile_bytes;
        for (int64_t ahead = 0; ahead < 2 * tile_bytes; ahead += 64) _mm_prefetch(reinterpret_cast<const char*>(blk + kPrefetchBytes + ahead), _MM_HINT_T0);
      }
      _tile_loadd(0, xq + b * kBlockElements, qx.k);
      _tile_loadd(1, weights_of(b), 64);
      _tile_loadd(3, xq + (b + 1) * kBlockElements, qx.k);
      _tile_loadd(4, weights_of(b + 1), 64);
      _tile_zero(2);
      _tile_zero(5);
      if constexpr (F == BlockFormat::kQ8_0) {  // signed quants
        _tile_dpbssd(2, 0, 1);
        _tile_dpbssd(5, 3, 4);
      } else {  // 4-bit quants, unsigned
        _tile_dpbsud(2, 0, 1);
        _tile_dpbsud(5, 3, 4);
      }
      _tile_stored(2, scratch.sums[b], 64);
      _tile_stored(5, scratch.sums[b + 1], 64);
    }
    if (b < count) {
      _tile_loadd(0, xq + b * kBlockElements, qx.k);
      _tile_loadd(1, weights_of(b), 64);
      _tile_zero(2);
      if constexpr (F == BlockFormat::kQ8_0) _tile_dpbssd(2, 0, 1);
      else _tile_dpbsud(2, 0, 1);
      _tile_stored(2, scratch.sums[b], 64);
    }
    compiler_barrier();
    for (int64_t c = 0; c < count; ++c) {
      const unsigned char* blk = group + (first + c) * tile_bytes;
      const __m512 dw = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk)));
      __m512 mw = _mm512_setzero_ps();
      if constexpr (F == BlockFormat::kQ4_1) mw = _mm512_maskz_cvtph_ps(kAll, _mm256_loadu_si256(reinterpret_cast<const __m256i*>(blk + 2 * kGroup)));
      for (int64_t i = 0; i < m; ++i) {
        const size_t at = static_cast<size_t>(i * qx.blocks + first + c);
        __m512i dot = _mm512_load_si512(scratch.sums[c][i]);
        if constexpr (F == BlockFormat::kQ4_0) dot = _mm512_sub_epi32(dot, _mm512_set1_epi32(8 * qx.sum[at]));
        const __m512 scale = _mm512_maskz_mul_ps(kAll, dw, _mm512_set1_ps(qx.d[at]));
        acc[i] = _mm512_fmadd_ps(_mm512_maskz_cvtepi32_ps(kAll, dot), scale, acc[i]);
        if constexpr (F == BlockFormat::kQ4_1) acc[i] = _mm512_fmadd_ps(mw, _mm512_set1_ps(qx.ds[at]), acc[i]);
      }
    }
  }
  for (int64_t i = 0; i < m; ++i) _mm512_storeu_ps(y + i * n + g * kGroup, acc[i]);
}

template <BlockFormat F>
void amx_product(const QuantizedRows& qx, const unsigned char* tiles, int64_t n, float* y) {
  const uint64_t call = g_call_serial.fetch_add(1) + 1;
  const int64_t group_bytes = qx.blocks * kGroup * block_bytes(F);
  parallel_for(n / kGroup, kGroup * qx.k * std::max<int64_t>(qx.m, 4) / 4, [&](int64_t g) {
    ensure_tile_config(call, qx.m);
    amx_group<F>(qx, tiles + g * group_bytes, g, y, n);
  });
}

}  // namespace

bool amx_int8_available() {
  static const bool ok = ask_for_tiles();
  return ok;
}

#else

bool amx_int8_available() { return false; }
int32_t QuantizedRows::quantize_block_vector(const float* xb, int8_t* qb, float& d) { return quantize_block(xb, qb, d); }

#endif

Int8BlockPath int8_block_path() { return amx_int8_available() ? Int8BlockPath::kAmx : Int8BlockPath::kScalar; }

namespace {

// Up to kInt8BlockMaxRows rows.
void int8_block_gemm_tile(Int8BlockPath path, int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  const QuantizedRows qx(x, m, k, path == Int8BlockPath::kAmx);
  const auto* tiles = static_cast<const unsigned char*>(w.bytes.data);
  if (path == Int8BlockPath::kAmx) {
#if AERIE_HAVE_AMX_PATH
    AERIE_CHECK(amx_int8_available(), "int8_block_gemm: AMX-INT8 is not available on this CPU");
    switch (w.format) {
      case BlockFormat::kQ4_0: amx_product<BlockFormat::kQ4_0>(qx, tiles, n, y); return;
      case BlockFormat::kQ4_1: amx_product<BlockFormat::kQ4_1>(qx, tiles, n, y); return;
      case BlockFormat::kQ8_0: amx_product<BlockFormat::kQ8_0>(qx, tiles, n, y); return;
    }
#else
    AERIE_CHECK(false, "int8_block_gemm: this build has no AMX path");
#endif
  }
  const int64_t group_bytes = qx.blocks * kGroup * block_bytes(w.format);
  parallel_for(n / kGroup, kGroup * k * m * 8, [&](int64_t g) { scalar_group(w.format, qx, tiles + g * group_bytes, g, y, n); });
}

}  // namespace

void int8_block_gemm_on(Int8BlockPath path, int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  AERIE_CHECK(m >= 0, "int8_block_gemm: " << m << " rows of x");
  AERIE_CHECK(w.layout == BlockLayout::kTiles16, "int8_block_gemm: the weight's blocks must be in tile order");
  w.validate(n, k, "int8_block_gemm weight");
  // A tile's rows at a time: each row's result is its own, so any batch gives it the same bits.
  for (int64_t r = 0; r < m; r += kInt8BlockMaxRows)
    int8_block_gemm_tile(path, std::min(kInt8BlockMaxRows, m - r), n, k, x + r * k, w, y + r * n);
}

void int8_block_gemm(int64_t m, int64_t n, int64_t k, const float* x, const WeightBlocks& w, float* y) {
  int8_block_gemm_on(int8_block_path(), m, n, k, x, w, y);
}

}  // namespace aerie::kernels::cpu
