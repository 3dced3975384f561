#pragma once
// The messages between Aerie's actors, declared once: each has a CAF `inspect` (type id
// and fields for the actor system) next to the cereal `serialize` its cross-process
// counterpart has (transport/messages.hpp). register_message_types() announces them.
#include <caf/all.hpp>
#include <cstdint>
#include <string>

#include "spec/draft_port.hpp"
#include "actors/core/generation_request.hpp"
#include "actors/draft_worker_actor.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingOptions& x) {
  return f(caf::meta::type_name("SamplingOptions"), x.temperature, x.top_p, x.top_k, x.min_p, x.seed, x.frequency_penalty,
           x.presence_penalty, x.repetition_penalty, x.min_new_tokens, x.logit_bias);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerationRequest& x) {
  return f(caf::meta::type_name("GenerationRequest"), x.prompt, x.sampling, x.max_new_tokens, x.stop_token_ids, x.ignore_eos,
           x.logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GenerationResult& x) {
  return f(caf::meta::type_name("GenerationResult"), x.output_ids, x.finish_reason, x.prompt_tokens, x.output_logprobs,
           x.spec_verify_ct, x.queue_seconds, x.cached_tokens);
}

}  // namespace aerie::core

namespace aerie::spec {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftExtendSeq& x) {
  return f(caf::meta::type_name("DraftExtendSeq"), x.rid, x.tokens, x.first_position, x.slots, x.context, x.hidden_rows, x.keep, x.spare_slots);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftProposeSeq& x) {
  return f(caf::meta::type_name("DraftProposeSeq"), x.rid, x.first_position, x.context, x.root_token);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftTree& x) {
  return f(caf::meta::type_name("DraftTree"), x.tokens, x.parents);
}

}  // namespace aerie::spec

