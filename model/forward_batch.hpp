#pragma once
// ForwardBatch: everything one model forward over a ragged batch needs, as host arrays.
// Sequence b contributes tokens [qo_indptr[b], qo_indptr[b+1]) and attends over KV slots
// kv_indices[kv_indptr[b] .. kv_indptr[b+1]) (its whole context, new tokens included).
#include <cstdint>
#include <vector>

#include "kernels/tensor.hpp"

namespace aerie::model {

struct ForwardBatch {
  std::vector<int32_t> input_ids;      // [tokens]
  std::vector<int32_t> positions;      // [tokens]
  std::vector<int32_t> out_cache_loc;  // [tokens] KV slot each new token writes
  std::vector<int32_t> qo_indptr{0};   // [batch + 1]
  std::vector<int32_t> kv_indptr{0};   // [batch + 1]
  std::vector<int32_t> kv_indices;     // [kv_indptr.back()]
  std::vector<int32_t> logit_rows;     // token rows whose logits are returned
  std::vector<uint8_t> custom_mask;    // optional tree mask (see kernels/attention.hpp)
  std::vector<int32_t> mask_indptr;    // [batch + 1] with custom_mask
  // Overlap scheduling: the device table an input id < 0 names a slot of (kernels/future_tokens.hpp);
  // the upload resolves those ids on the device. Unset: every id is a token.
  TensorView future_tokens;

  int64_t num_tokens() const { return static_cast<int64_t>(input_ids.size()); }
  int64_t batch_size() const { return static_cast<int64_t>(qo_indptr.size()) - 1; }
  // True when logit_rows is every token row in order (a decode step).
  bool logits_for_every_row() const;
  // True when an input id names a future token slot.
  bool references_future_tokens() const;
  // Throws aerie::Error when the arrays disagree with each other.
  void validate() const;
};

// `batch` (every sequence with q new tokens, or empty) padded with sequences up to `bucket`
// sequences, as a captured CUDA graph runs it (spec/decode_graph_runner.hpp) and the eager
// DP-attention path pads to the bucket every rank agreed on: a padded sequence reads token
// 0 at positions 0..q-1, writes the reserved dummy KV slot 0 and attends over q copies of
// it (a custom mask of ones when the batch has one); when every row of the batch wants
// logits, the padded rows do too (after the real ones, which keep their indices).
ForwardBatch pad_to_bucket(const ForwardBatch& batch, int64_t bucket, int64_t q);

}  // namespace aerie::model
