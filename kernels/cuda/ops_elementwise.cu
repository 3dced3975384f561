// Embedding, fused residual-add + RMSNorm, RoPE, KV write, fused RoPE + KV write,
// SiLU-and-multiply.
#include <algorithm>
#include <cstdint>
#include <type_traits>

#include "kernels/cuda/common.cuh"
#include "kernels/device_runtime.hpp"

namespace aerie::kernels::cuda {

namespace {

template <class TT, class TO>
__global__ void embedding_kernel(const int32_t* ids, const TT* table, TO* out, int64_t first_id, int64_t vocab, int64_t hidden) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t] - first_id;
  const bool ok = id >= 0 && id < vocab;  // an id outside the table reads nothing: zeros (another shard's)
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x)
    out[t * hidden + h] = from_float<TO>(ok ? to_float(table[id * hidden + h]) : 0.0f);
}

// The i32 table of an id map (a draft vocabulary's target ids): copied exactly.
__global__ void embedding_i32_kernel(const int32_t* ids, const int32_t* table, int32_t* out, int64_t first_id, int64_t vocab, int64_t hidden) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t] - first_id;
  const bool ok = id >= 0 && id < vocab;
  for (int64_t h = threadIdx.x; h < hidden; h += blockDim.x) out[t * hidden + h] = ok ? table[id * hidden + h] : 0;
}

// Row copies whose rows are whole 16-byte words and whose ends are 16-byte aligned (a bf16 row
// of any hidden size here): 16 bytes a thread, each thread's loads all issued before its stores,
// so a row costs one memory round trip, where one element a thread cost a round trip per
// 512 elements (a draft step's token embedding and its state row: ~5 us each, measured).
constexpr int kRowWordsInFlight = 4;
// `from` may be the previous kernel's output (a state row): read coherently (common.cuh).
__device__ __forceinline__ void copy_row16(const uint4* from, uint4* __restrict__ to, int64_t words, bool ok) {
  for (int64_t w0 = threadIdx.x; w0 < words; w0 += int64_t{kRowWordsInFlight} * blockDim.x) {
    uint4 v[kRowWordsInFlight];
#pragma unroll
    for (int u = 0; u < kRowWordsInFlight; ++u) {
      const int64_t w = w0 + int64_t{u} * blockDim.x;
      v[u] = ok && w < words ? load_from_previous_kernel(from + w) : make_uint4(0, 0, 0, 0);
    }
#pragma unroll
    for (int u = 0; u < kRowWordsInFlight; ++u) {
      const int64_t w = w0 + int64_t{u} * blockDim.x;
      if (w < words) to[w] = v[u];
    }
  }
}
// embedding_kernel's rows as 16-byte words (table and out of one dtype): out row t = table row ids[t].
__global__ void gather_rows16_kernel(const int32_t* ids, const uint4* table, uint4* out, int64_t first_id, int64_t vocab, int64_t words) {
  pdl_begin();
  const int64_t t = blockIdx.x;
  const int64_t id = ids[t] - first_id;
  const bool ok = id >= 0 && id < vocab;  // another shard's id: zeros
  copy_row16(table + (ok ? id : 0) * words, out + t * words, words, ok);
}
// scatter_rows_kernel's rows as 16-byte words.
__global__ void scatter_rows16_kernel(const uint4* src, const int32_t* rows, uint4* out, int64_t words, int64_t out_rows) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  const int64_t r = rows[i];
  if (r < 0 || r >= out_rows) return;  // never written: the CPU reference reports it
  copy_row16(src + i * words, out + r * words, words, true);
}

// Row i of src to row rows[i] of out, 4 bytes at a time (rows of 4-byte multiples) or byte-wise.
template <class W>
__global__ void scatter_rows_kernel(const W* src, const int32_t* rows, W* out, int64_t words, int64_t out_rows) {
  pdl_begin();
  const int64_t i = blockIdx.x;
  const int64_t r = rows[i];
  if (r < 0 || r >= out_rows) return;  // never written: the CPU reference reports it
  for (int64_t w = threadIdx.x; w < words; w += blockDim.x) out[r * words + w] = src[i * words + w];
}

__global__ void resolve_future_ids_kernel(int32_t* ids, const int32_t* table, int64_t tokens, int64_t slots) {
  pdl_begin();
  for (int64_t t = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; t < tokens; t += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slot = -static_cast<int64_t>(ids[t]) - 1;
    if (slot >= 0 && slot < slots) ids[t] = table[slot];
  }
}

