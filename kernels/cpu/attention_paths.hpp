#pragma once
// The CPU attention's two ways through one (sequence, query head): row by row (decode and
// verify: few queries, vectorised dot products), or in blocks of queries through sgemm
// (prefill: Q K^T and P V as matrix products). attention.cpp validates the indices and
// hands out the tasks.
#include <cstdint>

#include "kernels/attention.hpp"
#include "kernels/status.hpp"

namespace aerie::kernels::cpu {

/// p with its index arrays already checked, and the shapes every task needs.
struct AttentionTaskContext {
  const AttentionParams& p;
  int64_t q_heads, kv_heads, group, dim;
  const int32_t* qo;   // qo_indptr
  const int32_t* kvp;  // kv_indptr
  const int32_t* kv;   // kv_indices
  const int32_t* mp;   // mask_indptr, null without a custom mask

  // Query i of sequence b's row of the custom mask (kv_len bytes, nonzero: visible); needs mp.
  const uint8_t* mask_row(int64_t b, int64_t i, int64_t kv_len) const;
  bool visible(int64_t b, int64_t i, int64_t j, int64_t q_len, int64_t kv_len) const;
  // Keys that query i of sequence b can see at most: a prefix of its KV.
  int64_t span(int64_t i, int64_t q_len, int64_t kv_len) const;
  // Head kvh of cache slot `slot` as f32: in place for an f32 cache, converted into tmp otherwise.
  const float* cache_row(const TensorView& cache, int32_t slot, int64_t kvh, float* tmp) const;
  // Query row `row` (of all sequences), head h, as f32 into out.
  void query_row(int64_t row, int64_t h, float* out) const;
  // Writes dim values of output row `row`, head h, each times `scale`.
  void store_output(int64_t row, int64_t h, const float* acc, float scale) const;
};

/// Scores to softmax numerators in place, e^(s - max_score) by vector_exp (vector_exp.hpp, as
/// this CPU's clone fuses it), keys that are not visible (-inf) to -1; returns the numerators'
/// sum in key order. attend_rows' softmax, exposed for the tests of its order.
float softmax_numerators(float* s, int64_t n, float max_score);

/// Queries [i0, i1) of sequence b, head h, one at a time (each query's result is its own, so
/// any split of a sequence's queries gives the same bits).
void attend_rows(const AttentionTaskContext& c, int64_t b, int64_t h, int64_t i0, int64_t i1);

/// Queries [i0, i1) of sequence b, head h, as two matrix products (needs the fast sgemm).
Status attend_block(const AttentionTaskContext& c, int64_t b, int64_t h, int64_t i0, int64_t i1);

}  // namespace aerie::kernels::cpu
