// Attention one query at a time: decode and verify, where a sequence brings a few queries.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_paths.hpp"
#include "kernels/cpu/cpu_clones.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/lane_folds.hpp"
#include "kernels/cpu/vector_exp.hpp"
#include "kernels/cpu/vector_exp_x86.hpp"

namespace aerie::kernels::cpu {

namespace {

// A key a query cannot see: its score (and, after softmax_numerators, its numerator is -1).
constexpr float kNone = -std::numeric_limits<float>::infinity();

// s[j] *= scale for the keys `seen(j)` says are visible, kNone for the others, and the largest
// visible score (NaNs skipped, as std::max(m, s) skips them): sixteen running maxima the compiler
// can keep in one register; a maximum is exact in any order. Inlined into each clone below.
template <class Seen>
__attribute__((always_inline)) inline float scale_and_max_where(float* s, int64_t n, float scale, Seen seen) {
  float m[16];
  std::fill(m, m + 16, kNone);
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int u = 0; u < 16; ++u) {
      const float v = seen(j + u) ? s[j + u] * scale : kNone;
      s[j + u] = v;
      m[u] = v > m[u] ? v : m[u];
    }
  float best = kNone;
  for (; j < n; ++j) {
    const float v = seen(j) ? s[j] * scale : kNone;
    s[j] = v;
    best = v > best ? v : best;
  }
  for (float v : m) best = v > best ? v : best;
  return best;
}

// Causal: every key of the span is visible.
AERIE_CPU_CLONES float scale_and_max(float* s, int64_t n, float scale) {
  return scale_and_max_where(s, n, scale, [](int64_t) { return true; });
}

// Under a custom mask row (a tree verify's): a vectorisable loop where a visible() call per key
// had cost a tree verify's attention a fifth of its time.
AERIE_CPU_CLONES float scale_mask_and_max(float* s, const uint8_t* mask, int64_t n, float scale) {
  return scale_and_max_where(s, n, scale, [mask](int64_t j) { return mask[j] != 0; });
}

// The two inner loops. Sixteen partial sums: vectorised, and the order is fixed.
inline float dot16(const float* a, const float* b, int64_t n) {
  float acc[16] = {};
  int64_t c = 0;
  for (; c + 16 <= n; c += 16)
    for (int u = 0; u < 16; ++u) acc[u] += a[c + u] * b[c + u];
  for (int w = 8; w >= 1; w /= 2)
    for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
  float sum = acc[0];
  for (; c < n; ++c) sum += a[c] * b[c];
  return sum;
}

// acc += e * v
inline void axpy_row(float* acc, float e, const float* v, int64_t n) {
  for (int64_t d = 0; d < n; ++d) acc[d] += e * v[d];
}

// One version per instruction set (cpu_clones.hpp) of a whole query's loop over its keys: the
// per-key work is ~25 cycles at head_dim 64, so a dispatched call per key cost as much again
// (perf, SmolLM2 decode at batch 4). Each key's arithmetic is the one above, so the bits are too.
AERIE_CPU_CLONES float dot(const float* a, const float* b, int64_t n) { return dot16(a, b, n); }
AERIE_CPU_CLONES void axpy(float* acc, float e, const float* v, int64_t n) { axpy_row(acc, e, v, n); }

// out[j] = q . row(slots[j]) for an f32 cache, row(s) = cache + s * stride.
AERIE_CPU_CLONES void dot_rows_loop(const float* q, const float* cache, const int32_t* slots, int64_t n, int64_t stride, int64_t dim,
                                    float* out) {
  for (int64_t j = 0; j < n; ++j) out[j] = dot16(q, cache + static_cast<int64_t>(slots[j]) * stride, dim);
}

// acc += e[j] * row(slots[j]) in order of j, skipping keys with e[j] < 0 (not visible).
AERIE_CPU_CLONES void axpy_rows_loop(float* acc, const float* e, const float* cache, const int32_t* slots, int64_t n, int64_t stride,
                                     int64_t dim) {
  for (int64_t j = 0; j < n; ++j)
    if (e[j] >= 0.0f) axpy_row(acc, e[j], cache + static_cast<int64_t>(slots[j]) * stride, dim);
}

#if defined(__x86_64__) && defined(__GNUC__)
// The same two loops written out for AVX-512 at head dims of 64 and 128 (D = dim / 16
// registers a row; AVX2 below), with the arithmetic the compiler makes of the loops above there (a fused
// multiply-add per lane and column block, then the tree): the same bits. dot16's tree, one
// key at a time, was most of a key's ~25 cycles; here sixteen keys share one set of folds
// (lane_folds.hpp), and axpy keeps its accumulator in registers across the keys.
template <int D>
__attribute__((target("avx512f"))) void dot_rows_avx512(const float* q, const float* cache, const int32_t* slots, int64_t n,
                                                        int64_t stride, float* out) {
  __m512 qv[D];
  for (int d = 0; d < D; ++d) qv[d] = _mm512_loadu_ps(q + 16 * d);
  for (int64_t j0 = 0; j0 < n; j0 += 16) {
    const int count = static_cast<int>(std::min<int64_t>(16, n - j0));
    __m512 lanes[16];
    for (int t = 0; t < 16; ++t) {
      lanes[t] = _mm512_setzero_ps();
      if (t >= count) continue;
      const float* k = cache + static_cast<int64_t>(slots[j0 + t]) * stride;
      for (int d = 0; d < D; ++d) lanes[t] = _mm512_fmadd_ps(qv[d], _mm512_loadu_ps(k + 16 * d), lanes[t]);
    }
    _mm512_mask_storeu_ps(out + j0, static_cast<__mmask16>((1u << count) - 1), lane_folds::sum16_in_order(lanes));
  }
}

template <int D>
__attribute__((target("avx512f"))) void axpy_rows_avx512(float* acc, const float* e, const float* cache, const int32_t* slots, int64_t n,
                                                         int64_t stride) {
  __m512 a[D];
  for (int d = 0; d < D; ++d) a[d] = _mm512_loadu_ps(acc + 16 * d);
  for (int64_t j = 0; j < n; ++j) {
    if (!(e[j] >= 0.0f)) continue;
    const __m512 ej = _mm512_set1_ps(e[j]);
    const float* v = cache + static_cast<int64_t>(slots[j]) * stride;
    for (int d = 0; d < D; ++d) a[d] = _mm512_fmadd_ps(ej, _mm512_loadu_ps(v + 16 * d), a[d]);
  }
  for (int d = 0; d < D; ++d) _mm512_storeu_ps(acc + 16 * d, a[d]);
}

// AVX2 + FMA: the same sums with each key's sixteen lanes as two 8-wide halves (lo + hi is the
// tree's first step), eight keys sharing the rest of the tree.
template <int D>
__attribute__((target("avx2,fma"))) void dot_rows_avx2(const float* q, const float* cache, const int32_t* slots, int64_t n,
                                                       int64_t stride, float* out) {
  for (int64_t j0 = 0; j0 < n; j0 += 8) {
    const int count = static_cast<int>(std::min<int64_t>(8, n - j0));
    __m256 lanes[8];
    for (int t = 0; t < 8; ++t) {
      lanes[t] = _mm256_setzero_ps();
      if (t >= count) continue;
      const float* k = cache + static_cast<int64_t>(slots[j0 + t]) * stride;
      __m256 lo = _mm256_setzero_ps(), hi = _mm256_setzero_ps();
      for (int d = 0; d < D; ++d) {
        lo = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16 * d), _mm256_loadu_ps(k + 16 * d), lo);
        hi = _mm256_fmadd_ps(_mm256_loadu_ps(q + 16 * d + 8), _mm256_loadu_ps(k + 16 * d + 8), hi);
      }
      lanes[t] = _mm256_add_ps(lo, hi);
    }
    alignas(32) float sums[8];
    _mm256_store_ps(sums, lane_folds::sum8_in_order_avx2(lanes));
    for (int t = 0; t < count; ++t) out[j0 + t] = sums[t];
  }
}

