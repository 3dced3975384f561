#include "actors/core/forward_batch_of.hpp"

#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "spec/graph_times.hpp"

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

parallel::DpPaddingPlan dp_plan_of(const transport::BatchMessage& m) {
  AERIE_CHECK(m.dp_padding == 1 || m.dp_padding == 2, "batch " << m.step_id << " carries no DP-attention plan (dp_padding " << m.dp_padding << ")");
  const auto mode = m.dp_padding == 1 ? parallel::DpPaddingMode::kMaxLen : parallel::DpPaddingMode::kSumLen;
  return parallel::make_dp_padding_plan(m.global_num_tokens, mode, m.bucket > 0 ? std::optional<int64_t>(m.bucket) : std::nullopt,
                                        m.dp_tokens_per_request);
}

void log_dp_step(const transport::BatchMessage& m) {
  AERIE_LOG_DEBUG("DP step " << m.step_id << " bucket " << m.bucket << " padding " << (m.dp_padding == 1 ? "MAX_LEN" : "SUM_LEN")
                             << " tokens " << m.input_ids.size());
}

namespace {

const char* eager_label(transport::ForwardMode mode) {
  switch (mode) {
    case transport::ForwardMode::kExtend: return "target prefill (eager)";
    case transport::ForwardMode::kDecode: return "target decode (eager)";
    case transport::ForwardMode::kMixed: return "target mixed (eager)";
    case transport::ForwardMode::kVerify: return "target verify (eager)";
    case transport::ForwardMode::kIdle: break;
  }
  return "target idle (eager)";
}

}  // namespace

TensorView forward_eagerly(model::LlamaModel& model, const model::ForwardBatch& batch, model::KvCache& kv, transport::ForwardMode mode) {
  TensorView logits;
  spec::GraphTimes::run(eager_label(mode), model.stream(), [&] { logits = model.forward(batch, kv); });
  return logits;
}

}  // namespace aerie::core
