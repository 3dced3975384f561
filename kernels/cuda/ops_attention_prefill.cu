// Prefill attention on the tensor cores (FlashAttention-2's tiling with WMMA): a block takes
// 128 query tokens of one sequence and one query head, eight warps of 16 query rows each, and
// walks the keys the block can see in tiles of 64 gathered from the paged cache, in one pass
// with an online softmax: S = Q K^T (Q's fragments stay in registers), each row's running max
// and sum, P = exp(S - max) in the input dtype, O = O * correction + P V in fp32 fragments.
// Key and value tiles arrive by cp.async into two buffers, the next tile's copy in flight
// while this one computes; in the softmax a lane owns two columns of every row of its warp
// (conflict-free shared reads).
//
// The per-row correction of O needs each accumulator element's row: for sm_80+ m16n16k16 f32
// accumulators, element e of lane l sits in row l / 4 + 8 * ((e / 2) % 2) (the layout of
// mma.sync m16n8k16, twice). WMMA does not document it; CudaOps.PrefillAttentionOnTensorCores
// MatchesCpu (sequences of several key tiles) fails if it ever differs.
#include <mma.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kRowsPerBlock = 128;  // query tokens per block
constexpr int kKeysPerTile = 64;
constexpr int kWarps = 8;          // 16 query rows each
constexpr int kThreads = kWarps * 32;
static_assert(kAttentionPrefillMaxDim == 128, "the kernel instantiates head dims 16..128");

// Shared memory: Q [128][D], two K and two V tile buffers [64][D] (input dtype, rows padded by
// 8 elements against bank conflicts), per warp S [16][64] fp32 and P [16][64] in the input
// dtype. The output is staged through the K buffers at the end.
template <class T>
struct PrefillSmem {
  static constexpr int pad = 8;
  static size_t bytes(int dim) {
    const size_t ld = static_cast<size_t>(dim + pad);
    return (kRowsPerBlock + 4 * kKeysPerTile) * ld * sizeof(T) + kWarps * 16 * kKeysPerTile * (sizeof(float) + sizeof(T));
  }
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

template <class T>
using QFragment = wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major>;

// S_w [16][64] = Q_w [16][D] K^T for this warp's rows (Q as kDimBlocks fragments), scaled.
template <class T, int kDimBlocks>
__device__ __forceinline__ void scores(const QFragment<T>* qa, const T* k_tile, int ld, float* s_w, float scale) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kKeysPerTile / 16];
#pragma unroll
  for (int n = 0; n < kKeysPerTile / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
#pragma unroll
  for (int kb = 0; kb < kDimBlocks; ++kb) {
#pragma unroll
    for (int n = 0; n < kKeysPerTile / 16; ++n) {
      // K^T as a column-major [D][keys] matrix is K row-major [keys][D].
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
      wmma::load_matrix_sync(b, k_tile + n * 16 * ld + kb * 16, ld);
      wmma::mma_sync(acc[n], qa[kb], b, acc[n]);
    }
  }
#pragma unroll
  for (int n = 0; n < kKeysPerTile / 16; ++n) {
#pragma unroll
    for (int e = 0; e < acc[n].num_elements; ++e) acc[n].x[e] *= scale;
    wmma::store_matrix_sync(s_w + n * 16, acc[n], kKeysPerTile, wmma::mem_row_major);
  }
}

