// Prefill attention on the tensor cores (FlashAttention-2's tiling, mma.sync m16n8k16): a block
// takes 128 query tokens of one sequence and one query head, eight warps of 16 query rows
// each, and walks the keys the block can see in tiles of 64 gathered from the paged cache, in
// one pass with an online softmax. Everything a warp computes stays in registers: Q as A
// fragments loaded once, S = Q K^T as fp32 accumulators, P = exp(S - max) re-packed in the
// input dtype as the A fragments of P V (the accumulator layout of S is the A layout of P), O
// as fp32 accumulators. K and V tiles arrive by cp.async into three buffers, the next two
// tiles' copies in flight while this one computes, and reach the MMAs by ldmatrix (V
// transposed). The blocks of a sequence start with its last query tile (it sees the most keys).
//
// Why: the WMMA version (fragments through shared memory: S stored, read back for the
// softmax, P stored, read back as A) ran attention at ~50 TFLOP/s on the H200, 42% MFU for a
// 4096-token prompt (docs/performance.md).
#include <cstdint>
#include <string>

#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/attention_fragments.cuh"

namespace aerie::kernels::cuda {

namespace {

constexpr int kRowsPerBlock = 128;  // query tokens per block
constexpr int kKeysPerTile = 64;
constexpr int kWarps = 8;  // 16 query rows each (4 warps of 64 queries, two blocks per SM: 52% MFU at 4096 against 55%)
constexpr int kThreads = kWarps * 32;
// Tile buffers: two copies in flight while one tile computes (two buffers measured the same
// within noise on the H200: 56.1% against 56.3% MFU at 4096 tokens).
constexpr int kStages = 3;
static_assert(kAttentionPrefillMaxDim == 128, "the kernel instantiates head dims 16..128");

// Shared memory: kStages K and kStages V tile buffers [64][D] (input dtype, rows padded by 8
// elements: the eight rows an ldmatrix reads fall in distinct banks). A block holds one SM
// (registers), so there is room for kStages - 1 tiles in flight while one computes.
template <class T>
struct PrefillSmem {
  static constexpr int pad = 8;
  static size_t bytes(int dim) { return 2 * kStages * kKeysPerTile * static_cast<size_t>(dim + pad) * sizeof(T); }
};

// Starts copying the cache rows of keys [j0, j0 + 64) of a sequence into a tile (ld = dim +
// pad); keys at or past `visible` become zeros.
template <class T>
__device__ __forceinline__ void load_tile_async(T* tile, int ld, const T* cache, const int32_t* seq_slots, int j0, int visible,
                                                int64_t kv_heads, int kvh, int dim) {
  const int chunks = dim * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  for (int idx = threadIdx.x; idx < kKeysPerTile * chunks; idx += kThreads) {
    const int r = idx / chunks, c = idx % chunks;
    const bool valid = j0 + r < visible;
    const T* src = valid ? cache + (static_cast<int64_t>(seq_slots[j0 + r]) * kv_heads + kvh) * dim + c * (16 / sizeof(T)) : cache;
    cp_async16(tile + r * ld + c * (16 / sizeof(T)), src, valid);
  }
}

// The softmax runs on unscaled scores with exp2 (RowPairSoftmax::step_exp2), and only tiles that
// cross a row's last key are masked: against scaled scores, a mask on every tile and __expf, a
// 4096-token prompt's prefill went from 118.3 to 114.8 ms on the H200 (docs/performance.md).
template <class T, int kDimBlocks>
__global__ void __launch_bounds__(kThreads, 1) prefill_attention_kernel(const T* q, const T* k_cache, const T* v_cache, T* out,
                                                                        const int32_t* qo_indptr, const int32_t* kv_indptr,
                                                                        const int32_t* kv_indices, int batch, int q_heads,
                                                                        int kv_heads, float scale) {
  const float scale_log2 = scale * 1.4426950408889634f;
  constexpr int D = kDimBlocks * 16;
  constexpr int ld = D + PrefillSmem<T>::pad;
  constexpr int kKeyTiles = kKeysPerTile / 8;  // S accumulators: 8 keys each
  extern __shared__ __align__(128) unsigned char smem_raw[];
  // K buffers 0 .. kStages - 1, then the V buffers, kKeysPerTile rows each (arithmetic, not an
  // array of pointers: indexed at run time, that would live in local memory).
  T* kv_s = reinterpret_cast<T*>(smem_raw);
  auto k_buf = [&](int i) { return kv_s + i * kKeysPerTile * ld; };
  auto v_buf = [&](int i) { return kv_s + (kStages + i) * kKeysPerTile * ld; };

  pdl_begin();
  // Which sequence and which 128 of its tokens: blocks are numbered over every sequence's
  // ceil(q_len / 128) tiles, its last tile first (it sees the most keys: the longest blocks
  // start first and the short ones fill the end); blocks past the last tile have nothing to do.
  int b = 0, tile = blockIdx.x;
  for (; b < batch; ++b) {
    const int tiles = (qo_indptr[b + 1] - qo_indptr[b] + kRowsPerBlock - 1) / kRowsPerBlock;
    if (tile < tiles) {
      tile = tiles - 1 - tile;
      break;
    }
    tile -= tiles;
  }
  if (b == batch) return;
  const int h = blockIdx.y, kvh = h / (q_heads / kv_heads);
  const int q_len = qo_indptr[b + 1] - qo_indptr[b], kv_len = kv_indptr[b + 1] - kv_indptr[b];
  const int i0 = tile * kRowsPerBlock, rows = min(kRowsPerBlock, q_len - i0);
  const int64_t row0 = qo_indptr[b] + i0;
  const int32_t* seq_slots = kv_indices + kv_indptr[b];
  // Query i sees keys [0, kv_len - q_len + i]; the block's last row sees the most.
  const int first_pos = kv_len - q_len + i0;
  const int visible = min(kv_len, first_pos + rows);
  const int num_tiles = (visible + kKeysPerTile - 1) / kKeysPerTile;

  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane >> 2, c = 2 * (lane & 3);
  // This lane's rows of the warp's 16: lo = g, hi = g + 8; a row sees keys up to its position.
  const int r_lo = warp * 16 + g, r_hi = r_lo + 8;
  const bool lo_ok = r_lo < rows, hi_ok = r_hi < rows;
  const int last_lo = min(first_pos + r_lo, visible - 1), last_hi = min(first_pos + r_hi, visible - 1);
  // The warp's last row sees the most; a tile past it has nothing for this warp.
  const int warp_last = min(first_pos + warp * 16 + 15, visible - 1);
  const bool warp_has_rows = warp * 16 < rows;

  auto start_tile = [&](int t) {  // copies tile t into buffer t % kStages, as one group
    load_tile_async(k_buf(t % kStages), ld, k_cache, seq_slots, t * kKeysPerTile, visible, kv_heads, kvh, D);
    load_tile_async(v_buf(t % kStages), ld, v_cache, seq_slots, t * kKeysPerTile, visible, kv_heads, kvh, D);
    cp_async_commit();
  };
  for (int t = 0; t < kStages - 1 && t < num_tiles; ++t) start_tile(t);

  uint32_t qa[kDimBlocks][4];  // Q as A fragments (missing rows: zeros)
  load_a_rows<T, kDimBlocks>(qa, q + ((row0 + r_lo) * q_heads + h) * D + c, q + ((row0 + r_hi) * q_heads + h) * D + c, lo_ok, hi_ok);
  float o[2 * kDimBlocks][4];
#pragma unroll
  for (int n = 0; n < 2 * kDimBlocks; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowPairSoftmax softmax;
  // ldmatrix row addresses within a tile: K (keys 0-7 / 8-15 of a 16-key pair, dims +0 / +8),
  // V transposed (keys 0-7 / 8-15 at dims +0, then the same at dims +8).
  const int k_row = (lane & 7) + ((lane >> 4) << 3), k_col = ((lane >> 3) & 1) * 8;
  const int v_row = (lane & 7) + ((lane >> 3) & 1) * 8, v_col = (lane >> 4) * 8;

  for (int t = 0; t < num_tiles; ++t) {
    const int j0 = t * kKeysPerTile;
    // Tile t + kStages - 1 goes into the buffer tile t - 1 left (freed by the barrier that
    // ended the last iteration); the copies started after tile t's may stay in flight.
    if (t + kStages - 1 < num_tiles) start_tile(t + kStages - 1);
    cp_async_wait_at_most(min(kStages - 1, num_tiles - 1 - t));
    __syncthreads();  // tile t landed for every thread
    if (warp_has_rows && j0 <= warp_last) {
      const T* kt = k_buf(t % kStages);
      const T* vt = v_buf(t % kStages);
      float s[kKeyTiles][4];
#pragma unroll
      for (int n = 0; n < kKeyTiles; ++n) s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
#pragma unroll
      for (int kk = 0; kk < kDimBlocks; ++kk)
#pragma unroll
        for (int np = 0; np < kKeyTiles / 2; ++np) {
          uint32_t kb[4];
          ldmatrix_x4<false>(kb, kt + (np * 16 + k_row) * ld + kk * 16 + k_col);
          mma_m16n8k16<T>(s[2 * np], qa[kk], kb[0], kb[1]);
          mma_m16n8k16<T>(s[2 * np + 1], qa[kk], kb[2], kb[3]);
        }
      // Mask keys past each row's position (the diagonal tile, the sequence's end); step_exp2 scales.
      const bool full = j0 + kKeysPerTile - 1 <= min(first_pos + warp * 16, visible - 1);
      float corr_lo, corr_hi;
      if (!full) {
#pragma unroll
        for (int n = 0; n < kKeyTiles; ++n)
#pragma unroll
          for (int e = 0; e < 4; ++e)
            if (j0 + n * 8 + c + (e & 1) > (e >= 2 ? last_hi : last_lo)) s[n][e] = -INFINITY;
      }
      softmax.step_exp2(s, scale_log2, corr_lo, corr_hi);
      scale_rows(o, corr_lo, corr_hi);
      // O += P V, 16 keys (two S accumulators, already in the A layout) per step.
#pragma unroll
      for (int ks = 0; ks < kKeysPerTile / 16; ++ks) {
        uint32_t pa[4];
        p_fragment<T>(s, ks, pa);
#pragma unroll
        for (int dn = 0; dn < kDimBlocks; ++dn) {
          uint32_t vb[4];
          ldmatrix_x4<true>(vb, vt + (ks * 16 + v_row) * ld + dn * 16 + v_col);
          mma_m16n8k16<T>(o[2 * dn], pa, vb[0], vb[1]);
          mma_m16n8k16<T>(o[2 * dn + 1], pa, vb[2], vb[3]);
        }
      }
    }
    __syncthreads();  // buffer t % kStages consumed before a later copy lands there
  }
  // Each row's sum divides at the end; rows that saw nothing give zeros.
  softmax.finish();
  const float inv_lo = softmax.l_lo > 0.0f ? 1.0f / softmax.l_lo : 0.0f, inv_hi = softmax.l_hi > 0.0f ? 1.0f / softmax.l_hi : 0.0f;
  T* out_lo = out + ((row0 + r_lo) * q_heads + h) * D + c;
  T* out_hi = out + ((row0 + r_hi) * q_heads + h) * D + c;
#pragma unroll
  for (int n = 0; n < 2 * kDimBlocks; ++n) {
    if (lo_ok) *reinterpret_cast<uint32_t*>(out_lo + n * 8) = pack2<T>(o[n][0] * inv_lo, o[n][1] * inv_lo);
    if (hi_ok) *reinterpret_cast<uint32_t*>(out_hi + n * 8) = pack2<T>(o[n][2] * inv_hi, o[n][3] * inv_hi);
  }
}

}  // namespace

Status attention_prefill(const AttentionParams& p, void* stream) {
  const int batch = static_cast<int>(p.qo_indptr.dim(0) - 1);
  const int64_t tokens = p.q.dim(0);
  const int q_heads = static_cast<int>(p.q.dim(1)), kv_heads = static_cast<int>(p.k_cache.dim(1)), dim = static_cast<int>(p.q.dim(2));
  // Every sequence's tiles fit in tokens / 128 + batch blocks; the extra ones return at once.
  const dim3 grid(static_cast<unsigned>(tokens / kRowsPerBlock + batch), static_cast<unsigned>(q_heads));
  auto run = [&](auto type_tag, auto dim_blocks) {
    using T = decltype(type_tag);
    constexpr int kDimBlocks = decltype(dim_blocks)::value;
    auto kernel = prefill_attention_kernel<T, kDimBlocks>;
    const size_t smem = PrefillSmem<T>::bytes(kDimBlocks * 16);
    cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
    launch_pdl(kernel, grid, dim3(kThreads), smem, as_stream(stream), p.q.ptr<T>(), p.k_cache.ptr<T>(), p.v_cache.ptr<T>(),
               p.out.ptr<T>(), p.qo_indptr.ptr<int32_t>(), p.kv_indptr.ptr<int32_t>(), p.kv_indices.ptr<int32_t>(), batch, q_heads,
               kv_heads, p.scale);
  };
  auto by_dim = [&](auto type_tag) {
    switch (dim / 16) {
      case 1: return run(type_tag, std::integral_constant<int, 1>{});
      case 2: return run(type_tag, std::integral_constant<int, 2>{});
      case 3: return run(type_tag, std::integral_constant<int, 3>{});
      case 4: return run(type_tag, std::integral_constant<int, 4>{});
      case 5: return run(type_tag, std::integral_constant<int, 5>{});
      case 6: return run(type_tag, std::integral_constant<int, 6>{});
      case 7: return run(type_tag, std::integral_constant<int, 7>{});
      default: return run(type_tag, std::integral_constant<int, 8>{});
    }
  };
  if (p.q.dtype == DType::kBF16) by_dim(__nv_bfloat16{});
  else by_dim(__half{});
  return launch_status("attention (prefill, tensor cores)");
}

}  // namespace aerie::kernels::cuda
