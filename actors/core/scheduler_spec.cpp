// SchedulerCore's speculative planning (sglang's EAGLE loop, chain drafting). Iterations
// alternate between EXTEND batches (prompt chunks; the worker runs the draft over them too)
// and VERIFY batches (every decoding request: its last committed token plus spec_steps
// draft tokens the worker proposes). A speculative request always holds KV slots for all
// its tokens including the newest (its position is where the draft already writes), and a
// verify reserves spec::verify_reserve() positions from there on (the verified tokens and
// the draft's scratch rows); those past the committed tokens are given back when the
// result comes. With topk > 1 the verified tokens form a tree the worker drafts.
#include <algorithm>

#include "actors/core/future_tokens.hpp"
#include "actors/core/scheduler_core.hpp"
#include "kernels/error.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::core {

std::string SchedulerCore::commit_token(Request& q, int32_t token) {
  q.tokens.push_back(token);
  q.result.output_ids.push_back(token);
  const auto& stop = q.req.stop_token_ids;
  const auto& eos = options_.eos_token_ids;
  if (std::find(stop.begin(), stop.end(), token) != stop.end() || (!q.req.ignore_eos && std::find(eos.begin(), eos.end(), token) != eos.end()))
    return "stop";
  if (static_cast<int64_t>(q.result.output_ids.size()) >= q.req.max_new_tokens) return "length";
  return "";
}

int64_t SchedulerCore::spec_reserve() const {
  const int64_t S = options_.spec_steps, K = options_.spec_topk;
  return spec::verify_reserve(S, K, (K > 1 && options_.spec_draft_tokens > 0) ? options_.spec_draft_tokens : S + 1);
}

SchedulerCore::Request* SchedulerCore::live_request(const Planned& p) {
  auto it = requests_.find(p.rid);
  return it == requests_.end() || it->second.incarnation != p.incarnation ? nullptr : &it->second;
}

RequestUpdate SchedulerCore::commit_tokens(uint64_t rid, std::span<const int32_t> tokens, std::span<const transport::TokenLogprobs> logprobs) {
  Request& q = requests_.at(rid);
  RequestUpdate u{.rid = rid};
  std::string reason;
  for (size_t k = 0; k < tokens.size() && reason.empty(); ++k) {
    u.new_tokens.push_back(tokens[k]);
    if (q.req.logprobs >= 0) {
      AERIE_CHECK(k < logprobs.size(), "batch result lacks the log-probabilities request " << rid << " asked for");
      q.result.output_logprobs.push_back(logprobs[k]);
      u.new_logprobs.push_back(logprobs[k]);
    }
    reason = commit_token(q, tokens[k]);
  }
  if (reason.empty()) return u;
  RequestUpdate f = finish(rid, reason);
  f.new_tokens = std::move(u.new_tokens);
  f.new_logprobs = std::move(u.new_logprobs);
  return f;
}

