#include "actors/core/scheduler_core.hpp"

#include <algorithm>
#include <set>
#include <sstream>
#include <string_view>

#include "actors/core/future_tokens.hpp"
#include "actors/core/logit_adjustments.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "spec/draft_tree.hpp"

namespace aerie::core {

SchedulerCore::SchedulerCore(model::KvCacheShape kv, SchedulerOptions options)
    : options_(std::move(options)), kv_shape_(kv), allocator_(kv.num_pages), pages_(allocator_, kv.page_size) {
  AERIE_CHECK(options_.max_running_requests > 0, "max running requests must be positive");
  AERIE_CHECK(options_.chunked_prefill_size > 0, "chunked prefill size must be positive");
  AERIE_CHECK(options_.vocab_size > 0 && options_.context_length > 0, "scheduler needs the model's vocabulary and context sizes");
}

void SchedulerCore::submit(uint64_t rid, GenerationRequest r) {
  AERIE_CHECK(!requests_.count(rid), "request id " << rid << " is already in use");
  AERIE_CHECK(!r.prompt.empty(), "prompt is empty");
  AERIE_CHECK(r.max_new_tokens > 0, "max_new_tokens must be positive, got " << r.max_new_tokens);
  r.sampling.validate();
  AERIE_CHECK(r.logprobs >= -1 && r.logprobs <= kMaxTopLogprobs,
              "top log-probabilities must be between 0 and " << kMaxTopLogprobs << ", got " << r.logprobs);
  for (int32_t id : r.prompt)
    AERIE_CHECK(id >= 0 && id < options_.vocab_size, "token id " << id << " is outside the vocabulary [0, " << options_.vocab_size << ")");
  for (const auto& [id, bias] : r.sampling.logit_bias)
    AERIE_CHECK(id >= 0 && id < options_.vocab_size, "logit_bias names token " << id << ", outside the vocabulary [0, " << options_.vocab_size << ")");
  // A verify samples several tokens at once, each after the others: penalties would need the
  // accepted prefix of every draft. Not done yet: such a request is refused on a speculative server.
  AERIE_CHECK(!speculative() || !r.sampling.adjusts_logits(),
              "penalties, logit_bias and min_new_tokens are not supported with speculative decoding (this server runs a draft model)");
  // Compared with the room left, never summed first: a huge max_new_tokens would wrap past the
  // check and leave a request that can never finish holding the pool.
  const auto prompt = static_cast<int64_t>(r.prompt.size());
  AERIE_CHECK(prompt <= options_.context_length && r.max_new_tokens <= options_.context_length - prompt,
              "prompt (" << prompt << " tokens) + max_new_tokens (" << r.max_new_tokens << ") exceeds the context length "
                         << options_.context_length);
  // A verify holds slots for its draft tokens (and the draft's scratch rows) beyond the output.
  const int64_t total = prompt + r.max_new_tokens + (speculative() ? spec_reserve() - 1 : 0);
  // The last sampled token is never fed back, so a request needs total - 1 slots.
  AERIE_CHECK(total - 1 <= kv_shape_.usable_tokens(),
              "prompt (" << r.prompt.size() << " tokens) + max_new_tokens (" << r.max_new_tokens << ") can never fit in the KV cache of "
                         << kv_shape_.usable_tokens() << " tokens; raise --max-total-tokens or the memory budget");
  Request q;
  q.prompt_hash = std::hash<std::string_view>{}(
      std::string_view(reinterpret_cast<const char*>(r.prompt.data()), r.prompt.size() * sizeof(int32_t)));
  by_prompt_.emplace(q.prompt_hash, rid);
  q.tokens = r.prompt;
  q.incarnation = ++incarnations_;
  q.result.prompt_tokens = static_cast<int64_t>(r.prompt.size());
  q.req = std::move(r);
  requests_.emplace(rid, std::move(q));
  waiting_.push_back(rid);
}

RequestUpdate SchedulerCore::finish(uint64_t rid, const std::string& reason) {
  Request& q = requests_.at(rid);
  q.result.finish_reason = reason;
  if (speculative()) finished_since_.push_back(rid);
  RequestUpdate u{.rid = rid, .new_tokens = {}, .new_logprobs = {}, .finished = true, .result = q.result};
  hand_over_prompt(rid);
  pages_.release(rid);
  for (auto [it, end] = by_prompt_.equal_range(q.prompt_hash); it != end; ++it)
    if (it->second == rid) {
      by_prompt_.erase(it);
      break;
    }
  running_.erase(std::remove(running_.begin(), running_.end(), rid), running_.end());
  waiting_.erase(std::remove(waiting_.begin(), waiting_.end(), rid), waiting_.end());
  requests_.erase(rid);
  return u;
}

std::optional<RequestUpdate> SchedulerCore::abort(uint64_t rid) {
  if (!requests_.count(rid)) return std::nullopt;
  return finish(rid, "abort");
}

void SchedulerCore::preempt_newest() {
  const uint64_t victim = running_.back();
  running_.pop_back();
  pages_.release(victim);
  Request& q = requests_.at(victim);
  q.computed = 0;  // recomputed from its prompt + output on readmission
  q.drafted = false;
  q.pending = 0;  // the tokens in flight are sampled again (same seed, same position)
  q.future_slot = -1;
  q.verifying = 0;
  q.incarnation = ++incarnations_;  // its rows in flight are stale
  waiting_.push_front(victim);
  ++stats_.preemptions;
  AERIE_LOG_INFO("KV pool full: preempted request " << victim << " (recomputed when readmitted)");
}

bool SchedulerCore::decoding(uint64_t rid) const {
  const Request& q = requests_.at(rid);
  // Speculative requests also need their last prompt chunk to have sampled (a chunk may stop
  // one token short of the end; that token still needs its own chunk, which feeds the draft).
  return q.computed == length(q) - 1 && (!speculative() || q.drafted);
}

bool SchedulerCore::wants_decode(uint64_t rid) const {
  const Request& q = requests_.at(rid);
  return decoding(rid) && static_cast<int64_t>(q.result.output_ids.size()) + q.pending < q.req.max_new_tokens;
}

int64_t SchedulerCore::depth() const {
  if (!options_.overlap || (speculative() && !options_.spec_overlap)) return 1;
  // Penalties and min_new_tokens read the request's output, which must be known when planned.
  for (uint64_t rid : running_)
    if (requests_.at(rid).req.sampling.adjusts_logits()) return 1;
  return 2;
}

void SchedulerCore::take_prompt_chunks(std::vector<Planned>& plan, bool reserve_next_position) {
  // Unfinished chunked prompts first, then new requests in arrival order while the token
  // budget, pages and the running cap allow.
  int64_t budget = options_.chunked_prefill_size;
  auto take_chunk = [&](uint64_t rid) -> bool {
    Request& q = requests_.at(rid);
    // A token still being sampled is not a prompt position: a speculative request whose last
    // chunk is in flight waits for it (its draft state comes with the result).
    if (q.pending > 0) return false;
    const int64_t left = static_cast<int64_t>(q.tokens.size()) - q.computed;
    const int64_t len = std::min(left, budget);
    const bool last = len == left;
    if (len <= 0 || !pages_.reserve(rid, q.computed + len + (last && reserve_next_position ? 1 : 0))) return false;
    budget -= len;
    plan.push_back({rid, q.computed + len, last});
    ++stats_.prefill_chunks;
    return true;
  };
  for (uint64_t rid : running_)
    if (!decoding(rid) && budget > 0) take_chunk(rid);
  for (auto it = waiting_.begin(); it != waiting_.end() && budget > 0 && static_cast<int64_t>(running_.size()) < options_.max_running_requests;) {
    const uint64_t rid = *it;
    Request& q = requests_.at(rid);
    // A request whose prompt another running request is computing waits for it, then
    // shares those pages and starts at the last prompt position.
    const PrefixSource src = prefix_source(rid);
    if (src.wait) {
      ++it;
      continue;
    }
    if (src.tokens > 0) q.computed = pages_.adopt_prefix(rid, src.donor, src.tokens);
    if (!take_chunk(rid)) {
      if (q.computed > 0) pages_.release(rid), q.computed = 0;
      break;
    }
    q.result.cached_tokens = q.computed;
    stats_.shared_prefix_tokens += q.computed;
    it = waiting_.erase(it);
    running_.push_back(rid);
    if (!q.admitted) {
      q.admitted = true;
      q.result.queue_seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - q.submitted).count();
    }
  }
}

