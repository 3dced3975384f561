#include "actors/core/forward_batch_of.hpp"

namespace aerie::core {

model::ForwardBatch forward_batch_of(const transport::BatchMessage& m) {
  model::ForwardBatch b;
  b.input_ids = m.input_ids;
  b.positions = m.positions;
  b.out_cache_loc = m.out_cache_loc;
  b.qo_indptr = m.qo_indptr;
  b.kv_indptr = m.kv_indptr;
  b.kv_indices = m.kv_indices;
  b.logit_rows = m.logit_rows;
  return b;
}

std::vector<model::SamplingRow> sampling_rows_of(const transport::BatchMessage& m) {
  std::vector<model::SamplingRow> rows;
  for (const auto& s : m.sampling)
    rows.push_back({.temperature = s.temperature, .top_p = s.top_p, .min_p = s.min_p, .top_k = s.top_k, .seed = s.seed, .step = s.step});
  return rows;
}

}  // namespace aerie::core
