#pragma once
// ServingMetrics: what GET /metrics exposes, in Prometheus text format, under sglang's
// metric names with the "aerie:" prefix: request and token counters, running / queued
// requests and KV usage (asked of the Schedulers at scrape time), and histograms of
// time to first token, inter-token latency, end-to-end latency and speculative accept
// length, and the engine's speculative accept length and accept rate (sglang's
// spec_accept_length / spec_accept_rate: accepted drafts per draft step verified). Thread-safe: every HTTP handler thread records into it.
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
  void request_finished(const std::string& finish_reason, int64_t prompt_tokens, int64_t completion_tokens, double e2e_seconds,
                        double accept_length);
  void request_failed();
  std::string render(const EngineLoad& load);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace aerie::launch
