#pragma once
// SchedulerCore: the CAF-free policy of one DP group's Scheduler. It owns request state and
// KV-page allocation and turns them into one BatchMessage per iteration (continuous
// batching: decodes and prompt chunks together, chunked prefill under a token budget,
// admission while pages and the running cap allow, preemption by recompute when the pool
// runs out); results come back through on_result(), which commits tokens, applies stop
// conditions and frees pages. One batch is in flight at a time, or two with overlap
// scheduling (sglang's overlap scheduler, plain decoding): the next batch is planned while
// the last one runs, its decodes naming the tokens still being sampled by future slots
// (actors/core/future_tokens.hpp); a request that the running batch ends (EOS, a stop token)
// costs one wasted step whose row is dropped, never a wrong token. Requests with the same
// prompt share its K/V pages: the first computes them, the others wait for it and then
// prefill only the last prompt position (sglang's parallel samples sharing the prompt).
#include <chrono>
#include <cstdint>
#include <deque>
#include <map>
#include <span>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "actors/core/generation_request.hpp"
#include "model/kv_cache.hpp"
#include "transport/messages.hpp"

namespace aerie::core {

struct SchedulerOptions {
  int64_t max_running_requests = 256;
  int64_t chunked_prefill_size = 8192;  // prompt tokens per iteration (a longer prompt is chunked)
  std::vector<int32_t> eos_token_ids;
  int64_t vocab_size = 0;
  int64_t context_length = 0;
  // Speculative decoding: draft tokens per verify (-1: off). Above spec_disable_batch_size
  // running requests (0: never) a verify proposes none (the draft still follows).
  int64_t spec_steps = -1;
  int64_t spec_topk = 1;           // > 1: tree drafting
  int64_t spec_draft_tokens = 0;   // tokens per verify (0: spec_steps + 1)
  int64_t spec_disable_batch_size = 0;
  // Overlap scheduling: plan one batch ahead (requests with penalties, logit_bias or
  // min_new_tokens keep one batch in flight). A speculative Scheduler plans verifies ahead of
  // the last one's accept lengths only with spec_overlap too (sglang's spec v2, opt-in there
  // as here: it gains no throughput on the 8B shape yet, docs/performance.md).
  bool overlap = false;
  bool spec_overlap = false;
};

struct SchedulerStats {
  int64_t iterations = 0;
  int64_t preemptions = 0;
  int64_t max_batch = 0;
  int64_t prefill_chunks = 0;
  int64_t spec_verifies = 0;          // request-verifies (one per request per VERIFY batch)
  int64_t spec_committed_tokens = 0;  // tokens those verifies committed
  int64_t shared_prefix_tokens = 0;   // prompt positions taken from another request's pages
  double forward_seconds = 0;         // the worker's device busy with this Scheduler's batches
  double forward_gap_seconds = 0;     // and idle between them (BatchResult::gap_seconds)
};

// What happened to a request in one iteration.
struct RequestUpdate {
  uint64_t rid = 0;
  std::vector<int32_t> new_tokens;  // sampled this iteration (empty for a prompt chunk)
  std::vector<transport::TokenLogprobs> new_logprobs;  // theirs, when the request asked
  bool finished = false;
  GenerationResult result;          // the whole result, when finished
};

class SchedulerCore {
 public:
  SchedulerCore(model::KvCacheShape kv, SchedulerOptions options);

  // Queues a request. Throws aerie::Error, with a message for the client, when it is
  // malformed or can never fit (prompt + max_new_tokens beyond the KV pool or the context).
  void submit(uint64_t rid, GenerationRequest request);
  // Drops a request (queued or running) and frees its pages at once: a batch in flight may
  // still write them, but every later batch runs after it on each rank's stream, so a new
  // owner's writes come last; the dropped request's rows in flight are ignored. Returns its
  // final update (finish_reason "abort"), or nothing when unknown.
  std::optional<RequestUpdate> abort(uint64_t rid);

  bool has_work() const { return !waiting_.empty() || !running_.empty(); }
  // Batches sent whose results have not come back.
  int64_t in_flight() const { return static_cast<int64_t>(in_flight_.size()); }
  // True when another batch may be planned now (fewer than the overlap depth in flight).
  bool can_plan() const { return in_flight() < depth(); }
  // The next iteration's batch, when one may be planned and there is work for it.
  std::optional<transport::BatchMessage> plan_next();
  // Commits the oldest in-flight batch's result (results come back in the order batches were
  // planned). A result with an error fails every request of the batch (finish_reason
  // "error: ...").
  std::vector<RequestUpdate> on_result(const transport::BatchResult& result);

  const SchedulerStats& stats() const { return stats_; }
  int64_t free_pages() const { return allocator_.free_pages(); }
  size_t num_requests() const { return requests_.size(); }
  int64_t num_running() const { return static_cast<int64_t>(running_.size()); }
  int64_t num_queued() const { return static_cast<int64_t>(waiting_.size()); }
  int64_t kv_used_tokens() const { return (kv_shape_.num_pages - 1 - allocator_.free_pages()) * kv_shape_.page_size; }
  int64_t kv_total_tokens() const { return kv_shape_.usable_tokens(); }

