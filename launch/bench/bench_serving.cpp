#include "launch/bench/bench_serving.hpp"

#include <httplib.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <mutex>
#include <numeric>
#include <random>
#include <sstream>
#include <thread>

#include "kernels/error.hpp"
#include "launch/bench/bench_timing.hpp"
#include "launch/progress.hpp"

namespace aerie::launch {

namespace {

using nlohmann::json;
using bench::Clock;
using bench::mean;

void split_url(const ServingBenchOptions& o, std::string& host, int& port) {
  host = o.host, port = o.port;
  if (o.base_url.empty()) return;
  std::string rest = o.base_url;
  const std::string scheme = "http://";
  AERIE_CHECK(rest.rfind(scheme, 0) == 0, "--base-url must start with http:// (got " << o.base_url << ")");
  rest = rest.substr(scheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  const size_t colon = rest.rfind(':');
  AERIE_CHECK(rest.find('/') == std::string::npos, "--base-url takes no path (got " << o.base_url << ")");
  if (colon == std::string::npos) {
    host = rest, port = 80;
  } else {
    host = rest.substr(0, colon);
    port = std::stoi(rest.substr(colon + 1));
  }
}

int64_t draw_len(std::mt19937_64& rng, int64_t len, double ratio) {
  const int64_t lo = std::max<int64_t>(1, static_cast<int64_t>(static_cast<double>(len) * ratio));
  return std::uniform_int_distribution<int64_t>(lo, std::max(lo, len))(rng);
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  // Linear interpolation between closest ranks (numpy's default, as bench_serving uses).
  const double rank = p / 100.0 * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(v.size() - 1, lo + 1);
  return v[lo] + (v[hi] - v[lo]) * (rank - static_cast<double>(lo));
}

double stdev(const std::vector<double>& v) {
  if (v.empty()) return 0.0;
  const double m = mean(v);
  double s = 0;
  for (double x : v) s += (x - m) * (x - m);
  return std::sqrt(s / static_cast<double>(v.size()));
}

// One request: streams it and records when tokens arrive.
RequestOutcome send_one(const std::string& host, int port, const ServingBenchOptions& o, const BenchRequest& r) {
  RequestOutcome out;
  json body;
  std::string path;
  if (o.backend == "sglang") {
    path = "/generate";
    if (r.text.empty()) body["input_ids"] = r.input_ids;
    else body["text"] = r.text;
    body["sampling_params"] = {{"max_new_tokens", r.output_len}, {"temperature", 0.0}, {"ignore_eos", true}};
    body["stream"] = true;
  } else {
    path = "/v1/completions";
    if (r.text.empty()) body["prompt"] = r.input_ids;
    else body["prompt"] = r.text;
    body["max_tokens"] = r.output_len;
    body["temperature"] = 0.0;
    body["ignore_eos"] = true;
    body["stream"] = true;
    body["stream_options"] = {{"include_usage", true}};
  }
  httplib::Client cli(host, port);
  cli.set_read_timeout(static_cast<time_t>(o.timeout_s), 0);
  cli.set_connection_timeout(30, 0);
  httplib::Request req;
  req.method = "POST";
  req.path = path;
  req.body = body.dump();
  req.set_header("Content-Type", "application/json");
  std::string buffer;
  int64_t seen = 0;
  const auto start = Clock::now();
  auto last = start;
  bool first = true;
  auto on_event = [&](const std::string& data) {
    if (data == "[DONE]") return;
    const json ev = json::parse(data, nullptr, false);
    if (ev.is_discarded()) {
      out.error = "malformed event: " + data.substr(0, 200);
      return;
    }
    if (ev.contains("error")) {
      out.error = ev["error"].dump();
      return;
    }
    int64_t now_tokens = seen;
    if (o.backend == "sglang") {
      const auto& m = ev["meta_info"];
      now_tokens = m.value("completion_tokens", seen);
      out.prompt_tokens = m.value("prompt_tokens", out.prompt_tokens);
      if (m.contains("spec_verify_ct") && m["spec_verify_ct"].is_number_integer()) out.spec_verify_ct = m["spec_verify_ct"].get<int64_t>();
    } else {
      if (ev.contains("usage") && ev["usage"].is_object()) {
        out.prompt_tokens = ev["usage"].value("prompt_tokens", 0);
        out.output_tokens = ev["usage"].value("completion_tokens", 0);
      }
      if (ev.contains("choices") && !ev["choices"].empty() && !ev["choices"][0].value("text", "").empty()) now_tokens = seen + 1;
    }
    if (now_tokens <= seen) return;
    const auto t = Clock::now();
    if (first) {
      out.ttft = std::chrono::duration<double>(t - start).count();
      first = false;
    } else {
      // A chunk of several tokens spreads its gap over them, as bench_serving does.
      const double gap = std::chrono::duration<double>(t - last).count() / static_cast<double>(now_tokens - seen);
      for (int64_t k = seen; k < now_tokens; ++k) out.itl.push_back(gap);
    }
    last = t;
    seen = now_tokens;
  };
  req.content_receiver = [&](const char* data, size_t len, uint64_t, uint64_t) {
    buffer.append(data, len);
    for (size_t end; (end = buffer.find("\n\n")) != std::string::npos;) {
      const std::string event = buffer.substr(0, end);
      buffer.erase(0, end + 2);
      if (event.rfind("data: ", 0) == 0) on_event(event.substr(6));
    }
    return true;
  };
  httplib::Response res;
  httplib::Error err = httplib::Error::Success;
  const bool ok = cli.send(req, res, err);
  out.latency = std::chrono::duration<double>(Clock::now() - start).count();
  if (!ok) {
    out.error = "HTTP request failed: " + httplib::to_string(err);
    return out;
  }
  if (res.status != 200) {
    out.error = "HTTP " + std::to_string(res.status) + ": " + buffer.substr(0, 300) + res.body.substr(0, 300);
    return out;
  }
  if (o.backend == "sglang") out.output_tokens = seen;
  else if (out.output_tokens == 0) out.output_tokens = seen;
  out.success = out.error.empty() && !first;
  if (!out.success && out.error.empty()) out.error = "no tokens arrived";
  return out;
}

}  // namespace

std::vector<BenchRequest> make_bench_requests(const ServingBenchOptions& o, int64_t vocab_size) {
  AERIE_CHECK(o.num_prompts > 0, "--num-prompts must be positive");
  std::mt19937_64 rng(o.seed);
  std::vector<BenchRequest> reqs;
  if (o.dataset_name == "random") {
    AERIE_CHECK(vocab_size > 0, "the server reported no vocabulary size");
    AERIE_CHECK(o.random_input_len > 0 && o.random_output_len > 0, "--random-input-len and --random-output-len must be positive");
    AERIE_CHECK(o.random_range_ratio >= 0 && o.random_range_ratio <= 1, "--random-range-ratio must be in [0, 1]");
    std::uniform_int_distribution<int32_t> id(0, static_cast<int32_t>(vocab_size - 1));
    for (int64_t i = 0; i < o.num_prompts; ++i) {
      BenchRequest r;
      const int64_t in = draw_len(rng, o.random_input_len, o.random_range_ratio);
      r.output_len = draw_len(rng, o.random_output_len, o.random_range_ratio);
      for (int64_t k = 0; k < in; ++k) r.input_ids.push_back(id(rng));
      reqs.push_back(std::move(r));
    }
    return reqs;
  }
  AERIE_CHECK(o.dataset_name == "file", "--dataset-name must be random or file");
  AERIE_CHECK(!o.dataset_path.empty(), "--dataset-name file needs --dataset-path");
  std::ifstream in(o.dataset_path);
  AERIE_CHECK(in, "cannot open " << o.dataset_path);
  const std::string all((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::vector<json> items;
  const json whole = json::parse(all, nullptr, false);
  if (!whole.is_discarded() && whole.is_array()) {
    items.assign(whole.begin(), whole.end());
  } else {
    std::istringstream lines(all);
    std::string line;
    int64_t n = 0;
    while (std::getline(lines, line)) {
      ++n;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      const json j = json::parse(line, nullptr, false);
      AERIE_CHECK(!j.is_discarded() && j.is_object(), o.dataset_path << ":" << n << ": not a JSON object");
      items.push_back(j);
    }
  }
  for (const auto& j : items) {
    BenchRequest r;
    r.output_len = o.random_output_len;
    if (j.contains("conversations") || j.contains("conversation")) {  // ShareGPT: the first turn is the prompt
      const json& c = j.contains("conversations") ? j["conversations"] : j["conversation"];
      if (!c.is_array() || c.size() < 2 || !c[0].contains("value") || !c[0]["value"].is_string()) continue;
      r.text = c[0]["value"].get<std::string>();
      if (r.text.empty()) continue;
    } else {
      AERIE_CHECK(j.contains("prompt"), o.dataset_path << ": an entry has no \"prompt\" (or ShareGPT \"conversations\")");
      if (j["prompt"].is_string()) r.text = j["prompt"].get<std::string>();
      else r.input_ids = j["prompt"].get<std::vector<int32_t>>();
      AERIE_CHECK(!r.text.empty() || !r.input_ids.empty(), o.dataset_path << ": an entry has an empty prompt");
      if (j.contains("output_len")) r.output_len = j["output_len"].get<int64_t>();
    }
    AERIE_CHECK(r.output_len > 0, o.dataset_path << ": output lengths must be positive");
    reqs.push_back(std::move(r));
  }
  AERIE_CHECK(!reqs.empty(), o.dataset_path << " holds no usable prompt");
  std::shuffle(reqs.begin(), reqs.end(), rng);
  // Fewer entries than prompts: cycle through them.
  std::vector<BenchRequest> out;
  for (int64_t i = 0; i < o.num_prompts; ++i) out.push_back(reqs[static_cast<size_t>(i) % reqs.size()]);
  return out;
}

json summarize_bench(const ServingBenchOptions& o, const std::vector<RequestOutcome>& outcomes, double duration) {
  std::vector<double> ttft, tpot, itl, e2e;
  int64_t completed = 0, input = 0, output = 0, verify = 0, spec_output = 0;
  for (const auto& r : outcomes) {
    if (!r.success) continue;
    ++completed;
    input += r.prompt_tokens;
    output += r.output_tokens;
    if (r.spec_verify_ct > 0) verify += r.spec_verify_ct, spec_output += r.output_tokens;
    ttft.push_back(r.ttft * 1e3);
    e2e.push_back(r.latency * 1e3);
    if (r.output_tokens > 1) tpot.push_back((r.latency - r.ttft) / static_cast<double>(r.output_tokens - 1) * 1e3);
    for (double x : r.itl) itl.push_back(x * 1e3);
  }
  const double d = std::max(duration, 1e-9);
  json s{{"backend", o.backend},
         {"dataset_name", o.dataset_name},
         {"request_rate", std::isinf(o.request_rate) ? json("inf") : json(o.request_rate)},
         {"max_concurrency", o.max_concurrency > 0 ? json(o.max_concurrency) : json()},
         {"random_input_len", o.random_input_len},
         {"random_output_len", o.random_output_len},
         {"random_range_ratio", o.random_range_ratio},
         {"duration", duration},
         {"num_prompts", outcomes.size()},
         {"completed", completed},
         {"failed", static_cast<int64_t>(outcomes.size()) - completed},
         {"total_input_tokens", input},
         {"total_output_tokens", output},
         {"request_throughput", static_cast<double>(completed) / d},
         {"input_throughput", static_cast<double>(input) / d},
         {"output_throughput", static_cast<double>(output) / d},
         {"total_throughput", static_cast<double>(input + output) / d},
         {"concurrency", std::accumulate(e2e.begin(), e2e.end(), 0.0) / 1e3 / d},
         {"accept_length", verify > 0 ? json(static_cast<double>(spec_output) / static_cast<double>(verify)) : json()},
         {"mean_e2e_latency_ms", mean(e2e)},
         {"median_e2e_latency_ms", percentile(e2e, 50)},
         {"std_e2e_latency_ms", stdev(e2e)},
         {"p99_e2e_latency_ms", percentile(e2e, 99)},
         {"mean_ttft_ms", mean(ttft)},
         {"median_ttft_ms", percentile(ttft, 50)},
         {"std_ttft_ms", stdev(ttft)},
         {"p99_ttft_ms", percentile(ttft, 99)},
         {"mean_tpot_ms", mean(tpot)},
         {"median_tpot_ms", percentile(tpot, 50)},
         {"std_tpot_ms", stdev(tpot)},
         {"p99_tpot_ms", percentile(tpot, 99)},
         {"mean_itl_ms", mean(itl)},
         {"median_itl_ms", percentile(itl, 50)},
         {"std_itl_ms", stdev(itl)},
         {"p95_itl_ms", percentile(itl, 95)},
         {"p99_itl_ms", percentile(itl, 99)},
         {"max_itl_ms", itl.empty() ? 0.0 : *std::max_element(itl.begin(), itl.end())}};
  return s;
}

std::string format_bench_result(const json& s) {
  std::ostringstream out;
  auto row = [&](const std::string& name, const json& v) {
    out << std::left << std::setw(41) << (name + ":");
    if (v.is_number_float()) out << std::fixed << std::setprecision(2) << v.get<double>();
    else if (v.is_null()) out << "not set";
    else if (v.is_string()) out << v.get<std::string>();
    else out << v.dump();
    out << "\n";
  };
  auto header = [&](const std::string& title, char fill) {
    const int width = 50, pad = width - static_cast<int>(title.size());
    out << std::string(static_cast<size_t>(pad / 2), fill) << title << std::string(static_cast<size_t>(pad - pad / 2), fill) << "\n";
  };
  header(" Serving Benchmark Result ", '=');
  row("Backend", s["backend"]);
  row("Traffic request rate", s["request_rate"]);
  row("Max request concurrency", s["max_concurrency"]);
  row("Successful requests", s["completed"]);
  row("Failed requests", s["failed"]);
  row("Benchmark duration (s)", s["duration"]);
  row("Total input tokens", s["total_input_tokens"]);
  row("Total generated tokens", s["total_output_tokens"]);
  row("Request throughput (req/s)", s["request_throughput"]);
  row("Input token throughput (tok/s)", s["input_throughput"]);
  row("Output token throughput (tok/s)", s["output_throughput"]);
  row("Total token throughput (tok/s)", s["total_throughput"]);
  row("Concurrency", s["concurrency"]);
  if (!s["accept_length"].is_null()) row("Accept length", s["accept_length"]);
  header("End-to-End Latency", '-');
  row("Mean E2E Latency (ms)", s["mean_e2e_latency_ms"]);
  row("Median E2E Latency (ms)", s["median_e2e_latency_ms"]);
  row("P99 E2E Latency (ms)", s["p99_e2e_latency_ms"]);
  header("Time to First Token", '-');
  row("Mean TTFT (ms)", s["mean_ttft_ms"]);
  row("Median TTFT (ms)", s["median_ttft_ms"]);
  row("P99 TTFT (ms)", s["p99_ttft_ms"]);
  header("Time per Output Token (excl. 1st token)", '-');
  row("Mean TPOT (ms)", s["mean_tpot_ms"]);
  row("Median TPOT (ms)", s["median_tpot_ms"]);
  row("P99 TPOT (ms)", s["p99_tpot_ms"]);
  header("Inter-token Latency", '-');
  row("Mean ITL (ms)", s["mean_itl_ms"]);
  row("Median ITL (ms)", s["median_itl_ms"]);
  row("P95 ITL (ms)", s["p95_itl_ms"]);
  row("P99 ITL (ms)", s["p99_itl_ms"]);
  row("Max ITL (ms)", s["max_itl_ms"]);
  out << std::string(50, '=') << "\n";
  return out.str();
}

int run_serving_bench(const ServingBenchOptions& o) {
  AERIE_CHECK(o.backend == "sglang" || o.backend == "openai", "--backend must be sglang or openai");
  AERIE_CHECK(o.request_rate > 0, "--request-rate must be positive (inf: all at once)");
  AERIE_CHECK(o.max_concurrency >= 0, "--max-concurrency must be >= 0");
  std::string host;
  int port = 0;
  split_url(o, host, port);
  int64_t vocab = 0;
  {
    httplib::Client cli(host, port);
    cli.set_connection_timeout(10, 0);
    auto res = cli.Get("/get_server_info");
    AERIE_CHECK(res && res->status == 200, "no server at http://" << host << ":" << port << " (GET /get_server_info: "
                                                                  << (res ? std::to_string(res->status) : httplib::to_string(res.error())) << ")");
    const json info = json::parse(res->body, nullptr, false);
    if (!info.is_discarded() && info.contains("vocab_size") && info["vocab_size"].is_number_integer()) vocab = info["vocab_size"].get<int64_t>();
  }
  const auto requests = make_bench_requests(o, vocab);
  const size_t n = requests.size();
  // Arrival offsets: a Poisson process of the given rate (all at 0 for inf).
  std::vector<double> arrival(n, 0.0);
  if (!std::isinf(o.request_rate)) {
    std::mt19937_64 rng(o.seed ^ 0x5DEECE66Dull);
    std::exponential_distribution<double> gap(o.request_rate);
    double t = 0;
    for (auto& a : arrival) a = (t += gap(rng));
  }
  std::vector<RequestOutcome> outcomes(n);
  ProgressBar progress("requests", static_cast<int64_t>(n), !o.disable_progress);
  std::atomic<size_t> next{0};
  const size_t workers = o.max_concurrency > 0 ? std::min<size_t>(n, static_cast<size_t>(o.max_concurrency)) : n;
  std::cerr << "aerie-bench serving: " << n << " requests to http://" << host << ":" << port << " (" << o.backend << "), "
            << workers << " at a time at most\n";
  const auto start = Clock::now();
  std::vector<std::thread> pool;
  pool.reserve(workers);
  for (size_t w = 0; w < workers; ++w)
    pool.emplace_back([&] {
      for (size_t i; (i = next++) < n;) {
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(arrival[i])));
        outcomes[i] = send_one(host, port, o, requests[i]);
        progress.advance();
      }
    });
  for (auto& t : pool) t.join();
  const double duration = std::chrono::duration<double>(Clock::now() - start).count();
  progress.finish();
  const json summary = summarize_bench(o, outcomes, duration);
  std::cout << format_bench_result(summary) << std::flush;
  size_t shown = 0;
  for (const auto& r : outcomes)
    if (!r.success && shown++ < 5) std::cerr << "failed request: " << r.error << "\n";
  if (!o.output_file.empty()) {
    std::ofstream f(o.output_file);
    AERIE_CHECK(f, "cannot write " << o.output_file);
    f << summary.dump(2) << "\n";
  }
  return summary["failed"].get<int64_t>() == 0 ? 0 : 1;
}

}  // namespace aerie::launch
