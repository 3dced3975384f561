#include "spec/decode_graph_runner.hpp"

#include <algorithm>

#include "kernels/error.hpp"
#include "kernels/staging.hpp"

namespace aerie::spec {

DecodeGraphRunner::DecodeGraphRunner(model::LlamaModel& model, model::KvCache& kv, int64_t max_bs, int64_t max_context,
                                     int64_t tokens_per_seq, bool masked)
    : model_(model),
      kv_(kv),
      q_(tokens_per_seq),
      masked_(masked),
      max_context_(max_context),
      // The split count and tokens per attention block are fixed per bucket by its capture.
      buckets_(tokens_per_seq == 1 ? "decode" : "verify", max_bs, /*graphs=*/true, [this](int64_t bs) {
        const int tpb = model_.attention_tokens_per_block(model::pad_to_bucket(model::ForwardBatch{}, bs, q_));
        return model::ForwardDims{.tokens = bs * q_, .seqs = bs, .logit_rows = bs * q_, .custom_mask = masked_,
                                  .num_splits = model_.attention_splits(bs * q_ / tpb, max_context_), .logits_all_rows = true,
                                  .attention_tokens_per_block = tpb};
      }),
      side_(model.stream()) {
  AERIE_CHECK(model.stream().device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  AERIE_CHECK(!model.dp_attention(), "DP attention runs eagerly (padded to the bucket every rank agreed on): its graphs are not captured yet");
  AERIE_CHECK(max_context > 0, "max context must be positive");
  AERIE_CHECK(q_ >= 1 && q_ <= max_context, "tokens per sequence must be in [1, max context]");
  const int64_t top = buckets_.largest(), top_rows = top * q_;
  model::ForwardCapacity cap;
  cap.max_tokens = cap.max_logit_rows = top_rows;
  cap.max_seqs = top;
  cap.max_kv_indices = kv.shape().num_slots() + top_rows;  // every real slot once, plus q per padded sequence
  // A sequence's mask is q rows over its context: q entries per context slot.
  if (masked_) cap.max_mask = q_ * cap.max_kv_indices;
  for (int64_t bs : buckets_.buckets()) cap.max_splits = std::max(cap.max_splits, buckets_.dims(bs).num_splits);
  ws_ = model.make_workspace(cap);
  const Stream& stream = model.stream();
  argmax_ = std::make_unique<DeviceArgmax>(Device::kCuda, top_rows);
  greedy_tokens_ = Buffer(Device::kCuda, DType::kI32, {top_rows});
  greedy_host_ = HostStaging(Device::kCuda, static_cast<size_t>(top_rows) * 4);
  buckets_.capture(
      stream, [&](int64_t bs) { ws_->upload(padding_only(bs), stream); },
      [&](int64_t bs) {  // the forward and its argmax
        const TensorView logits = model.run(*ws_, kv, buckets_.dims(bs));
        argmax_->run(logits, greedy_tokens_.view().slice_rows(0, bs * q_), stream);
      });
}

int64_t DecodeGraphRunner::bucket_for(int64_t batch_size) const { return buckets_.bucket_for(batch_size); }

model::ForwardBatch DecodeGraphRunner::padding_only(int64_t bs) const {
  model::ForwardBatch p = model::pad_to_bucket(model::ForwardBatch{}, bs, q_);
  if (masked_) {  // padded sequences see their q copies of the dummy slot: a mask of ones
    p.custom_mask.assign(static_cast<size_t>(bs * q_ * q_), uint8_t{1});
    p.mask_indptr = {0};
    for (int64_t i = 0; i < bs; ++i) p.mask_indptr.push_back(static_cast<int32_t>((i + 1) * q_ * q_));
  }
  return p;
}

bool DecodeGraphRunner::can_run(const model::ForwardBatch& b) const {
  if (b.batch_size() < 1 || b.num_tokens() != b.batch_size() * q_ || b.custom_mask.empty() == masked_) return false;
  if (masked_ && static_cast<int64_t>(b.custom_mask.size()) + buckets_.largest() * q_ * q_ > ws_->capacity().max_mask) return false;
  if (!buckets_.batch_for(b.batch_size())) return false;
  for (int64_t i = 0; i < b.batch_size(); ++i) {
    const auto s = static_cast<size_t>(i);
    if (b.qo_indptr[s + 1] - b.qo_indptr[s] != q_ || b.kv_indptr[s + 1] - b.kv_indptr[s] < q_) return false;
  }
  if (b.logit_rows.size() != static_cast<size_t>(b.num_tokens())) return false;
  for (size_t r = 0; r < b.logit_rows.size(); ++r)
    if (b.logit_rows[r] != static_cast<int32_t>(r)) return false;
  return static_cast<int64_t>(b.kv_indices.size()) + buckets_.largest() * q_ <= ws_->capacity().max_kv_indices;
}

TensorView DecodeGraphRunner::replay(const model::ForwardBatch& batch) {
  AERIE_CHECK(can_run(batch), "batch cannot replay a captured graph of " << q_ << " tokens per sequence");
  const int64_t bs = *buckets_.batch_for(batch.batch_size());
  ws_->upload_beside(model::pad_to_bucket(batch, bs, q_), side_, model_.stream());
  buckets_.run(bs, model_.stream(), [](int64_t) {});
  side_.mark();
  last_tokens_ = batch.num_tokens();
  model_.captured_by_replay(*ws_, last_tokens_);
  return ws_->logits.view().slice_rows(0, last_tokens_);
}

std::vector<int32_t> DecodeGraphRunner::last_greedy_tokens() {
  const size_t n = static_cast<size_t>(last_tokens_);
  copy_async(greedy_host_.data(), greedy_tokens_.data(), n * 4, model_.stream());
  synchronize(model_.stream());
  const int32_t* t = greedy_host_.as<int32_t>();
  return std::vector<int32_t>(t, t + n);
}

TensorView DecodeGraphRunner::replay_greedy_on_device(const model::ForwardBatch& batch) {
  replay(batch);
  return greedy_tokens_.view().slice_rows(0, last_tokens_);
}

std::vector<int32_t> DecodeGraphRunner::replay_greedy(const model::ForwardBatch& batch) {
  replay(batch);
  return last_greedy_tokens();
}

}  // namespace aerie::spec