__global__ void record_future_tokens_kernel(const int32_t* tokens, const int32_t* slot_of, int32_t* table, int64_t rows, int64_t slots) {
  pdl_begin();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < rows; i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t slot = slot_of[i];
    if (slot >= 0 && slot < slots) table[slot] = tokens[i];
  }
}

// One row of the scalar RMSNorm: x_row (+ res_row, updated in place) normalised into y_row;
// copy_row (optional) gets x_row as read.
template <class T, class TW, class TR>
__device__ __forceinline__ void norm_row(const T* x_row, const TW* w, TR* res_row, T* y_row, T* copy_row, int64_t hidden, float eps,
                                         float* scratch) {
  float ss = 0.0f;
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    float v = to_float(x_row[i]);
    if (copy_row) copy_row[i] = x_row[i];
    if (res_row) {
      v += to_float(res_row[i]);
      const TR stored = from_float<TR>(v);
      res_row[i] = stored;
      v = to_float(stored);  // what the next layer reads
    }
    ss += v * v;
  }
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(hidden) + eps);
  // Second pass re-reads the row (this thread wrote the residual elements it reads).
  for (int64_t i = threadIdx.x; i < hidden; i += blockDim.x) {
    const float v = res_row ? to_float(res_row[i]) : to_float(x_row[i]);
    y_row[i] = from_float<T>(to_float(w[i]) * (v * inv));
  }
}

template <class T, class TW, class TR>
__global__ void rms_norm_kernel(const T* x, const TW* w, TR* residual, T* y, int64_t hidden, float eps) {
  pdl_begin();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  norm_row(x + r * hidden, w, residual ? residual + r * hidden : nullptr, y + r * hidden, static_cast<T*>(nullptr), hidden, eps, scratch);
}

// 16-byte vectorized RMSNorm for 2-byte types: each thread keeps its (<= kMaxChunks) chunks
// of the row in registers between the two passes, so the row is read once.
constexpr int kNormThreads = 512;
constexpr int kNormMaxChunks = 4;

// The norm weight's chunks of this thread: they never depend on the previous kernel, so they
// are fetched while that kernel ends.
template <class TW>
__device__ __forceinline__ void load_norm_weight(const TW* w, int64_t chunks, uint4 (&wv)[kNormMaxChunks]) {
#pragma unroll
  for (int u = 0; u < kNormMaxChunks; ++u) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(u) * kNormThreads;
    wv[u] = c < chunks ? __ldg(reinterpret_cast<const uint4*>(w) + c) : make_uint4(0, 0, 0, 0);
  }
}

// One row of the vectorized norm: x_row (+ res_row, updated in place) normalised into y_row;
// copy_row (optional) gets x_row as read.
template <class T, class TW>
__device__ __forceinline__ void norm_row_vec(const T* x_row, const uint4 (&wv)[kNormMaxChunks], T* res_row, T* y_row, T* copy_row,
                                             int64_t hidden, float eps, float* scratch) {
  const int64_t chunks = hidden / 8;
  const uint4* xr = reinterpret_cast<const uint4*>(x_row);
  uint4* rr = reinterpret_cast<uint4*>(res_row);
  float v[kNormMaxChunks][8];
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kNormMaxChunks; ++u) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(u) * kNormThreads;
    if (c >= chunks) break;
    uint4 xv = xr[c];
    if (copy_row) reinterpret_cast<uint4*>(copy_row)[c] = xv;
    const T* xe = reinterpret_cast<const T*>(&xv);
    if (rr) {
      uint4 rv = rr[c];
      T* re = reinterpret_cast<T*>(&rv);
#pragma unroll
      for (int i = 0; i < 8; ++i) re[i] = from_float<T>(to_float(xe[i]) + to_float(re[i]));
      rr[c] = rv;
#pragma unroll
      for (int i = 0; i < 8; ++i) v[u][i] = to_float(re[i]);  // what the next layer reads
    } else {
#pragma unroll
      for (int i = 0; i < 8; ++i) v[u][i] = to_float(xe[i]);
    }
#pragma unroll
    for (int i = 0; i < 8; ++i) ss += v[u][i] * v[u][i];
  }
  ss = block_sum(ss, scratch);
  const float inv = rsqrtf(ss / static_cast<float>(hidden) + eps);
  uint4* yr = reinterpret_cast<uint4*>(y_row);
#pragma unroll
  for (int u = 0; u < kNormMaxChunks; ++u) {
    const int64_t c = threadIdx.x + static_cast<int64_t>(u) * kNormThreads;
    if (c >= chunks) break;
    uint4 out;
    T* oe = reinterpret_cast<T*>(&out);
    const TW* we = reinterpret_cast<const TW*>(&wv[u]);
#pragma unroll
    for (int i = 0; i < 8; ++i) oe[i] = from_float<T>(to_float(we[i]) * (v[u][i] * inv));
    yr[c] = out;
  }
}

