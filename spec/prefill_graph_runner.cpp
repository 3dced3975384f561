#include "spec/prefill_graph_runner.hpp"

#include "kernels/batch_invariant.hpp"
#include "kernels/error.hpp"

namespace aerie::spec {

PrefillGraphRunner::PrefillGraphRunner(model::LlamaModel& model, model::KvCache& kv, int64_t max_tokens, int64_t max_context)
    : model_(model),
      kv_(kv),
      // Unsplit attention (the tensor-core prefill kernel takes it), one logit row gathered;
      // batch-invariant attention splits as every other forward does (kernels/batch_invariant.hpp).
      // Padding up to a bucket as the launch's policy says (--disable-cuda-graph-padding: exact sizes only).
      buckets_("target prefill", BucketSchedule(prefill_graph_token_buckets(max_tokens), graph_bucket_policy().padding), /*graphs=*/true,
               [&model, max_context](int64_t tokens) {
                 const int splits = kernels::batch_invariant() ? model.attention_splits(tokens, max_context) : 1;
                 return model::ForwardDims{.tokens = tokens, .seqs = 1, .logit_rows = 1, .custom_mask = false, .num_splits = splits,
                                           .logits_all_rows = false, .attention_tokens_per_block = 1};
               }),
      side_(model.stream()) {
  AERIE_CHECK(model.stream().device() == Device::kCuda, "CUDA graphs need the CUDA backend");
  AERIE_CHECK(!model.dp_attention(), "DP attention runs eagerly (padded to the bucket every rank agreed on): its graphs are not captured yet");
  AERIE_CHECK(max_tokens >= 1 && max_context >= max_tokens, "prefill graphs need 1 <= max tokens <= max context");
  const int64_t top = buckets_.largest();
  model::ForwardCapacity cap;
  cap.max_tokens = top;
  cap.max_seqs = 1;
  cap.max_logit_rows = 1;
  cap.max_kv_indices = max_context + top;  // the longest context, and a padded token's dummy behind it
  cap.max_splits = buckets_.dims(top).num_splits;
  ws_ = model.make_workspace(cap);
  const Stream& stream = model.stream();
  buckets_.capture(
      stream,
      [&](int64_t tokens) {  // a prompt of one token padded to the bucket
        model::ForwardBatch one;
        one.input_ids = {0};
        one.positions = {0};
        one.out_cache_loc = {0};
        one.qo_indptr = {0, 1};
        one.kv_indptr = {0, 1};
        one.kv_indices = {0};
        one.logit_rows = {0};
        ws_->upload(padded_to(one, tokens), stream);
      },
      [&](int64_t tokens) { model.run(*ws_, kv, buckets_.dims(tokens)); });
}

bool PrefillGraphRunner::can_run(const model::ForwardBatch& b) const {
  if (b.batch_size() != 1 || !b.custom_mask.empty()) return false;
  const int64_t n = b.num_tokens();
  if (n < 1 || n > buckets_.largest() || b.logit_rows.size() > 1) return false;
  if (!b.logit_rows.empty() && (b.logit_rows[0] < 0 || b.logit_rows[0] >= n)) return false;
  const int64_t context = b.kv_indptr[1] - b.kv_indptr[0];
  const int64_t bucket = buckets_.bucket_for(n);
  return bucket >= n && context >= n && static_cast<int64_t>(b.kv_indices.size()) + bucket - n <= ws_->capacity().max_kv_indices;
}

model::ForwardBatch PrefillGraphRunner::padded_to(const model::ForwardBatch& b, int64_t bucket) const {
  model::ForwardBatch p = b;
  const int64_t pad = bucket - b.num_tokens();
  const int32_t last_position = b.positions.back();
  p.input_ids.insert(p.input_ids.end(), static_cast<size_t>(pad), 0);
  p.positions.insert(p.positions.end(), static_cast<size_t>(pad), last_position);
  p.out_cache_loc.insert(p.out_cache_loc.end(), static_cast<size_t>(pad), 0);
  p.kv_indices.insert(p.kv_indices.end(), static_cast<size_t>(pad), 0);
  p.qo_indptr = {0, static_cast<int32_t>(bucket)};
  p.kv_indptr = {0, static_cast<int32_t>(p.kv_indices.size())};
  if (p.logit_rows.empty()) p.logit_rows = {0};  // the graph gathers one row; none comes back
  return p;
}

TensorView PrefillGraphRunner::replay(const model::ForwardBatch& batch) {
  AERIE_CHECK(can_run(batch), "this batch cannot replay a prefill graph");
  const int64_t bucket = buckets_.bucket_for(batch.num_tokens());
  ws_->upload_beside(padded_to(batch, bucket), side_, model_.stream());
  buckets_.run(bucket, model_.stream(), [](int64_t) {});
  side_.mark();
  model_.captured_by_replay(*ws_, batch.num_tokens());
  return ws_->logits.view().slice_rows(0, static_cast<int64_t>(batch.logit_rows.size()));
}

}  // namespace aerie::spec
