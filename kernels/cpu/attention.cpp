#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/cpu/parallel_for.hpp"

namespace aerie::kernels::cpu {

namespace {
Status bad(const std::string& what) { return Status::error("attention: " + what); }
}  // namespace

Status attention(const AttentionParams& p) {
  const int64_t batch = p.qo_indptr.dim(0) - 1;
  const int64_t q_heads = p.q.dim(1), kv_heads = p.k_cache.dim(1), dim = p.q.dim(2);
  const int64_t group = q_heads / kv_heads, slots = p.k_cache.dim(0);
  const int32_t* qo = p.qo_indptr.ptr<int32_t>();
  const int32_t* kvp = p.kv_indptr.ptr<int32_t>();
  const int32_t* kv = p.kv_indices.ptr<int32_t>();
  const int32_t* mp = p.custom_mask.defined() ? p.mask_indptr.ptr<int32_t>() : nullptr;
  // Check every index before reading through it.
  if (qo[0] != 0 || kvp[0] != 0) return bad("indptr arrays must start at 0");
  if (qo[batch] != p.q.dim(0)) return bad("qo_indptr ends at " + std::to_string(qo[batch]) + ", q has " +
                                          std::to_string(p.q.dim(0)) + " rows");
  if (kvp[batch] > p.kv_indices.dim(0)) return bad("kv_indptr runs past kv_indices");
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t q_len = qo[b + 1] - qo[b], kv_len = kvp[b + 1] - kvp[b];
    if (q_len < 0 || kv_len < 0) return bad("indptr arrays must not decrease");
    if (!mp && q_len > kv_len) return bad("sequence " + std::to_string(b) + " has more new tokens than KV slots");
    if (mp && (mp[b + 1] - mp[b] != q_len * kv_len || mp[b + 1] > p.custom_mask.dim(0)))
      return bad("custom mask block of sequence " + std::to_string(b) + " must hold q_len * kv_len entries");
  }
  for (int64_t i = 0; i < kvp[batch]; ++i)
    if (kv[i] < 0 || kv[i] >= slots) return bad("KV slot " + std::to_string(kv[i]) + " is outside the cache");

  // The CPU backend keeps its cache in f32: read it directly there (other dtypes convert per element).
  const float* k32 = p.k_cache.dtype == DType::kF32 ? p.k_cache.ptr<float>() : nullptr;
  const float* v32 = p.v_cache.dtype == DType::kF32 ? p.v_cache.ptr<float>() : nullptr;
  auto k_at = [&](int64_t i) { return k32 ? k32[i] : load_as_float(p.k_cache.data, p.k_cache.dtype, i); };
  auto v_at = [&](int64_t i) { return v32 ? v32[i] : load_as_float(p.v_cache.data, p.v_cache.dtype, i); };
  // Sequences are independent and write disjoint output rows: one task each.
  parallel_for(batch, kvp[batch] * q_heads * dim / std::max<int64_t>(batch, 1) + 1, [&](int64_t b) {
    thread_local std::vector<float> scores, acc, qrow;
    acc.resize(static_cast<size_t>(dim)), qrow.resize(static_cast<size_t>(dim));
    const int64_t q_len = qo[b + 1] - qo[b], kv_len = kvp[b + 1] - kvp[b];
    scores.resize(static_cast<size_t>(kv_len));
    for (int64_t i = 0; i < q_len; ++i) {
      const int64_t row = qo[b] + i;
      const int64_t causal_limit = kv_len - q_len + i;  // last visible position
      for (int64_t h = 0; h < q_heads; ++h) {
        const int64_t kvh = h / group;
        for (int64_t d = 0; d < dim; ++d) qrow[static_cast<size_t>(d)] = load_as_float(p.q.data, p.q.dtype, (row * q_heads + h) * dim + d);
        float max_score = -std::numeric_limits<float>::infinity();
        for (int64_t j = 0; j < kv_len; ++j) {
          const bool visible = mp ? p.custom_mask.ptr<uint8_t>()[mp[b] + i * kv_len + j] != 0 : j <= causal_limit;
          if (!visible) { scores[static_cast<size_t>(j)] = -std::numeric_limits<float>::infinity(); continue; }
          const int64_t base = (static_cast<int64_t>(kv[kvp[b] + j]) * kv_heads + kvh) * dim;
          float s = 0.0f;
          for (int64_t d = 0; d < dim; ++d) s += qrow[static_cast<size_t>(d)] * k_at(base + d);
          s *= p.scale;
          scores[static_cast<size_t>(j)] = s;
          max_score = std::max(max_score, s);
        }
        std::fill(acc.begin(), acc.end(), 0.0f);
        float denom = 0.0f;
        if (max_score != -std::numeric_limits<float>::infinity()) {
          for (int64_t j = 0; j < kv_len; ++j) {
            const float s = scores[static_cast<size_t>(j)];
            if (s == -std::numeric_limits<float>::infinity()) continue;
            const float e = std::exp(s - max_score);
            denom += e;
            const int64_t base = (static_cast<int64_t>(kv[kvp[b] + j]) * kv_heads + kvh) * dim;
            for (int64_t d = 0; d < dim; ++d) acc[static_cast<size_t>(d)] += e * v_at(base + d);
          }
        }
        const float inv = denom > 0.0f ? 1.0f / denom : 0.0f;
        for (int64_t d = 0; d < dim; ++d)
          store_from_float(p.out.data, p.out.dtype, (row * q_heads + h) * dim + d, acc[static_cast<size_t>(d)] * inv);
      }
    }
  });
  return Status::ok();
}

Status kv_write(const KvWriteParams& p) {
  const int64_t tokens = p.k.dim(0), row = p.k.dim(1) * p.k.dim(2), slots = p.k_cache.dim(0);
  const int32_t* s = p.slots.ptr<int32_t>();
  for (int64_t t = 0; t < tokens; ++t)
    if (s[t] < 0 || s[t] >= slots)
      return Status::error("kv_write: slot " + std::to_string(s[t]) + " is outside the cache of " + std::to_string(slots));
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < row; ++i) {
      store_from_float(p.k_cache.data, p.k_cache.dtype, s[t] * row + i, load_as_float(p.k.data, p.k.dtype, t * row + i));
      store_from_float(p.v_cache.data, p.v_cache.dtype, s[t] * row + i, load_as_float(p.v.data, p.v.dtype, t * row + i));
    }
  }
  return Status::ok();
}

Status kv_move(const KvMoveParams& p) {
  const int64_t moves = p.src_slots.dim(0), row = p.k_cache.dim(1) * p.k_cache.dim(2), slots = p.k_cache.dim(0);
  const int32_t* src = p.src_slots.ptr<int32_t>();
  const int32_t* dst = p.dst_slots.ptr<int32_t>();
  for (int64_t i = 0; i < moves; ++i)
    if (src[i] < 0 || src[i] >= slots || dst[i] < 0 || dst[i] >= slots)
      return Status::error("kv_move: move " + std::to_string(src[i]) + " -> " + std::to_string(dst[i]) + " is outside the cache of " +
                           std::to_string(slots));
  const size_t bytes = static_cast<size_t>(row) * dtype_size(p.k_cache.dtype);
  for (int64_t i = 0; i < moves; ++i) {
    if (src[i] == dst[i]) continue;
    for (void* base : {p.k_cache.data, p.v_cache.data})
      std::memcpy(static_cast<char*>(base) + static_cast<size_t>(dst[i]) * bytes, static_cast<const char*>(base) + static_cast<size_t>(src[i]) * bytes, bytes);
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