template <class T, class TW>
__global__ void __launch_bounds__(kNormThreads) rms_norm_vec_kernel(const T* x, const TW* w, T* residual, T* y, int64_t hidden, float eps) {
  static_assert(sizeof(TW) == sizeof(T), "weight chunks are read as 16-byte vectors");
  pdl_trigger();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x;
  uint4 wv[kNormMaxChunks];
  load_norm_weight(w, hidden / 8, wv);
  pdl_wait();
  norm_row_vec<T, TW>(x + r * hidden, wv, residual ? residual + r * hidden : nullptr, y + r * hidden, nullptr, hidden, eps, scratch);
}

// rms_norm_pair: block (r, side) normalises row r of a (side 0) or b (side 1) into its half of
// y's row r, and side 1 copies b's row out when asked. With a_ids, side 0 reads a's row
// a_ids[r] (a table of a_rows rows); an id outside it gives zeros and reads nothing.
template <class T, class TW>
struct NormPairArgs {
  const T *a, *b;
  const TW *wa, *wb;
  T *y, *b_copy;
  const int32_t* a_ids;
  int64_t a_rows;
  int64_t hidden;
  float eps;
};
// The row block (r, side) normalises, or null (and its half of y zeroed) for an id outside the
// table. Called after the wait: the ids come from the kernel before (a draft step's argmax).
template <class T, class TW>
__device__ __forceinline__ const T* norm_pair_row(const NormPairArgs<T, TW>& p, int64_t r, int side) {
  if (side) return p.b + r * p.hidden;
  if (!p.a_ids) return p.a + r * p.hidden;
  const int64_t id = load_from_previous_kernel(p.a_ids + r);
  if (id >= 0 && id < p.a_rows) return p.a + id * p.hidden;
  T* y = p.y + 2 * r * p.hidden;
  for (int64_t i = threadIdx.x; i < p.hidden; i += blockDim.x) y[i] = from_float<T>(0.0f);
  return nullptr;
}
template <class T, class TW>
__global__ void __launch_bounds__(kNormThreads) rms_norm_pair_vec_kernel(const NormPairArgs<T, TW> p) {
  pdl_trigger();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, h = p.hidden;
  const int side = blockIdx.y;
  uint4 wv[kNormMaxChunks];
  load_norm_weight(side ? p.wb : p.wa, h / 8, wv);
  pdl_wait();
  const T* x = norm_pair_row(p, r, side);
  if (!x) return;  // the whole block: its row is one id
  norm_row_vec<T, TW>(x, wv, nullptr, p.y + (2 * r + side) * h, side && p.b_copy ? p.b_copy + r * h : nullptr, h, p.eps, scratch);
}
template <class T, class TW>
__global__ void rms_norm_pair_kernel(const NormPairArgs<T, TW> p) {
  pdl_begin();
  __shared__ float scratch[32];
  const int64_t r = blockIdx.x, h = p.hidden;
  const int side = blockIdx.y;
  const T* x = norm_pair_row(p, r, side);
  if (!x) return;
  norm_row(x, side ? p.wb : p.wa, static_cast<T*>(nullptr), p.y + (2 * r + side) * h, side && p.b_copy ? p.b_copy + r * h : nullptr, h,
           p.eps, scratch);
}

template <class T>
__device__ __forceinline__ void rotate_pair(T* x, int64_t i, int64_t half, float c, float s) {
  const float x1 = to_float(x[i]), x2 = to_float(x[i + half]);
  x[i] = from_float<T>(x1 * c - x2 * s);
  x[i + half] = from_float<T>(x2 * c + x1 * s);
}

template <class T>
__global__ void rope_kernel(T* q, T* k, const int32_t* pos, const float* inv_freq, int64_t qh, int64_t kh, int64_t dim,
                            float scaling) {
  const int64_t t = blockIdx.x, half = dim / 2;
  const float p = static_cast<float>(pos[t]);
  for (int64_t idx = threadIdx.x; idx < (qh + kh) * half; idx += blockDim.x) {
    const int64_t h = idx / half, i = idx % half;
    float s, c;
    sincosf(p * inv_freq[i], &s, &c);
    c *= scaling;
    s *= scaling;
    if (h < qh) rotate_pair(q + (t * qh + h) * dim, i, half, c, s);
    else rotate_pair(k + (t * kh + (h - qh)) * dim, i, half, c, s);
  }
}

