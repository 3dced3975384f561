#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/batch_invariant.hpp"
#include "kernels/cpu/attention_paths.hpp"
#include "kernels/cpu/parallel_for.hpp"

namespace aerie::kernels::cpu {

namespace {
Status bad(const std::string& what) { return Status::error("attention: " + what); }

// Sequences with at least this many new queries (prefill) go through sgemm in blocks of
// kQueryBlock queries; fewer (decode, verify) go row by row.
constexpr int64_t kBlockedMinQueries = 16, kQueryBlock = 64;
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

  const AttentionTaskContext ctx{p, q_heads, kv_heads, group, dim, qo, kvp, kv, mp};
  // Tasks: (sequence, head) row by row, or (sequence, head, query block) through sgemm. Each
  // writes its own output rows, and each output's sums run in the same order whatever the
  // thread count.
  struct Task {
    int64_t b, h, i0, i1;
  };
  std::vector<Task> rows, blocks;
  // Batch-invariant attention (kernels/batch_invariant.hpp): every query row by itself, so that
  // a prompt's rows are summed alike however its prompt was cut into chunks.
  const bool blocked = cpu_gemm_uses_blas() && !batch_invariant();
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t q_len = qo[b + 1] - qo[b];
    for (int64_t h = 0; h < q_heads; ++h) {
      if (!blocked || q_len < kBlockedMinQueries) {
        // A verify's few queries one task each: 9 heads of 4 queries split 18/18 over two
        // threads where 9 tasks of 4 split 20/16.
        for (int64_t i = 0; i < q_len; ++i) rows.push_back({b, h, i, i + 1});
        continue;
      }
      for (int64_t i0 = 0; i0 < q_len; i0 += kQueryBlock) blocks.push_back({b, h, i0, std::min(q_len, i0 + kQueryBlock)});
    }
  }
  const int64_t avg_kv = kvp[batch] / std::max<int64_t>(batch, 1) + 1;
  parallel_for(static_cast<int64_t>(rows.size()), avg_kv * dim * 4, [&](int64_t t) { attend_rows(ctx, rows[t].b, rows[t].h, rows[t].i0, rows[t].i1); });
  std::vector<Status> failed(blocks.size());
  parallel_for(static_cast<int64_t>(blocks.size()), avg_kv * dim * kQueryBlock, [&](int64_t t) {
    failed[static_cast<size_t>(t)] = attend_block(ctx, blocks[t].b, blocks[t].h, blocks[t].i0, blocks[t].i1);
  });
  for (const Status& st : failed)
    if (!st.is_ok()) return bad(st.message());
  return Status::ok();
}

Status kv_write(const KvWriteParams& p) {
  const int64_t tokens = p.k.dim(0), row = p.k.dim(1) * p.k.dim(2), slots = p.k_cache.dim(0);
  const int32_t* s = p.slots.ptr<int32_t>();
  for (int64_t t = 0; t < tokens; ++t)
    if (s[t] < 0 || s[t] >= slots)
      return Status::error("kv_write: slot " + std::to_string(s[t]) + " is outside the cache of " + std::to_string(slots));
  if (p.k.dtype == p.k_cache.dtype && p.v.dtype == p.v_cache.dtype) {  // rows of the cache's dtype: copied as they are
    const size_t kb = static_cast<size_t>(row) * dtype_size(p.k.dtype), vb = static_cast<size_t>(row) * dtype_size(p.v.dtype);
    for (int64_t t = 0; t < tokens; ++t) {
      std::memcpy(static_cast<char*>(p.k_cache.data) + static_cast<size_t>(s[t]) * kb, static_cast<const char*>(p.k.data) + static_cast<size_t>(t) * kb, kb);
      std::memcpy(static_cast<char*>(p.v_cache.data) + static_cast<size_t>(s[t]) * vb, static_cast<const char*>(p.v.data) + static_cast<size_t>(t) * vb, vb);
    }
    return Status::ok();
  }
  for (int64_t t = 0; t < tokens; ++t) {
    for (int64_t i = 0; i < row; ++i) {
      store_from_float(p.k_cache.data, p.k_cache.dtype, s[t] * row + i, load_as_float(p.k.data, p.k.dtype, t * row + i));
      store_from_float(p.v_cache.data, p.v_cache.dtype, s[t] * row + i, load_as_float(p.v.data, p.v.dtype, t * row + i));
    }
  }
  return Status::ok();
}

Status kv_move(const KvMoveParams& p) {
  const TensorView& first = p.k_caches.front();
  const int64_t moves = p.src_slots.dim(0), row = first.dim(1) * first.dim(2), slots = first.dim(0);
  const int32_t* src = p.src_slots.ptr<int32_t>();
  const int32_t* dst = p.dst_slots.ptr<int32_t>();
  for (int64_t i = 0; i < moves; ++i)
    if (src[i] < 0 || src[i] >= slots || dst[i] < 0 || dst[i] >= slots)
      return Status::error("kv_move: move " + std::to_string(src[i]) + " -> " + std::to_string(dst[i]) + " is outside the cache of " +
                           std::to_string(slots));
  const size_t bytes = static_cast<size_t>(row) * dtype_size(first.dtype);
  for (size_t l = 0; l < p.k_caches.size(); ++l)
    for (int64_t i = 0; i < moves; ++i) {
      if (src[i] == dst[i]) continue;
      for (void* base : {p.k_caches[l].data, p.v_caches[l].data})
        std::memcpy(static_cast<char*>(base) + static_cast<size_t>(dst[i]) * bytes, static_cast<const char*>(base) + static_cast<size_t>(src[i]) * bytes, bytes);
    }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
