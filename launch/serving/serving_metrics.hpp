#pragma once
// ServingMetrics: what GET /metrics exposes, in Prometheus text format, under sglang's names
// and types (sglang:num_requests_total, num_aborted_requests_total, prompt/generation token
// counters, num_running_reqs, num_queue_reqs, num_used_tokens, token_usage, gen_throughput,
// cache_hit_rate, the time_to_first_token / inter_token_latency / e2e_request_latency /
// queue_time histograms, the spec_accept_length and spec_accept_rate gauges), so its
// dashboards work unchanged; "aerie:" names for what sglang lacks (failed requests, finished
// requests by reason, each request's accept length as a histogram). Running / queued requests
// and KV usage are asked of the Schedulers at scrape time. Thread-safe: every HTTP handler
// thread records into it.
#include <memory>
#include <string>

namespace aerie::launch {

struct EngineLoad {
  int64_t running = 0;
  int64_t queued = 0;
  int64_t kv_used_tokens = 0;
  int64_t kv_total_tokens = 0;
  int64_t spec_verify_ct = 0;        // request-verifies so far (speculative decoding)
  int64_t spec_committed_tokens = 0; // tokens they committed
  double forward_seconds = 0;        // the workers' devices busy with batches, summed over DP groups
  double forward_gap_seconds = 0;    // and idle between batches (gaps over 100 ms: no work, not counted)
};

class ServingMetrics {
 public:
  // spec_steps: draft steps per verify (the deepest a verify accepts), 0 without speculation.
  explicit ServingMetrics(const std::string& model_name, int64_t spec_steps = 0);
  ~ServingMetrics();
  void request_started();
  void first_token(double seconds_since_arrival);
  void inter_token(double seconds, int64_t tokens);  // a chunk of `tokens` after `seconds`
  // A finished request; accept_length is output tokens per verify forward (0: no speculation).
  // queue_seconds: its wait before the first batch (< 0: unknown); cached_tokens: prompt tokens whose K/V
  // it shared with another request (sglang's cached_tokens; cache_hit_rate is their share of all prompt tokens).
  void request_finished(const std::string& finish_reason, int64_t prompt_tokens, int64_t completion_tokens, double e2e_seconds,
                        double accept_length, double queue_seconds = -1, int64_t cached_tokens = 0);
  void request_failed();
  void request_aborted();  // its client went away
  std::string render(const EngineLoad& load);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aerie::launch