template <class TI, class TC>
__global__ void kv_write_kernel(const TI* k, const TI* v, const int32_t* slots, TC* kc, TC* vc, int64_t row, int64_t num_slots) {
  const int64_t t = blockIdx.x;
  const int32_t s = slots[t];
  if (s < 0 || s >= num_slots) return;  // never write outside the cache
  for (int64_t i = threadIdx.x; i < row; i += blockDim.x) {
    kc[s * row + i] = from_float<TC>(to_float(k[t * row + i]));
    vc[s * row + i] = from_float<TC>(to_float(v[t * row + i]));
  }
}

// Two adjacent elements (dims i and i + half of a rotated pair sit at 2i, 2i + 1) as floats, in
// one 4-byte load for 16-bit types when kPairs (the caller checked the row's alignment).
template <class T, bool kPairs>
__device__ __forceinline__ void load_pair(const T* p, float& a, float& b) {
  if constexpr (kPairs && std::is_same_v<T, __nv_bfloat16>) {
    const __nv_bfloat162 v = *reinterpret_cast<const __nv_bfloat162*>(p);
    a = __low2float(v);
    b = __high2float(v);
  } else if constexpr (kPairs && std::is_same_v<T, __half>) {
    const __half2 v = *reinterpret_cast<const __half2*>(p);
    a = __low2float(v);
    b = __high2float(v);
  } else {
    a = to_float(p[0]);
    b = to_float(p[1]);
  }
}

// Grid (token, unit group): a token's units are its q heads, its k heads, then its V row; block
// y takes units [y * per_block, (y + 1) * per_block). A block with rope units first computes the
// token's cos / sin once per frequency into shared memory (one sincosf per frequency, not per
// head: at long prompts the arguments are large and sincosf takes its slow path), then rotates
// its heads' pairs straight out of the merged qkv row (q to q_out, k to its cache slot); the V
// unit copies the token's V to its slot. Prompts use one group per token (all 41 units of an 8B
// token in one block); few tokens split them so the grid still fills the GPU.
template <class T, class TC, bool kPairs>
__global__ void rope_kv_write_kernel(const T* qkv, const int32_t* pos, const float* inv_freq, const int32_t* slots, T* q_out,
                                     TC* kc, TC* vc, int qh, int kh, int dim, float scaling, int64_t num_slots, int per_block) {
  extern __shared__ float rope_cs[];  // cos * scaling [half], then sin * scaling [half]
  pdl_begin();
  const int64_t t = blockIdx.x;
  const int half = dim / 2, rope_units = qh + kh;
  const int u0 = blockIdx.y * per_block, u1 = min(u0 + per_block, rope_units + 1);
  const T* src = qkv + t * static_cast<int64_t>(qh + 2 * kh) * dim;
  const int32_t slot = slots[t];
  const bool slot_ok = slot >= 0 && slot < num_slots;
  // Units this block rotates: q heads always, k heads only with a valid slot.
  const int r1 = min(u1, slot_ok ? rope_units : qh);
  if (u0 < r1) {
    const float p = static_cast<float>(pos[t]);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
      float sn, cs;
      sincosf(p * inv_freq[i], &sn, &cs);
      rope_cs[i] = cs * scaling;
      rope_cs[half + i] = sn * scaling;
    }
    __syncthreads();
    for (int idx = threadIdx.x; idx < (r1 - u0) * half; idx += blockDim.x) {
      const int h = u0 + idx / half, i = idx % half;
      const float c = rope_cs[i], s = rope_cs[half + i];
      float x1, x2;
      load_pair<T, kPairs>(src + h * dim + 2 * i, x1, x2);
      const float o1 = x1 * c - x2 * s, o2 = x2 * c + x1 * s;
      if (h < qh) {
        T* q = q_out + (t * qh + h) * dim;
        q[i] = from_float<T>(o1);
        q[i + half] = from_float<T>(o2);
      } else {
        TC* kd = kc + (static_cast<int64_t>(slot) * kh + (h - qh)) * dim;
        // Round through the activation dtype first, as the unfused rope + kv_write does.
        kd[i] = from_float<TC>(to_float(from_float<T>(o1)));
        kd[i + half] = from_float<TC>(to_float(from_float<T>(o2)));
      }
    }
  }
  if (u1 == rope_units + 1 && slot_ok) {
    const T* vs = src + rope_units * dim;
    TC* vd = vc + static_cast<int64_t>(slot) * kh * dim;
    for (int i = threadIdx.x; i < kh * dim; i += blockDim.x) vd[i] = from_float<TC>(to_float(vs[i]));
  }
}

