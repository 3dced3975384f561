// Prefill attention on the tensor cores (FlashAttention-2's tiling with WMMA): a block takes
// 64 query tokens of one sequence and one query head, four warps of 16 query rows each, and
// walks the keys the block can see in tiles of 64 gathered from the paged cache. Two passes:
// the first finds each row's softmax max and sum from S = Q K^T, the second recomputes S,
// forms P = exp(S - max) / sum in the input dtype and accumulates O += P V in fp32 fragments.
// Recomputing Q K^T (cheap on tensor cores) keeps the accumulators in registers without the
// per-tile rescaling that WMMA's opaque fragment layout makes awkward.
#include <mma.h>

#include <cstdint>
#include <string>

#include "kernels/cuda/attention_prefill.cuh"
#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

namespace {

namespace wmma = nvcuda::wmma;

constexpr int kRowsPerBlock = 64;  // query tokens per block
constexpr int kKeysPerTile = 64;
constexpr int kWarps = 4;          // 16 query rows each
constexpr int kThreads = kWarps * 32;
static_assert(kAttentionPrefillMaxDim == 128, "the kernel instantiates head dims 16..128");

// Shared memory: Q [64][D], K and V tiles [64][D] (input dtype, rows padded by 8 elements
// against bank conflicts), per warp S [16][64] fp32 and P [16][64] in the input dtype, each
// row's max and sum, the tile's slots. The output is staged through the K/V space at the end.
template <class T>
struct PrefillSmem {
  static constexpr int pad = 8;
  static size_t bytes(int dim) {
    const size_t ld = static_cast<size_t>(dim + pad);
    return (3 * kRowsPerBlock * ld) * sizeof(T) + kWarps * 16 * kKeysPerTile * (sizeof(float) + sizeof(T)) +
           2 * kRowsPerBlock * sizeof(float) + kKeysPerTile * sizeof(int32_t);
  }
};

// Fills rows [0, 64) of a tile (ld = dim + pad) from the cache rows of `slots` (-1: zeros).
template <class T>
__device__ __forceinline__ void load_rows(T* tile, int ld, const T* cache, const int32_t* slots, int64_t kv_heads, int kvh, int dim) {
  const int chunks = dim * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per row
  for (int idx = threadIdx.x; idx < kKeysPerTile * chunks; idx += kThreads) {
    const int r = idx / chunks, c = idx % chunks;
    const int32_t slot = slots[r];
    uint4 v = make_uint4(0, 0, 0, 0);
    if (slot >= 0) v = reinterpret_cast<const uint4*>(cache + (static_cast<int64_t>(slot) * kv_heads + kvh) * dim)[c];
    reinterpret_cast<uint4*>(tile + r * ld)[c] = v;
  }
}

// S_w [16][64] = Q_w [16][D] K^T for this warp's rows, scaled.
template <class T>
__device__ __forceinline__ void scores(const T* q_w, const T* k_tile, int ld, int dim, float* s_w, float scale) {
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[kKeysPerTile / 16];
#pragma unroll
  for (int n = 0; n < kKeysPerTile / 16; ++n) wmma::fill_fragment(acc[n], 0.0f);
  for (int k = 0; k < dim; k += 16) {
    wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
    wmma::load_matrix_sync(a, q_w + k, ld);
#pragma unroll
    for (int n = 0; n < kKeysPerTile / 16; ++n) {
      // K^T as a column-major [D][keys] matrix is K row-major [keys][D].
      wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::col_major> b;
      wmma::load_matrix_sync(b, k_tile + n * 16 * ld + k, ld);
      wmma::mma_sync(acc[n], a, b, acc[n]);
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
  T* k_s = q_s + kRowsPerBlock * ld;
  T* v_s = k_s + kRowsPerBlock * ld;
  float* s_all = reinterpret_cast<float*>(v_s + kRowsPerBlock * ld);
  T* p_all = reinterpret_cast<T*>(s_all + kWarps * 16 * kKeysPerTile);
  float* row_max = reinterpret_cast<float*>(p_all + kWarps * 16 * kKeysPerTile);
  float* row_sum = row_max + kRowsPerBlock;
  int32_t* slots = reinterpret_cast<int32_t*>(row_sum + kRowsPerBlock);

  pdl_begin();
  // Which sequence and which 64 of its tokens: blocks are numbered over every sequence's
  // ceil(q_len / 64) tiles in order; blocks past the last tile have nothing to do.
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

  // Q rows (missing rows: zeros).
  const int chunks = D * static_cast<int>(sizeof(T)) / 16;
  for (int idx = threadIdx.x; idx < kRowsPerBlock * chunks; idx += kThreads) {
    const int r = idx / chunks, c = idx % chunks;
    uint4 v = make_uint4(0, 0, 0, 0);
    if (r < rows) v = reinterpret_cast<const uint4*>(q + ((row0 + r) * q_heads + h) * D)[c];
    reinterpret_cast<uint4*>(q_s + r * ld)[c] = v;
  }
  if (threadIdx.x < kRowsPerBlock) {
    row_max[threadIdx.x] = -INFINITY;
    row_sum[threadIdx.x] = 0.0f;
  }
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const T* q_w = q_s + warp * 16 * ld;
  float* s_w = s_all + warp * 16 * kKeysPerTile;
  T* p_w = p_all + warp * 16 * kKeysPerTile;
  // Two lanes per row, 32 keys each.
  const int my_row = lane / 2, my_half = lane % 2;
  const int block_row = warp * 16 + my_row;
  const int my_limit = first_pos + block_row;  // last key this row sees

  // Pass 1: each row's max and sum of exp over its visible keys.
  for (int j0 = 0; j0 < visible; j0 += kKeysPerTile) {
    __syncthreads();  // the previous tile is consumed
    if (threadIdx.x < kKeysPerTile) slots[threadIdx.x] = j0 + threadIdx.x < visible ? seq_slots[j0 + threadIdx.x] : -1;
    __syncthreads();
    load_rows(k_s, ld, k_cache, slots, kv_heads, kvh, D);
    __syncthreads();
    scores(q_w, k_s, ld, D, s_w, scale);
    __syncwarp();
    float m = -INFINITY;
    for (int c = my_half * 32; c < my_half * 32 + 32; ++c)
      if (j0 + c <= my_limit && j0 + c < visible) m = fmaxf(m, s_w[my_row * kKeysPerTile + c]);
    m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
    const float m_old = row_max[block_row], m_new = fmaxf(m_old, m);
    float l = 0.0f;
    if (m_new != -INFINITY)
      for (int c = my_half * 32; c < my_half * 32 + 32; ++c)
        if (j0 + c <= my_limit && j0 + c < visible) l += __expf(s_w[my_row * kKeysPerTile + c] - m_new);
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    __syncwarp();
    if (my_half == 0 && m_new != -INFINITY) {
      row_sum[block_row] = row_sum[block_row] * (m_old == -INFINITY ? 0.0f : __expf(m_old - m_new)) + l;
      row_max[block_row] = m_new;
    }
    __syncwarp();
  }

  // Pass 2: O = sum over tiles of P V, P already divided by the row's sum.
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> o[kDimBlocks];
#pragma unroll
  for (int d = 0; d < kDimBlocks; ++d) wmma::fill_fragment(o[d], 0.0f);
  const float my_max = row_max[block_row], my_sum = row_sum[block_row];
  const float inv_sum = my_sum > 0.0f ? 1.0f / my_sum : 0.0f;
  for (int j0 = 0; j0 < visible; j0 += kKeysPerTile) {
    __syncthreads();
    if (threadIdx.x < kKeysPerTile) slots[threadIdx.x] = j0 + threadIdx.x < visible ? seq_slots[j0 + threadIdx.x] : -1;
    __syncthreads();
    load_rows(k_s, ld, k_cache, slots, kv_heads, kvh, D);
    load_rows(v_s, ld, v_cache, slots, kv_heads, kvh, D);
    __syncthreads();
    scores(q_w, k_s, ld, D, s_w, scale);
    __syncwarp();
    for (int c = my_half * 32; c < my_half * 32 + 32; ++c) {
      const bool seen = j0 + c <= my_limit && j0 + c < visible && inv_sum > 0.0f;
      p_w[my_row * kKeysPerTile + c] = from_float<T>(seen ? __expf(s_w[my_row * kKeysPerTile + c] - my_max) * inv_sum : 0.0f);
    }
    __syncwarp();
#pragma unroll
    for (int k = 0; k < kKeysPerTile; k += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, T, wmma::row_major> a;
      wmma::load_matrix_sync(a, p_w + k, kKeysPerTile);
#pragma unroll
      for (int d = 0; d < kDimBlocks; ++d) {
        wmma::fragment<wmma::matrix_b, 16, 16, 16, T, wmma::row_major> bv;
        wmma::load_matrix_sync(bv, v_s + k * ld + d * 16, ld);
        wmma::mma_sync(o[d], a, bv, o[d]);
      }
    }
  }
  // Out: each warp stages its 16 x D fp32 rows through the (now free) K/V space.
  __syncthreads();
  float* o_w = reinterpret_cast<float*>(k_s) + warp * 16 * D;
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
  // Every sequence's tiles fit in tokens / 64 + batch blocks; the extra ones return at once.
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
