#include "launch/bench/bench_one_batch.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "kernels/device_runtime.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "launch/bench/bench_timing.hpp"
#include "launch/tp_context.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "model/llama_model.hpp"
#include "model/sampler.hpp"
#include "spec/decode_graph_runner.hpp"

namespace aerie::launch {

namespace {

using bench::Clock;
using bench::median;
using bench::ms_since;

// Device-to-device copy bandwidth, counting bytes read plus bytes written (METHOD.md).
double measure_copy_bandwidth(Device device) {
  const size_t bytes = device == Device::kCuda ? (size_t{2} << 30) : (size_t{256} << 20);
  Buffer a(device, DType::kU8, {static_cast<int64_t>(bytes)}), b(device, DType::kU8, {static_cast<int64_t>(bytes)});
  a.zero();
  b.zero();
  const int reps = device == Device::kCuda ? 20 : 3;
  if (device == Device::kCpu) {
    auto t = Clock::now();
    for (int i = 0; i < reps; ++i) std::memcpy(b.data(), a.data(), bytes);
    return 2.0 * bytes * reps / (ms_since(t) * 1e-3);
  }
  OwnedStream s(device);
  std::vector<double> rates;  // the copy alternates direction; call 0 (b <- a) also warms up
  for (double ms : bench::stream_times_ms(s.get(), reps, 1, [&](int i) {
         cuda_runtime::copy_async(i % 2 ? a.data() : b.data(), i % 2 ? b.data() : a.data(), bytes, s.get().handle());
       }))
    rates.push_back(2.0 * bytes / (ms * 1e-3));
  return median(rates);
}

// Dense tensor-core throughput of this GPU in the run's dtype (FLOP/s): cuBLAS through
// kernels::matmul on 8192^3, median of 10, the denominator of prefill's MFU. On random data
// (x ~ N(0, 1), w ~ N(0, 0.02), as the dummy weights and their activations) by default: zero
// operands draw less power and hold higher clocks, ~12% faster on the H200 (894 against 788
// TFLOP/s, device notes), a rate no real prefill sees; the zeros rate is reported beside it.
double measure_matmul_flops(DType dtype, bool zeros) {
  const int64_t n = 8192;
  Buffer x(Device::kCuda, dtype, {n, n}), w(Device::kCuda, dtype, {n, n}), y(Device::kCuda, dtype, {n, n});
  OwnedStream s(Device::kCuda);
  if (zeros) {
    x.zero();
    w.zero();
  } else {
    AERIE_CHECK_STATUS(kernels::fill_normal({.x = x.view(), .seed = 11, .std = 1.0f}, s.get()));
    AERIE_CHECK_STATUS(kernels::fill_normal({.x = w.view(), .seed = 12, .std = 0.02f}, s.get()));
  }
  const kernels::MatmulParams mm{.x = x.view(), .w = w.view(), .y = y.view()};
  std::vector<double> rates;  // one untimed call first: cuBLAS picks its kernel
  for (double ms : bench::stream_times_ms(s.get(), 10, 1, [&](int) { AERIE_CHECK_STATUS(kernels::matmul(mm, s.get())); }))
    rates.push_back(2.0 * n * n * n / (ms * 1e-3));
  return median(rates);
}

// The FLOPs of prefilling `batch` prompts of `len` tokens on one rank: the projections and
// the MLP for every token, the LM head for each prompt's last token, causal attention.
double prefill_flops(const model::LlamaConfig& c, int64_t batch, int64_t len) {
  const double per_layer = static_cast<double>(c.hidden_size) * (c.q_size() + 2 * c.kv_size()) +
                           static_cast<double>(c.q_size()) * c.hidden_size + 3.0 * c.hidden_size * c.intermediate_size;
  const double tokens = static_cast<double>(batch) * len;
  const double attention = 4.0 * c.num_layers * c.num_heads * c.head_dim * batch * (len * (len + 1) / 2.0);
  return 2.0 * per_layer * c.num_layers * tokens + 2.0 * c.hidden_size * c.vocab_size * batch + attention;
}

struct Sequences {
  model::PageAllocator allocator;
  model::RequestPageTable pages;
  Sequences(int64_t num_pages, int64_t page_size) : allocator(num_pages), pages(allocator, page_size) {}
};

}  // namespace

int run_one_batch(const OneBatchOptions& o) {
  const Device device = parse_device(o.device);
  model::LlamaConfig config = o.model_path.empty() ? model::LlamaConfig::named_shape(o.model_shape) : model::LlamaConfig::load(o.model_path);
  model::TpShard::check_divisible(config, static_cast<int>(o.tp_size), "the model");
  // Every rank runs the same batches in lock-step (same seeds); rank 0 reports.
  TpContext tp = make_tp_context(nullptr, nullptr, device, o.tp_size, {.custom_all_reduce = !o.disable_custom_all_reduce});
  const bool report = tp.rank0();
  const DType wdt = o.dtype != "auto" ? parse_dtype(o.dtype) : device == Device::kCpu ? DType::kF32 : DType::kBF16;
  const DType act = device == Device::kCpu ? DType::kF32 : wdt;
  const double bandwidth = measure_copy_bandwidth(device);
  const double matmul_flops = device == Device::kCuda ? measure_matmul_flops(act, false) : 0.0;
  const double matmul_flops_zeros = device == Device::kCuda ? measure_matmul_flops(act, true) : 0.0;
  if (report && matmul_flops > 0)
    std::fprintf(stderr, "dense %s matmul (cuBLAS, 8192^3): %.0f TFLOP/s on random data, %.0f on zeros\n", dtype_name(act),
                 matmul_flops / 1e12, matmul_flops_zeros / 1e12);
  if (report) std::fprintf(stderr, "copy bandwidth (read + write): %.1f GB/s\nloading weights...\n", bandwidth / 1e9);
  if (report && device == Device::kCpu) std::fprintf(stderr, "CPU f32 products: %s\n", kernels::cpu_gemm_name());
  auto weights = o.load_format == "dummy" ? model::random_llama_weights(config, o.seed, device, wdt, 0.02f, {}, tp.shard)
                                          : model::load_llama_weights(o.model_path, config, device, wdt, {}, tp.shard);
  OwnedStream stream(device);
  model::LlamaModel llama(config, std::move(weights), stream.get(), act, tp.tp);
  const int64_t max_bs = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  const int64_t ctx = o.input_len + o.output_len;
  const int64_t graph_context = std::max(ctx, o.graph_context);  // what the decode graphs are captured for
  const int64_t page = 16;
  model::KvCache kv(llama.local_config(), model::kv_shape_for_tokens(max_bs * (ctx + page), page), device, act);
  model::Sampler sampler(device, max_bs);
  std::vector<bool> modes;
  if (o.cuda_graph != "on" || device == Device::kCpu) modes.push_back(false);
  if (o.cuda_graph != "off" && device == Device::kCuda) modes.push_back(true);
  std::unique_ptr<spec::DecodeGraphRunner> runner;
  if (std::find(modes.begin(), modes.end(), true) != modes.end()) {
    auto t = Clock::now();
    runner = std::make_unique<spec::DecodeGraphRunner>(llama, kv, max_bs, graph_context);
    if (report) std::fprintf(stderr, "captured %zu decode graphs in %.0f ms\n", runner->buckets().size(), ms_since(t));
  }
  std::mt19937 rng(static_cast<uint32_t>(o.seed));
  nlohmann::json results = nlohmann::json::array();
  if (report) {
    std::printf("model %s, %s, tp %lld%s, weights per GPU %.2f GB, copy bandwidth %.0f GB/s, input %lld, output %lld\n",
                o.model_path.empty() ? o.model_shape.c_str() : o.model_path.c_str(), dtype_name(act), static_cast<long long>(o.tp_size),
                o.tp_size > 1 ? (o.disable_custom_all_reduce ? " (NCCL all-reduce)" : " (IPC all-reduce)") : "", llama.weight_bytes() / 1e9, bandwidth / 1e9, static_cast<long long>(o.input_len), static_cast<long long>(o.output_len));
    // decode_ms: a whole step (host prep, upload, forward, sampling, copy back); fwd_ms: the
    // device time of the forward (with graphs: the replay including its greedy argmax).
    std::printf("%6s %6s %12s %14s %12s %10s %12s %12s %9s\n", "batch", "graph", "prefill_ms", "prefill_tok/s", "decode_ms",
                "fwd_ms", "decode_tok/s", "floor_ms", "of_floor");
  }
  for (int64_t bs : o.batch_sizes) {
    Sequences seqs(kv.shape().num_pages, page);
    model::ForwardBatch pre;
    std::vector<model::SamplingRow> rows(static_cast<size_t>(bs));
    for (int64_t r = 0; r < bs; ++r) {
      AERIE_CHECK(seqs.pages.reserve(static_cast<uint64_t>(r), ctx), "KV pool too small for the benchmark");
      for (int64_t p = 0; p < o.input_len; ++p) {
        pre.input_ids.push_back(static_cast<int32_t>(rng() % config.vocab_size));
        pre.positions.push_back(static_cast<int32_t>(p));
      }
      seqs.pages.append_slots(static_cast<uint64_t>(r), 0, o.input_len, pre.out_cache_loc);
      seqs.pages.append_slots(static_cast<uint64_t>(r), 0, o.input_len, pre.kv_indices);
      pre.qo_indptr.push_back(static_cast<int32_t>(pre.input_ids.size()));
      pre.kv_indptr.push_back(static_cast<int32_t>(pre.kv_indices.size()));
      pre.logit_rows.push_back(static_cast<int32_t>(pre.input_ids.size()) - 1);
    }
    // Prefill: one warm-up, then three timed runs (median; each includes sampling the first token).
    std::vector<double> prefill_runs;
    std::vector<int32_t> first;
    for (int rep = 0; rep < 4; ++rep) {
      auto t = Clock::now();
      first = sampler.sample(llama.forward(pre, kv), rows, stream.get());
      if (rep > 0) prefill_runs.push_back(ms_since(t));
    }
    const double prefill_ms = median(prefill_runs);
    // Prefill's model FLOP/s against the dense matmul rate measured above (one rank's share).
    const double flops = prefill_flops(llama.local_config(), bs, o.input_len);
    const double prefill_mfu = matmul_flops > 0 ? flops / (prefill_ms * 1e-3) / matmul_flops : 0.0;
    const double prefill_mfu_zeros = matmul_flops_zeros > 0 ? flops / (prefill_ms * 1e-3) / matmul_flops_zeros : 0.0;
    if (report && matmul_flops > 0)
      std::printf("prefill batch %lld x %lld: %.1f TFLOP/s, %.1f%% of the measured dense matmul rate (%.1f%% of its rate on zeros)\n",
                  static_cast<long long>(bs), static_cast<long long>(o.input_len), flops / (prefill_ms * 1e-3) / 1e12,
                  100.0 * prefill_mfu, 100.0 * prefill_mfu_zeros);
    for (bool graph : modes) {
      std::vector<int32_t> tokens = first;
      std::vector<double> steps, forwards;
      void* e0 = device == Device::kCuda ? cuda_runtime::create_event() : nullptr;
      void* e1 = device == Device::kCuda ? cuda_runtime::create_event() : nullptr;
      for (int64_t s = 0; s < o.output_len; ++s) {
        model::ForwardBatch dec;
        const int64_t pos = o.input_len + s;
        for (int64_t r = 0; r < bs; ++r) {
          dec.input_ids.push_back(tokens[static_cast<size_t>(r)]);
          dec.positions.push_back(static_cast<int32_t>(pos));
          dec.out_cache_loc.push_back(seqs.pages.slot(static_cast<uint64_t>(r), pos));
          seqs.pages.append_slots(static_cast<uint64_t>(r), 0, pos + 1, dec.kv_indices);
          dec.qo_indptr.push_back(static_cast<int32_t>(r + 1));
          dec.kv_indptr.push_back(static_cast<int32_t>(dec.kv_indices.size()));
          dec.logit_rows.push_back(static_cast<int32_t>(r));
        }
        auto t = Clock::now();
        if (e0) cuda_runtime::record_event(e0, stream.get().handle());
        if (graph) {  // greedy: the graph ends with its own argmax (what the engine does)
          tokens = runner->replay_greedy(dec);
          cuda_runtime::record_event(e1, stream.get().handle());
        } else {
          const TensorView logits = llama.forward(dec, kv);
          if (e1) cuda_runtime::record_event(e1, stream.get().handle());
          tokens = sampler.sample(logits, rows, stream.get());
        }
        if (s > 0) {  // the first step warms up
          steps.push_back(ms_since(t));
          if (e0) forwards.push_back(cuda_runtime::elapsed_ms(e0, e1));
        }
      }
      if (e0) {
        cuda_runtime::destroy_event(e0);
        cuda_runtime::destroy_event(e1);
      }
      const double step_ms = median(steps), forward_ms = median(forwards);
      // One GPU's floor: its shard of the weights and of the KV heads.
      const int64_t kv_read = bs * (ctx - o.output_len / 2) * model::kv_bytes_per_token(llama.local_config(), act);
      const double floor_ms = static_cast<double>(llama.weight_bytes_per_step(bs) + kv_read) / bandwidth * 1e3;
      if (report)
        std::printf("%6lld %6s %12.2f %14.0f %12.3f %10.3f %12.1f %12.3f %8.1f%%\n", static_cast<long long>(bs), graph ? "on" : "off",
                  prefill_ms, bs * o.input_len / (prefill_ms * 1e-3), step_ms, forward_ms, bs / (step_ms * 1e-3), floor_ms,
                  100.0 * floor_ms / step_ms);
      std::fflush(stdout);
      results.push_back({{"batch_size", bs}, {"cuda_graph", graph}, {"prefill_ms", prefill_ms},
                         {"prefill_tok_s", bs * o.input_len / (prefill_ms * 1e-3)}, {"prefill_mfu", prefill_mfu}, {"prefill_mfu_vs_zeros_rate", prefill_mfu_zeros}, {"decode_step_ms", step_ms}, {"forward_ms", forward_ms},
                         {"decode_tok_s", bs / (step_ms * 1e-3)}, {"floor_ms", floor_ms}, {"fraction_of_floor", floor_ms / step_ms},
                         {"graph_context", graph ? graph_context : 0}});
    }
    for (int64_t r = 0; r < bs; ++r) seqs.pages.release(static_cast<uint64_t>(r));
  }
  if (report && !o.json_path.empty()) {
    nlohmann::json doc = {{"model", o.model_path.empty() ? o.model_shape : o.model_path}, {"dtype", dtype_name(act)}, {"tp_size", o.tp_size}, {"custom_all_reduce", !o.disable_custom_all_reduce},
                          {"weight_bytes", llama.weight_bytes()}, {"copy_bandwidth_bytes_per_s", bandwidth}, {"matmul_flops_per_s", matmul_flops}, {"matmul_flops_per_s_zeros", matmul_flops_zeros},
                          {"input_len", o.input_len}, {"output_len", o.output_len}, {"results", results}};
    std::ofstream(o.json_path) << doc.dump(2) << "\n";
  }
  return 0;
}

}  // namespace aerie::launch