// out[r][i] = silu(gate) * up of the interleaved (gate, up) pairs of row r: grid (row, column
// block), kVec outputs a thread per step; kVec = 4 reads the 8 inputs in one 16-byte load (16-bit
// types; two for f32) and writes 4 outputs at once (the caller checked the alignment). Rows on
// the grid's x: no 64-bit division per element (that and 2-byte accesses held the one-dimensional
// version to half of HBM bandwidth on prompts).
template <class T, int N>
struct alignas(sizeof(T) * N) VecOf {
  T v[N];
};

template <class T, int kVec>
__global__ void silu_mul_kernel(const T* gu, T* out, int64_t inter) {
  pdl_begin();
  const int64_t r = blockIdx.x;
  const T* g_row = gu + r * 2 * inter;
  T* o_row = out + r * inter;
  const int64_t stride = static_cast<int64_t>(gridDim.y) * blockDim.x * kVec;
  for (int64_t i = (static_cast<int64_t>(blockIdx.y) * blockDim.x + threadIdx.x) * kVec; i < inter; i += stride) {
    if constexpr (kVec == 1) {
      const float g = to_float(g_row[2 * i]), u = to_float(g_row[2 * i + 1]);
      o_row[i] = from_float<T>(g / (1.0f + __expf(-g)) * u);
    } else {
      const VecOf<T, 2 * kVec> in = *reinterpret_cast<const VecOf<T, 2 * kVec>*>(g_row + 2 * i);
      VecOf<T, kVec> o;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float g = to_float(in.v[2 * j]), u = to_float(in.v[2 * j + 1]);
        o.v[j] = from_float<T>(g / (1.0f + __expf(-g)) * u);
      }
      *reinterpret_cast<VecOf<T, kVec>*>(o_row + i) = o;
    }
  }
}

int threads_for(int64_t n) { return n >= 512 ? 512 : n >= 256 ? 256 : 128; }

}  // namespace

Status resolve_future_ids(const ResolveFutureIdsParams& p, void* stream) {
  const int64_t n = p.ids.dim(0);
  if (n == 0) return Status::ok();
  launch_pdl(resolve_future_ids_kernel, dim3(static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1024))), dim3(256), 0, as_stream(stream),
             p.ids.ptr<int32_t>(), p.table.ptr<int32_t>(), n, p.table.dim(0));
  return launch_status("resolve_future_ids");
}

Status record_future_tokens(const RecordFutureTokensParams& p, void* stream) {
  const int64_t n = p.tokens.dim(0);
  if (n == 0) return Status::ok();
  launch_pdl(record_future_tokens_kernel, dim3(static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 1024))), dim3(256), 0, as_stream(stream),
             p.tokens.ptr<int32_t>(), p.slots.ptr<int32_t>(), p.table.ptr<int32_t>(), n, p.table.dim(0));
  return launch_status("record_future_tokens");
}

Status embedding(const EmbeddingParams& p, void* stream) {
  const int64_t tokens = p.ids.dim(0);
  if (tokens == 0) return Status::ok();
  const int64_t hidden = p.table.dim(1), vocab = p.table.dim(0);
  if (p.table.dtype == DType::kI32) {
    launch_pdl(embedding_i32_kernel, dim3(static_cast<unsigned>(tokens)), dim3(threads_for(hidden)), 0, as_stream(stream),
               p.ids.ptr<int32_t>(), p.table.ptr<int32_t>(), p.out.ptr<int32_t>(), p.first_id, vocab, hidden);
    return launch_status("embedding");
  }
  const int64_t row_bytes = hidden * static_cast<int64_t>(dtype_size(p.table.dtype));
  if (p.table.dtype == p.out.dtype && row_bytes % 16 == 0 && aligned16(p.table.data) && aligned16(p.out.data)) {
    const int64_t words = row_bytes / 16;
    launch_pdl(gather_rows16_kernel, dim3(static_cast<unsigned>(tokens)), dim3(threads_for(words)), 0, as_stream(stream), p.ids.ptr<int32_t>(),
               static_cast<const uint4*>(p.table.data), static_cast<uint4*>(p.out.data), p.first_id, vocab, words);
    return launch_status("embedding");
  }
  AERIE_DISPATCH_FLOAT(p.table.dtype, TT, [&] {
    AERIE_DISPATCH_FLOAT(p.out.dtype, TO, [&] {
      launch_pdl(embedding_kernel<TT, TO>, dim3(static_cast<unsigned>(tokens)), dim3(threads_for(hidden)), 0, as_stream(stream),
                 p.ids.ptr<int32_t>(), p.table.ptr<TT>(), p.out.ptr<TO>(), p.first_id, vocab, hidden);
    });
  });
  return launch_status("embedding");
}