template <class T, int kDimBlocks>
__global__ void __launch_bounds__(kThreads) prefill_attention_kernel(const T* q, const T* k_cache, const T* v_cache, T* out,
                                                                     const int32_t* qo_indptr, const int32_t* kv_indptr,
                                                                     const int32_t* kv_indices, int batch, int q_heads,
                                                                     int kv_heads, float scale) {
  constexpr int D = kDimBlocks * 16;
  constexpr int ld = D + PrefillSmem<T>::pad;
  extern __shared__ __align__(128) unsigned char smem_raw[];
  T* q_s = reinterpret_cast<T*>(smem_raw);
  T* kv_s = q_s + kRowsPerBlock * ld;  // K buffers 0 and 1, then V buffers 0 and 1, kKeysPerTile rows each
  T* k_buf[2] = {kv_s, kv_s + kKeysPerTile * ld};
  T* v_buf[2] = {kv_s + 2 * kKeysPerTile * ld, kv_s + 3 * kKeysPerTile * ld};
  float* s_all = reinterpret_cast<float*>(kv_s + 4 * kKeysPerTile * ld);
  T* p_all = reinterpret_cast<T*>(s_all + kWarps * 16 * kKeysPerTile);

  pdl_begin();
  // Which sequence and which 128 of its tokens: blocks are numbered over every sequence's
  // ceil(q_len / 128) tiles in order; blocks past the last tile have nothing to do.
  int b = 0, tile = blockIdx.x;
  for (; b < batch; ++b) {
    const int tiles = (qo_indptr[b + 1] - qo_indptr[b] + kRowsPerBlock - 1) / kRowsPerBlock;
    if (tile < tiles) break;
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

  // Q rows (missing rows: zeros) travel with the first K tile.
  const int chunks = D * static_cast<int>(sizeof(T)) / 16;
  for (int idx = threadIdx.x; idx < kRowsPerBlock * chunks; idx += kThreads) {
    const int r = idx / chunks, c = idx % chunks;
    const bool valid = r < rows;
    cp_async16(q_s + r * ld + c * (16 / sizeof(T)), valid ? q + ((row0 + r) * q_heads + h) * D + c * (16 / sizeof(T)) : q, valid);
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  float* s_w = s_all + warp * 16 * kKeysPerTile;
  T* p_w = p_all + warp * 16 * kKeysPerTile;
  // Lane owns columns lane and lane + 32 of each of its warp's 16 rows; row r's last visible
  // key is limit0 + r.
  const int limit0 = first_pos + warp * 16;
  float m_run[16], l_run[16];
#pragma unroll
  for (int r = 0; r < 16; ++r) m_run[r] = -INFINITY, l_run[r] = 0.0f;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> o[kDimBlocks];
#pragma unroll
  for (int d = 0; d < kDimBlocks; ++d) wmma::fill_fragment(o[d], 0.0f);
  QFragment<T> qa[kDimBlocks];
  // The accumulator rows this lane holds (see the top of the file).
  const int row_lo = lane / 4, row_hi = row_lo + 8;

  load_tile_async(k_buf[0], ld, k_cache, seq_slots, 0, visible, kv_heads, kvh, D);
  load_tile_async(v_buf[0], ld, v_cache, seq_slots, 0, visible, kv_heads, kvh, D);
  cp_async_commit();
  for (int t = 0; t < num_tiles; ++t) {
    const int j0 = t * kKeysPerTile;
    if (t + 1 < num_tiles) {
      load_tile_async(k_buf[(t + 1) % 2], ld, k_cache, seq_slots, j0 + kKeysPerTile, visible, kv_heads, kvh, D);
      load_tile_async(v_buf[(t + 1) % 2], ld, v_cache, seq_slots, j0 + kKeysPerTile, visible, kv_heads, kvh, D);
      cp_async_commit();
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // tile t (and q) landed for every thread
    if (t == 0) {
#pragma unroll
      for (int kb = 0; kb < kDimBlocks; ++kb) wmma::load_matrix_sync(qa[kb], q_s + warp * 16 * ld + kb * 16, ld);
    }
    scores<T, kDimBlocks>(qa, k_buf[t % 2], ld, s_w, scale);
    __syncwarp();
    float corr_lo = 1.0f, corr_hi = 1.0f;
#pragma unroll
    for (int r = 0; r < 16; ++r) {
      const int limit = min(limit0 + r, visible - 1);
      const bool see0 = j0 + lane <= limit, see1 = j0 + lane + 32 <= limit;
      const float s0 = s_w[r * kKeysPerTile + lane], s1 = s_w[r * kKeysPerTile + lane + 32];
      const float m_new = fmaxf(m_run[r], warp_max(fmaxf(see0 ? s0 : -INFINITY, see1 ? s1 : -INFINITY)));
      // m_new is the same in every lane; -inf: nothing visible yet, P row stays 0.
      const float p0 = see0 && m_new != -INFINITY ? __expf(s0 - m_new) : 0.0f;
      const float p1 = see1 && m_new != -INFINITY ? __expf(s1 - m_new) : 0.0f;
      const float corr = m_run[r] == -INFINITY ? 0.0f : __expf(m_run[r] - m_new);
      l_run[r] = l_run[r] * corr + warp_sum(p0 + p1);
      m_run[r] = m_new;
      p_w[r * kKeysPerTile + lane] = from_float<T>(p0);
      p_w[r * kKeysPerTile + lane + 32] = from_float<T>(p1);
      if (r == row_lo) corr_lo = corr;
      if (r == row_hi) corr_hi = corr;
    }
    __syncwarp();
#pragma unroll
    for (int d = 0; d < kDimBlocks; ++d)
#pragma unroll
      for (int e = 0; e < o[d].num_elements; ++e) o[d].x[e] *= ((e / 2) % 2) ? corr_hi : corr_lo;
    const T* v_tile = v_buf[t % 2];
#pragma unroll
    for (int k = 0; k < kKeysPerTile; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::load_matrix_sync(a, p_w + k, kKeysPerTile);
#pragma unroll
      for (int d = 0; d < kDimBlocks; ++d) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(bv, v_tile + k * ld + d * 16, ld);
        wmma::mma_sync(o[d], a, bv, o[d]);
      }
    }
    __syncthreads();  // buffers t % 2 consumed before the copy two tiles ahead lands there
  }
  // Each row's sum divides at the end; rows that saw nothing give zeros.
  float inv_lo = 0.0f, inv_hi = 0.0f;
#pragma unroll
  for (int r = 0; r < 16; ++r) {
    const float inv = l_run[r] > 0.0f ? 1.0f / l_run[r] : 0.0f;
    if (r == row_lo) inv_lo = inv;
    if (r == row_hi) inv_hi = inv;
  }
#pragma unroll
  for (int d = 0; d < kDimBlocks; ++d)
#pragma unroll
    for (int e = 0; e < o[d].num_elements; ++e) o[d].x[e] *= ((e / 2) % 2) ? inv_hi : inv_lo;
  // Out: each warp stages its 16 x D fp32 rows through the (now free) K and V buffers.
  float* o_w = reinterpret_cast<float*>(k_buf[0]) + warp * 16 * D;
#pragma unroll
  for (int d = 0; d < kDimBlocks; ++d) wmma::store_matrix_sync(o_w + d * 16, o[d], D, wmma::mem_row_major);
  __syncwarp();
  for (int idx = lane; idx < 16 * D; idx += 32) {
    const int r = idx / D, c = idx % D, br = warp * 16 + r;
    if (br < rows) out[((row0 + br) * q_heads + h) * D + c] = from_float<T>(o_w[idx]);
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
