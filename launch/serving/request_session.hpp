#pragma once
// RequestSession: one HTTP request's life in the engine, for every endpoint and both
// streaming and plain replies. It submits the request to the Router with itself as the
// stream target, turns the TokenChunks into client-visible text (incremental
// detokenization, stop strings with hold-back), ends the request early when a stop string
// appears (an AbortRequest frees its KV pages), and records the serving metrics. It owns a
// scoped actor, so one thread at a time may use it (a streamed sample's session is created
// by the handler and then used by the sample's thread alone).
#include <chrono>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "launch/serving/json_request.hpp"
#include "launch/serving/incremental_text.hpp"
#include "launch/serving/serving_metrics.hpp"
#include "launch/serving/stop_matcher.hpp"

namespace caf {
class actor;
class scoped_actor;
}  // namespace caf

namespace aerie::launch {

class Deployment;

struct SessionUpdate {
  std::vector<int32_t> ids;  // new output ids (none past a stop string)
  std::vector<transport::TokenLogprobs> logprobs;  // theirs, when asked
  std::string text;          // new client-visible text (empty without a tokenizer)
  bool finished = false;
  core::GenerationResult result;  // when finished: the whole result as the client sees it
  std::optional<std::string> matched_stop;
  std::string error;  // when the engine rejected or failed the request
  int status = 400;   // with an error: 400 rejected, 499 the client left, 500 the engine failed it, 503 the engine is down
};

class RequestSession {
 public:
  // kNow: the session submits its request itself. kTogether: the caller submits it with its
  // siblings through submit_together() before the first next().
  enum class Submission { kNow, kTogether };
  RequestSession(Deployment& deployment, const model::TextTokenizer* tokenizer, ServingMetrics& metrics, uint64_t rid,
                 const ParsedRequest& request, Submission submission = Submission::kNow);
  // Submits the sessions' requests (created with kTogether, on this thread) as one
  // actors::SubmitGroup: the n samples of one prompt reach one Scheduler together, so the
  // first computes the prompt and the others share its pages, however fast it finishes.
  static void submit_together(const std::vector<std::unique_ptr<RequestSession>>& sessions);
  ~RequestSession();
  // Blocks until the request gains tokens or ends (an error after `timeout`). With
  // `client_gone`, asks it a few times a second while waiting: once it says so, the request
  // is aborted (its pages freed) and the update is an error with status 499.
  SessionUpdate next(std::chrono::seconds timeout = std::chrono::seconds(600), const std::function<bool()>& client_gone = {});
  // The client went away: end the request and free its pages.
  void abort();
  // Where another thread sends an actors::AbortRequest to end this request (/abort_request).
  // The session forwards it to the Router itself, so it cannot overtake the request's own
  // SubmitRequest (CAF keeps each sender's messages in order).
  caf::actor handle() const;
  uint64_t rid() const { return rid_; }
  double seconds_since_arrival() const;

 private:
  void take(int32_t id, const transport::TokenLogprobs* lp, SessionUpdate& u);
  Deployment& deployment_;
  const model::TextTokenizer* tokenizer_;
  ServingMetrics& metrics_;
  uint64_t rid_;
  int64_t prompt_tokens_;
  std::unique_ptr<caf::scoped_actor> self_;
  std::unique_ptr<IncrementalText> text_;
  StopMatcher stop_;
  core::GenerationResult kept_;  // ids and logprobs the client gets
  std::chrono::steady_clock::time_point arrival_ = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_chunk_;
  size_t seen_ = 0;  // output ids received so far
  bool got_first_ = false;
  bool done_ = false;
  bool zero_tokens_ = false;  // max_new_tokens 0: finished without the engine
  std::optional<core::GenerationRequest> unsent_;  // kTogether: the request until submit_together()
};

}  // namespace aerie::launch