Status scatter_rows(const ScatterRowsParams& p, void* stream) {
  const int64_t n = p.src.dim(0);
  if (n == 0) return Status::ok();
  const int64_t bytes = p.src.dim(1) * static_cast<int64_t>(dtype_size(p.src.dtype));
  if (bytes % 16 == 0 && aligned16(p.src.data) && aligned16(p.out.data)) {
    launch_pdl(scatter_rows16_kernel, dim3(static_cast<unsigned>(n)), dim3(threads_for(bytes / 16)), 0, as_stream(stream),
               static_cast<const uint4*>(p.src.data), p.rows.ptr<int32_t>(), static_cast<uint4*>(p.out.data), bytes / 16, p.out.dim(0));
  } else if (bytes % 4 == 0) {
    launch_pdl(scatter_rows_kernel<int32_t>, dim3(static_cast<unsigned>(n)), dim3(threads_for(bytes / 4)), 0, as_stream(stream),
               static_cast<const int32_t*>(p.src.data), p.rows.ptr<int32_t>(), static_cast<int32_t*>(p.out.data), bytes / 4, p.out.dim(0));
  } else {
    launch_pdl(scatter_rows_kernel<uint8_t>, dim3(static_cast<unsigned>(n)), dim3(threads_for(bytes)), 0, as_stream(stream),
               static_cast<const uint8_t*>(p.src.data), p.rows.ptr<int32_t>(), static_cast<uint8_t*>(p.out.data), bytes, p.out.dim(0));
  }
  return launch_status("scatter_rows");
}

Status rms_norm(const RmsNormParams& p, void* stream) {
  if (p.x.dtype != p.y.dtype) return Status::error("rms_norm (cuda): x and y must share a dtype");
  if (p.residual.defined() && p.residual.dtype != p.x.dtype) return Status::error("rms_norm (cuda): residual must have x's dtype");
  const int64_t rows = p.x.dim(0), hidden = p.x.dim(1);
  if (rows == 0) return Status::ok();
  auto aligned = [](const TensorView& t) { return !t.defined() || aligned16(t.data); };
  const bool vec = p.x.dtype != DType::kF32 && p.weight.dtype == p.x.dtype && hidden % 8 == 0 &&
                   hidden / 8 <= static_cast<int64_t>(kNormThreads) * kNormMaxChunks && aligned(p.x) && aligned(p.y) && aligned(p.residual);
  if (vec) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      launch_pdl(rms_norm_vec_kernel<T, T>, dim3(static_cast<unsigned>(rows)), dim3(kNormThreads), 0, as_stream(stream),
                 p.x.ptr<T>(), p.weight.ptr<T>(), p.residual.defined() ? p.residual.ptr<T>() : nullptr, p.y.ptr<T>(), hidden, p.eps);
    };
    if (p.x.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("rms_norm");
  }
  AERIE_DISPATCH_FLOAT(p.x.dtype, T, [&] {
    AERIE_DISPATCH_FLOAT(p.weight.dtype, TW, [&] {
      rms_norm_kernel<T, TW, T><<<static_cast<unsigned>(rows), threads_for(hidden), 0, as_stream(stream)>>>(
          p.x.ptr<T>(), p.weight.ptr<TW>(), p.residual.defined() ? p.residual.ptr<T>() : nullptr, p.y.ptr<T>(), hidden, p.eps);
    });
  });
  return launch_status("rms_norm");
}