int64_t SchedulerCore::shareable_prefix(int64_t computed, int64_t prompt) const {
  const int64_t page = kv_shape_.page_size;
  return std::min(computed, prompt - 1) / page * page;
}

void SchedulerCore::hand_over_prompt(uint64_t donor) {
  const Request& d = requests_.at(donor);
  if (pages_.capacity(donor) == 0) return;
  for (auto [it, end] = by_prompt_.equal_range(d.prompt_hash); it != end; ++it) {
    const uint64_t rid = it->second;
    Request& q = requests_.at(rid);
    if (rid == donor || pages_.capacity(rid) > 0 || q.req.prompt != d.req.prompt) continue;
    const int64_t tokens = shareable_prefix(d.computed, static_cast<int64_t>(q.req.prompt.size()));
    if (tokens > 0) q.computed = pages_.adopt_prefix(rid, donor, tokens);
  }
}

SchedulerCore::PrefixSource SchedulerCore::prefix_source(uint64_t rid) const {
  const Request& q = requests_.at(rid);
  const auto prompt = static_cast<int64_t>(q.req.prompt.size());
  const int64_t most = shareable_prefix(prompt - 1, prompt);  // whole pages before the last prompt position
  PrefixSource src;
  if (most <= 0 || pages_.capacity(rid) > 0) return src;  // none to share, or it holds them already (hand_over_prompt)
  bool computing = false;
  for (auto [it, end] = by_prompt_.equal_range(q.prompt_hash); it != end; ++it) {
    const uint64_t other = it->second;
    if (other == rid || pages_.capacity(other) == 0) continue;  // itself, or not running
    const Request& d = requests_.at(other);
    if (d.req.prompt != q.req.prompt) continue;
    const int64_t ready = shareable_prefix(d.computed, prompt);
    if (ready > src.tokens) src.donor = other, src.tokens = ready;
    computing = computing || d.computed < prompt - 1;
  }
  src.wait = src.tokens < most && computing;
  return src;
}

