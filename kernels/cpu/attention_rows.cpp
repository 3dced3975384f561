// Attention one query at a time: decode and verify, where a sequence brings a few queries.
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_paths.hpp"
#include "kernels/cpu/cpu_clones.hpp"

namespace aerie::kernels::cpu {

namespace {

// The two inner loops, one version per instruction set (cpu_clones.hpp). Sixteen partial
// sums: vectorised, and the order is fixed.
AERIE_CPU_CLONES float dot(const float* a, const float* b, int64_t n) {
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
AERIE_CPU_CLONES void axpy(float* acc, float e, const float* v, int64_t n) {
  for (int64_t d = 0; d < n; ++d) acc[d] += e * v[d];
}

}  // namespace

bool AttentionTaskContext::visible(int64_t b, int64_t i, int64_t j, int64_t q_len, int64_t kv_len) const {
  return mp ? p.custom_mask.ptr<uint8_t>()[mp[b] + i * kv_len + j] != 0 : j <= kv_len - q_len + i;
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

void attend_rows(const AttentionTaskContext& c, int64_t b, int64_t h) {
  const int64_t kvh = h / c.group, dim = c.dim;
  thread_local std::vector<float> scores, acc, qrow, row;
  acc.resize(static_cast<size_t>(dim)), qrow.resize(static_cast<size_t>(dim)), row.resize(static_cast<size_t>(dim));
  const int64_t q_len = c.qo[b + 1] - c.qo[b], kv_len = c.kvp[b + 1] - c.kvp[b];
  const int32_t* slots = c.kv + c.kvp[b];
  scores.resize(static_cast<size_t>(kv_len));
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < q_len; ++i) {
    const int64_t span = c.span(i, q_len, kv_len);
    c.query_row(c.qo[b] + i, h, qrow.data());
    float max_score = kNone;
    for (int64_t j = 0; j < span; ++j) {
      if (!c.visible(b, i, j, q_len, kv_len)) {
        scores[static_cast<size_t>(j)] = kNone;
        continue;
      }
      const float s = dot(qrow.data(), c.cache_row(c.p.k_cache, slots[j], kvh, row.data()), dim) * c.p.scale;
      scores[static_cast<size_t>(j)] = s;
      max_score = std::max(max_score, s);
    }
    std::fill(acc.begin(), acc.end(), 0.0f);
    float denom = 0.0f;
    if (max_score != kNone) {
      for (int64_t j = 0; j < span; ++j) {
        const float s = scores[static_cast<size_t>(j)];
        if (s == kNone) continue;
        const float e = std::exp(s - max_score);
        denom += e;
        axpy(acc.data(), e, c.cache_row(c.p.v_cache, slots[j], kvh, row.data()), dim);
      }
    }
    c.store_output(c.qo[b] + i, h, acc.data(), denom > 0.0f ? 1.0f / denom : 0.0f);
  }
}

}  // namespace aerie::kernels::cpu
