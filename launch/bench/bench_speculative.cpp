#include "launch/bench/bench_speculative.hpp"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <tuple>
#include <nlohmann/json.hpp>
#include <random>

#include "spec/draft_worker_core.hpp"
#include "spec/graph_times.hpp"
#include "spec/verify_batch.hpp"
#include "actors/actor_pool.hpp"
#include "actors/draft_worker_actor.hpp"
#include "actors/messages.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/matmul.hpp"
#include "spec/draft_tree.hpp"
#include "actors/core/scheduler_core.hpp"
#include "actors/core/target_worker_core.hpp"
#include "kernels/error.hpp"
#include "launch/bench/bench_timing.hpp"
#include "launch/tp_context.hpp"
#include "kernels/staging.hpp"
#include "launch/draft_builder.hpp"

namespace aerie::launch {

namespace {

using bench::Clock;
using bench::mean;
using bench::median;
using bench::ms_since;

std::vector<core::GenerationRequest> prompts(int64_t batch, int64_t len, int64_t vocab, int64_t max_new, uint64_t seed, float temperature) {
  std::mt19937_64 rng(seed);
  std::vector<core::GenerationRequest> reqs(static_cast<size_t>(batch));
  for (auto& r : reqs) {
    for (int64_t t = 0; t < len; ++t) r.prompt.push_back(static_cast<int32_t>(3 + rng() % static_cast<uint64_t>(vocab - 3)));
    r.max_new_tokens = max_new;
    r.ignore_eos = true;
    r.sampling.temperature = temperature;
    r.sampling.seed = static_cast<int64_t>(rng() >> 1);
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

// Each label's device time per round (or step) over `rounds` timed ones.
nlohmann::json graph_ms_per(const std::map<std::string, spec::GraphTime>& times, size_t rounds) {
  nlohmann::json out = nlohmann::json::object();
  for (const auto& [label, t] : times) out[label] = t.ms / static_cast<double>(std::max<size_t>(1, rounds));
  return out;
}

}  // namespace

int run_spec_bench(const SpecBenchOptions& o) {
  const Device device = o.device == "cuda" ? Device::kCuda : Device::kCpu;
  const auto config = model::LlamaConfig::named_shape(o.model_shape);
  model::TpShard::check_divisible(config, static_cast<int>(o.tp_size), "the model");
  TpContext tp = make_tp_context(nullptr, nullptr, device, o.tp_size);
  const bool report = tp.rank0();
  const bool replicated_head = o.draft_tp_size == 1 && o.tp_size > 1;
  const DType wdt = device == Device::kCpu ? DType::kF32 : parse_dtype(o.dtype);
  OwnedStream stream(device);
  model::LlamaModel target(config, model::random_llama_weights(config, o.seed, device, wdt, 0.02f, {}, tp.shard), stream.get(), wdt, tp.tp);
  const int64_t max_bs = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  const int64_t S = o.num_steps, K = o.topk, rounds = o.rounds, max_new = 1 + (rounds + 4) * (S + 1) + 8;
  const int64_t N = K > 1 ? (o.draft_tokens > 0 ? o.draft_tokens : S * K + 1) : S + 1;
  AERIE_CHECK(N >= 2 && N <= 1 + K + (S - 1) * K * K, "--speculative-num-draft-tokens " << N << " does not fit steps " << S << " and topk " << K);
  const int64_t per_request = o.input_len + max_new + spec::verify_reserve(S, K, N);
  const int64_t graph_context = std::max(per_request, o.graph_context);
  const bool verify_graphs = o.verify_graphs && device == Device::kCuda;
  const int64_t eagle3_vocab = o.draft_vocab > 0 ? std::min(o.draft_vocab, config.vocab_size) : config.vocab_size;
  if (o.gemv_max_rows >= 0) kernels::set_gemv_max_rows(o.gemv_max_rows);
  caf::actor_system_config actor_cfg;
  actors::register_message_types(actor_cfg);
  actors::configure_actor_pool(actor_cfg, device);
  caf::actor_system actor_sys(actor_cfg);
  const auto shape = model::kv_shape_for_tokens(max_bs * per_request + 64, 1);
  model::KvCache kv(target.local_config(), shape, device, wdt);
  nlohmann::json out = nlohmann::json::array();
  if (report) {
    std::printf("steps %lld, topk %lld, %lld tokens per verify, temperature %.2f, draft %s, verify %s, GEMV up to %d rows, EAGLE3 draft vocab %lld, tp %lld%s\n",
                static_cast<long long>(S), static_cast<long long>(K), static_cast<long long>(N), static_cast<double>(o.temperature), o.draft_actor ? "behind its actor" : "in-process",
                verify_graphs ? "graphs" : "eager", kernels::gemv_max_rows(), static_cast<long long>(eagle3_vocab),
                static_cast<long long>(o.tp_size), o.tp_size == 1 ? "" : replicated_head ? " (EAGLE heads whole on every rank)" : " (heads sharded)");
    if (device == Device::kCpu) std::printf("CPU: EAGLE heads' weights in %s, products by %s\n", o.cpu_head_dtype.c_str(), kernels::cpu_gemm_name());
    std::printf("%-16s %5s %10s %10s %10s %10s %10s %9s %11s %9s %8s\n", "algorithm", "batch", "plain(ms)", "draft(ms)", "extend(ms)",
                "verify(ms)", "round(ms)", "verify/pl", "round/parts", "tok/round", "tok/s x");
  }

  for (int64_t B : o.batch_sizes) {
    // The plain decode step, with CUDA graphs as Aerie runs it.
    double plain_ms = 0, plain_mean_ms = 0;
    nlohmann::json plain_graph_ms;
    {
      core::SchedulerCore sched(shape, {.max_running_requests = B, .chunked_prefill_size = 8192, .eos_token_ids = {}, .vocab_size = config.vocab_size,
                                        .context_length = config.max_position_embeddings});
      core::TargetWorkerCore worker(target, kv, {.max_batch = B, .cuda_graph_max_bs = device == Device::kCuda ? B : 0});
      auto reqs = prompts(B, o.input_len, config.vocab_size, max_new, o.seed + 1, o.temperature);
      for (size_t i = 0; i < reqs.size(); ++i) sched.submit(i, reqs[i]);
      prefill(sched, worker);
      std::vector<double> t;
      // A step is a whole iteration as the engine runs it: plan, execute, commit.
      for (int64_t r = 0; r < rounds + 2; ++r) {
        if (r == 2) spec::GraphTimes::enable(true);
        const auto t0 = Clock::now();
        auto m = sched.plan_next();
        AERIE_CHECK(m && m->mode == transport::ForwardMode::kDecode, "the plain run left its decode phase early ("
                                                                          << (m ? static_cast<int>(m->mode) : -1) << ")");
        auto res = worker.execute(*m);
        AERIE_CHECK(res.error.empty(), "plain decode failed: " << res.error);
        sched.on_result(res);
        if (r >= 2) t.push_back(ms_since(t0));
      }
      plain_ms = median(t);
      plain_mean_ms = mean(t);
      spec::GraphTimes::enable(false);
      plain_graph_ms = graph_ms_per(spec::GraphTimes::collect(), t.size());
    }
    std::vector<std::tuple<std::string, bool, bool>> variants;  // (algorithm, chain runner, fp8 head)
    for (const auto& alg_name : o.algorithms)
      for (const auto& q : o.draft_quantizations) {
        const bool fp8 = q == "fp8";
        if (fp8 && alg_name == "STANDALONE") continue;  // fp8 is for heads
        if (o.draft_chain != "runner") variants.emplace_back(alg_name, false, fp8);
        if (o.draft_chain != "steps") variants.emplace_back(alg_name, true, fp8);
      }
    for (const auto& [alg_name, draft_runner, fp8] : variants) {
      // The draft as a launch builds it (launch/draft_builder.hpp): STANDALONE is the target
      // itself (its seed), EAGLE / EAGLE3 a random head shaped for the target.
      const DraftChoice choice{.algorithm = spec::parse_spec_algorithm(alg_name), .path = {}, .target_path = {}, .token_map = {},
                               .dummy = true, .seed = o.seed, .replicated = replicated_head,
                               .draft_vocab = eagle3_vocab == config.vocab_size ? 0 : eagle3_vocab,
                               .quantization = fp8 ? model::DraftQuantization::kFp8 : model::DraftQuantization::kNone};
      const DraftShape draft_shape = resolve_draft(choice, config);
      const DType head_wdt = device == Device::kCpu && draft_shape.head ? parse_dtype(o.cpu_head_dtype) : wdt;
      DraftModel draft_model = load_draft(choice, draft_shape, target, tp.shard, tp.tp, device, head_wdt, wdt, stream.get());
      model::KvCache draft_kv(draft_local_config(draft_shape, tp.shard), shape, device, wdt);
      auto draft = std::make_shared<spec::DraftWorkerCore>(choice.algorithm, std::move(draft_model.head), std::move(draft_model.model),
                                                           draft_kv, target, B, K);
      if (draft_runner) draft->enable_draft_runners(S, B, graph_context, device == Device::kCuda);
      const std::string label =
          alg_name + (draft_runner ? (device == Device::kCuda ? "+graph" : (K == 1 ? "+chain" : "+tree")) : "") + (fp8 ? "+fp8" : "");
      core::SchedulerCore sched(shape, {.max_running_requests = B, .chunked_prefill_size = 8192, .eos_token_ids = {}, .vocab_size = config.vocab_size,
                                        .context_length = config.max_position_embeddings, .spec_steps = S, .spec_topk = K, .spec_draft_tokens = N});
      core::TargetWorkerCore worker(target, kv, {.max_batch = B, .cuda_graph_max_bs = 0});
      caf::actor draft_actor;
      std::unique_ptr<actors::DraftWorkerClient> client;
      spec::DraftPort* port = draft.get();
      if (o.draft_actor) {
        draft_actor = actor_sys.spawn<caf::detached>(actors::draft_worker_actor, draft, device == Device::kCuda ? cuda_runtime::current_device() : -1);
        client = std::make_unique<actors::DraftWorkerClient>(actor_sys, draft_actor, draft->info());
        port = client.get();
      }
      auto spec_core = std::make_unique<core::SpecWorkerCore>(
          target, kv, *port, B,
          core::VerifyGraphOptions{.max_bs = verify_graphs ? B : 0, .tokens_per_request = N, .max_context = graph_context, .tree = K > 1});
      core::SpecWorkerCore& spec = *spec_core;
      worker.enable_speculation(std::move(spec_core));
      auto reqs = prompts(B, o.input_len, config.vocab_size, max_new, o.seed + 1, o.temperature);
      for (size_t i = 0; i < reqs.size(); ++i) sched.submit(i, reqs[i]);
      prefill(sched, worker);
      std::vector<double> round_t, verify_t, draft_t, extend_t;
      int64_t committed = 0, requests_verified = 0;
      for (int64_t r = 0; r < rounds + 2; ++r) {
        // A round as the engine runs it: plan, execute (its draft extend may still run on
        // the GPU behind the DraftWorker while the next round is planned), commit.
        if (r == 2) {
          spec.reset_stage_times();
          spec::GraphTimes::enable(true);
        }
        auto t0 = Clock::now();
        auto m = sched.plan_next();
        AERIE_CHECK(m && m->mode == transport::ForwardMode::kVerify, "the speculative run left its decode phase early");
        auto res = worker.execute(*m);
        AERIE_CHECK(res.error.empty(), res.error);
        sched.on_result(res);
        const double round_ms = ms_since(t0);
        if (r >= 2) {
          round_t.push_back(round_ms);
          for (int32_t c : res.token_counts) committed += c, ++requests_verified;
        }
      }
      const core::SpecStageTimes stages = spec.stage_times();
      port->flush();  // the last round's draft extend may still run behind the actor
      spec::GraphTimes::enable(false);
      const nlohmann::json round_graph_ms = graph_ms_per(spec::GraphTimes::collect(), round_t.size());
      // The parts alone, on the next planned verify (its KV writes are redone by any later round).
      auto m = sched.plan_next();
      AERIE_CHECK(m && m->mode == transport::ForwardMode::kVerify, "no verify to take apart");
      std::vector<spec::DraftProposeSeq> ps;
      std::vector<std::vector<int32_t>> full;
      std::vector<int32_t> roots;
      for (size_t s = 0; s < m->seq_rids.size(); ++s) {
        full.emplace_back(m->kv_indices.begin() + m->kv_indptr[s], m->kv_indices.begin() + m->kv_indptr[s + 1]);
        roots.push_back(m->positions[static_cast<size_t>(m->qo_indptr[s])]);
        ps.push_back({.rid = m->seq_rids[s], .first_position = roots.back() + (draft->eagle() ? 0 : 1), .context = full.back(),
                      .root_token = m->input_ids[static_cast<size_t>(m->qo_indptr[s])]});
      }
      for (int rep = 0; rep < 7; ++rep) {
        auto t0 = Clock::now();
        const auto trees = draft->propose(ps, S, N);
        if (rep >= 2 && S > 1) draft_t.push_back(ms_since(t0) / static_cast<double>(S - 1));
        std::vector<spec::VerifySequence> vs;
        for (size_t s = 0; s < trees.size(); ++s) vs.push_back({.tree = &trees[s], .root_position = roots[s], .slots = &full[s]});
        const model::ForwardBatch vb = spec::verify_forward_batch(vs, K > 1);
        t0 = Clock::now();
        spec.verify_forward(vb);  // as the engine verifies: a replayed graph where one fits
        synchronize(stream.get());
        if (rep >= 2) verify_t.push_back(ms_since(t0));
        // The draft extend over S + 1 committed tokens (every draft accepted: the longest).
        std::vector<spec::DraftExtendSeq> ext;
        int32_t row = 0;
        for (size_t s = 0; s < trees.size(); ++s) {
          spec::DraftExtendSeq e{.rid = ps[s].rid, .tokens = {}, .first_position = roots[s] + (draft->eagle() ? 0 : 1), .slots = {}, .context = {},
                                 .hidden_rows = {}, .keep = true};
          for (int64_t i = 0; i <= S; ++i) {
            e.tokens.push_back(trees[s].tokens[static_cast<size_t>(std::min<int64_t>(i + 1, trees[s].size() - 1))]);
            e.hidden_rows.push_back(row + static_cast<int32_t>(std::min<int64_t>(i, trees[s].size() - 1)));
          }
          if (!draft->eagle()) e.hidden_rows.clear();
          e.slots.assign(full[s].begin() + e.first_position, full[s].begin() + e.first_position + S + 1);
          e.context.assign(full[s].begin(), full[s].begin() + e.first_position + S + 1);
          row += static_cast<int32_t>(trees[s].size());
          ext.push_back(std::move(e));
        }
        t0 = Clock::now();
        draft->extend(ext, draft->eagle() ? target.captured_hidden() : TensorView());
        synchronize(stream.get());  // with the chain runner the extend only enqueues
        if (rep >= 2) extend_t.push_back(ms_since(t0));
      }
      worker.enable_speculation(nullptr);
      if (client) {
        client.reset();
        caf::anon_send_exit(draft_actor, caf::exit_reason::user_shutdown);
      }
      const double round_ms = median(round_t), verify_ms = median(verify_t), draft_ms = median(draft_t), extend_ms = median(extend_t);
      const double tok_per_round = requests_verified ? static_cast<double>(committed) / static_cast<double>(requests_verified) : 0.0;
      // Decode throughput against plain decoding: tokens per request per ms.
      const double speedup = (tok_per_round / round_ms) / (1.0 / plain_ms);
      const double parts = verify_ms + draft_ms * static_cast<double>(S - 1) + extend_ms;
      if (report)
        std::printf("%-16s %5lld %10.3f %10.3f %10.3f %10.3f %10.3f %9.2f %11.2f %9.2f %8.2f\n", label.c_str(), static_cast<long long>(B),
                  plain_ms, draft_ms, extend_ms, verify_ms, round_ms, verify_ms / plain_ms, round_ms / parts, tok_per_round, speedup);
      // Where a round's wall time goes on the worker's thread (means over the timed rounds);
      // "scheduler" is the rest: planning the batch and committing its result.
      const double n_st = std::max<double>(1.0, static_cast<double>(stages.rounds));
      const double mean_round = mean(round_t);
      const nlohmann::json stage_ms = {{"propose", stages.propose_ms / n_st}, {"verify", stages.verify_ms / n_st},
                                       {"accept", stages.accept_ms / n_st}, {"send_extend", stages.extend_ms / n_st},
                                       {"scheduler", mean_round - (stages.propose_ms + stages.verify_ms + stages.accept_ms +
                                                                   stages.extend_ms) / n_st}};
      if (report)
        std::printf("%22s stages (ms, mean of %lld): propose %.3f  verify %.3f  accept %.3f  send-extend %.3f  scheduler %.3f\n",
                  "", static_cast<long long>(stages.rounds), stage_ms["propose"].get<double>(),
                  stage_ms["verify"].get<double>(), stage_ms["accept"].get<double>(), stage_ms["send_extend"].get<double>(),
                  stage_ms["scheduler"].get<double>());
      // The device's time in the runners' graphs, a round's and a plain step's: the rest of
      // the wall time the device was idle or ran work outside them (uploads, copies back).
      double in_graphs = 0.0, plain_in_graphs = 0.0;
      for (const auto& [label, ms] : round_graph_ms.items()) in_graphs += ms.get<double>();
      for (const auto& [label, ms] : plain_graph_ms.items()) plain_in_graphs += ms.get<double>();
      if (report) {
        std::printf("%22s device in graphs (ms a round):", "");
        for (const auto& [label, ms] : round_graph_ms.items()) std::printf("  %s %.3f", label.c_str(), ms.get<double>());
        std::printf("  | outside %.3f (a plain step: in graphs %.3f, outside %.3f)\n", mean_round - in_graphs, plain_in_graphs,
                    plain_mean_ms - plain_in_graphs);
      }
      out.push_back({{"algorithm", alg_name}, {"draft_runner", draft_runner}, {"draft_fp8", fp8}, {"draft_graphs", draft_runner && device == Device::kCuda}, {"batch", B}, {"tp_size", o.tp_size}, {"draft_replicated", replicated_head}, {"num_steps", S}, {"topk", K}, {"num_draft_tokens", N}, {"temperature", o.temperature}, {"draft_actor", o.draft_actor}, {"verify_graphs", verify_graphs},
                     {"eagle3_draft_vocab", eagle3_vocab}, {"device", device == Device::kCpu ? "cpu" : "cuda"}, {"cpu_head_dtype", device == Device::kCpu ? o.cpu_head_dtype : std::string()},
                     {"gemv_max_rows", kernels::gemv_max_rows()}, {"plain_step_ms", plain_ms},
                     {"draft_forward_ms", draft_ms}, {"draft_extend_ms", extend_ms}, {"verify_ms", verify_ms}, {"round_ms", round_ms}, {"verify_over_plain", verify_ms / plain_ms},
                     {"round_over_parts", round_ms / parts}, {"tokens_per_round", tok_per_round},
                     {"decode_tok_s", tok_per_round * static_cast<double>(B) / round_ms * 1e3},
                     {"plain_decode_tok_s", static_cast<double>(B) / plain_ms * 1e3}, {"speedup_vs_plain", speedup},
                     {"round_stages_ms", stage_ms}, {"round_graph_ms", round_graph_ms}, {"round_outside_graphs_ms", mean_round - in_graphs},
                     {"plain_graph_ms", plain_graph_ms}, {"plain_outside_graphs_ms", plain_mean_ms - plain_in_graphs}});
      std::fflush(stdout);
    }
  }
  if (report && !o.json_path.empty()) std::ofstream(o.json_path) << out.dump(2) << "\n";
  return 0;
}

}  // namespace aerie::launch