transport::SamplingRowMsg SchedulerCore::sampling_row(const Request& q) const {
  const auto& s = q.req.sampling;
  // step: the output position of the token this row samples (the tokens in flight come first).
  return {.temperature = s.temperature, .top_p = s.top_p, .min_p = s.min_p, .top_k = s.top_k, .seed = s.seed,
          .step = static_cast<int64_t>(q.result.output_ids.size()) + q.pending, .logprobs = q.req.logprobs};
}

void SchedulerCore::append_sequence(transport::BatchMessage& b, const Planned& p) const {
  const Request& q = requests_.at(p.rid);
  const int64_t begin = q.computed, end = p.new_computed;
  const auto known = static_cast<int64_t>(q.tokens.size());
  AERIE_CHECK(q.verifying == 0, "request " << p.rid << " is extended while a verify of it is in flight");
  for (int64_t t = begin; t < end; ++t) {
    // Only the newest token can still be in flight: a request is planned with at most one
    // batch ahead of its known tokens.
    AERIE_CHECK(t < known || (t == known && q.pending == 1 && q.future_slot >= 0),
                "request " << p.rid << ": position " << t << " is neither known nor the token in flight");
    b.input_ids.push_back(t < known ? q.tokens[static_cast<size_t>(t)] : future_token_ref(q.future_slot));
    b.positions.push_back(static_cast<int32_t>(t));
  }
  pages_.append_slots(p.rid, begin, end, b.out_cache_loc);
  pages_.append_slots(p.rid, 0, end, b.kv_indices);
  if (b.qo_indptr.empty()) b.qo_indptr.push_back(0), b.kv_indptr.push_back(0);
  b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
  b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
  if (p.samples) {
    if (q.req.sampling.adjusts_logits()) {
      std::vector<int32_t> banned = q.req.stop_token_ids;
      if (!q.req.ignore_eos) banned.insert(banned.end(), options_.eos_token_ids.begin(), options_.eos_token_ids.end());
      append_logit_adjustments(b, static_cast<int32_t>(b.rids.size()), q.req.prompt, q.result.output_ids, q.req.sampling, banned);
    }
    b.rids.push_back(p.rid);
    b.logit_rows.push_back(static_cast<int32_t>(b.input_ids.size()) - 1);
    b.sampling.push_back(sampling_row(q));
  }
}

