// Paged attention for ragged batches (prefill, extend, decode, draft trees): one block per
// (query tokens, KV head, split) handles every query head of the GQA group for
// tokens_per_block consecutive query tokens of one sequence (a verify's drafts share each
// K/V tile that way), streaming the visible keys in tiles with an online softmax; splits > 1
// combine in a second kernel (flash-decoding).
//
// What the H200 taught this kernel (batch-1 verify of 8 tokens at a 544-token context,
// docs/performance.md): every block must be resident at once, so registers are bounded
// (accumulators sized for the real head dim); q arrives in a few 16-byte loads issued
// together (a loop of dependent scalar loads cost several memory round trips per block).
// At batch 128 a decode step's attention ran at 30% of HBM bandwidth while tiles were
// loaded, then computed, in turn: the next tile is now copied (cp.async, two buffers) while
// this one computes.
#include <algorithm>
#include <type_traits>

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/attention_splits.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/device_runtime.hpp"
#include "kernels/env_knob.hpp"

namespace aerie::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;       // keys per tile (one per lane when scoring)
constexpr int kMaxGroup = kAttentionMaxGroup;  // query heads per block (a larger GQA group uses more blocks)
constexpr int kMaxRows = kAttentionMaxRows;    // query rows (heads x tokens) per block
constexpr int kMaxDim = 256;
constexpr int kLoadBatch = 4;   // 16-byte loads of q in flight per thread

struct Geometry {
  int q_heads, kv_heads, dim, group, head_chunks;
};

// Shared memory of one block: q (fp32, pre-scaled), `stages` buffers of a K tile (rows padded
// by 16 bytes so that lanes reading different rows hit different banks) and a V tile (with
// two, the next tile's copy is in flight while this one computes), probabilities [key][row]
// (rows padded to keep 16-byte reads aligned), the running softmax state, each buffer's slots.
template <class TC>
struct Smem {
  static constexpr int kPad = 16 / sizeof(TC);
  static constexpr int prob_stride(int rows) { return rows + 4; }
  static size_t bytes(int dim, int rows, int stages) {
    return sizeof(float) * rows * dim + stages * (sizeof(TC) * kTile * (dim + kPad) + sizeof(TC) * kTile * dim) +
           sizeof(float) * kTile * prob_stride(rows) + sizeof(float) * 3 * rows + stages * sizeof(int32_t) * kTile + 64;
  }
};

