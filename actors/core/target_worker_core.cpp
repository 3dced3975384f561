#include "actors/core/target_worker_core.hpp"

#include "actors/core/forward_batch_of.hpp"

#include <algorithm>
#include <optional>

#include "kernels/device_runtime.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"

namespace aerie::core {

using transport::ForwardMode;

TargetWorkerCore::TargetWorkerCore(model::LlamaModel& model, model::KvCache& kv, WorkerOptions options)
    : model_(model),
      kv_(kv),
      options_(options),
      sampler_(model.stream().device(), options.max_batch),
      device_futures_(model.stream().device(), FutureTokenMap::kMaxSlots),
      timeline_(model.stream().device()) {
  AERIE_CHECK(options_.max_batch > 0, "worker max batch must be positive");
  if (model.stream().device() == Device::kCuda) cuda_device_ = cuda_runtime::current_device();
  const int64_t max_context = std::min(model.config().max_position_embeddings, kv.shape().usable_tokens());
  if (options_.cuda_graph_max_bs > 0 && model.stream().device() == Device::kCuda)
    graphs_ = std::make_unique<spec::DecodeGraphRunner>(model, kv, std::min(options_.cuda_graph_max_bs, options_.max_batch), max_context);
  if (options_.prefill_graph_max_tokens > 0 && model.stream().device() == Device::kCuda)
    prefill_graphs_ = std::make_unique<spec::PrefillGraphRunner>(model, kv, std::min(options_.prefill_graph_max_tokens, max_context), max_context);
}

transport::BatchResult TargetWorkerCore::execute(const transport::BatchMessage& batch) {
  launch(batch);
  return collect();
}

std::unique_ptr<HostStaging> TargetWorkerCore::take_token_buffer() {
  if (spare_token_buffers_.empty()) return std::make_unique<HostStaging>(model_.stream().device(), static_cast<size_t>(options_.max_batch) * 4);
  auto b = std::move(spare_token_buffers_.back());
  spare_token_buffers_.pop_back();
  return b;
}

namespace {

// AERIE_SPEC_ANSWER_ON_HOST=0 makes a speculative round's result wait for the device work
// enqueued behind its verify, as before (for measuring).
bool answer_speculative_on_host() {
  static const bool on = !kernels::env_turned_off("AERIE_SPEC_ANSWER_ON_HOST");
  return on;
}

}  // namespace

void TargetWorkerCore::launch(const transport::BatchMessage& batch) {
  Pending p;
  p.result = transport::BatchResult{.seq = 0, .step_id = batch.step_id, .rids = batch.rids, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""};
  p.future_slots = batch.future_slots;
  p.done = std::make_shared<StreamEvent>(model_.stream().device());
  ++stats_.batches;
  transport::BatchResult& r = p.result;
  try {
    // The current device is per thread, and an actor may run this on any thread.
    if (cuda_device_ >= 0) cuda_runtime::set_device(cuda_device_);
    AERIE_CHECK(batch.future_slots.empty() || batch.future_slots.size() == batch.rids.size(),
                "batch " << batch.step_id << " has " << batch.future_slots.size() << " future slots for " << batch.rids.size() << " sampled rows");
    timeline_.begin(model_.stream());
    p.timed = true;
    if (spec_) {
      run_speculative(batch, r);
      p.on_host = answer_speculative_on_host();
    } else {
      bool on_host = false;
      const TensorView tokens = run(batch, r, on_host);
      if (tokens.data && tokens.dim(0) > 0) {
        if (!batch.future_slots.empty()) device_futures_.record(tokens, batch.future_slots, model_.stream());
        if (!on_host) {  // on the way: collect() reads them once the batch's work has run
          p.tokens = take_token_buffer();
          p.token_count = static_cast<size_t>(tokens.dim(0));
          copy_async(p.tokens->data(), tokens.data, p.token_count * 4, model_.stream());
        }
      }
    }
    timeline_.mark_end(model_.stream());
    p.done->record(model_.stream());
  } catch (const std::exception& e) {
    if (p.timed) timeline_.mark_end(model_.stream());
    r.next_tokens.clear();
    r.logprobs.clear();
    r.error = ::aerie::client_message(e);
  }
  if (!r.error.empty()) {
    ++stats_.errors;
    futures_.forget(batch.future_slots);  // a batch that names them fails too
    device_futures_.forget(batch.future_slots);
  }
  pending_.push_back(std::move(p));
}

bool TargetWorkerCore::oldest_done() const {
  AERIE_CHECK(!pending_.empty(), "no batch in flight");
  return pending_.front().on_host || pending_.front().done->done();
}

std::shared_ptr<const StreamEvent> TargetWorkerCore::newest_done_event() const {
  AERIE_CHECK(!pending_.empty(), "no batch in flight");
  return pending_.back().done;
}

transport::BatchResult TargetWorkerCore::collect() {
  AERIE_CHECK(!pending_.empty(), "no batch in flight to collect");
  Pending p = std::move(pending_.front());
  pending_.pop_front();
  transport::BatchResult& r = p.result;
  try {
    if (cuda_device_ >= 0) cuda_runtime::set_device(cuda_device_);
    if (!p.on_host) p.done->wait();
    if (p.tokens) {
      const int32_t* t = p.tokens->as<int32_t>();
      if (r.error.empty()) r.next_tokens.assign(t, t + p.token_count);
      spare_token_buffers_.push_back(std::move(p.tokens));
    }
    if (p.timed) {
      // Earlier results answered from the host left their times behind; they come first on
      // the timeline. A result from the host takes what has run by now, the others wait.
      ForwardTimes times;
      if (p.on_host) {
        size_t collected = 0;
        times = timeline_.collect_done(untimed_on_host_ + 1, collected);
        untimed_on_host_ = untimed_on_host_ + 1 - collected;
      } else {
        for (size_t i = 0; i <= untimed_on_host_; ++i) {
          const ForwardTimes t = timeline_.collect();
          times.forward_seconds += t.forward_seconds;
          times.gap_seconds += t.gap_seconds;
        }
        untimed_on_host_ = 0;
      }
      r.forward_seconds = times.forward_seconds;
      r.gap_seconds = times.gap_seconds;
    }
  } catch (const std::exception& e) {  // an error of the device's work, found when waiting for it
    if (r.error.empty()) {
      ++stats_.errors;
      r.error = ::aerie::client_message(e);
      r.next_tokens.clear();
      r.logprobs.clear();
      futures_.forget(p.future_slots);
      device_futures_.forget(p.future_slots);
    }
  }
  return r;
}

bool TargetWorkerCore::prepare(const transport::BatchMessage& m) {
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
    return false;
  }
  // Ids < 0 name future slots: DeviceFutureTokens::check (plain) or the host map (speculative) checks them.
  for (int32_t id : m.input_ids) AERIE_CHECK(id < model_.config().vocab_size, "token id " << id << " is outside the vocabulary");
  return true;
}