 private:
  struct Request {
    GenerationRequest req;
    std::vector<int32_t> tokens;  // prompt + generated (the tokens known so far)
    int64_t computed = 0;         // tokens whose K/V are in the cache once the batches in flight ran
    int64_t pending = 0;          // tokens batches in flight sample for it (not known yet)
    int32_t future_slot = -1;     // overlap: the future slot of the newest of them (or of its verify in flight)
    int64_t verifying = 0;        // speculative: verifies in flight for it
    int64_t verify_extra = 0;     // the most tokens beyond one the newest of them may commit (its spec_steps)
    int64_t verify_context = 0;   // its context slots past the last committed token's position (its reserve)
    uint64_t incarnation = 0;     // new at submission and at each preemption: older rows are stale
    GenerationResult result;
    bool drafted = false;  // speculative: its last prompt chunk ran, so the draft holds its state
    std::chrono::steady_clock::time_point submitted = std::chrono::steady_clock::now();
    bool admitted = false;  // its first chunk was planned (queue time recorded)
    uint64_t prompt_hash = 0;
  };
  // Where a request about to start can take its prompt's K/V from: a running request with
  // the same prompt (n > 1 samples, or equal prompts) shares its whole pages of positions
  // [0, prompt - 1) (the last prompt position is each request's own: it makes its logits).
  // `wait`: such a request is still on its prompt and will have more to share soon.
  struct PrefixSource {
    uint64_t donor = 0;
    int64_t tokens = 0;
    bool wait = false;
  };
  PrefixSource prefix_source(uint64_t rid) const;
  // The prompt positions another request can take from one that has `computed` of a prompt of
  // `prompt` tokens: whole pages before the last prompt position (each request's own).
  int64_t shareable_prefix(int64_t computed, int64_t prompt) const;
  // Before a request's pages are freed: the queued requests with its prompt (waiting for it to
  // compute it) take its whole prompt pages, so a request whose first token ends it (EOS, a
  // stop token, max_new_tokens 1, an abort) does not leave them to compute the prompt again.
  void hand_over_prompt(uint64_t donor);
  struct Planned {
    uint64_t rid;
    int64_t new_computed;  // computed after this batch
    bool samples;          // the chunk reaches the end of the known tokens
    uint64_t incarnation = 0;
  };
  struct InFlight {
    transport::ForwardMode mode = transport::ForwardMode::kIdle;
    std::vector<Planned> plan;
  };
  // Batches in flight at once: 2 with overlap (when allowed), else 1.
  int64_t depth() const;
  // Prompt + generated, the tokens still being sampled included.
  static int64_t length(const Request& q) { return static_cast<int64_t>(q.tokens.size()) + q.pending; }
  // True when a decode of the request may be planned: past its prompt and short of
  // max_new_tokens once the tokens in flight are counted (those end it otherwise).
  bool wants_decode(uint64_t rid) const;
  void preempt_newest();
  bool speculative() const { return options_.spec_steps >= 0; }
  // True when the request's next step is a decode (or verify), not a prompt chunk.
  bool decoding(uint64_t rid) const;
  // Adds prompt chunks to `plan` under the token budget, admitting waiting requests; a
  // chunk that ends the known tokens also reserves the next position when asked.
  void take_prompt_chunks(std::vector<Planned>& plan, bool reserve_next_position);
  transport::SamplingRowMsg sampling_row(const Request& q) const;
  // Appends a planned sequence's new tokens, slots and context (and its sampling row when it samples).
  void append_sequence(transport::BatchMessage& b, const Planned& p) const;
  // Records the plan as in flight and returns the message.
  transport::BatchMessage put_in_flight(transport::BatchMessage b, std::vector<Planned> plan);
  std::optional<transport::BatchMessage> plan_speculative();
  // Positions a verify reserves from a request's last committed token on (spec::verify_reserve).
  int64_t spec_reserve() const;
  std::vector<RequestUpdate> on_verify_result(const transport::BatchResult& result, const std::vector<Planned>& plan);
  // Why a result cannot belong to the batch `plan` describes (counts, rids, token ids,
  // logprobs), or "" when it can. Checked before any state changes: a malformed result fails
  // its batch's requests instead of throwing out of the Scheduler actor.
  std::string malformed(const transport::BatchResult& result, const std::vector<Planned>& plan) const;
  // Appends a sampled token and applies the stop conditions; the finish reason or "".
  std::string commit_token(Request& q, int32_t token);
  // The request a planned row belongs to, or nullptr when it has ended or been preempted
  // since (its row is stale).
  Request* live_request(const Planned& p);
  // Commits tokens in order until one ends the request, with their log-probabilities when it
  // asked (`logprobs`: one per token, or empty when the result has none). The update carries
  // the committed tokens and, when one ended the request, its finished result.
  RequestUpdate commit_tokens(uint64_t rid, std::span<const int32_t> tokens, std::span<const transport::TokenLogprobs> logprobs);
  std::vector<uint64_t> finished_since_;  // speculative: requests ended since the last batch
  RequestUpdate finish(uint64_t rid, const std::string& reason);

  SchedulerOptions options_;
  model::KvCacheShape kv_shape_;
  model::PageAllocator allocator_;
  model::RequestPageTable pages_;
  std::map<uint64_t, Request> requests_;
  std::unordered_multimap<uint64_t, uint64_t> by_prompt_;  // prompt hash -> rid, for prefix_source
  std::deque<uint64_t> waiting_;
  std::vector<uint64_t> running_;  // admission order: the newest is preempted first
  std::deque<InFlight> in_flight_;  // oldest first
  uint64_t step_ = 0;
  uint64_t incarnations_ = 0;
  int32_t next_future_slot_ = 0;  // the ring of future slots (4 x max_running_requests)
  // Takes the ring's next future slot (a slot is read at most two batches later).
  int32_t next_future_slot();
  SchedulerStats stats_;
};

}  // namespace aerie::core
