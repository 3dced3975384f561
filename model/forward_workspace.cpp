#include "model/forward_workspace.hpp"

#include <algorithm>
#include <cstring>

#include "kernels/attention.hpp"
#include "kernels/future_tokens.hpp"
#include "kernels/error.hpp"

namespace aerie::model {

ForwardWorkspace::ForwardWorkspace(const LlamaConfig& c, ForwardCapacity cap, Device dev, DType dt, int vocab_ranks) : capacity_(cap) {
  AERIE_CHECK(cap.max_tokens > 0 && cap.max_seqs > 0 && cap.max_logit_rows > 0 && cap.max_kv_indices > 0,
              "forward workspace needs positive capacities");
  // i32 arena: small per-token and per-sequence arrays first, kv_indices last, so an
  // upload copies one prefix.
  int64_t at = 0;
  auto take = [&](int64_t n) { const int64_t o = at; at += n; return o; };
  off_ids_ = take(cap.max_tokens);
  off_pos_ = take(cap.max_tokens);
  off_slots_ = take(cap.max_tokens);
  off_qo_ = take(cap.max_seqs + 1);
  off_kvp_ = take(cap.max_seqs + 1);
  off_maskp_ = take(cap.max_seqs + 1);
  off_rows_ = take(cap.max_logit_rows);
  off_kv_ = take(cap.max_kv_indices);
  total_ints_ = at;
  ints_ = Buffer(dev, DType::kI32, {total_ints_});
  ints_.zero();
  staging_ = StagingRing(dev, static_cast<size_t>(total_ints_) * 4);
  mask_ = Buffer(dev, DType::kU8, {std::max<int64_t>(cap.max_mask, 1)});
  mask_staging_ = StagingRing(dev, static_cast<size_t>(std::max<int64_t>(cap.max_mask, 1)));

  const int64_t T = cap.max_tokens, H = c.hidden_size, I = c.intermediate_size;
  hidden = Buffer(dev, dt, {T, H});
  residual = Buffer(dev, dt, {T, H});
  normed = Buffer(dev, dt, {T, H});
  qkv = Buffer(dev, dt, {T, c.q_size() + 2 * c.kv_size()});
  q = Buffer(dev, dt, {T, c.num_heads, c.head_dim});
  attn = Buffer(dev, dt, {T, c.num_heads, c.head_dim});
  gate_up = Buffer(dev, dt, {T, 2 * I});
  act = Buffer(dev, dt, {T, I});
  selected = Buffer(dev, dt, {cap.max_logit_rows, H});
  logits = Buffer(dev, DType::kF32, {cap.max_logit_rows, c.vocab_size});
  if (vocab_ranks > 1) {
    const int64_t per_rank = (c.vocab_size + vocab_ranks - 1) / vocab_ranks;
    shard_logits = Buffer(dev, DType::kF32, {cap.max_logit_rows * per_rank});
    gathered_logits = Buffer(dev, DType::kF32, {vocab_ranks * cap.max_logit_rows * per_rank});
  }
  attn_partial = Buffer(dev, DType::kF32,
                        {std::max<int64_t>(1, kernels::attention_workspace_floats(T, c.num_heads, c.head_dim, cap.max_splits))});
}

ForwardCapacity ForwardCapacity::grown_for(const ForwardBatch& b, int splits) const {
  auto grow = [](int64_t need, int64_t have) { return need <= have ? have : std::max(need, 2 * have); };
  ForwardCapacity c;
  c.max_tokens = grow(std::max<int64_t>(b.num_tokens(), 1), max_tokens);
  c.max_seqs = grow(std::max<int64_t>(b.batch_size(), 1), max_seqs);
  c.max_kv_indices = grow(std::max<int64_t>(static_cast<int64_t>(b.kv_indices.size()), 1), max_kv_indices);
  c.max_logit_rows = grow(std::max<int64_t>(static_cast<int64_t>(b.logit_rows.size()), 1), max_logit_rows);
  c.max_mask = grow(static_cast<int64_t>(b.custom_mask.size()), max_mask);
  c.max_splits = std::max(splits, max_splits);
  return c;
}

bool ForwardWorkspace::fits(const ForwardBatch& b, int num_splits) const {
  return b.num_tokens() <= capacity_.max_tokens && b.batch_size() <= capacity_.max_seqs &&
         static_cast<int64_t>(b.kv_indices.size()) <= capacity_.max_kv_indices &&
         static_cast<int64_t>(b.logit_rows.size()) <= capacity_.max_logit_rows &&
         static_cast<int64_t>(b.custom_mask.size()) <= capacity_.max_mask && num_splits <= capacity_.max_splits;
}

void ForwardWorkspace::upload(const ForwardBatch& b, const Stream& stream) {
  copy_in(b, stream);
  resolve_future_tokens(b, stream);
}

void ForwardWorkspace::copy_in(const ForwardBatch& b, const Stream& stream) {
  AERIE_CHECK(fits(b, 1), "forward batch (" << b.num_tokens() << " tokens, " << b.batch_size() << " sequences, "
                                            << b.kv_indices.size() << " KV slots) exceeds the workspace");
  // Earlier uploads may not have run yet (overlap scheduling enqueues the next batch while
  // one runs): the ring hands out a host arena whose last copy has run, without waiting for
  // the stream.
  int32_t* host = staging_.acquire_as<int32_t>();
  auto put = [&](int64_t off, const std::vector<int32_t>& v) {
    if (!v.empty()) std::memcpy(host + off, v.data(), v.size() * 4);
  };
  put(off_ids_, b.input_ids);
  put(off_pos_, b.positions);
  put(off_slots_, b.out_cache_loc);
  put(off_qo_, b.qo_indptr);
  put(off_kvp_, b.kv_indptr);
  put(off_maskp_, b.mask_indptr);
  put(off_rows_, b.logit_rows);
  put(off_kv_, b.kv_indices);
  const size_t used = static_cast<size_t>(off_kv_ + static_cast<int64_t>(b.kv_indices.size())) * 4;
  copy_async(ints_.data(), host, used, stream);
  staging_.release(stream);
  if (!b.custom_mask.empty()) {
    void* mask_host = mask_staging_.acquire();
    std::memcpy(mask_host, b.custom_mask.data(), b.custom_mask.size());
    copy_async(mask_.data(), mask_host, b.custom_mask.size(), stream);
    mask_staging_.release(stream);
  }
}

void ForwardWorkspace::upload_beside(const ForwardBatch& b, SideCopyStream& side, const Stream& stream) {
  copy_in(b, side.begin());
  side.end();
  resolve_future_tokens(b, stream);
}

void ForwardWorkspace::resolve_future_tokens(const ForwardBatch& b, const Stream& stream) {
  // Future tokens (overlap scheduling): ids naming a slot of the table become its token on
  // the device, after the batch that samples it and before this batch reads them.
  if (b.future_tokens.data && b.references_future_tokens())
    AERIE_CHECK_STATUS(kernels::resolve_future_ids({.ids = ids(b.num_tokens()), .table = b.future_tokens}, stream));
}

}  // namespace aerie::model