// kRows: the rows (heads x tokens) a block holds (8, 16 or 32); kDimPer: head dims per
// thread (1 up to 128, 2 up to 256); kStages: K/V tile buffers (k > 1: the next k - 1 tiles
// are copied while this one computes; 1: copied after, the least shared memory).
template <class TQ, class TC, int kRows, int kDimPer, int kStages>
__global__ void __launch_bounds__(kThreads, kRows <= 8 ? 5 : 4) attention_kernel(
    const TQ* q, const TC* kc, const TC* vc, TQ* out, const int32_t* qo_indptr, const int32_t* kv_indptr,
    const int32_t* kv_indices, const uint8_t* mask, const int32_t* mask_indptr, int batch, Geometry g, float scale,
    int num_splits, float* partial, int64_t num_slots, int tokens_per_block, int min_split_keys) {
  extern __shared__ __align__(16) unsigned char smem_raw[];
  pdl_trigger();
  const int D = g.dim;
  constexpr int kPad = Smem<TC>::kPad;
  constexpr int kPS = Smem<TC>::prob_stride(kRows);
  constexpr int kRowsPerWarp = kRows / kWarps;
  const int kstride = D + kPad;
  float* qs = reinterpret_cast<float*>(smem_raw);                                  // [kRows][D]
  TC* kbuf = reinterpret_cast<TC*>(qs + kRows * D);                                // 2 x [kTile][D + pad]
  TC* vbuf = kbuf + kStages * kTile * kstride;                                     // kStages x [kTile][D]
  float* probs = reinterpret_cast<float*>(vbuf + kStages * kTile * D);             // [kTile][kPS]
  float* m_s = probs + kTile * kPS;                                                // [kRows]
  float* l_s = m_s + kRows;
  float* corr_s = l_s + kRows;
  int32_t* slot_buf = reinterpret_cast<int32_t*>(corr_s + kRows);                 // kStages x [kTile]

  // Row r of the block is head head0 + r % heads of query token t0 + r / heads.
  const int t0 = blockIdx.x * tokens_per_block;
  const int kvh = blockIdx.y / g.head_chunks;
  const int head0 = kvh * g.group + (blockIdx.y % g.head_chunks) * kMaxGroup;
  const int heads = min(kMaxGroup, kvh * g.group + g.group - head0);
  const int rows = heads * tokens_per_block;
  const int split = blockIdx.z;
  const int b = find_sequence(qo_indptr, batch, t0);
  const int q_len = qo_indptr[b + 1] - qo_indptr[b], kv_len = kv_indptr[b + 1] - kv_indptr[b];
  const int i0 = t0 - qo_indptr[b];
  const uint8_t* mask_b = mask ? mask + mask_indptr[b] : nullptr;
  // Keys query i may see lie in [0, visible_of(i)) (attention_splits.cuh); the block's range is
  // its last token's.
  auto visible_of = [&](int i) { return visible_keys(q_len, kv_len, i, mask != nullptr); };
  const BlockKeys keys = block_keys(q_len, kv_len, i0, tokens_per_block, mask != nullptr, num_splits, min_split_keys);
  // A split past the block's keys has nothing to add: the merge reads only the used ones.
  if (num_splits > 1 && split >= keys.used_splits()) return;
  // One token per block: its mask row is folded into the tile's slots; with several, every
  // row checks its own.
  const uint8_t* mrow = (mask_b && tokens_per_block == 1) ? mask_b + static_cast<int64_t>(i0) * kv_len : nullptr;
  const int j_begin = keys.begin(split), j_end = keys.end(split);
  const int32_t* slots = kv_indices + kv_indptr[b];
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  // The slot of key j of this block's range for the tile-filling threads (-1: none or masked).
  auto slot_of = [&](int j) {
    if (j >= j_end) return -1;
    const int32_t s = slots[j];
    return (s >= num_slots || (mrow && !mrow[j])) ? -1 : s;
  };
  // The batch layout and slot lists were uploaded before the forward began, so they are read
  // while the previous kernel (which writes q and this step's K/V) still runs.
  if (threadIdx.x < kTile) slot_buf[threadIdx.x] = slot_of(j_begin + threadIdx.x);
  if (threadIdx.x < kRows) {
    m_s[threadIdx.x] = -INFINITY;
    l_s[threadIdx.x] = 0.0f;
  }
  __syncthreads();
  pdl_wait();

  const int row_chunks = D * static_cast<int>(sizeof(TC)) / 16;  // 16-byte chunks per K/V row
  // Starts copying the K and V rows of the tile whose slots are in `tslots` into buffer `buf`
  // (cp.async; unseen keys become zeros, so p * V stays finite). The caller's thread wrote
  // tslots for its own keys; every thread reads them after a barrier.
  auto issue_tile = [&](int buf, const int32_t* tslots) {
    TC* kt = kbuf + buf * kTile * kstride;
    TC* vt = vbuf + buf * kTile * D;
    for (int idx = threadIdx.x; idx < kTile * row_chunks; idx += kThreads) {
      const int jj = idx / row_chunks, ch = idx % row_chunks;
      const int32_t sl = tslots[jj];
      const int64_t off = sl >= 0 ? (static_cast<int64_t>(sl) * g.kv_heads + kvh) * D : 0;
      cp_async16(reinterpret_cast<uint4*>(kt + jj * kstride) + ch, reinterpret_cast<const uint4*>(kc + off) + ch, sl >= 0);
      cp_async16(reinterpret_cast<uint4*>(vt + jj * D) + ch, reinterpret_cast<const uint4*>(vc + off) + ch, sl >= 0);
    }
    cp_async_commit();
  };
  // q in 16-byte loads, a batch of them in flight per thread, then widened and pre-scaled.
  auto load_q = [&] {
    constexpr int kQPer = 16 / sizeof(TQ);
    const int q_row_chunks = D / kQPer, q_chunks = rows * q_row_chunks;
    for (int first = threadIdx.x; first < q_chunks; first += kThreads * kLoadBatch) {
      uint4 buf[kLoadBatch];
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int idx = first + u * kThreads;
        if (idx < q_chunks) {
          const int r = idx / q_row_chunks;
          const int64_t row = static_cast<int64_t>(t0 + r / heads) * g.q_heads + head0 + r % heads;
          buf[u] = load_from_previous_kernel(reinterpret_cast<const uint4*>(q + row * D) + idx % q_row_chunks);
        }
      }
#pragma unroll
      for (int u = 0; u < kLoadBatch; ++u) {
        const int idx = first + u * kThreads;
        if (idx >= q_chunks) break;
        const TQ* h = reinterpret_cast<const TQ*>(&buf[u]);
        float* dst = qs + (idx / q_row_chunks) * D + (idx % q_row_chunks) * kQPer;
#pragma unroll
        for (int e = 0; e < kQPer; ++e) dst[e] = to_float(h[e]) * scale;
      }
    }
  };
  // The first tile's K/V copy is in flight while q loads.
  if (j_begin < j_end) issue_tile(0, slot_buf);
  load_q();
  float acc[kRows][kDimPer];
