#pragma once
// The model-side view of a batch message: its token, position, slot and index arrays as a
// ForwardBatch, and its sampling rows as the sampler's (the message's other fields are the
// worker's business).
#include <vector>

#include "model/forward_batch.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "parallel/dp_padding.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

model::ForwardBatch forward_batch_of(const transport::BatchMessage& m);
std::vector<model::SamplingRow> sampling_rows_of(const transport::BatchMessage& m);
// DP attention: the step's padding plan the message carries (dp_padding != 0). Throws
// aerie::Error when its fields do not make one.
parallel::DpPaddingPlan dp_plan_of(const transport::BatchMessage& m);
// Logs, at debug level, the step a DP-attention rank is about to run: "DP step N bucket B
// padding MAX_LEN|SUM_LEN tokens T" (every rank of a step must log the same bucket).
void log_dp_step(const transport::BatchMessage& m);
// The target's forward of `batch` outside the captured graphs (LlamaModel::forward), timed by
// spec::GraphTimes (aerie-generate --graph-times) as "target prefill (eager)" for EXTEND,
// "target decode (eager)", "target verify (eager)" or "target mixed (eager)".
TensorView forward_eagerly(model::LlamaModel& model, const model::ForwardBatch& batch, model::KvCache& kv, transport::ForwardMode mode);

}  // namespace aerie::core