// Head dim 64: the accumulator in eight registers across the keys.
__attribute__((target("avx2,fma"))) void axpy_rows_avx2_64(float* acc, const float* e, const float* cache, const int32_t* slots, int64_t n,
                                                           int64_t stride) {
  __m256 a[8];
  for (int d = 0; d < 8; ++d) a[d] = _mm256_loadu_ps(acc + 8 * d);
  for (int64_t j = 0; j < n; ++j) {
    if (!(e[j] >= 0.0f)) continue;
    const __m256 ej = _mm256_set1_ps(e[j]);
    const float* v = cache + static_cast<int64_t>(slots[j]) * stride;
    for (int d = 0; d < 8; ++d) a[d] = _mm256_fmadd_ps(ej, _mm256_loadu_ps(v + 8 * d), a[d]);
  }
  for (int d = 0; d < 8; ++d) _mm256_storeu_ps(acc + 8 * d, a[d]);
}

void dot_rows(const float* q, const float* cache, const int32_t* slots, int64_t n, int64_t stride, int64_t dim, float* out) {
  const CpuIsa isa = cpu_isa();
  if (isa == CpuIsa::kAvx512 && dim == 64) return dot_rows_avx512<4>(q, cache, slots, n, stride, out);
  if (isa == CpuIsa::kAvx512 && dim == 128) return dot_rows_avx512<8>(q, cache, slots, n, stride, out);
  if (isa == CpuIsa::kAvx2 && dim == 64) return dot_rows_avx2<4>(q, cache, slots, n, stride, out);
  if (isa == CpuIsa::kAvx2 && dim == 128) return dot_rows_avx2<8>(q, cache, slots, n, stride, out);
  dot_rows_loop(q, cache, slots, n, stride, dim, out);
}