Status rms_norm_pair(const RmsNormPairParams& p, void* stream) {
  const int64_t rows = p.rows(), hidden = p.a.dim(1);
  const int32_t* a_ids = p.a_ids.defined() ? p.a_ids.ptr<int32_t>() : nullptr;
  if (rows == 0) return Status::ok();
  auto aligned = [](const TensorView& t) { return !t.defined() || aligned16(t.data); };
  // The same choice of kernel as rms_norm, so each half equals rms_norm's result.
  const bool vec = p.a.dtype != DType::kF32 && p.weight_a.dtype == p.a.dtype && p.weight_b.dtype == p.a.dtype && hidden % 8 == 0 &&
                   hidden / 8 <= static_cast<int64_t>(kNormThreads) * kNormMaxChunks && aligned(p.a) && aligned(p.b) && aligned(p.y) &&
                   aligned(p.b_copy);
  const dim3 grid(static_cast<unsigned>(rows), 2);
  if (vec) {
    auto run = [&](auto tag) {
      using T = decltype(tag);
      const NormPairArgs<T, T> args{p.a.ptr<T>(), p.b.ptr<T>(), p.weight_a.ptr<T>(), p.weight_b.ptr<T>(), p.y.ptr<T>(),
                                    p.b_copy.defined() ? p.b_copy.ptr<T>() : nullptr, a_ids, p.a.dim(0), hidden, p.eps};
      launch_pdl(rms_norm_pair_vec_kernel<T, T>, grid, dim3(kNormThreads), 0, as_stream(stream), args);
    };
    if (p.a.dtype == DType::kBF16) run(__nv_bfloat16{});
    else run(__half{});
    return launch_status("rms_norm_pair");
  }
  if (p.weight_a.dtype != p.weight_b.dtype) return Status::error("rms_norm_pair (cuda): weight_a and weight_b must share a dtype");
  AERIE_DISPATCH_FLOAT(p.a.dtype, T, [&] {
    AERIE_DISPATCH_FLOAT(p.weight_a.dtype, TW, [&] {
      const NormPairArgs<T, TW> args{p.a.ptr<T>(), p.b.ptr<T>(), p.weight_a.ptr<TW>(), p.weight_b.ptr<TW>(), p.y.ptr<T>(),
                                     p.b_copy.defined() ? p.b_copy.ptr<T>() : nullptr, a_ids, p.a.dim(0), hidden, p.eps};
      rms_norm_pair_kernel<T, TW><<<grid, threads_for(hidden), 0, as_stream(stream)>>>(args);
    });
  });
  return launch_status("rms_norm_pair");
}

Status rope(const RopeParams& p, void* stream) {
  if (p.q.dtype != p.k.dtype) return Status::error("rope (cuda): q and k must share a dtype");
  const int64_t tokens = p.q.dim(0);
  if (tokens == 0) return Status::ok();
  AERIE_DISPATCH_FLOAT(p.q.dtype, T, [&] {
    rope_kernel<T><<<static_cast<unsigned>(tokens), 128, 0, as_stream(stream)>>>(
        p.q.ptr<T>(), p.k.ptr<T>(), p.positions.ptr<int32_t>(), p.inv_freq.ptr<float>(), p.q.dim(1), p.k.dim(1), p.q.dim(2),
        p.attention_scaling);
  });
  return launch_status("rope");
}

Status kv_write(const KvWriteParams& p, void* stream) {
  if (p.k.dtype != p.v.dtype) return Status::error("kv_write (cuda): k and v must share a dtype");
  const int64_t tokens = p.k.dim(0);
  if (tokens == 0) return Status::ok();
  const int64_t row = p.k.dim(1) * p.k.dim(2);
  AERIE_DISPATCH_FLOAT(p.k.dtype, TI, [&] {
    AERIE_DISPATCH_FLOAT(p.k_cache.dtype, TC, [&] {
      kv_write_kernel<TI, TC><<<static_cast<unsigned>(tokens), threads_for(row), 0, as_stream(stream)>>>(
          p.k.ptr<TI>(), p.v.ptr<TI>(), p.slots.ptr<int32_t>(), p.k_cache.ptr<TC>(), p.v_cache.ptr<TC>(), row, p.k_cache.dim(0));
    });
  });
  return launch_status("kv_write");
}

// The caches of up to kKvMoveLayers layers, passed by value (kernel parameters): one launch
// moves them all without a pointer table on the device.
constexpr int kKvMoveLayers = 64;
struct KvMoveLayers {
  void* k[kKvMoveLayers];
  void* v[kKvMoveLayers];
};

// Each thread owns some elements of a row of one layer (blockIdx.y) and applies the moves to
// them in order, so a move that reads a row an earlier move wrote sees the written value.
template <class T>
__global__ void kv_move_kernel(const int32_t* src, const int32_t* dst, int64_t moves, KvMoveLayers layers, int64_t row, int64_t num_slots) {
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= row) return;
  T* kc = static_cast<T*>(layers.k[blockIdx.y]);
  T* vc = static_cast<T*>(layers.v[blockIdx.y]);
  for (int64_t m = 0; m < moves; ++m) {
    const int32_t s = src[m], d = dst[m];
    if (s < 0 || s >= num_slots || d < 0 || d >= num_slots || s == d) continue;
    kc[d * row + i] = kc[s * row + i];
    vc[d * row + i] = vc[s * row + i];
  }
}

