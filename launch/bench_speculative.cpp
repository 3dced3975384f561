#include "launch/bench_speculative.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "actors/core/draft_worker_core.hpp"
#include "actors/core/scheduler_core.hpp"
#include "actors/core/target_worker_core.hpp"
#include "kernels/error.hpp"
#include "launch/bench_timing.hpp"
#include "kernels/staging.hpp"
#include "model/eagle_head.hpp"

namespace aerie::launch {

namespace {

using bench::Clock;
using bench::median;
using bench::ms_since;

std::vector<core::GenerationRequest> prompts(int64_t batch, int64_t len, int64_t vocab, int64_t max_new, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<core::GenerationRequest> reqs(static_cast<size_t>(batch));
  for (auto& r : reqs) {
    for (int64_t t = 0; t < len; ++t) r.prompt.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3)));
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    r.sampling.temperature = 0.0f;
  }
  return reqs;
}

// Runs iterations until every request has left its prompt (one token each).
// Runs iterations until the first decode-only one has run (every prompt is done then).
void prefill(core::SchedulerCore& s, core::TargetWorkerCore& w) {
  while (auto m = s.plan_next()) {
    const bool decode = m->mode == transport::ForwardMode::kVerify || m->mode == transport::ForwardMode::kDecode;
    const auto r = w.execute(*m);
    AERIE_CHECK(r.error.empty(), "batch " << m->step_id << " failed: " << r.error);
    s.on_result(r);
    if (decode) return;
  }
}

}  // namespace