std::optional<transport::BatchMessage> SchedulerCore::plan_speculative() {
  std::vector<Planned> plan;
  transport::BatchMessage b;
  b.step_id = step_++;
  b.finished_rids = std::move(finished_since_);
  finished_since_.clear();
  // Planned ahead (one verify in flight): room for the most tokens past one that verify may
  // commit while the request goes on. It may commit more only by reaching max_new_tokens, which
  // ends the request (its row ahead is then stale, and the worker clamps the shift); so the
  // worst case stays within what submit() allowed. No room: that verify surely ends it.
  auto room = [&](const Request& q) {
    return std::min(q.verify_extra, q.req.max_new_tokens - static_cast<int64_t>(q.result.output_ids.size()) - 2);
  };
  auto ahead_ok = [&](const Request& q) { return q.verifying == 1 && q.future_slot >= 0 && room(q) >= 0; };
  auto joins = [&](uint64_t rid) {
    const Request& q = requests_.at(rid);
    return decoding(rid) && (q.verifying == 0 || ahead_ok(q));
  };
  // 1. Prompt chunks first (as sglang prefers prefill): a chunk that ends the known tokens
  //    also reserves the next position, where the draft writes the sampled token. With a
  //    prompt batch already in flight (overlap), requests waiting for a verify go first, so
  //    that a stream of arrivals cannot hold their tokens back batch after batch.
  const bool after_extend = !in_flight_.empty() && in_flight_.back().mode == transport::ForwardMode::kExtend;
  if (!after_extend || std::none_of(running_.begin(), running_.end(), joins)) take_prompt_chunks(plan, /*reserve_next_position=*/true);
  if (!plan.empty()) {
    b.mode = transport::ForwardMode::kExtend;
    for (const Planned& p : plan) {
      const Request& q = requests_.at(p.rid);
      const int64_t end = p.new_computed;
      append_sequence(b, p);
      b.seq_rids.push_back(p.rid);
      b.lookahead_ids.push_back(p.samples ? -1 : q.tokens[static_cast<size_t>(end)]);
      b.extra_slots.push_back(p.samples ? pages_.slot(p.rid, end) : -1);
    }
    return put_in_flight(std::move(b), std::move(plan));
  }
  // 2. Verify every running request; preempt the newest while the pool is short. With a
  //    verify of a request in flight (overlap), the next one is planned ahead of its result:
  //    its first input names the token that verify will end with (a future slot), its layout
  //    assumes one committed token and its context holds slots for the most that verify may
  //    commit; the worker shifts it by the rest (FutureTokenMap::resolve).
  // Nothing to verify yet: the batch is not planned (its number and finished requests wait).
  auto nothing = [&]() -> std::optional<transport::BatchMessage> {
    --step_;
    finished_since_ = std::move(b.finished_rids);
    return std::nullopt;
  };
  if (running_.empty()) {
    AERIE_CHECK(!in_flight_.empty(), "the scheduler cannot make progress: the KV pool holds no request's next step");
    return nothing();
  }
  const bool off = options_.spec_disable_batch_size > 0 && static_cast<int64_t>(running_.size()) > options_.spec_disable_batch_size;
  const int64_t S = off ? 0 : options_.spec_steps;
  const int64_t K = off ? 1 : options_.spec_topk;
  const int64_t N = (K > 1 && options_.spec_draft_tokens > 0) ? options_.spec_draft_tokens : S + 1;  // tokens verified
  const int64_t reserve = spec::verify_reserve(S, K, N);
  // Context slots of its verify: up to the root (its last committed token, or the last the
  // verify in flight may commit), then the verify's reserve.
  auto need_of = [&](uint64_t rid) {
    const Request& q = requests_.at(rid);
    return static_cast<int64_t>(q.tokens.size()) - 1 + (q.verifying ? room(q) + 1 : 0) + reserve;
  };
  for (;;) {
    int64_t need = 0;
    for (uint64_t rid : running_)
      if (joins(rid)) need += pages_.pages_needed(rid, need_of(rid));
    if (need <= allocator_.free_pages() || running_.size() <= 1) break;
    preempt_newest();
  }
  b.mode = transport::ForwardMode::kVerify;
  b.spec_steps = static_cast<int32_t>(S);  // 0 above the batch-size threshold
  b.spec_topk = static_cast<int32_t>(K);
  b.spec_draft_tokens = static_cast<int32_t>(N);
  for (uint64_t rid : running_) {
    if (!joins(rid)) continue;
    AERIE_CHECK(pages_.reserve(rid, need_of(rid)), "the KV pool cannot hold one verify of request " << rid);
    const Request& q = requests_.at(rid);
    const bool ahead = q.verifying > 0;
    const int64_t L = static_cast<int64_t>(q.tokens.size());
    const int64_t n = ahead ? L : L - 1;  // the root's position (ahead: if the verify in flight commits one token)
    b.input_ids.push_back(ahead ? future_token_ref(q.future_slot) : q.tokens.back());
    for (int64_t i = 1; i < N; ++i) b.input_ids.push_back(0);  // the worker's drafts go here
    for (int64_t i = 0; i < N; ++i) b.positions.push_back(static_cast<int32_t>(n + i));  // the worker sets tree depths
    pages_.append_slots(rid, n, n + N, b.out_cache_loc);
    pages_.append_slots(rid, 0, need_of(rid), b.kv_indices);
    if (b.qo_indptr.empty()) b.qo_indptr.push_back(0), b.kv_indptr.push_back(0);
    b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
    b.seq_rids.push_back(rid);
    b.extra_slots.push_back(-1);
    b.rids.push_back(rid);
    b.logit_rows.push_back(static_cast<int32_t>(b.input_ids.size()) - 1);
    b.sampling.push_back(sampling_row(q));
    if (ahead) ++b.sampling.back().step;  // after the one token the layout assumes
    plan.push_back({.rid = rid, .new_computed = 0, .samples = true});
  }
  if (plan.empty()) return nothing();  // every request waits for its verify in flight
  return put_in_flight(std::move(b), std::move(plan));
}

std::vector<RequestUpdate> SchedulerCore::on_verify_result(const transport::BatchResult& r, const std::vector<Planned>& plan) {
  AERIE_CHECK(r.token_counts.size() == plan.size() && r.rids.size() == plan.size(),
              "verify result has " << r.token_counts.size() << " counts for " << plan.size() << " requests");
  AERIE_CHECK(r.logprobs.empty() || r.logprobs.size() == r.next_tokens.size(),
              "verify result has " << r.logprobs.size() << " logprob entries for " << r.next_tokens.size() << " tokens");
  std::vector<RequestUpdate> updates;
  size_t at = 0;
  for (size_t i = 0; i < plan.size(); ++i) {
    const Planned& p = plan[i];
    const auto count = static_cast<size_t>(r.token_counts[i]);
    AERIE_CHECK(r.rids[i] == p.rid && count >= 1 && at + count <= r.next_tokens.size(), "verify result does not match its batch");
    const std::span<const int32_t> tokens(r.next_tokens.data() + at, count);
    const std::span<const transport::TokenLogprobs> logprobs =
        r.logprobs.empty() ? std::span<const transport::TokenLogprobs>() : std::span<const transport::TokenLogprobs>(r.logprobs.data() + at, count);
    at += count;
    Request* q = live_request(p);
    if (!q) continue;
    --q->verifying;
    ++stats_.spec_verifies;
    stats_.spec_committed_tokens += static_cast<int64_t>(count);
    ++q->result.spec_verify_ct;
    // The last committed token and the accepted drafts are in the cache now (the verify ran
    // after every token committed so far, whatever its plan assumed).
    q->computed = static_cast<int64_t>(q->tokens.size()) - 1 + static_cast<int64_t>(count);
    RequestUpdate u = commit_tokens(p.rid, tokens, logprobs);
    // Rejected draft positions go back, but what a verify still in flight uses stays: its
    // context now that this one's count is known (the worst case it reserved, less the surplus).
    // A finished request is gone (commit_tokens erased it): q is read only while it lives.
    if (!u.finished) {
      const auto L = static_cast<int64_t>(q->tokens.size());
      pages_.truncate(p.rid, q->verifying > 0 ? L - 1 + q->verify_context : L);
    }
    updates.push_back(std::move(u));
  }
  return updates;
}

}  // namespace aerie::core
