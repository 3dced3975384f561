// Decode and verify attention on the tensor cores (mma.sync m16n8k16, FlashAttention-2's
// register layout). A block serves one KV head of `tokens_per_block` query tokens of one
// sequence: the 16 rows of an mma tile are the GQA group's heads x those tokens (rows past
// them are zeros), so each K/V tile is read once for all of them. Its four warps walk the
// split's keys in tiles of 16, interleaved (warp w takes tiles w, w + 4, ...), each warp with
// its own two cp.async buffers (the next tile's copy in flight while this one computes), its
// own online softmax and fp32 output fragments; at the end the warps' partial results are
// merged in shared memory (as the splits are merged by the combine kernel).
//
// Why: the CUDA-core kernel (ops_attention.cu) spends ~600 warp instructions per 32-key tile
// on shared-memory reads, conversions and FMAs and ran a batch-128 decode step's attention at
// ~40% of HBM bandwidth (docs/performance.md); here a 16-key tile is 16 ldmatrix + 32 mma.
#include <cstdint>
#include <string>

#include "kernels/cuda/attention_decode.cuh"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/attention_fragments.cuh"
#include "kernels/cuda/attention_splits.cuh"

namespace aerie::kernels::cuda {

namespace {

constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kKeys = 16;   // keys per warp tile (the k of the P V mma)
constexpr int kStages = 2;  // tile buffers per warp
static_assert(kAttentionDecodeTcMaxRows == 16, "one m16 tile of rows");

// Shared memory: per warp, kStages x (K tile, V tile) of [16 keys][D + 8] (8 elements of
// padding put the eight rows an ldmatrix reads in distinct banks). At the end the warps'
// fp32 outputs [16][D] are staged in the same memory.
template <class T, int D>
struct DecodeSmem {
  static constexpr int ld = D + 8;
  static constexpr int tile = kKeys * ld;
  static constexpr int per_warp = kStages * 2 * tile;
  static constexpr size_t bytes = static_cast<size_t>(kWarps) * per_warp * sizeof(T);
  static_assert(static_cast<size_t>(kWarps) * 16 * D * sizeof(float) <= bytes, "the merge reuses the tiles' memory");
};

template <class T, int D>
__global__ void __launch_bounds__(kThreads) decode_attention_tc_kernel(
    const T* q, const T* kc, const T* vc, T* out, const int32_t* qo_indptr, const int32_t* kv_indptr,
    const int32_t* kv_indices, const uint8_t* mask, const int32_t* mask_indptr, int batch, int q_heads, int kv_heads,
    int group, float scale, int num_splits, float* partial, int64_t num_slots, int tokens_per_block, int min_split_keys) {
  using Smem = DecodeSmem<T, D>;
  constexpr int kSteps = D / 16;                       // k-steps of Q K^T, dim pairs of P V
  constexpr int kChunks = D * static_cast<int>(sizeof(T)) / 16;  // 16-byte chunks per cache row
  extern __shared__ __align__(16) unsigned char smem_raw[];
  __shared__ float m_w[kWarps][16], l_w[kWarps][16];
  pdl_trigger();
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  const int g = lane >> 2, c = 2 * (lane & 3);  // this lane's fragment row and column pair
  const int t0 = blockIdx.x * tokens_per_block, kvh = blockIdx.y, split = blockIdx.z;
  const int head0 = kvh * group, rows = group * tokens_per_block;
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
  const int j_begin = keys.begin(split), j_end = keys.end(split);
  const int32_t* slots = kv_indices + kv_indptr[b];
  const int num_tiles = (j_end - j_begin + kKeys - 1) / kKeys;
  const int my_tiles = num_tiles > warp ? (num_tiles - warp + kWarps - 1) / kWarps : 0;
  auto tile_base = [&](int local) { return j_begin + (warp + local * kWarps) * kKeys; };
  // Lane k < 16: the slot of key k of this warp's tile `local` (-1: none, or out of the cache).
  auto load_slot = [&](int local) -> int {
    const int j = tile_base(local) + lane;
    if (lane >= kKeys || local >= my_tiles || j >= j_end) return -1;
    const int s = slots[j];
    return (s < 0 || s >= num_slots) ? -1 : s;
  };
  // The lane's two rows: lo = g, hi = g + 8 (head r % group of token i0 + r / group).
  const bool lo_ok = g < rows, hi_ok = g + 8 < rows;
  const int qi_lo = i0 + g / group, qi_hi = i0 + (g + 8) / group;
  const int vis_lo = lo_ok ? visible_of(qi_lo) : 0, vis_hi = hi_ok ? visible_of(qi_hi) : 0;
  // The slot lists were uploaded before the forward began: read while the previous kernel
  // (which writes q and this step's K/V) still runs.
  int next_slot = load_slot(0);
  pdl_wait();

  uint32_t qa[kSteps][4];  // Q as A fragments, in the input dtype (the scale applies to S)
  load_a_rows<T, kSteps>(qa, q + (static_cast<int64_t>(t0 + g / group) * q_heads + head0 + g % group) * D + c,
                         q + (static_cast<int64_t>(t0 + (g + 8) / group) * q_heads + head0 + (g + 8) % group) * D + c, lo_ok, hi_ok);

  T* wbase = reinterpret_cast<T*>(smem_raw) + warp * Smem::per_warp;
  // Starts copying the K and V rows of the keys whose slots lanes 0..15 hold into buffer
  // `stage` (keys without a slot become zeros, so p * V stays finite); returns which of the
  // 16 keys have one.
  auto issue = [&](int stage, int slot) -> unsigned {
    const unsigned have = __ballot_sync(0xffffffffu, slot >= 0) & 0xffffu;
    T* kt = wbase + stage * 2 * Smem::tile;
    T* vt = kt + Smem::tile;
#pragma unroll
    for (int u = 0; u < kKeys * kChunks / 32; ++u) {
      const int idx = lane + 32 * u, key = idx / kChunks, ch = idx % kChunks;
      const int sl = __shfl_sync(0xffffffffu, slot, key);
      const int64_t off = sl >= 0 ? (static_cast<int64_t>(sl) * kv_heads + kvh) * D + ch * 8 : 0;
      cp_async16(kt + key * Smem::ld + ch * 8, kc + off, sl >= 0);
      cp_async16(vt + key * Smem::ld + ch * 8, vc + off, sl >= 0);
    }
    cp_async_commit();
    return have;
  };

  float o[2 * kSteps][4];  // output fragments: 8 dims each
#pragma unroll
  for (int n = 0; n < 2 * kSteps; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  RowPairSoftmax softmax;
  unsigned have_cur = 0, have_next = 0;
  if (my_tiles > 0) {
    have_cur = issue(0, next_slot);
    next_slot = load_slot(1);
  }
  for (int t = 0; t < my_tiles; ++t) {
    const int stage = t & 1;
    if (t + 1 < my_tiles) {
      have_next = issue(stage ^ 1, next_slot);
      next_slot = load_slot(t + 2);  // used by the next iteration's copy
      cp_async_wait<1>();
    } else {
      cp_async_wait<0>();
    }
    __syncwarp();
    const T* kt = wbase + stage * 2 * Smem::tile;
    const T* vt = kt + Smem::tile;
    // S = Q K^T over two 8-key halves. ldmatrix: lanes 0-7 address keys 0-7 at the k-step's
    // first 8 dims, 8-15 the same keys' next 8, 16-31 keys 8-15 likewise.
    float s[2][4] = {{0.0f, 0.0f, 0.0f, 0.0f}, {0.0f, 0.0f, 0.0f, 0.0f}};
    {
      const T* k_row = kt + ((lane & 7) + ((lane >> 4) << 3)) * Smem::ld + ((lane >> 3) & 1) * 8;
#pragma unroll
      for (int kk = 0; kk < kSteps; ++kk) {
        uint32_t kb[4];
        ldmatrix_x4<false>(kb, k_row + kk * 16);
        mma_m16n8k16<T>(s[0], qa[kk], kb[0], kb[1]);
        mma_m16n8k16<T>(s[1], qa[kk], kb[2], kb[3]);
      }
    }
    // Element e of half h: row lo (e < 2) or hi, key h * 8 + c + (e & 1) of the tile.
    const int base = tile_base(t);
#pragma unroll
    for (int h = 0; h < 2; ++h)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int kj = h * 8 + c + (e & 1), j = base + kj;
        const bool hi = e >= 2;
        bool seen = ((have_cur >> kj) & 1u) && (hi ? hi_ok && j < vis_hi : lo_ok && j < vis_lo);
        if (seen && mask_b) seen = mask_b[static_cast<int64_t>(hi ? qi_hi : qi_lo) * kv_len + j] != 0;
        s[h][e] = seen ? s[h][e] * scale : -INFINITY;
      }
    float corr_lo, corr_hi;
    softmax.step(s, corr_lo, corr_hi);
    scale_rows(o, corr_lo, corr_hi);
    // P (16 rows x 16 keys) is already in the A layout: S's accumulators, two halves.
    uint32_t pa[4];
    p_fragment<T>(s, 0, pa);
    // O += P V, 16 dims per ldmatrix.trans: lanes 0-7 address keys 0-7 at dims d..d+7, 8-15
    // keys 8-15 there, 16-31 the same keys at dims d+8..d+15.
    const T* v_row = vt + ((lane & 7) + ((lane >> 3) & 1) * 8) * Smem::ld + (lane >> 4) * 8;
#pragma unroll
    for (int dn = 0; dn < kSteps; ++dn) {
      uint32_t vb[4];
      ldmatrix_x4<true>(vb, v_row + dn * 16);
      mma_m16n8k16<T>(o[2 * dn], pa, vb[0], vb[1]);
      mma_m16n8k16<T>(o[2 * dn + 1], pa, vb[2], vb[3]);
    }
    __syncwarp();  // this buffer is consumed before the next iteration copies into it
    have_cur = have_next;
  }
  softmax.finish();

  // Merge the four warps' (max, sum, output) per row, as the combine kernel merges splits.
  __syncthreads();  // every warp is done with its tiles: their memory holds the outputs now
  float* staged = reinterpret_cast<float*>(smem_raw);  // [warp][16][D]
  float* mine = staged + warp * 16 * D;
#pragma unroll
  for (int n = 0; n < 2 * kSteps; ++n) {
    if (lo_ok) *reinterpret_cast<float2*>(mine + g * D + n * 8 + c) = make_float2(o[n][0], o[n][1]);
    if (hi_ok) *reinterpret_cast<float2*>(mine + (g + 8) * D + n * 8 + c) = make_float2(o[n][2], o[n][3]);
  }
  if ((lane & 3) == 0) {
    m_w[warp][g] = softmax.m_lo;
    l_w[warp][g] = softmax.l_lo;
    m_w[warp][g + 8] = softmax.m_hi;
    l_w[warp][g + 8] = softmax.l_hi;
  }
  __syncthreads();
  for (int idx = threadIdx.x; idx < rows * D; idx += kThreads) {
    const int r = idx / D, d = idx % D;
    float mx = -INFINITY;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      if (l_w[w][r] > 0.0f) mx = fmaxf(mx, m_w[w][r]);
    float sum = 0.0f, acc = 0.0f;
#pragma unroll
    for (int w = 0; w < kWarps; ++w)
      if (l_w[w][r] > 0.0f) {
        const float e = __expf(m_w[w][r] - mx);
        sum += e * l_w[w][r];
        acc += e * staged[(w * 16 + r) * D + d];
      }
    const int64_t row = static_cast<int64_t>(t0 + r / group) * q_heads + head0 + r % group;
    if (num_splits == 1) {
      out[row * D + d] = from_float<T>(sum > 0.0f ? acc / sum : 0.0f);
    } else {
      float* part = partial + (row * num_splits + split) * (D + 2);
      part[d] = acc;
      if (d == 0) {
        part[D] = mx;
        part[D + 1] = sum;
      }
    }
  }
}

template <class T, int D>
Status launch(const AttentionParams& p, float* partial, void* stream) {
  auto kernel = decode_attention_tc_kernel<T, D>;
  constexpr size_t smem = DecodeSmem<T, D>::bytes;
  if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  const int q_heads = static_cast<int>(p.q.dim(1)), kv_heads = static_cast<int>(p.k_cache.dim(1));
  const int tpb = p.tokens_per_block;
  const dim3 grid(static_cast<unsigned>(p.q.dim(0) / tpb), static_cast<unsigned>(kv_heads), static_cast<unsigned>(p.num_splits));
  launch_pdl_unless(kPdlDecodeAttentionTc, kernel, grid, dim3(kThreads), smem, as_stream(stream), p.q.ptr<T>(), p.k_cache.ptr<T>(), p.v_cache.ptr<T>(),
             p.out.ptr<T>(), p.qo_indptr.ptr<int32_t>(), p.kv_indptr.ptr<int32_t>(), p.kv_indices.ptr<int32_t>(),
             p.custom_mask.defined() ? p.custom_mask.ptr<uint8_t>() : nullptr,
             p.custom_mask.defined() ? p.mask_indptr.ptr<int32_t>() : nullptr, static_cast<int>(p.qo_indptr.dim(0) - 1),
             q_heads, kv_heads, q_heads / kv_heads, p.scale, p.num_splits, partial, p.k_cache.dim(0), tpb, attention_min_split_keys());
  return launch_status("attention (tensor-core decode)");
}

}  // namespace

Status attention_decode_tc(const AttentionParams& p, float* partial, void* stream) {
  const bool bf16 = p.q.dtype == DType::kBF16;
  switch (p.q.dim(2)) {
    case 64: return bf16 ? launch<__nv_bfloat16, 64>(p, partial, stream) : launch<__half, 64>(p, partial, stream);
    case 128: return bf16 ? launch<__nv_bfloat16, 128>(p, partial, stream) : launch<__half, 128>(p, partial, stream);
    default: return Status::error("attention (tensor-core decode): head dim " + std::to_string(p.q.dim(2)) + " is not 64 or 128");
  }
}

}  // namespace aerie::kernels::cuda