int run_spec_bench(const SpecBenchOptions& o) {
  const Device device = o.device == "cuda" ? Device::kCuda : Device::kCpu;
  AERIE_CHECK(device == Device::kCpu || cuda_available(), "--device cuda: no usable CUDA device");
  const auto config = model::LlamaConfig::named_shape(o.model_shape);
  const DType wdt = device == Device::kCpu ? DType::kF32 : parse_dtype(o.dtype);
  OwnedStream stream(device);
  model::LlamaModel target(config, model::random_llama_weights(config, o.seed, device, wdt), stream.get(), wdt);
  const int64_t max_bs = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  const int64_t S = o.num_steps, rounds = o.rounds, max_new = 1 + (rounds + 4) * (S + 1) + 8;
  const int64_t per_request = o.input_len + max_new + S + 2;
  const auto shape = model::kv_shape_for_tokens(max_bs * per_request + 64, 1);
  model::KvCache kv(config, shape, device, wdt);
  nlohmann::json out = nlohmann::json::array();
  std::printf("%-11s %5s %12s %12s %12s %12s %9s %10s %10s %8s\n", "algorithm", "batch", "plain(ms)", "draft fw(ms)", "verify(ms)",
              "round(ms)", "verify/pl", "round/parts", "tok/round", "tok/s x");

  for (int64_t B : o.batch_sizes) {
    // The plain decode step, with CUDA graphs as Aerie runs it.
    double plain_ms = 0;
    {
      core::SchedulerCore sched(shape, {.max_running_requests = B, .chunked_prefill_size = 8192, .eos_token_ids = {}, .vocab_size = config.vocab_size,
                                        .context_length = config.max_position_embeddings});
      core::TargetWorkerCore worker(target, kv, {.max_batch = B, .cuda_graph_max_bs = device == Device::kCuda ? B : 0});
      auto reqs = prompts(B, o.input_len, config.vocab_size, max_new, o.seed + 1);
      for (size_t i = 0; i < reqs.size(); ++i) sched.submit(i, reqs[i]);
      prefill(sched, worker);
      std::vector<double> t;
      for (int64_t r = 0; r < rounds + 2; ++r) {
        auto m = sched.plan_next();
        AERIE_CHECK(m && m->mode == transport::ForwardMode::kDecode, "the plain run left its decode phase early ("
                                                                          << (m ? static_cast<int>(m->mode) : -1) << ")");
        const auto t0 = Clock::now();
        auto res = worker.execute(*m);
        if (r >= 2) t.push_back(ms_since(t0));
        AERIE_CHECK(res.error.empty(), "plain decode failed: " << res.error);
        sched.on_result(res);
      }
      plain_ms = median(t);
    }
    for (const auto& alg_name : o.algorithms) {
      const auto alg = core::parse_spec_algorithm(alg_name);
      std::unique_ptr<model::EagleHead> head;
      std::unique_ptr<model::LlamaModel> standalone;
      model::LlamaConfig draft_config = config;
      if (alg == core::SpecAlgorithm::kStandalone) {  // the target itself as the draft
        standalone = std::make_unique<model::LlamaModel>(config, model::random_llama_weights(config, o.seed, device, wdt), stream.get(), wdt);
      } else {
        const auto kind = alg == core::SpecAlgorithm::kEagle3 ? model::EagleKind::kEagle3 : model::EagleKind::kEagle1;
        auto hc = model::EagleHeadConfig::for_target(kind, config);
        draft_config = hc.layer;
        head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, o.seed, device, wdt), target);
      }
      model::KvCache draft_kv(draft_config, shape, device, wdt);
      core::DraftWorkerCore draft(alg, std::move(head), std::move(standalone), draft_kv, target, B);
      core::SchedulerCore sched(shape, {.max_running_requests = B, .chunked_prefill_size = 8192, .eos_token_ids = {}, .vocab_size = config.vocab_size,
                                        .context_length = config.max_position_embeddings, .spec_steps = S});
      core::TargetWorkerCore worker(target, kv, {.max_batch = B, .cuda_graph_max_bs = 0});
      worker.enable_speculation(std::make_unique<core::SpecWorkerCore>(target, kv, draft, B));
      auto reqs = prompts(B, o.input_len, config.vocab_size, max_new, o.seed + 1);
      for (size_t i = 0; i < reqs.size(); ++i) sched.submit(i, reqs[i]);
      prefill(sched, worker);
      std::vector<double> round_t, verify_t, draft_t;
      int64_t committed = 0, requests_verified = 0;
      for (int64_t r = 0; r < rounds + 2; ++r) {
        auto m = sched.plan_next();
        AERIE_CHECK(m && m->mode == transport::ForwardMode::kVerify, "the speculative run left its decode phase early");
        auto t0 = Clock::now();
        auto res = worker.execute(*m);
        const double round_ms = ms_since(t0);
        AERIE_CHECK(res.error.empty(), res.error);
        if (r >= 2) {
          round_t.push_back(round_ms);
          for (int32_t c : res.token_counts) committed += c, ++requests_verified;
        }
        sched.on_result(res);
      }
      // The parts alone, on the next planned verify (its KV writes are redone by any later round).
      auto m = sched.plan_next();
      AERIE_CHECK(m && m->mode == transport::ForwardMode::kVerify, "no verify to take apart");
      std::vector<core::DraftWorkerCore::ProposeSeq> ps;
      for (size_t s = 0; s < m->seq_rids.size(); ++s) {
        std::vector<int32_t> ctx(m->kv_indices.begin() + m->kv_indptr[s], m->kv_indices.begin() + m->kv_indptr[s + 1]);
        ctx.push_back(m->extra_slots[s]);
        ps.push_back({.rid = m->seq_rids[s], .first_position = m->positions[static_cast<size_t>(m->qo_indptr[s])] + (draft.eagle() ? 0 : 1),
                      .context = ctx});
      }
      model::ForwardBatch vb;
      vb.input_ids = m->input_ids, vb.positions = m->positions, vb.out_cache_loc = m->out_cache_loc;
      vb.qo_indptr = m->qo_indptr, vb.kv_indptr = m->kv_indptr, vb.kv_indices = m->kv_indices;
      for (int64_t i = 0; i < static_cast<int64_t>(vb.input_ids.size()); ++i) vb.logit_rows.push_back(static_cast<int32_t>(i));
      for (int rep = 0; rep < 7; ++rep) {
        auto t0 = Clock::now();
        if (S > 1) draft.propose_chain(ps, S);
        if (rep >= 2 && S > 1) draft_t.push_back(ms_since(t0) / static_cast<double>(S - 1));
        t0 = Clock::now();
        target.forward(vb, kv);
        synchronize(stream.get());
        if (rep >= 2) verify_t.push_back(ms_since(t0));
      }
      const double round_ms = median(round_t), verify_ms = median(verify_t), draft_ms = median(draft_t);
      const double tok_per_round = requests_verified ? static_cast<double>(committed) / static_cast<double>(requests_verified) : 0.0;
      // Decode throughput against plain decoding: tokens per request per ms.
      const double speedup = (tok_per_round / round_ms) / (1.0 / plain_ms);
      const double parts = verify_ms + draft_ms * static_cast<double>(S - 1);
      std::printf("%-11s %5lld %12.3f %12.3f %12.3f %12.3f %9.2f %10.2f %10.2f %8.2f\n", alg_name.c_str(), static_cast<long long>(B), plain_ms,
                  draft_ms, verify_ms, round_ms, verify_ms / plain_ms, round_ms / parts, tok_per_round, speedup);
      out.push_back({{"algorithm", alg_name}, {"batch", B}, {"num_steps", S}, {"num_draft_tokens", S + 1}, {"plain_step_ms", plain_ms},
                     {"draft_forward_ms", draft_ms}, {"verify_ms", verify_ms}, {"round_ms", round_ms}, {"verify_over_plain", verify_ms / plain_ms},
                     {"round_over_parts", round_ms / parts}, {"tokens_per_round", tok_per_round},
                     {"decode_tok_s", tok_per_round * static_cast<double>(B) / round_ms * 1e3},
                     {"plain_decode_tok_s", static_cast<double>(B) / plain_ms * 1e3}, {"speedup_vs_plain", speedup}});
      std::fflush(stdout);
    }
  }
  if (!o.json_path.empty()) std::ofstream(o.json_path) << out.dump(2) << "\n";
  return 0;
}

}  // namespace aerie::launch