int32_t SchedulerCore::next_future_slot() {
  const int32_t slot = next_future_slot_;
  next_future_slot_ = (next_future_slot_ + 1) % static_cast<int32_t>(4 * options_.max_running_requests);
  return slot;
}

transport::BatchMessage SchedulerCore::put_in_flight(transport::BatchMessage b, std::vector<Planned> plan) {
  b.global_num_tokens = {static_cast<int64_t>(b.input_ids.size())};
  // The batch's effects as planned: its K/V will be in the cache, its sampled tokens in flight
  // (a VERIFY's are counted when its result says how many were accepted).
  const bool ahead = options_.overlap && (!speculative() || options_.spec_overlap);
  for (Planned& p : plan) {
    Request& q = requests_.at(p.rid);
    p.incarnation = q.incarnation;
    if (b.mode == transport::ForwardMode::kVerify) {
      ++q.verifying;
      q.verify_extra = b.spec_steps;
      q.verify_context = spec::verify_reserve(b.spec_steps, b.spec_topk, b.spec_draft_tokens);
      if (ahead) q.future_slot = next_future_slot();
      continue;
    }
    q.computed = p.new_computed;
    if (!p.samples) continue;
    ++q.pending;
    if (ahead) q.future_slot = next_future_slot();
  }
  if (ahead) {
    b.future_slots.reserve(b.rids.size());
    for (uint64_t rid : b.rids) b.future_slots.push_back(requests_.at(rid).future_slot);
  }
  ++stats_.iterations;
  stats_.max_batch = std::max<int64_t>(stats_.max_batch, static_cast<int64_t>(plan.size()));
  in_flight_.push_back({.mode = b.mode, .plan = std::move(plan)});
  return b;
}

std::optional<transport::BatchMessage> SchedulerCore::plan_next() {
  if (!can_plan() || !has_work()) return std::nullopt;
  if (speculative()) return plan_speculative();
  // 1. Running requests that are past their prompt need one slot for their next token.
  //    When the pool is short, preempt the newest (recompute later) until the rest fit.
  for (;;) {
    int64_t need = 0;
    for (uint64_t rid : running_)
      if (wants_decode(rid)) need += pages_.pages_needed(rid, requests_.at(rid).computed + 1);
    if (need <= allocator_.free_pages() || running_.empty()) break;
    preempt_newest();
  }
  std::vector<Planned> plan;
  for (uint64_t rid : running_)
    if (wants_decode(rid)) {
      AERIE_CHECK(pages_.reserve(rid, requests_.at(rid).computed + 1), "KV reservation failed after preemption");
      plan.push_back({rid, requests_.at(rid).computed + 1, true});
    }
  // 2. Prompt chunks under the token budget.
  take_prompt_chunks(plan, /*reserve_next_position=*/false);
  if (plan.empty()) {
    // With a batch in flight its result may end requests or free pages: wait for it.
    AERIE_CHECK(!in_flight_.empty() || (running_.empty() && waiting_.empty()),
                "the scheduler cannot make progress: the KV pool holds no request's next step");
    return std::nullopt;
  }
  // 3. The message: every sequence's new tokens and whole context, and one logit row,
  //    sampling parameters and rid per sequence that samples.
  transport::BatchMessage b;
  b.step_id = step_++;
  bool any_prefill = false, any_decode = false;
  for (const Planned& p : plan) {
    const Request& q = requests_.at(p.rid);
    const int64_t begin = q.computed, end = p.new_computed;
    (end - begin == 1 && p.samples && begin == length(q) - 1 ? any_decode : any_prefill) = true;
    append_sequence(b, p);
  }
  b.mode = any_prefill && any_decode ? transport::ForwardMode::kMixed
                                     : (any_prefill ? transport::ForwardMode::kExtend : transport::ForwardMode::kDecode);
  return put_in_flight(std::move(b), std::move(plan));
}

