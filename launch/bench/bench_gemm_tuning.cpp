#include "launch/bench/bench_gemm_tuning.hpp"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <numeric>
#include <random>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/gemm_tuning.hpp"
#include "kernels/matmul.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "launch/bench/bench_timing.hpp"
#include "model/config.hpp"

namespace aerie::launch {

namespace {

constexpr int64_t kRotateBytes = int64_t{256} << 20;  // several times the 50 MB L2

}  // namespace

int run_gemm_tuning_bench(const GemmTuningBenchOptions& o) {
  AERIE_CHECK(cuda_available(), "aerie-bench gemm-tuning needs a CUDA device");
  AERIE_CHECK(o.min_rows >= 1 && o.min_rows <= o.max_rows, "--min-rows " << o.min_rows << " and --max-rows " << o.max_rows);
  const auto c = model::LlamaConfig::named_shape(o.model_shape);
  OwnedStream os(Device::kCuda);
  const Stream& s = os.get();
  const DType bf = DType::kBF16;
  const bool buckets = kernels::gemm_tuning_buckets();
  std::vector<int64_t> order(static_cast<size_t>(o.max_rows - o.min_rows + 1));
  std::iota(order.begin(), order.end(), o.min_rows);
  std::mt19937 rng(o.seed);
  std::shuffle(order.begin(), order.end(), rng);
  const int64_t H = c.hidden_size, I = c.intermediate_size, Q = c.q_size(), KV = c.kv_size();
  struct Gemm { const char* name; int64_t n, k; };
  const Gemm gemms[] = {{"qkv", Q + 2 * KV, H}, {"o_proj", H, Q}, {"gate_up", 2 * I, H}, {"down", H, I}};
  std::printf("shape %s, rows %lld-%lld in a random order (seed %u), tuning %s\n", o.model_shape.c_str(),
              static_cast<long long>(o.min_rows), static_cast<long long>(o.max_rows), o.seed,
              buckets ? "shared by bucket (default)" : "per row count (AERIE_GEMM_LT_BUCKETS=0)");
  const int64_t retune_after = kernels::gemm_retune_after();
  std::printf("%-8s %14s %7s %7s %16s %14s %8s %17s\n", "op", "first_calls_ms", "timed", "reused", "steady_sum_us", "steady_TB/s", "retuned",
              "settled_sum_us");
  nlohmann::json results = nlohmann::json::array();
  for (const Gemm& g : gemms) {
    const int64_t wbytes = g.n * g.k * 2;
    const int copies = static_cast<int>(std::max<int64_t>(1, kRotateBytes / wbytes + 1));
    std::vector<Buffer> ws;
    for (int i = 0; i < copies; ++i) {
      ws.emplace_back(Device::kCuda, bf, std::vector<int64_t>{g.n, g.k});
      AERIE_CHECK_STATUS(kernels::fill_normal({.x = ws.back().view(), .seed = 10 + static_cast<uint64_t>(i), .std = 0.02f}, s));
    }
    Buffer x(Device::kCuda, bf, {o.max_rows, g.k}), y(Device::kCuda, bf, {o.max_rows, g.n});
    AERIE_CHECK_STATUS(kernels::fill_normal({.x = x.view(), .seed = 3, .std = 1.0f}, s));
    auto product = [&](int64_t m, int i) {
      AERIE_CHECK_STATUS(kernels::matmul({.x = x.view().slice_rows(0, m), .w = ws[static_cast<size_t>(i)].view(), .y = y.view().slice_rows(0, m)}, s));
    };
    cuda_runtime::synchronize(s.handle());
    // First calls, each on its own: host wall time around the call and its product, as an eager
    // batch of a new row count would see it.
    const kernels::GemmTuningCounts before = kernels::gemm_tuning_counts();
    double first_total = 0;
    std::vector<double> first(order.size()), steady(order.size()), settled(order.size());
    for (size_t j = 0; j < order.size(); ++j) {
      const auto t0 = bench::Clock::now();
      product(order[j], 0);
      cuda_runtime::synchronize(s.handle());
      first[j] = bench::ms_since(t0);
      first_total += first[j];
    }
    const kernels::GemmTuningCounts after = kernels::gemm_tuning_counts();
    // Each row count's median device time, the weights rotated through copies.
    auto medians = [&](std::vector<double>& ms) {
      double total = 0;
      for (size_t j = 0; j < order.size(); ++j) {
        const int64_t m = order[j];
        ms[j] = bench::median(bench::stream_times_ms(s, o.reps, 3, [&](int r) { product(m, r % copies); }));
        total += ms[j];
      }
      return total;
    };
    double steady_bytes = 0;
    for (const int64_t m : order) steady_bytes += static_cast<double>(wbytes + m * (g.k + g.n) * 2);
    // Soon after the first calls (borrowed algorithms where the buckets are on) ...
    const double steady_total_ms = medians(steady);
    // ... and once every row count has recurred retune_after times (borrowed ones retimed).
    const kernels::GemmTuningCounts pre_settle = kernels::gemm_tuning_counts();
    for (const int64_t m : order)
      for (int64_t r = 0; r < retune_after; ++r) product(m, static_cast<int>(r % copies));
    cuda_runtime::synchronize(s.handle());
    const int64_t retuned = kernels::gemm_tuning_counts().retuned - pre_settle.retuned;
    const double settled_total_ms = medians(settled);
    std::printf("%-8s %14.1f %7lld %7lld %16.1f %14.2f %8lld %17.1f\n", g.name, first_total, static_cast<long long>(after.tuned - before.tuned),
                static_cast<long long>(after.reused - before.reused), steady_total_ms * 1e3, steady_bytes / (steady_total_ms * 1e-3) / 1e12,
                static_cast<long long>(retuned), settled_total_ms * 1e3);
    std::fflush(stdout);
    nlohmann::json rows = nlohmann::json::array();
    for (size_t j = 0; j < order.size(); ++j)
      rows.push_back({{"rows", order[j]}, {"first_call_ms", first[j]}, {"steady_ms", steady[j]}, {"settled_ms", settled[j]}});
    results.push_back({{"op", g.name}, {"n", g.n}, {"k", g.k}, {"first_calls_ms", first_total}, {"timed", after.tuned - before.tuned},
                       {"reused", after.reused - before.reused}, {"steady_sum_ms", steady_total_ms}, {"retuned", retuned},
                       {"settled_sum_ms", settled_total_ms}, {"rows", rows}});
  }
  if (!o.json_path.empty()) {
    std::ofstream f(o.json_path);
    AERIE_CHECK(f, "cannot write " << o.json_path);
    f << nlohmann::json{{"model", o.model_shape}, {"buckets", buckets}, {"retune_after", retune_after}, {"seed", o.seed}, {"results", results}}.dump(1) << "\n";
  }
  return 0;
}

}  // namespace aerie::launch