void axpy_rows(float* acc, const float* e, const float* cache, const int32_t* slots, int64_t n, int64_t stride, int64_t dim) {
  const CpuIsa isa = cpu_isa();
  if (isa == CpuIsa::kAvx512 && dim == 64) return axpy_rows_avx512<4>(acc, e, cache, slots, n, stride);
  if (isa == CpuIsa::kAvx512 && dim == 128) return axpy_rows_avx512<8>(acc, e, cache, slots, n, stride);
  if (isa == CpuIsa::kAvx2 && dim == 64) return axpy_rows_avx2_64(acc, e, cache, slots, n, stride);
  axpy_rows_loop(acc, e, cache, slots, n, stride, dim);
}
#else
void dot_rows(const float* q, const float* cache, const int32_t* slots, int64_t n, int64_t stride, int64_t dim, float* out) {
  dot_rows_loop(q, cache, slots, n, stride, dim, out);
}
void axpy_rows(float* acc, const float* e, const float* cache, const int32_t* slots, int64_t n, int64_t stride, int64_t dim) {
  axpy_rows_loop(acc, e, cache, slots, n, stride, dim);
}
#endif

}  // namespace

namespace {

// The denominator: the numerators of the visible keys (>= 0) added in key order.
float sum_in_key_order(const float* s, int64_t n) {
  float denom = 0.0f;
  for (int64_t j = 0; j < n; ++j)
    if (s[j] >= 0.0f) denom += s[j];
  return denom;
}

// The numerators by vector_exp as this CPU's clone computes it (one call a key, which the
// compiler keeps scalar: ~4 cycles a key in a 4-row verify's attention).
AERIE_CPU_CLONES void numerators_loop(float* s, int64_t n, float max_score) {
  for (int64_t j = 0; j < n; ++j) s[j] = s[j] == kNone ? -1.0f : vector_exp(s[j] - max_score);
}

#if defined(__x86_64__) && defined(__GNUC__)
// Sixteen keys at a time (the last ones under a mask), vector_exp's bits (vector_exp_x86.hpp).
__attribute__((target("avx512f"))) void numerators_avx512(float* s, int64_t n, float max_score) {
  const __m512 none = _mm512_set1_ps(kNone), minus_one = _mm512_set1_ps(-1.0f), mx = _mm512_set1_ps(max_score);
  for (int64_t j = 0; j < n; j += 16) {
    const __mmask16 lanes = n - j >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << (n - j)) - 1);
    const __m512 v = _mm512_maskz_loadu_ps(lanes, s + j);
    const ExpParts16 e = exp_parts_avx512(_mm512_sub_ps(v, mx));
    const __mmask16 hidden = _mm512_cmp_ps_mask(v, none, _CMP_EQ_OQ);
    _mm512_mask_storeu_ps(s + j, lanes, _mm512_mask_blend_ps(hidden, _mm512_mul_ps(e.er, e.scale), minus_one));
  }
}