void TargetWorkerCore::run_speculative(const transport::BatchMessage& batch, transport::BatchResult& r) {
  // Verifies planned before the last result name its tokens by future slots, resolved (and
  // the sequence shifted by what the last verify committed) on the host.
  std::optional<transport::BatchMessage> resolved;
  if (FutureTokenMap::references(batch.input_ids)) {
    resolved = batch;
    futures_.resolve(*resolved);
  }
  const transport::BatchMessage& m = resolved ? *resolved : batch;
  if (!prepare(m)) return;
  // A speculative engine's batches (EXTEND with the draft, VERIFY) all go to `spec`.
  r = spec_->execute(m);
  if (!r.error.empty()) return;
  if (m.mode == ForwardMode::kVerify) futures_.record_verify(m.future_slots, r.token_counts, r.next_tokens);
  else futures_.record(m.future_slots, r.next_tokens);
}

TensorView TargetWorkerCore::run(const transport::BatchMessage& m, transport::BatchResult& r, bool& tokens_on_host) {
  if (!prepare(m)) return {};
  AERIE_CHECK(m.mode != ForwardMode::kVerify, "batch " << m.step_id << " is a VERIFY, but this worker has no draft model");
  device_futures_.check(m.input_ids);
  model::ForwardBatch b = forward_batch_of(m);
  b.future_tokens = device_futures_.table();  // ids naming a slot are resolved on the device
  const bool replay = graphs_ && graphs_->can_run(b);
  const bool prefill_replay = !replay && prefill_graphs_ && prefill_graphs_->can_run(b);
  // The in-graph argmax serves all-greedy batches that need no logits back.
  const bool adjusted = !m.adjust_ids.empty();  // penalties, logit_bias, min_new_tokens
  const bool want_logprobs = std::any_of(m.sampling.begin(), m.sampling.end(), [](const auto& s) { return s.logprobs >= 0; });
  const bool all_greedy = !adjusted && !want_logprobs &&
                          std::all_of(m.sampling.begin(), m.sampling.end(), [](const auto& s) { return s.temperature == 0.0f; });
  stats_.graph_replays += replay ? 1 : 0;
  stats_.prefill_graph_replays += prefill_replay ? 1 : 0;
  if (replay && all_greedy) return graphs_->replay_greedy_on_device(b);
  const TensorView logits = replay ? graphs_->replay(b) : prefill_replay ? prefill_graphs_->replay(b) : forward_eagerly(model_, b, kv_, m.mode);
  const TensorView to_sample = adjusted ? adjuster_.apply(logits, m, model_.stream()) : logits;
  const auto rows = sampling_rows_of(m);
  if (!want_logprobs) return sampler_.sample_on_device(to_sample, rows, model_.stream());
  // Logprobs are read on the host beside the sampled tokens: this batch is waited for.
  r.next_tokens = sampler_.sample(to_sample, rows, model_.stream());
  r.logprobs = logprobs_.read(logits, m.sampling, r.next_tokens, model_.stream());
  tokens_on_host = true;
  return sampler_.last_ids_on_device(r.next_tokens.size());
}

}  // namespace aerie::core