namespace aerie::transport {

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SamplingRowMsg& x) {
  return f(caf::meta::type_name("SamplingRowMsg"), x.temperature, x.top_p, x.min_p, x.top_k, x.seed, x.step, x.logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenLogprobs& x) {
  return f(caf::meta::type_name("TokenLogprobs"), x.logprob, x.top_ids, x.top_logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BatchMessage& x) {
  return f(caf::meta::type_name("BatchMessage"), x.seq, x.step_id, x.mode, x.rids, x.input_ids, x.positions, x.out_cache_loc,
           x.qo_indptr, x.kv_indptr, x.kv_indices, x.logit_rows, x.sampling, x.global_num_tokens, x.bucket,
           x.dp_padding, x.dp_tokens_per_request, x.spec_steps, x.spec_topk, x.spec_draft_tokens, x.seq_rids, x.lookahead_ids, x.extra_slots, x.finished_rids, x.adjust_rows, x.adjust_ids, x.adjust_bias, x.adjust_rep, x.adjust_add);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BatchResult& x) {
  return f(caf::meta::type_name("BatchResult"), x.seq, x.step_id, x.rids, x.next_tokens, x.logprobs, x.token_counts, x.error);
}

}  // namespace aerie::transport

namespace aerie::actors {

// A client's request, addressed to the Router (which picks a DP group) or a Scheduler.
struct SubmitRequest {
  uint64_t rid = 0;
  core::GenerationRequest request;
  caf::actor stream_to;  // when set, receives a TokenChunk for every iteration that adds tokens
  // Set by the Router on every member of a SubmitGroup but the last: another request of the
  // group follows at once, so the Scheduler queues this one without planning a batch yet.
  bool group_follows = false;
};
// Requests that must reach one Scheduler together (the n samples of one prompt): the Router
// sends them all to one DP group, one after another, and that Scheduler plans nothing until
// the last has arrived, so the first member computes the prompt and the others share its
// pages however fast it finishes. Each member's RequestDone goes to its `stream_to` (required).
struct SubmitGroup {
  std::vector<SubmitRequest> members;
};
// Tokens a request gained in one iteration (streaming).
struct TokenChunk {
  uint64_t rid = 0;
  std::vector<int32_t> tokens;
  std::vector<transport::TokenLogprobs> logprobs;  // one per token, when the request asked
};
// The reply to a SubmitRequest: the result, or why it was rejected.
struct RequestDone {
  uint64_t rid = 0;
  core::GenerationResult result;
  std::string error;     // empty on success
  int32_t status = 400;  // with an error, the HTTP status it maps to: 400 bad request, 500 the engine failed it, 503 the engine is down
};
// The engine is broken (a rank lost, a step past the watchdog, an actor dead): every request
// in flight fails with 503 and new ones are refused (actors/core/engine_fault.hpp).
struct EngineFailed {
  std::string reason;
};

struct AbortRequest {
  uint64_t rid = 0;
};
// Asks the Router (or one Scheduler) how loaded the engine is; answered with a LoadReport
// summed over the DP groups (for /metrics and /get_server_info).
struct GetLoad {};
struct LoadReport {
  int64_t running = 0;          // requests in the running batch
  int64_t queued = 0;           // requests waiting for admission
  int64_t kv_used_tokens = 0;   // KV slots held by requests
  int64_t kv_total_tokens = 0;  // usable KV slots
  int64_t spec_verify_ct = 0;   // verify forwards so far (speculative decoding)
  int64_t spec_accepted_tokens = 0;  // tokens those verifies committed
  double forward_seconds = 0;        // the workers' devices busy with batches (SchedulerStats)
  double forward_gap_seconds = 0;    // and idle between them
  int64_t forward_batches = 0;       // batches planned (prefill chunks, decode steps, verifies)
};

// DP attention's lock-step (actors/dp_coordinator_actor.hpp). The coordinator asks every
// Scheduler for its plan of a step (PlanStep, answered with StepPlan), sends each the
// result of its batch (StepOutcome), and is woken by WorkArrived when it idles.
struct PlanStep {
  uint64_t step_id = 0;
};
struct StepPlan {
  bool has_batch = false;  // false: nothing to run this step
  transport::BatchMessage batch;
};
struct StepOutcome {
  transport::BatchResult result;
};
struct WorkArrived {};
// A remote worker's note to itself: wait for the oldest result its rank owes
// (actors/target_worker_actor.hpp).
struct CollectRemoteResult {};
// Asks a TargetWorker to stop: answered once every batch sent to it before has run (under
// overlap scheduling a batch may still be in flight when the last request ends) and its
// core::CompletionWaiter thread has ended; a batch after it is answered with an error. The
// launch sends it before it takes the worker's draft client, actor system and model down:
// the waiter thread holds the actor for each notice it sends, and were it the last to let
// go, the actor (and the worker core it owns, which reads the model) would be destroyed on
// that thread, at any time, after the model.
struct WorkerStop {};
// A TargetWorker's note to itself (from its core::CompletionWaiter): the oldest batch it
// launched has run on the device, so its result can be collected.
struct BatchWorkDone {};
// The Schedulers the coordinator drives, one per DP group in order (sent once, after they
// are spawned with the coordinator's handle).
struct DpSchedulers {
  std::vector<caf::actor> schedulers;
};

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, PlanStep& x) {
  return f(caf::meta::type_name("PlanStep"), x.step_id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepPlan& x) {
  return f(caf::meta::type_name("StepPlan"), x.has_batch, x.batch);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, StepOutcome& x) {
  return f(caf::meta::type_name("StepOutcome"), x.result);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkerStop&) {
  return f(caf::meta::type_name("WorkerStop"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, BatchWorkDone&) {
  return f(caf::meta::type_name("BatchWorkDone"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, CollectRemoteResult&) {
  return f(caf::meta::type_name("CollectRemoteResult"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, WorkArrived&) {
  return f(caf::meta::type_name("WorkArrived"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DpSchedulers& x) {
  return f(caf::meta::type_name("DpSchedulers"), x.schedulers);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SubmitRequest& x) {
  return f(caf::meta::type_name("SubmitRequest"), x.rid, x.request, x.stream_to, x.group_follows);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, SubmitGroup& x) {
  return f(caf::meta::type_name("SubmitGroup"), x.members);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, TokenChunk& x) {
  return f(caf::meta::type_name("TokenChunk"), x.rid, x.tokens, x.logprobs);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, RequestDone& x) {
  return f(caf::meta::type_name("RequestDone"), x.rid, x.result, x.error, x.status);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, EngineFailed& x) {
  return f(caf::meta::type_name("EngineFailed"), x.reason);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, AbortRequest& x) {
  return f(caf::meta::type_name("AbortRequest"), x.rid);
}

template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, GetLoad&) {
  return f(caf::meta::type_name("GetLoad"));
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, LoadReport& x) {
  return f(caf::meta::type_name("LoadReport"), x.running, x.queued, x.kv_used_tokens, x.kv_total_tokens, x.spec_verify_ct,
           x.spec_accepted_tokens, x.forward_seconds, x.forward_gap_seconds, x.forward_batches);
}

// The DraftWorker's messages (actors/draft_worker_actor.hpp).
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DeviceRows& x) {
  return f(caf::meta::type_name("DeviceRows"), x.address, x.rows, x.cols, x.dtype, x.device);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftExtend& x) {
  return f(caf::meta::type_name("DraftExtend"), x.step_id, x.seqs, x.hidden);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftExtendVerified& x) {
  return f(caf::meta::type_name("DraftExtendVerified"), x.step_id, x.seqs, x.argmax, x.hidden);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftPropose& x) {
  return f(caf::meta::type_name("DraftPropose"), x.step_id, x.seqs, x.steps, x.draft_tokens);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftProposeAhead& x) {
  return f(caf::meta::type_name("DraftProposeAhead"), x.step_id, x.seqs, x.steps);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftAheadQueued& x) {
  return f(caf::meta::type_name("DraftAheadQueued"), x.step_id, x.queued, x.table, x.stride);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftChainsOnDevice& x) {
  return f(caf::meta::type_name("DraftChainsOnDevice"), x.step_id, x.seqs, x.steps);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftCollectChains& x) {
  return f(caf::meta::type_name("DraftCollectChains"), x.step_id);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftDeviceChains& x) {
  return f(caf::meta::type_name("DraftDeviceChains"), x.step_id, x.found, x.table, x.stride, x.rows, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftForget& x) {
  return f(caf::meta::type_name("DraftForget"), x.rids);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftDone& x) {
  return f(caf::meta::type_name("DraftDone"), x.step_id, x.error);
}
template <class Inspector>
typename Inspector::result_type inspect(Inspector& f, DraftProposal& x) {
  return f(caf::meta::type_name("DraftProposal"), x.step_id, x.trees, x.error);
}

// Announces every message type above to the actor system.
void register_message_types(caf::actor_system_config& cfg);

}  // namespace aerie::actors