// Eight keys at a time; the last ones through a padded copy.
__attribute__((target("avx2,fma"))) void numerators8_avx2(float* at, __m256 mx) {
  const __m256 v = _mm256_loadu_ps(at);
  const ExpParts8 e = exp_parts_avx2(_mm256_sub_ps(v, mx));
  _mm256_storeu_ps(at, _mm256_blendv_ps(_mm256_mul_ps(e.er, e.scale), _mm256_set1_ps(-1.0f), _mm256_cmp_ps(v, _mm256_set1_ps(kNone), _CMP_EQ_OQ)));
}
__attribute__((target("avx2,fma"))) void numerators_avx2(float* s, int64_t n, float max_score) {
  const __m256 mx = _mm256_set1_ps(max_score);
  int64_t j = 0;
  for (; j + 8 <= n; j += 8) numerators8_avx2(s + j, mx);
  if (j < n) {
    alignas(32) float tail[8] = {};
    std::copy(s + j, s + n, tail);
    numerators8_avx2(tail, mx);
    std::copy(tail, tail + (n - j), s + j);
  }
}
#endif
}  // namespace

float softmax_numerators(float* s, int64_t n, float max_score) {
#if defined(__x86_64__) && defined(__GNUC__)
  const CpuIsa isa = cpu_isa();
  if (isa == CpuIsa::kAvx512) numerators_avx512(s, n, max_score);
  else if (isa == CpuIsa::kAvx2) numerators_avx2(s, n, max_score);
  else numerators_loop(s, n, max_score);
#else
  numerators_loop(s, n, max_score);
#endif
  return sum_in_key_order(s, n);
}

const uint8_t* AttentionTaskContext::mask_row(int64_t b, int64_t i, int64_t kv_len) const {
  return p.custom_mask.ptr<uint8_t>() + mp[b] + i * kv_len;
}

bool AttentionTaskContext::visible(int64_t b, int64_t i, int64_t j, int64_t q_len, int64_t kv_len) const {
  return mp ? mask_row(b, i, kv_len)[j] != 0 : j <= kv_len - q_len + i;
}

int64_t AttentionTaskContext::span(int64_t i, int64_t q_len, int64_t kv_len) const {
  // Without a custom mask, positions past the causal limit are never visible.
  return mp ? kv_len : std::min(kv_len, kv_len - q_len + i + 1);
}

const float* AttentionTaskContext::cache_row(const TensorView& cache, int32_t slot, int64_t kvh, float* tmp) const {
  const int64_t base = (static_cast<int64_t>(slot) * kv_heads + kvh) * dim;
  if (cache.dtype == DType::kF32) return cache.ptr<float>() + base;
  convert_to_float(static_cast<const char*>(cache.data) + base * static_cast<int64_t>(dtype_size(cache.dtype)), cache.dtype, dim, tmp);
  return tmp;
}