#pragma unroll
  for (int h = 0; h < kRows; ++h)
#pragma unroll
    for (int e = 0; e < kDimPer; ++e) acc[h][e] = 0.0f;

  const int num_tiles = (j_end - j_begin + kTile - 1) / kTile;
  // Starts tile `t`'s copy into buffer t % kStages: its slots first (a barrier makes them
  // visible), then the cp.async of its rows.
  auto start_tile = [&](int t) {
    int32_t* ts = slot_buf + (t % kStages) * kTile;
    if (threadIdx.x < kTile) ts[threadIdx.x] = slot_of(j_begin + t * kTile + threadIdx.x);
    __syncthreads();
    issue_tile(t % kStages, ts);
  };
  // Tiles 1 .. kStages - 2 join tile 0 in flight before the loop.
  for (int t = 1; t < kStages - 1 && t < num_tiles; ++t) start_tile(t);
  for (int t = 0; t < num_tiles; ++t) {
    const int base = j_begin + t * kTile;
    const int n = min(kTile, j_end - base), cur = t % kStages;
    const TC* ktile = kbuf + cur * kTile * kstride;
    const TC* vtile = vbuf + cur * kTile * D;
    const int32_t* tile_slots = slot_buf + cur * kTile;
    // With kStages buffers, tile t + kStages - 1 goes into the buffer tile t - 1 left (the
    // previous iteration ended with a barrier), in flight while this tile computes.
    if (kStages > 1 && t + kStages - 1 < num_tiles) start_tile(t + kStages - 1);
    // Wait for tile t: the copies started after it may stay in flight.
    cp_async_wait_at_most(min(kStages - 1, num_tiles - 1 - t));
    __syncthreads();  // the tile (and q) are in shared memory
    // Scores: warp w takes rows w, w + 4, ...; lane = key. Each K chunk is read once for
    // all of the warp's rows.
    {
      const int jj = lane;
      const bool key_ok = jj < n && tile_slots[jj] >= 0;
      float sc[kRowsPerWarp];
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) sc[i] = 0.0f;
      if (key_ok) {
        constexpr int kPer = 16 / sizeof(TC);
        const TC* kr = ktile + jj * kstride;
        for (int ch = 0; ch < row_chunks; ++ch) {
          const uint4 raw = reinterpret_cast<const uint4*>(kr)[ch];
          const TC* kv = reinterpret_cast<const TC*>(&raw);
          float kf[kPer];
#pragma unroll
          for (int e = 0; e < kPer; ++e) kf[e] = to_float(kv[e]);
#pragma unroll
          for (int i = 0; i < kRowsPerWarp; ++i) {
            const int h = warp + i * kWarps;
            if (h >= rows) break;
            const float4* qh = reinterpret_cast<const float4*>(qs + h * D + ch * kPer);
#pragma unroll
            for (int e4 = 0; e4 < kPer / 4; ++e4) {
              const float4 qv = qh[e4];
              sc[i] += qv.x * kf[4 * e4] + qv.y * kf[4 * e4 + 1] + qv.z * kf[4 * e4 + 2] + qv.w * kf[4 * e4 + 3];
            }
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kRowsPerWarp; ++i) {
        const int h = warp + i * kWarps;
        if (h >= rows) break;
        bool seen = key_ok;
        if (seen && tokens_per_block > 1) {
          const int qi = i0 + h / heads, key = base + jj;
          seen = key < visible_of(qi) && (!mask_b || mask_b[static_cast<int64_t>(qi) * kv_len + key]);
        }
        const float s = seen ? sc[i] : -INFINITY;
        // Online softmax state of row h, kept by this warp.
        const float tile_max = warp_max(s);
        const float m_old = m_s[h];
        const float m_new = fmaxf(m_old, tile_max);
        const float p = (s == -INFINITY) ? 0.0f : __expf(s - m_new);
        const float tile_sum = warp_sum(p);
        probs[jj * kPS + h] = p;
        if (lane == 0) {
          const float corr = (m_new == -INFINITY) ? 1.0f : __expf(m_old - m_new);
          corr_s[h] = corr;
          l_s[h] = l_s[h] * corr + tile_sum;
          m_s[h] = m_new;
        }
      }
    }
    __syncthreads();
    // Accumulate P V: this thread's dims for every row.
#pragma unroll
    for (int h = 0; h < kRows; ++h) {
      if (h >= rows) break;
      const float corr = corr_s[h];
#pragma unroll
      for (int e = 0; e < kDimPer; ++e) acc[h][e] *= corr;
    }
    for (int jj = 0; jj < n; ++jj) {
      float vv[kDimPer];
#pragma unroll
      for (int e = 0; e < kDimPer; ++e) {
        const int d = threadIdx.x + e * kThreads;
        vv[e] = d < D ? to_float(vtile[jj * D + d]) : 0.0f;
      }
      const float4* pr = reinterpret_cast<const float4*>(probs + jj * kPS);
#pragma unroll
      for (int h4 = 0; h4 < kRows / 4; ++h4) {
        if (4 * h4 >= rows) break;
        const float4 p4 = pr[h4];
#pragma unroll
        for (int e = 0; e < kDimPer; ++e) {
          acc[4 * h4][e] += p4.x * vv[e];
          acc[4 * h4 + 1][e] += p4.y * vv[e];
          acc[4 * h4 + 2][e] += p4.z * vv[e];
          acc[4 * h4 + 3][e] += p4.w * vv[e];
        }
      }
    }
    __syncthreads();  // this tile's buffer is consumed before a later copy lands there
    if (kStages == 1 && t + 1 < num_tiles) start_tile(t + 1);
  }
  __syncthreads();
#pragma unroll  // acc stays in registers only while every index is known at compile time
  for (int h = 0; h < kRows; ++h) {
    if (h >= rows) break;
    const int64_t head = head0 + h % heads, t = t0 + h / heads;
    const float l = l_s[h];
#pragma unroll
    for (int e = 0; e < kDimPer; ++e) {
      const int d = threadIdx.x + e * kThreads;
      if (d >= D) continue;
      if (num_splits == 1) {
        out[(t * g.q_heads + head) * D + d] = from_float<TQ>(l > 0.0f ? acc[h][e] / l : 0.0f);
      } else {
        float* part = partial + ((t * g.q_heads + head) * num_splits + split) * (D + 2);
        part[d] = acc[h][e];
        if (d == 0) {
          part[D] = m_s[h];
          part[D + 1] = l;
        }
      }
    }
  }
}

