#pragma once
// aerie-bench serving: an HTTP load generator for a running server (Aerie's, or any with
// sglang's /generate or OpenAI's /v1/completions). Requests come from a random dataset
// (token ids, lengths drawn as sglang's bench_serving does) or a file, arrive as a Poisson
// process (--request-rate, inf = all at once) under an optional concurrency cap, and stream
// their tokens; the run prints sglang's "Serving Benchmark Result" block (throughput, TTFT,
// TPOT, ITL, end-to-end latency, accept length) and can write the same as JSON.
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace aerie::launch {

struct ServingBenchOptions {
  std::string base_url;  // e.g. http://127.0.0.1:30000 (default: from host and port)
  std::string host = "127.0.0.1";
  int port = 30000;
  std::string backend = "sglang";  // sglang: POST /generate; openai: POST /v1/completions
  std::string dataset_name = "random";  // random | file
  std::string dataset_path;  // file: JSON lines {"prompt": text or ids, "output_len": n} or a ShareGPT JSON list
  int64_t num_prompts = 1000;
  int64_t random_input_len = 1024;
  int64_t random_output_len = 1024;
  double random_range_ratio = 0.0;  // lengths drawn from [len * ratio, len], as sglang
  double request_rate = std::numeric_limits<double>::infinity();  // requests per second
  int64_t max_concurrency = 0;  // 0: no cap
  uint64_t seed = 1;
  std::string output_file;  // JSON result (one object)
  bool disable_progress = false;
  double timeout_s = 600;
};

struct BenchRequest {
  std::vector<int32_t> input_ids;  // or
  std::string text;
  int64_t output_len = 0;
};

struct RequestOutcome {
  bool success = false;
  std::string error;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t spec_verify_ct = 0;
  double ttft = 0;     // seconds
  double latency = 0;  // seconds, send to last byte
  std::vector<double> itl;  // seconds per token after the first
};

// The requests of a run (seeded). vocab_size bounds the random ids.
std::vector<BenchRequest> make_bench_requests(const ServingBenchOptions& o, int64_t vocab_size);
// Summary numbers with sglang's JSON keys (completed, request_throughput, mean_ttft_ms, ...).
nlohmann::json summarize_bench(const ServingBenchOptions& o, const std::vector<RequestOutcome>& outcomes, double duration_s);
// The "Serving Benchmark Result" block for a summary.
std::string format_bench_result(const nlohmann::json& summary);
// Runs the benchmark; returns the process exit code.
int run_serving_bench(const ServingBenchOptions& o);

}  // namespace aerie::launch