void AttentionTaskContext::query_row(int64_t row, int64_t h, float* out) const {
  convert_to_float(static_cast<const char*>(p.q.data) + (row * q_heads + h) * dim * static_cast<int64_t>(dtype_size(p.q.dtype)),
                   p.q.dtype, dim, out);
}

void AttentionTaskContext::store_output(int64_t row, int64_t h, const float* acc, float scale) const {
  if (p.out.dtype == DType::kF32) {
    float* out = p.out.ptr<float>() + (row * q_heads + h) * dim;
    for (int64_t d = 0; d < dim; ++d) out[d] = acc[d] * scale;
    return;
  }
  for (int64_t d = 0; d < dim; ++d) store_from_float(p.out.data, p.out.dtype, (row * q_heads + h) * dim + d, acc[d] * scale);
}

void attend_rows(const AttentionTaskContext& c, int64_t b, int64_t h, int64_t i0, int64_t i1) {
  const int64_t kvh = h / c.group, dim = c.dim;
  thread_local std::vector<float> scores, acc, qrow, row;
  acc.resize(static_cast<size_t>(dim)), qrow.resize(static_cast<size_t>(dim)), row.resize(static_cast<size_t>(dim));
  const int64_t q_len = c.qo[b + 1] - c.qo[b], kv_len = c.kvp[b + 1] - c.kvp[b];
  const int32_t* slots = c.kv + c.kvp[b];
  scores.resize(static_cast<size_t>(kv_len));
  // An f32 cache is read in place, one dispatched call per query for all its keys.
  const bool f32 = c.p.k_cache.dtype == DType::kF32 && c.p.v_cache.dtype == DType::kF32;
  const int64_t stride = c.kv_heads * dim;
  const float* k_rows = f32 ? c.p.k_cache.ptr<float>() + kvh * dim : nullptr;
  const float* v_rows = f32 ? c.p.v_cache.ptr<float>() + kvh * dim : nullptr;
  for (int64_t i = i0; i < i1; ++i) {
    const int64_t span = c.span(i, q_len, kv_len);
    c.query_row(c.qo[b] + i, h, qrow.data());
    if (f32) dot_rows(qrow.data(), k_rows, slots, span, stride, dim, scores.data());
    float max_score = kNone;
    if (f32 && !c.mp) {  // causal: every key of the span is visible
      max_score = scale_and_max(scores.data(), span, c.p.scale);
    } else if (f32) {  // a custom mask: its row for query i (span == kv_len)
      max_score = scale_mask_and_max(scores.data(), c.mask_row(b, i, kv_len), span, c.p.scale);
    } else {
      for (int64_t j = 0; j < span; ++j) {
        if (!c.visible(b, i, j, q_len, kv_len)) {
          scores[static_cast<size_t>(j)] = kNone;
          continue;
        }
        const float d = f32 ? scores[static_cast<size_t>(j)] : dot(qrow.data(), c.cache_row(c.p.k_cache, slots[j], kvh, row.data()), dim);
        const float s = d * c.p.scale;
        scores[static_cast<size_t>(j)] = s;
        max_score = std::max(max_score, s);
      }
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    float denom = 0.0f;
    if (max_score != kNone) {
      denom = softmax_numerators(scores.data(), span, max_score);
      if (f32) {
        axpy_rows(acc.data(), scores.data(), v_rows, slots, span, stride, dim);
      } else {
        for (int64_t j = 0; j < span; ++j)
          if (scores[static_cast<size_t>(j)] >= 0.0f) axpy(acc.data(), scores[static_cast<size_t>(j)], c.cache_row(c.p.v_cache, slots[j], kvh, row.data()), dim);
      }
    }
    c.store_output(c.qo[b] + i, h, acc.data(), denom > 0.0f ? 1.0f / denom : 0.0f);
  }
}

}  // namespace aerie::kernels::cpu
