// Paged attention for ragged batches (prefill, extend, decode, draft trees): one block per
// (query token, KV head, split) handles every query head of the GQA group, streaming the
// visible keys in tiles with an online softmax; splits > 1 combine in a second kernel
// (flash-decoding).
#include "kernels/cuda/common.cuh"

namespace aerie::kernels::cuda {

namespace {

constexpr int kThreads = 128;
constexpr int kWarps = kThreads / 32;
constexpr int kTile = 32;       // keys per tile
constexpr int kMaxGroup = 8;    // query heads per block (a larger GQA group uses more blocks)
constexpr int kMaxDim = 256;
constexpr int kDimPerThread = kMaxDim / kThreads;

struct Geometry {
  int64_t q_heads, kv_heads, dim, group, head_chunks;
};

__device__ __forceinline__ int find_sequence(const int32_t* qo_indptr, int batch, int64_t t) {
  int lo = 0, hi = batch - 1;  // the last b with qo_indptr[b] <= t
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (qo_indptr[mid] <= t) lo = mid;
    else hi = mid - 1;
  }
  return lo;
}

template <class TQ, class TC>
__global__ void __launch_bounds__(kThreads) attention_kernel(
    const TQ* q, const TC* kc, const TC* vc, TQ* out, const int32_t* qo_indptr, const int32_t* kv_indptr,
    const int32_t* kv_indices, const uint8_t* mask, const int32_t* mask_indptr, int batch, Geometry g, float scale,
    int num_splits, float* partial, int64_t num_slots) {
  __shared__ float qs[kMaxGroup][kMaxDim];
  __shared__ float scores[kMaxGroup][kTile];
  __shared__ int32_t tile_slots[kTile];
  const int64_t t = blockIdx.x;
  const int64_t kvh = blockIdx.y / g.head_chunks;
  const int64_t head0 = kvh * g.group + (blockIdx.y % g.head_chunks) * kMaxGroup;
  const int heads = static_cast<int>(min64(kMaxGroup, kvh * g.group + g.group - head0));
  const int split = blockIdx.z;
  const int b = find_sequence(qo_indptr, batch, t);
  const int64_t q_len = qo_indptr[b + 1] - qo_indptr[b], kv_len = kv_indptr[b + 1] - kv_indptr[b];
  const int64_t i = t - qo_indptr[b];
  const uint8_t* mrow = mask ? mask + mask_indptr[b] + i * kv_len : nullptr;
  // Keys this query may see lie in [0, visible): all of them with a mask, else causally.
  const int64_t visible = mask ? kv_len : min64(kv_len, max64(0, kv_len - q_len + i + 1));
  const int64_t chunk = (visible + num_splits - 1) / num_splits;
  const int64_t j_begin = min64(visible, split * chunk), j_end = min64(visible, j_begin + chunk);
  const int32_t* slots = kv_indices + kv_indptr[b];
  const int64_t D = g.dim;

  for (int idx = threadIdx.x; idx < heads * D; idx += kThreads)
    qs[idx / D][idx % D] = to_float(q[(t * g.q_heads + head0 + idx / D) * D + idx % D]) * scale;

  float m[kMaxGroup], l[kMaxGroup], acc[kMaxGroup][kDimPerThread];
#pragma unroll
  for (int h = 0; h < kMaxGroup; ++h) {
    m[h] = -INFINITY;
    l[h] = 0.0f;
#pragma unroll
    for (int e = 0; e < kDimPerThread; ++e) acc[h][e] = 0.0f;
  }
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
  for (int64_t base = j_begin; base < j_end; base += kTile) {
    const int n = static_cast<int>(min64(kTile, j_end - base));
    __syncthreads();  // qs ready; previous tile's scores consumed
    if (threadIdx.x < kTile) {
      int32_t s = threadIdx.x < n ? slots[base + threadIdx.x] : -1;
      tile_slots[threadIdx.x] = (s >= 0 && s < num_slots) ? s : -1;
    }
    __syncthreads();
    for (int jj = warp; jj < kTile; jj += kWarps) {
      const int64_t j = base + jj;
      const int32_t s = tile_slots[jj];
      const bool ok = jj < n && s >= 0 && (!mrow || mrow[j]);
      float dots[kMaxGroup];
#pragma unroll
      for (int h = 0; h < kMaxGroup; ++h) dots[h] = 0.0f;
      if (ok) {
        const TC* krow = kc + (static_cast<int64_t>(s) * g.kv_heads + kvh) * D;
        for (int64_t d = lane; d < D; d += 32) {
          const float kv = to_float(krow[d]);
#pragma unroll
          for (int h = 0; h < kMaxGroup; ++h)
            if (h < heads) dots[h] += qs[h][d] * kv;
        }
      }
#pragma unroll
      for (int h = 0; h < kMaxGroup; ++h) {
        const float v = warp_sum(dots[h]);
        if (lane == 0 && h < heads) scores[h][jj] = ok ? v : -INFINITY;
      }
    }
    __syncthreads();
    // Online softmax: every thread follows all heads, and accumulates its dims of V.
#pragma unroll
    for (int h = 0; h < kMaxGroup; ++h) {
      if (h >= heads) break;
      float tile_max = -INFINITY;
      for (int jj = 0; jj < n; ++jj) tile_max = fmaxf(tile_max, scores[h][jj]);
      if (tile_max == -INFINITY) continue;
      const float new_m = fmaxf(m[h], tile_max);
      const float corr = __expf(m[h] - new_m);
      l[h] *= corr;
#pragma unroll
      for (int e = 0; e < kDimPerThread; ++e) acc[h][e] *= corr;
      m[h] = new_m;
    }
    for (int jj = 0; jj < n; ++jj) {
      const int32_t s = tile_slots[jj];
      if (s < 0) continue;
      const TC* vrow = vc + (static_cast<int64_t>(s) * g.kv_heads + kvh) * D;
      float vv[kDimPerThread];
#pragma unroll
      for (int e = 0; e < kDimPerThread; ++e) {
        const int64_t d = threadIdx.x + e * kThreads;
        vv[e] = d < D ? to_float(vrow[d]) : 0.0f;
      }
#pragma unroll
      for (int h = 0; h < kMaxGroup; ++h) {
        if (h >= heads) break;
        const float sc = scores[h][jj];
        if (sc == -INFINITY) continue;
        const float pj = __expf(sc - m[h]);
        l[h] += pj;
#pragma unroll
        for (int e = 0; e < kDimPerThread; ++e) acc[h][e] += pj * vv[e];
      }
    }
  }
  for (int h = 0; h < heads; ++h) {
    const int64_t head = head0 + h;
    for (int e = 0; e < kDimPerThread; ++e) {
      const int64_t d = threadIdx.x + e * kThreads;
      if (d >= D) continue;
      if (num_splits == 1) {
        out[(t * g.q_heads + head) * D + d] = from_float<TQ>(l[h] > 0.0f ? acc[h][e] / l[h] : 0.0f);
      } else {
        float* part = partial + ((t * g.q_heads + head) * num_splits + split) * (D + 2);
        part[d] = acc[h][e];
        if (d == 0) {
          part[D] = m[h];
          part[D + 1] = l[h];
        }
      }
    }
  }
}

template <class TQ>
__global__ void combine_splits_kernel(const float* partial, TQ* out, int64_t D, int num_splits) {
  const int64_t row = blockIdx.x;  // token * q_heads + head
  const float* base = partial + row * num_splits * (D + 2);
  float mx = -INFINITY;
  for (int s = 0; s < num_splits; ++s)
    if (base[s * (D + 2) + D + 1] > 0.0f) mx = fmaxf(mx, base[s * (D + 2) + D]);
  for (int64_t d = threadIdx.x; d < D; d += blockDim.x) {
    float num = 0.0f, den = 0.0f;
    if (mx != -INFINITY) {
      for (int s = 0; s < num_splits; ++s) {
        const float* part = base + s * (D + 2);
        if (part[D + 1] <= 0.0f) continue;
        const float w = __expf(part[D] - mx);
        num += part[d] * w;
        den += part[D + 1] * w;
      }
    }
    out[row * D + d] = from_float<TQ>(den > 0.0f ? num / den : 0.0f);
  }
}

}  // namespace

