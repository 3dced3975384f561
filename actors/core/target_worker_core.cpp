#include "actors/core/target_worker_core.hpp"

#include "actors/core/forward_batch_of.hpp"

#include <algorithm>
#include <optional>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"

namespace aerie::core {

using transport::ForwardMode;

TargetWorkerCore::TargetWorkerCore(model::LlamaModel& model, model::KvCache& kv, WorkerOptions options)
    : model_(model), kv_(kv), options_(options), sampler_(model.stream().device(), options.max_batch), timeline_(model.stream().device()) {
  AERIE_CHECK(options_.max_batch > 0, "worker max batch must be positive");
  if (model.stream().device() == Device::kCuda) cuda_device_ = cuda_runtime::current_device();
  if (options_.cuda_graph_max_bs > 0 && model.stream().device() == Device::kCuda) {
    graphs_ = std::make_unique<spec::DecodeGraphRunner>(model, kv, std::min(options_.cuda_graph_max_bs, options_.max_batch),
                                                        std::min(model.config().max_position_embeddings, kv.shape().usable_tokens()));
  }
}

transport::BatchResult TargetWorkerCore::execute(const transport::BatchMessage& batch) {
  transport::BatchResult r{.seq = 0, .step_id = batch.step_id, .rids = batch.rids, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""};
  ++stats_.batches;
  try {
    // Decodes planned before the last batch's result name its tokens by future slots.
    std::optional<transport::BatchMessage> resolved;
    if (FutureTokenMap::references(batch.input_ids)) {
      resolved = batch;
      futures_.resolve(*resolved);
    }
    const transport::BatchMessage& m = resolved ? *resolved : batch;
    AERIE_CHECK(m.future_slots.empty() || m.future_slots.size() == m.rids.size(),
                "batch " << m.step_id << " has " << m.future_slots.size() << " future slots for " << m.rids.size() << " sampled rows");
    timeline_.begin(model_.stream());
    run(m, r);
    const ForwardTimes times = timeline_.end(model_.stream());
    r.forward_seconds = times.forward_seconds;
    r.gap_seconds = times.gap_seconds;
    if (r.error.empty() && m.mode == ForwardMode::kVerify) futures_.record_verify(m.future_slots, r.token_counts, r.next_tokens);
    else if (r.error.empty()) futures_.record(m.future_slots, r.next_tokens);
  } catch (const std::exception& e) {
    r.next_tokens.clear();
    r.logprobs.clear();
    r.error = ::aerie::client_message(e);
  }
  if (!r.error.empty()) {
    ++stats_.errors;
    futures_.forget(batch.future_slots);  // a batch that names them fails too
  }
  return r;
}

void TargetWorkerCore::run(const transport::BatchMessage& m, transport::BatchResult& r) {
  // The current device is per thread, and an actor may run this on any thread.
  if (cuda_device_ >= 0) cuda_runtime::set_device(cuda_device_);
  AERIE_CHECK(m.rids.size() == m.logit_rows.size() && m.rids.size() == m.sampling.size(),
              "batch " << m.step_id << ": rids, logit_rows and sampling disagree in length");
  AERIE_CHECK(static_cast<int64_t>(m.rids.size()) <= options_.max_batch, "batch of " << m.rids.size() << " exceeds the worker's "
                                                                                         << options_.max_batch);
  // DP attention: every forward of the step follows the plan the step carries, and a group
  // with nothing to run still joins the MLP's collectives.
  AERIE_CHECK((m.dp_padding != 0) == model_.dp_attention(), "batch " << m.step_id << (model_.dp_attention() ? " carries no" : " carries a")
                                                                     << " DP-attention plan, but this worker runs "
                                                                     << (model_.dp_attention() ? "with" : "without") << " DP attention");
  if (model_.dp_attention()) {
    model_.set_dp_plan(dp_plan_of(m));
    log_dp_step(m);
  }
  // The batch says what it is (transport::ForwardMode); its tokens must agree.
  const auto mode = static_cast<int32_t>(m.mode);
  AERIE_CHECK(mode >= static_cast<int32_t>(ForwardMode::kIdle) && mode <= static_cast<int32_t>(ForwardMode::kVerify),
              "batch " << m.step_id << " has no forward mode (" << mode << ")");
  AERIE_CHECK((m.mode == ForwardMode::kIdle) == m.input_ids.empty(),
              "batch " << m.step_id << (m.input_ids.empty() ? " has no tokens but is not IDLE" : " is IDLE but carries tokens"));
  if (m.mode == ForwardMode::kIdle) {
    if (spec_) spec_->forget(m.finished_rids);  // still drops the draft state of finished requests
    if (model_.dp_attention()) model_.forward_idle(kv_);
    return;
  }
  for (int32_t id : m.input_ids)
    AERIE_CHECK(id >= 0 && id < model_.config().vocab_size, "token id " << id << " is outside the vocabulary");
  // A speculative engine's batches (EXTEND with the draft, VERIFY) all go to `spec`.
  if (spec_) {
    r = spec_->execute(m);
    return;
  }
  AERIE_CHECK(m.mode != ForwardMode::kVerify, "batch " << m.step_id << " is a VERIFY, but this worker has no draft model");
  const model::ForwardBatch b = forward_batch_of(m);
  const bool replay = graphs_ && graphs_->can_run(b);
  // The in-graph argmax serves all-greedy batches that need no logits back.
  const bool adjusted = !m.adjust_ids.empty();  // penalties, logit_bias, min_new_tokens
  const bool all_greedy = !adjusted && std::all_of(m.sampling.begin(), m.sampling.end(),
                                                   [](const auto& s) { return s.temperature == 0.0f && s.logprobs < 0; });
  stats_.graph_replays += replay ? 1 : 0;
  if (replay && all_greedy) {
    r.next_tokens = graphs_->replay_greedy(b);
    return;
  }
  const TensorView logits = replay ? graphs_->replay(b) : model_.forward(b, kv_);
  const TensorView to_sample = adjusted ? adjuster_.apply(logits, m, model_.stream()) : logits;
  r.next_tokens = sampler_.sample(to_sample, sampling_rows_of(m), model_.stream());
  r.logprobs = logprobs_.read(logits, m.sampling, r.next_tokens, model_.stream());
}

}  // namespace aerie::core