std::string SchedulerCore::malformed(const transport::BatchResult& r, const std::vector<Planned>& plan) const {
  std::ostringstream why;
  auto in_vocab = [&](int32_t t) { return t >= 0 && t < options_.vocab_size; };
  for (int32_t t : r.next_tokens)
    if (!in_vocab(t)) return (why << "token " << t << " is outside the vocabulary", why.str());
  for (const auto& lp : r.logprobs) {
    if (lp.top_ids.size() != lp.top_logprobs.size() || lp.top_ids.size() > static_cast<size_t>(kMaxTopLogprobs))
      return "top logprobs of the wrong length";
    for (int32_t t : lp.top_ids)
      if (!in_vocab(t)) return (why << "top-logprob token " << t << " is outside the vocabulary", why.str());
  }
  if (!r.token_counts.empty()) {  // VERIFY: one count per request, in the batch's order
    if (r.token_counts.size() != plan.size() || r.rids.size() != plan.size())
      return (why << r.token_counts.size() << " counts and " << r.rids.size() << " rids for " << plan.size() << " requests", why.str());
    size_t total = 0;
    const int64_t most = speculative() ? options_.spec_steps + 1 : 1;
    for (size_t i = 0; i < plan.size(); ++i) {
      if (r.rids[i] != plan[i].rid) return "rids in another order than the batch's";
      if (r.token_counts[i] < 1 || r.token_counts[i] > most) return (why << "a request committed " << r.token_counts[i] << " tokens", why.str());
      total += static_cast<size_t>(r.token_counts[i]);
    }
    if (total != r.next_tokens.size()) return (why << total << " counted tokens but " << r.next_tokens.size() << " sent", why.str());
    if (!r.logprobs.empty() && r.logprobs.size() != r.next_tokens.size()) return "logprobs for another number of tokens";
    return "";
  }
  if (r.rids.size() != r.next_tokens.size()) return (why << r.rids.size() << " rids and " << r.next_tokens.size() << " tokens", why.str());
  if (!r.logprobs.empty() && r.logprobs.size() != r.rids.size()) return "logprobs for another number of rows";
  std::set<uint64_t> rids(r.rids.begin(), r.rids.end());
  if (rids.size() != r.rids.size()) return "a request appears twice";
  for (const Planned& p : plan)
    if (p.samples && !rids.count(p.rid)) return (why << "no token for request " << p.rid, why.str());
  return "";
}

std::vector<RequestUpdate> SchedulerCore::on_result(const transport::BatchResult& r) {
  AERIE_CHECK(!in_flight_.empty(), "a batch result arrived with no batch in flight");
  const InFlight batch = std::move(in_flight_.front());
  in_flight_.pop_front();
  const std::vector<Planned>& plan = batch.plan;
  stats_.forward_seconds += r.forward_seconds;
  stats_.forward_gap_seconds += r.gap_seconds;
  std::string error = r.error;
  if (error.empty()) {
    if (const std::string why = malformed(r, plan); !why.empty()) error = "malformed batch result: " + why;
  }
  std::vector<RequestUpdate> updates;
  if (!error.empty()) {
    for (const Planned& p : plan)
      if (live_request(p)) updates.push_back(finish(p.rid, "error: " + error));
    return updates;
  }
  if (!r.token_counts.empty()) return on_verify_result(r, plan);
  AERIE_CHECK(r.rids.size() == r.next_tokens.size(), "batch result has " << r.rids.size() << " rids and " << r.next_tokens.size() << " tokens");
  AERIE_CHECK(r.logprobs.empty() || r.logprobs.size() == r.rids.size(),
              "batch result has " << r.logprobs.size() << " logprob entries for " << r.rids.size() << " rows");
  std::map<uint64_t, int32_t> sampled;
  std::map<uint64_t, const transport::TokenLogprobs*> logprobs;
  for (size_t i = 0; i < r.rids.size(); ++i) {
    sampled[r.rids[i]] = r.next_tokens[i];
    if (!r.logprobs.empty()) logprobs[r.rids[i]] = &r.logprobs[i];
  }
  for (const Planned& p : plan) {
    Request* q = live_request(p);
    if (!q) continue;
    if (!p.samples) {
      updates.push_back({.rid = p.rid});
      continue;
    }
    const auto tok = sampled.find(p.rid);
    AERIE_CHECK(tok != sampled.end(), "batch result lacks a token for request " << p.rid);
    q->drafted = true;
    --q->pending;
    const auto lp = logprobs.find(p.rid);
    updates.push_back(commit_tokens(p.rid, std::span<const int32_t>(&tok->second, 1),
                                    lp == logprobs.end() ? std::span<const transport::TokenLogprobs>()
                                                         : std::span<const transport::TokenLogprobs>(lp->second, 1)));
  }
  return updates;
}

}  // namespace aerie::core