// Merges the used splits of each (query token, head) row (attention_splits.cuh: the same
// BlockKeys as the attention kernel's, so empty splits are never read). One block a row.
template <class TQ>
__global__ void combine_splits_kernel(const float* partial, TQ* out, const int32_t* qo_indptr, const int32_t* kv_indptr, int batch,
                                      int q_heads, int64_t D, int num_splits, int tokens_per_block, bool masked, int min_split_keys) {
  __shared__ float weight[kMaxAttentionSplits];  // exp(m_s - max) * [l_s > 0]
  __shared__ float weighted_sum[kMaxAttentionSplits];
  __shared__ float inv_den;
  const int64_t row = blockIdx.x;  // token * q_heads + head
  const int t = static_cast<int>(row / q_heads);
  // The batch layout was uploaded before the forward began: read before waiting.
  const int b = find_sequence(qo_indptr, batch, t);
  const int q_len = qo_indptr[b + 1] - qo_indptr[b], kv_len = kv_indptr[b + 1] - kv_indptr[b];
  const int i0 = (t - qo_indptr[b]) / tokens_per_block * tokens_per_block;
  const int used = block_keys(q_len, kv_len, i0, tokens_per_block, masked, num_splits, min_split_keys).used_splits();
  pdl_begin();
  const float* base = partial + row * num_splits * (D + 2);
  // Every split's (max, sum) in one parallel round trip, then the weights from shared memory.
  float m = -INFINITY, l = 0.0f;
  if (threadIdx.x < used) {
    m = base[threadIdx.x * (D + 2) + D];
    l = base[threadIdx.x * (D + 2) + D + 1];
    if (!(l > 0.0f)) m = -INFINITY;
  }
  const float mx = warp_max(m);  // num_splits <= 64: the first two warps hold them all
  __shared__ float warp_mx[2];
  if (threadIdx.x < 64 && (threadIdx.x & 31) == 0) warp_mx[threadIdx.x >> 5] = mx;
  __syncthreads();
  const float gmax = fmaxf(warp_mx[0], used > 32 ? warp_mx[1] : -INFINITY);
  if (threadIdx.x < used) {
    weight[threadIdx.x] = (l > 0.0f && gmax != -INFINITY) ? __expf(m - gmax) : 0.0f;
    weighted_sum[threadIdx.x] = weight[threadIdx.x] * l;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float den = 0.0f;
    for (int s = 0; s < used; ++s) den += weighted_sum[s];
    inv_den = den > 0.0f ? 1.0f / den : 0.0f;
  }
  __syncthreads();
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.0f;
#pragma unroll 8
    for (int s = 0; s < used; ++s) num += base[s * (D + 2) + d] * weight[s];  // independent loads
    out[row * D + d] = from_float<TQ>(num * inv_den);
  }
}

}  // namespace