Status attention(const AttentionParams& p, void* stream) {
  if (p.q.dtype != p.out.dtype) return Status::error("attention (cuda): q and out must share a dtype");
  const int64_t tokens = p.q.dim(0);
  if (tokens == 0) return Status::ok();
  Geometry g{p.q.dim(1), p.k_cache.dim(1), p.q.dim(2), p.q.dim(1) / p.k_cache.dim(1), 0};
  g.head_chunks = (g.group + kMaxGroup - 1) / kMaxGroup;
  const int batch = static_cast<int>(p.qo_indptr.dim(0) - 1);
  if (batch < 1) return Status::error("attention (cuda): empty batch with tokens");
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>(g.kv_heads * g.head_chunks), static_cast<unsigned>(p.num_splits));
  float* partial = p.num_splits > 1 ? p.workspace.ptr<float>() : nullptr;
  const float scale = p.scale;
  AERIE_DISPATCH_FLOAT(p.q.dtype, TQ, [&] {
    AERIE_DISPATCH_FLOAT(p.k_cache.dtype, TC, [&] {
      attention_kernel<TQ, TC><<<grid, kThreads, 0, as_stream(stream)>>>(
          p.q.ptr<TQ>(), p.k_cache.ptr<TC>(), p.v_cache.ptr<TC>(), p.out.ptr<TQ>(), p.qo_indptr.ptr<int32_t>(),
          p.kv_indptr.ptr<int32_t>(), p.kv_indices.ptr<int32_t>(),
          p.custom_mask.defined() ? p.custom_mask.ptr<uint8_t>() : nullptr,
          p.custom_mask.defined() ? p.mask_indptr.ptr<int32_t>() : nullptr, batch, g, scale, p.num_splits, partial,
          p.k_cache.dim(0));
    });
    if (p.num_splits > 1)
      combine_splits_kernel<TQ><<<static_cast<unsigned>(tokens * g.q_heads), 128, 0, as_stream(stream)>>>(
          partial, p.out.ptr<TQ>(), g.dim, p.num_splits);
  });
  return launch_status("attention");
}

}  // namespace aerie::kernels::cuda
