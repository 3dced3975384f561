// Attention for a block of queries as two matrix products (prefill): S = Q K^T over the
// keys the block can see, masked softmax per row, O = P V. The keys and values of the
// sequence's pages are gathered into contiguous rows first.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/attention_paths.hpp"
#include "kernels/cpu/blas_gemm.hpp"
#include "kernels/cpu/cpu_clones.hpp"
#include "kernels/cpu/vector_exp.hpp"

namespace aerie::kernels::cpu {

namespace {
// One row of scores to softmax numerators in place: masked keys (-inf) weigh 0. Returns the
// sum (sixteen partial sums, fixed order). Vectorised.
AERIE_CPU_CLONES float exp_row(float* s, int64_t n, float max_score) {
  for (int64_t j = 0; j < n; ++j) s[j] = s[j] == -std::numeric_limits<float>::infinity() ? 0.0f : vector_exp(s[j] - max_score);
  float acc[16] = {};
  int64_t j = 0;
  for (; j + 16 <= n; j += 16)
    for (int u = 0; u < 16; ++u) acc[u] += s[j + u];
  for (int w = 8; w >= 1; w /= 2)
    for (int u = 0; u < w; ++u) acc[u] += acc[u + w];
  float sum = acc[0];
  for (; j < n; ++j) sum += s[j];
  return sum;
}
}  // namespace

Status attend_block(const AttentionTaskContext& c, int64_t b, int64_t h, int64_t i0, int64_t i1) {
  const int64_t kvh = h / c.group, dim = c.dim, rows = i1 - i0;
  const int64_t q_len = c.qo[b + 1] - c.qo[b], kv_len = c.kvp[b + 1] - c.kvp[b];
  const int64_t span = c.span(i1 - 1, q_len, kv_len);  // the last query sees the most
  const int32_t* slots = c.kv + c.kvp[b];
  thread_local std::vector<float> q, k, v, s, o, tmp;
  q.resize(static_cast<size_t>(rows * dim)), o.resize(q.size()), tmp.resize(static_cast<size_t>(dim));
  k.resize(static_cast<size_t>(span * dim)), v.resize(k.size()), s.resize(static_cast<size_t>(rows * span));
  for (int64_t r = 0; r < rows; ++r) c.query_row(c.qo[b] + i0 + r, h, q.data() + r * dim);
  for (int64_t j = 0; j < span; ++j) {
    std::memcpy(k.data() + j * dim, c.cache_row(c.p.k_cache, slots[j], kvh, tmp.data()), static_cast<size_t>(dim) * sizeof(float));
    std::memcpy(v.data() + j * dim, c.cache_row(c.p.v_cache, slots[j], kvh, tmp.data()), static_cast<size_t>(dim) * sizeof(float));
  }
  if (Status st = blas_sgemm(true, rows, span, dim, q.data(), dim, k.data(), dim, s.data(), span); !st.is_ok()) return st;
  // Softmax numerators in place (masked keys weigh 0); each row's sum divides at the end.
  constexpr float kNone = -std::numeric_limits<float>::infinity();
  std::vector<float> denom(static_cast<size_t>(rows), 0.0f);
  for (int64_t r = 0; r < rows; ++r) {
    float* sr = s.data() + r * span;
    const int64_t i = i0 + r;
    float max_score = kNone;
    for (int64_t j = 0; j < span; ++j) {
      sr[j] = c.visible(b, i, j, q_len, kv_len) ? sr[j] * c.p.scale : kNone;
      max_score = std::max(max_score, sr[j]);
    }
    denom[static_cast<size_t>(r)] = max_score == kNone ? 0.0f : exp_row(sr, span, max_score);
  }
  if (Status st = blas_sgemm(false, rows, dim, span, s.data(), span, v.data(), dim, o.data(), dim); !st.is_ok()) return st;
  for (int64_t r = 0; r < rows; ++r) {
    const float d = denom[static_cast<size_t>(r)];
    c.store_output(c.qo[b] + i0 + r, h, o.data() + r * dim, d > 0.0f ? 1.0f / d : 0.0f);
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