Status attention(const AttentionParams& p, void* stream) {
  if (p.q.dtype != p.out.dtype) return Status::error("attention (cuda): q and out must share a dtype");
  const int64_t tokens = p.q.dim(0);
  if (tokens == 0) return Status::ok();
  // Prefill-shaped batches on the tensor cores (ops_attention_prefill.cu).
  if (attention_prefill_on_tensor_cores(p)) return attention_prefill(p, stream);
  Geometry g{static_cast<int>(p.q.dim(1)), static_cast<int>(p.k_cache.dim(1)), static_cast<int>(p.q.dim(2)),
             static_cast<int>(p.q.dim(1) / p.k_cache.dim(1)), 0};
  g.head_chunks = (g.group + kMaxGroup - 1) / kMaxGroup;
  if (g.dim > kMaxDim || (g.dim * dtype_size(p.q.dtype)) % 16 != 0 || (g.dim * dtype_size(p.k_cache.dtype)) % 16 != 0)
    return Status::error("attention (cuda): head dim " + std::to_string(g.dim) + " must be at most " + std::to_string(kMaxDim) +
                         " and span whole 16-byte chunks of q and the cache");
  const int batch = static_cast<int>(p.qo_indptr.dim(0) - 1);
  if (batch < 1) return Status::error("attention (cuda): empty batch with tokens");
  const int tpb = p.tokens_per_block;
  const int rows = std::min(g.group, kMaxGroup) * tpb;
  if (tpb < 1 || tokens % tpb != 0 || (tpb > 1 && (g.head_chunks > 1 || rows > kMaxRows)))
    return Status::error("attention (cuda): " + std::to_string(tpb) + " tokens per block do not fit " + std::to_string(tokens) +
                         " tokens of GQA groups of " + std::to_string(g.group));
  const dim3 grid(static_cast<unsigned>(tokens / tpb), static_cast<unsigned>(g.kv_heads * g.head_chunks), static_cast<unsigned>(p.num_splits));
  float* partial = p.num_splits > 1 ? p.workspace.ptr<float>() : nullptr;
  const float scale = p.scale;
  static const int num_sms = cuda_runtime::sm_count();
  // Decode and verify batches that fit one mma tile of rows on the tensor cores
  // (ops_attention_decode.cu); the rest, and f32, on the kernel above.
  const bool tensor_cores = attention_decode_on_tensor_cores(p, num_sms);
  return AERIE_DISPATCH_FLOAT(p.q.dtype, TQ, [&]() -> Status {
    if (tensor_cores) {
      if (Status st = attention_decode_tc(p, partial, stream); !st.is_ok()) return st;
    } else AERIE_DISPATCH_FLOAT(p.k_cache.dtype, TC, [&] {
      auto launch = [&](auto kernel, int block_rows, int stages) {
        const size_t smem = Smem<TC>::bytes(g.dim, block_rows, stages);
        if (smem > 48 * 1024)  // f32 caches, large heads or many rows: opt in to more shared memory
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
        launch_pdl_unless(kPdlDecodeAttention, kernel, grid, dim3(kThreads), smem, as_stream(stream),
            p.q.ptr<TQ>(), p.k_cache.ptr<TC>(), p.v_cache.ptr<TC>(), p.out.ptr<TQ>(), p.qo_indptr.ptr<int32_t>(),
            p.kv_indptr.ptr<int32_t>(), p.kv_indices.ptr<int32_t>(),
            p.custom_mask.defined() ? p.custom_mask.ptr<uint8_t>() : nullptr,
            p.custom_mask.defined() ? p.mask_indptr.ptr<int32_t>() : nullptr, batch, g, scale, p.num_splits, partial,
            p.k_cache.dim(0), tpb, attention_min_split_keys());
      };
      auto by_stages = [&](auto dims_per_thread, auto stages) {
        constexpr int kDimPer = decltype(dims_per_thread)::value, kStages = decltype(stages)::value;
        if (rows <= 8) launch(attention_kernel<TQ, TC, 8, kDimPer, kStages>, 8, kStages);
        else if (rows <= 16) launch(attention_kernel<TQ, TC, 16, kDimPer, kStages>, 16, kStages);
        else launch(attention_kernel<TQ, TC, 32, kDimPer, kStages>, 32, kStages);
      };
      // Two tile buffers when the query blocks alone fill the GPU (large batches, where the
      // kernel is bound by reading the cache); one for small batches, where many short blocks
      // run split and the kernels of a step overlap (PDL) better with less shared memory
      // each (H200: batch 8 decode lost 1 ms per step with two).
      // Three buffers were measured too (H200, 8B decode at batch 32-256): no faster end to
      // end, so two. AERIE_ATTN_STAGES=1 (for measuring) gives large batches one buffer too.
      static const int forced_stages = env_knob("AERIE_ATTN_STAGES");
      const bool large = (tokens / tpb) * g.kv_heads * g.head_chunks >= num_sms;
      const int stages = large && forced_stages != 1 ? 2 : 1;
      auto by_rows = [&](auto dims_per_thread) {
        if (stages == 2) by_stages(dims_per_thread, std::integral_constant<int, 2>{});
        else by_stages(dims_per_thread, std::integral_constant<int, 1>{});
      };
      if (g.dim <= kThreads) by_rows(std::integral_constant<int, 1>{});
      else by_rows(std::integral_constant<int, 2>{});
    });
    if (p.num_splits > 1)
      launch_pdl_unless(kPdlAttentionCombine, combine_splits_kernel<TQ>, dim3(static_cast<unsigned>(tokens * g.q_heads)), dim3(128), 0, as_stream(stream),
                 static_cast<const float*>(partial), p.out.ptr<TQ>(), p.qo_indptr.ptr<int32_t>(), p.kv_indptr.ptr<int32_t>(), batch,
                 g.q_heads, static_cast<int64_t>(g.dim), p.num_splits, tpb, p.custom_mask.defined(), attention_min_split_keys());
    return launch_status("attention");
  });
}

}  // namespace aerie::kernels::cuda
