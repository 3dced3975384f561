#include "launch/serving/request_session.hpp"

#include <caf/all.hpp>

#include <algorithm>

#include "actors/messages.hpp"
#include "launch/deployment.hpp"

namespace aerie::launch {

RequestSession::RequestSession(Deployment& deployment, const model::TextTokenizer* tokenizer, ServingMetrics& metrics, uint64_t rid,
                               const ParsedRequest& request, Submission submission)
    : deployment_(deployment),
      tokenizer_(tokenizer),
      metrics_(metrics),
      rid_(rid),
      prompt_tokens_(static_cast<int64_t>(request.request.prompt.size())),
      self_(std::make_unique<caf::scoped_actor>(deployment.system())),
      stop_(tokenizer ? request.stop : std::vector<std::string>{}) {
  if (tokenizer_) text_ = std::make_unique<IncrementalText>(*tokenizer_);
  kept_.prompt_tokens = prompt_tokens_;
  metrics_.request_started();
  if (request.request.max_new_tokens == 0) {  // nothing to generate: answered without the engine
    zero_tokens_ = true;
    return;
  }
  if (submission == Submission::kTogether) {
    unsent_ = request.request;
    return;
  }
  (*self_)->send(deployment_.router(), actors::SubmitRequest{rid_, request.request, caf::actor_cast<caf::actor>(*self_)});
}

void RequestSession::submit_together(const std::vector<std::unique_ptr<RequestSession>>& sessions) {
  actors::SubmitGroup group;
  for (const auto& s : sessions) {
    if (!s->unsent_) continue;  // submitted already, or nothing to generate
    group.members.push_back({s->rid_, std::move(*s->unsent_), caf::actor_cast<caf::actor>(*s->self_)});
    s->unsent_.reset();
  }
  if (group.members.empty()) return;
  // Sent by the first session: its own later AbortRequest cannot overtake the group, and the
  // others' are sent after this send returns (from this thread, or from sample threads started
  // after it), so the Router's local mailbox holds the group first.
  RequestSession& first = *sessions.front();
  (*first.self_)->send(first.deployment_.router(), std::move(group));
}

RequestSession::~RequestSession() {
  if (!done_) abort();
}

double RequestSession::seconds_since_arrival() const {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - arrival_).count();
}

caf::actor RequestSession::handle() const { return caf::actor_cast<caf::actor>(*self_); }

void RequestSession::abort() {
  if (done_) return;
  done_ = true;
  metrics_.request_aborted();
  (*self_)->send(deployment_.router(), actors::AbortRequest{rid_});
}

// One output id: its text goes through the stop matcher; past a stop string nothing is kept.
void RequestSession::take(int32_t id, const transport::TokenLogprobs* lp, SessionUpdate& u) {
  if (stop_.matched()) return;
  u.ids.push_back(id);
  kept_.output_ids.push_back(id);
  if (lp) u.logprobs.push_back(*lp), kept_.output_logprobs.push_back(*lp);
  if (text_) u.text += stop_.feed(text_->push({id}));
}

SessionUpdate RequestSession::next(std::chrono::seconds timeout, const std::function<bool()>& client_gone) {
  SessionUpdate u;
  if (zero_tokens_ && !done_) {
    done_ = true;
    u.finished = true;
    u.result = kept_;
    u.result.finish_reason = "length";
    metrics_.request_finished("length", prompt_tokens_, 0, seconds_since_arrival(), 0.0);
    return u;
  }
  if (done_) {
    u.finished = true, u.error = "the request has ended";
    return u;
  }
  bool received = false, timed_out = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  // How long one receive waits: the whole timeout, or a poll interval to ask client_gone.
  const auto wait = [&] {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    return std::max(std::chrono::milliseconds(0), client_gone ? std::min(left, std::chrono::milliseconds(200)) : left);
  };
  while (!received && !timed_out) {
    if (client_gone && client_gone()) {
      abort();
      u.finished = true;
      u.error = "the client disconnected";
      u.status = 499;
      return u;
    }
    bool polled = false;
    (*self_)->receive(
      [&](actors::TokenChunk& c) {
        received = true;
        const auto now = std::chrono::steady_clock::now();
        if (!got_first_) {
          got_first_ = true;
          metrics_.first_token(std::chrono::duration<double>(now - arrival_).count());
        } else {
          metrics_.inter_token(std::chrono::duration<double>(now - last_chunk_).count(), static_cast<int64_t>(c.tokens.size()));
        }
        last_chunk_ = now;
        for (size_t i = 0; i < c.tokens.size(); ++i) take(c.tokens[i], i < c.logprobs.size() ? &c.logprobs[i] : nullptr, u);
        seen_ += c.tokens.size();
        if (stop_.matched()) {  // end it here; the engine's late reply is not needed
          (*self_)->send(deployment_.router(), actors::AbortRequest{rid_});
          done_ = true;
          u.finished = true;
          u.matched_stop = stop_.matched();
          u.result = kept_;
          u.result.finish_reason = "stop";
        }
      },
      [&](actors::RequestDone& d) {
        received = true;
        done_ = true;
        u.finished = true;
        if (!d.error.empty()) {
          u.error = d.error;
          u.status = d.status;
          metrics_.request_failed();
          return;
        }
        // The reply comes through the Router, the chunks straight from the Scheduler: ids
        // whose chunk has not arrived yet are taken from the result.
        const auto& all = d.result.output_ids;
        for (size_t i = seen_; i < all.size(); ++i) take(all[i], i < d.result.output_logprobs.size() ? &d.result.output_logprobs[i] : nullptr, u);
        seen_ = all.size();
        if (text_) u.text += stop_.feed(text_->finish());
        u.text += stop_.flush();
        u.result = kept_;
        u.result.finish_reason = stop_.matched() ? "stop" : d.result.finish_reason;
        u.result.spec_verify_ct = d.result.spec_verify_ct;
        u.result.queue_seconds = d.result.queue_seconds;
        u.result.cached_tokens = d.result.cached_tokens;
        u.matched_stop = stop_.matched();
      },
      [&](actors::AbortRequest&) { (*self_)->send(deployment_.router(), actors::AbortRequest{rid_}); },
      caf::after(wait()) >> [&] { polled = true; });
    if (polled && std::chrono::steady_clock::now() >= deadline) timed_out = true;
  }
  if (!received) {
    abort();
    u.finished = true;
    u.error = "no progress within " + std::to_string(timeout.count()) + " s";
    u.status = 503;
    metrics_.request_failed();
    return u;
  }
  if (u.finished && u.error.empty()) {
    const auto& r = u.result;
    const double accept = r.spec_verify_ct > 0 ? static_cast<double>(r.output_ids.size()) / static_cast<double>(r.spec_verify_ct) : 0.0;
    metrics_.request_finished(r.finish_reason, r.prompt_tokens, static_cast<int64_t>(r.output_ids.size()), seconds_since_arrival(), accept,
                              r.queue_seconds, r.cached_tokens);
  }
  return u;
}

}  // namespace aerie::launch