Status kv_move(const KvMoveParams& p, void* stream) {
  const int64_t moves = p.src_slots.dim(0);
  if (moves == 0) return Status::ok();
  const TensorView& first = p.k_caches.front();
  const int64_t row = first.dim(1) * first.dim(2);
  const auto blocks = static_cast<unsigned>((row + 255) / 256);
  for (size_t l0 = 0; l0 < p.k_caches.size(); l0 += kKvMoveLayers) {
    const size_t n = std::min(p.k_caches.size() - l0, static_cast<size_t>(kKvMoveLayers));
    KvMoveLayers layers{};
    for (size_t l = 0; l < n; ++l) layers.k[l] = p.k_caches[l0 + l].data, layers.v[l] = p.v_caches[l0 + l].data;
    AERIE_DISPATCH_FLOAT(first.dtype, T, [&] {
      kv_move_kernel<T><<<dim3(blocks, static_cast<unsigned>(n)), 256, 0, as_stream(stream)>>>(p.src_slots.ptr<int32_t>(), p.dst_slots.ptr<int32_t>(),
                                                                                               moves, layers, row, first.dim(0));
    });
  }
  return launch_status("kv_move");
}

Status rope_kv_write(const RopeKvWriteParams& p, void* stream) {
  if (p.qkv.dtype != p.q_out.dtype) return Status::error("rope_kv_write (cuda): qkv and q_out must share a dtype");
  const int64_t tokens = p.qkv.dim(0);
  if (tokens == 0) return Status::ok();
  const int qh = static_cast<int>(p.q_out.dim(1)), kh = static_cast<int>(p.k_cache.dim(1)), dim = static_cast<int>(p.k_cache.dim(2));
  // Unit groups per token: enough blocks for ~4 per SM, one group (every unit) from ~528 tokens on.
  const int units = qh + kh + 1;
  static const int64_t sms = cuda_runtime::sm_count();  // once per process, as attention() does
  const int64_t want = (4 * sms + tokens - 1) / tokens;
  const int groups = static_cast<int>(std::clamp<int64_t>(want, 1, units));
  const int per_block = (units + groups - 1) / groups;
  const dim3 grid(static_cast<unsigned>(tokens), static_cast<unsigned>((units + per_block - 1) / per_block));
  const unsigned threads = static_cast<unsigned>(std::min(256, std::max(64, per_block * dim / 2)));
  const size_t smem = static_cast<size_t>(dim) * sizeof(float);
  // Pairs load as one word when every row and head starts on a word (even dims, aligned base).
  const bool pairs = dim % 2 == 0 && reinterpret_cast<uintptr_t>(p.qkv.data) % (2 * dtype_size(p.qkv.dtype)) == 0;
  AERIE_DISPATCH_FLOAT(p.qkv.dtype, T, [&] {
    AERIE_DISPATCH_FLOAT(p.k_cache.dtype, TC, [&] {
      auto kernel = pairs ? rope_kv_write_kernel<T, TC, true> : rope_kv_write_kernel<T, TC, false>;
      launch_pdl(kernel, grid, dim3(threads), smem, as_stream(stream), p.qkv.ptr<T>(), p.positions.ptr<int32_t>(),
                 p.inv_freq.ptr<float>(), p.slots.ptr<int32_t>(), p.q_out.ptr<T>(), p.k_cache.ptr<TC>(), p.v_cache.ptr<TC>(), qh, kh,
                 dim, p.attention_scaling, p.k_cache.dim(0), per_block);
    });
  });
  return launch_status("rope_kv_write");
}

Status silu_mul(const SiluMulParams& p, void* stream) {
  if (p.gate_up.dtype != p.out.dtype) return Status::error("silu_mul (cuda): gate_up and out must share a dtype");
  const int64_t rows = p.out.dim(0), inter = p.out.dim(1);
  if (rows * inter == 0) return Status::ok();
  const size_t es = dtype_size(p.out.dtype);
  const bool vec = inter % 4 == 0 && reinterpret_cast<uintptr_t>(p.gate_up.data) % (8 * es) == 0 &&
                   reinterpret_cast<uintptr_t>(p.out.data) % (4 * es) == 0;
  const int per_thread = vec ? 4 : 1;
  const int64_t col_blocks = std::min<int64_t>((inter + 256 * per_thread - 1) / (256 * per_thread), 65535);
  const dim3 grid(static_cast<unsigned>(rows), static_cast<unsigned>(col_blocks));
  AERIE_DISPATCH_FLOAT(p.out.dtype, T, [&] {
    auto kernel = vec ? silu_mul_kernel<T, 4> : silu_mul_kernel<T, 1>;
    launch_pdl(kernel, grid, dim3(256), 0, as_stream(stream), p.gate_up.ptr<T>(), p.out.ptr<T>(), inter);
  });
  return launch_status("silu_mul");
}

}  // namespace aerie::kernels::cuda
