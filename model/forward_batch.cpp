#include "model/forward_batch.hpp"

#include "kernels/error.hpp"

namespace aerie::model {

bool ForwardBatch::logits_for_every_row() const {
  if (static_cast<int64_t>(logit_rows.size()) != num_tokens()) return false;
  for (size_t i = 0; i < logit_rows.size(); ++i)
    if (logit_rows[i] != static_cast<int32_t>(i)) return false;
  return true;
}

bool ForwardBatch::references_future_tokens() const {
  for (int32_t id : input_ids)
    if (id < 0) return true;
  return false;
}

void ForwardBatch::validate() const {
  const auto t = input_ids.size();
  AERIE_CHECK(t > 0, "forward batch has no tokens");
  AERIE_CHECK(positions.size() == t && out_cache_loc.size() == t,
              "forward batch: positions and out_cache_loc must have one entry per token");
  AERIE_CHECK(qo_indptr.size() == kv_indptr.size() && qo_indptr.size() >= 2,
              "forward batch: qo_indptr and kv_indptr must have batch + 1 entries");
  AERIE_CHECK(qo_indptr.front() == 0 && static_cast<size_t>(qo_indptr.back()) == t,
              "forward batch: qo_indptr must run from 0 to the token count");
  AERIE_CHECK(kv_indptr.front() == 0 && static_cast<size_t>(kv_indptr.back()) == kv_indices.size(),
              "forward batch: kv_indptr must run from 0 to the size of kv_indices");
  for (size_t b = 0; b + 1 < qo_indptr.size(); ++b) {
    AERIE_CHECK(qo_indptr[b + 1] >= qo_indptr[b] && kv_indptr[b + 1] >= kv_indptr[b], "forward batch: indptr decreases");
  }
  for (int32_t r : logit_rows)
    AERIE_CHECK(r >= 0 && static_cast<size_t>(r) < t, "forward batch: logit row " << r << " is not a token row");
  if (!custom_mask.empty())
    AERIE_CHECK(mask_indptr.size() == qo_indptr.size(), "forward batch: custom_mask needs mask_indptr");
  if (!future_tokens.data)
    AERIE_CHECK(!references_future_tokens(), "forward batch: an input id names a future token, but the batch has no future token table");
}

ForwardBatch pad_to_bucket(const ForwardBatch& batch, int64_t bucket, int64_t q) {
  AERIE_CHECK(q >= 1, "padding needs a positive token count per sequence");
  AERIE_CHECK(batch.batch_size() <= bucket, "a batch of " << batch.batch_size() << " sequences does not fit the bucket of " << bucket);
  ForwardBatch p = batch;
  if (p.qo_indptr.empty()) p.qo_indptr = {0};
  if (p.kv_indptr.empty()) p.kv_indptr = {0};
  const bool every_row = batch.num_tokens() == 0 || batch.logits_for_every_row();
  const bool masked = !batch.custom_mask.empty();
  if (masked && p.mask_indptr.empty()) p.mask_indptr = {0};
  for (int64_t i = p.batch_size(); i < bucket; ++i) {
    for (int64_t j = 0; j < q; ++j) {
      p.input_ids.push_back(0);
      p.positions.push_back(static_cast<int32_t>(j));
      p.out_cache_loc.push_back(0);  // the reserved dummy slot
      p.kv_indices.push_back(0);
      if (every_row) p.logit_rows.push_back(static_cast<int32_t>(p.logit_rows.size()));
    }
    p.qo_indptr.push_back(p.qo_indptr.back() + static_cast<int32_t>(q));
    p.kv_indptr.push_back(p.kv_indptr.back() + static_cast<int32_t>(q));
    if (masked) {
      p.custom_mask.insert(p.custom_mask.end(), static_cast<size_t>(q * q), uint8_t{1});
      p.mask_indptr.push_back(p.mask_indptr.back() + static_cast<int32_t>(q * q));
    }
  }
  return p;
}

}  // namespace aerie::model
