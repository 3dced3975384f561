// Speculative decoding through the whole actor path in one process (CPU): greedy output
// with speculation equals greedy output without it, token for token, for EAGLE, EAGLE3
// and STANDALONE, chain and tree drafting, at batch sizes 1-64 with mixed prompt lengths, chunked prefill, pages of
// 1 and 4 tokens and a pool tight enough to preempt; STANDALONE with the target itself as
// the draft accepts every draft token; with temperature > 0 the output distribution
// matches plain sampling (chi-square over many seeded requests).
#include <gtest/gtest.h>

#include <array>
#include <filesystem>
#include <fstream>
#include <cmath>
#include <iostream>
#include <map>

#include "kernels/batch_invariant.hpp"
#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/error.hpp"
#include "launch/deployment.hpp"
#include "launch/deployment_flags.hpp"
#include "tests/launch/random_requests.hpp"

using namespace aerie;

namespace {

std::vector<core::GenerationRequest> mixed(int n, uint32_t seed, int64_t max_new) {
  auto reqs = aerie::testing::random_requests(n, seed, 40, 1, max_new);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].ignore_eos = i % 3 != 0;  // some may stop at EOS
  return reqs;
}

// Drafting shapes under test: chains of 1, 3 and 5 tokens, and trees (steps, topk, nodes).
struct DraftShape {
  int64_t steps = 1, topk = 1, draft_tokens = 0;
};
const DraftShape kShapes[] = {{1, 1, 0}, {3, 1, 0}, {5, 1, 0}, {3, 2, 6}, {4, 4, 12}};

launch::DeploymentOptions options(const std::string& algorithm, DraftShape shape, int64_t pool, int64_t page) {
  launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny", .max_total_tokens = pool, .page_size = page,
                              .max_running_requests = 64, .chunked_prefill_size = 24};
  o.speculative_algorithm = algorithm;
  o.speculative_num_steps = shape.steps;
  o.speculative_eagle_topk = shape.topk;
  o.speculative_num_draft_tokens = shape.draft_tokens;
  if (!algorithm.empty()) launch::check_deployment_flags(o);
  return o;
}

std::vector<launch::RequestOutcome> run(const launch::DeploymentOptions& o, const std::vector<core::GenerationRequest>& reqs) {
  auto world = parallel::make_single_process_group();
  launch::Deployment d(o, *world);
  return d.run(reqs);
}

}  // namespace

TEST(Speculative, GreedyOutputEqualsPlainGreedyForEveryAlgorithm) {
  for (int batch : {1, 7, 64}) {
    const auto reqs = mixed(batch, 100 + static_cast<uint32_t>(batch), 20);
    const auto plain = run(options("", {}, 8192, 1), reqs);
    for (const std::string alg : {"EAGLE", "EAGLE3", "STANDALONE"})
      for (const DraftShape shape : kShapes)
        for (auto [pool, page] : {std::pair<int64_t, int64_t>{8192, 1}, {8192, 4}, {400, 4}}) {
          // On the CPU the draft runs in-process by default; one pool layout takes the
          // DraftWorker actor (as on a GPU), so both hand-offs meet every algorithm and shape.
          auto o = options(alg, shape, pool, page);
          if (page == 1) o.draft_worker = "actor";
          const auto spec = run(o, reqs);
          ASSERT_EQ(spec.size(), reqs.size());
          for (size_t i = 0; i < reqs.size(); ++i) {
            ASSERT_TRUE(spec[i].error.empty()) << alg << ": " << spec[i].error;
            EXPECT_EQ(spec[i].result.output_ids, plain[i].result.output_ids)
                << alg << " draft " << o.draft_worker << " steps " << shape.steps << " topk " << shape.topk << " nodes " << shape.draft_tokens << " pool " << pool << " page " << page << " batch " << batch << " request " << i;
            EXPECT_EQ(spec[i].result.finish_reason, plain[i].result.finish_reason);
            EXPECT_GE(spec[i].result.spec_verify_ct, 0);
          }
        }
  }
}

// --speculative-draft-model-quantization fp8: the heads' products read FP8 weights; the
// output is still the target's greedy output, chains and trees, with a tight pool too.
TEST(Speculative, Fp8DraftHeadsKeepGreedyOutput) {
  const auto reqs = mixed(7, 417, 20);
  const auto plain = run(options("", {}, 8192, 1), reqs);
  for (const std::string alg : {"EAGLE", "EAGLE3"})
    for (const DraftShape shape : {DraftShape{3, 1, 0}, DraftShape{3, 2, 6}})
      for (int64_t pool : {8192, 400}) {
        auto o = options(alg, shape, pool, 4);
        o.speculative_draft_model_quantization = "fp8";
        const auto spec = run(o, reqs);
        for (size_t i = 0; i < reqs.size(); ++i) {
          ASSERT_TRUE(spec[i].error.empty()) << alg << ": " << spec[i].error;
          EXPECT_EQ(spec[i].result.output_ids, plain[i].result.output_ids) << alg << " topk " << shape.topk << " pool " << pool << " request " << i;
        }
      }
  auto standalone = options("STANDALONE", {3, 1, 0}, 8192, 1);
  standalone.speculative_draft_model_quantization = "fp8";
  try {
    (void)run(standalone, reqs);
    FAIL() << "a STANDALONE draft was built with fp8 weights";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("is for EAGLE and EAGLE3 heads"), std::string::npos) << e.what();
  }
}

// --speculative-draft-model-quantization w8a8_int8 (CPU, AMX): the heads' products as Q8_0 blocks
// over int8 activations; the output is still the target's greedy output, chains and trees.
TEST(Speculative, W8a8Int8DraftHeadsKeepGreedyOutput) {
  if (!kernels::cpu::amx_int8_available()) GTEST_SKIP() << "w8a8_int8 draft heads need AMX-INT8, which this CPU does not offer";
  const auto reqs = mixed(7, 417, 20);
  const auto plain = run(options("", {}, 8192, 1), reqs);
  for (const std::string alg : {"EAGLE", "EAGLE3"})
    for (const DraftShape shape : {DraftShape{3, 1, 0}, DraftShape{3, 2, 6}}) {
      auto o = options(alg, shape, 400, 4);
      o.speculative_draft_model_quantization = "w8a8_int8";
      const auto spec = run(o, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(spec[i].error.empty()) << alg << ": " << spec[i].error;
        EXPECT_EQ(spec[i].result.output_ids, plain[i].result.output_ids) << alg << " topk " << shape.topk << " request " << i;
      }
    }
}

// Overlap scheduling (on by default) plans each verify before the last one's result; with it
// off, one batch is in flight. Greedy and seeded sampled requests, some stopping at EOS, with
// a pool roomy and tight enough to preempt: the same tokens either way. (Sampled speculative
// tokens depend on where a request's verify rounds fall, which a preemption moves, with
// overlap off as well: with the tight pool only the greedy requests are compared.)
TEST(Speculative, OverlapOnAndOffGiveTheSameTokens) {
  auto reqs = mixed(24, 911, 24);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = i % 2 ? 0.8f : 0.0f;
    reqs[i].sampling.seed = static_cast<int64_t>(i);
  }
  for (const auto& [alg, shape] : {std::pair<std::string, DraftShape>{"EAGLE3", {3, 1, 0}}, {"EAGLE", {3, 2, 6}}, {"STANDALONE", {5, 1, 0}}})
    for (int64_t pool : {8192, 400}) {
      auto on = options(alg, shape, pool, 4), off = on;
      on.enable_spec_overlap = true;
      off.disable_overlap_schedule = true;
      const auto a = run(on, reqs), b = run(off, reqs);
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(a[i].error.empty() && b[i].error.empty()) << a[i].error << b[i].error;
        if (pool < 8192 && reqs[i].sampling.temperature > 0) continue;
        EXPECT_EQ(a[i].result.output_ids, b[i].result.output_ids) << alg << " pool " << pool << " request " << i;
        EXPECT_EQ(a[i].result.finish_reason, b[i].result.finish_reason) << alg << " pool " << pool << " request " << i;
      }
    }
}

// Drafting ahead (--draft-ahead on; on CUDA by default): the next round's chain drafted right
// after each verify into scratch slots, its tokens read as future ids by the next verify, gives
// the tokens that drafting each round when asked gives, greedy and seeded sampled requests,
// EAGLE3 and EAGLE chains, the draft in-process and behind its actor, with spec overlap, and
// with a pool tight enough to preempt (requests re-prefilled, so their chains drafted ahead
// are stale).
TEST(Speculative, DraftingAheadGivesTheSameTokens) {
  auto reqs = mixed(24, 913, 24);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = i % 2 ? 0.8f : 0.0f;
    reqs[i].sampling.seed = static_cast<int64_t>(i);
  }
  const auto plain = run(options("", {}, 8192, 4), reqs);
  for (const auto& [alg, shape] : {std::pair<std::string, DraftShape>{"EAGLE3", {3, 1, 0}}, {"EAGLE", {5, 1, 0}}})
    for (int64_t pool : {8192, 400})
      for (const std::string placement : {"in-process", "actor"})
        for (bool overlap : {false, true}) {
          auto on = options(alg, shape, pool, 4), off = on;
          on.draft_ahead = "on";
          off.draft_ahead = "off";
          on.draft_worker = off.draft_worker = placement;
          on.enable_spec_overlap = off.enable_spec_overlap = overlap;
          const auto a = run(on, reqs), b = run(off, reqs);
          const std::string what = alg + " pool " + std::to_string(pool) + " " + placement + (overlap ? " spec overlap" : "");
          for (size_t i = 0; i < reqs.size(); ++i) {
            ASSERT_TRUE(a[i].error.empty() && b[i].error.empty()) << what << ": " << a[i].error << b[i].error;
            EXPECT_EQ(a[i].result.output_ids, b[i].result.output_ids) << what << " request " << i;
            EXPECT_EQ(a[i].result.finish_reason, b[i].result.finish_reason) << what << " request " << i;
            if (reqs[i].sampling.temperature == 0) {
              EXPECT_EQ(a[i].result.output_ids, plain[i].result.output_ids) << what << " request " << i;
            }
          }
        }
}

// One request at a time (--max-running-requests 1), drafting ahead: after each prompt the
// first chain is drafted ahead too, so every verify but the very first (before any verify has
// said how long the chains are) reads its chain on the device, in-process and behind the
// DraftWorker actor, and the outputs are plain greedy decoding's.
TEST(Speculative, OneRequestAtATimeReadsEveryChainButTheFirstOnTheDevice) {
  auto reqs = mixed(6, 515, 20);
  for (auto& r : reqs) r.sampling.temperature = 0.0f;
  auto plain_o = options("", {}, 8192, 4);
  plain_o.max_running_requests = 1;
  const auto plain = run(plain_o, reqs);
  for (const std::string placement : {"in-process", "actor"}) {
    auto o = options("EAGLE3", {3, 1, 0}, 8192, 4);
    o.max_running_requests = 1;
    o.draft_ahead = "on";
    o.draft_worker = placement;
    auto world = parallel::make_single_process_group();
    launch::Deployment d(o, *world);
    const auto out = d.run(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(out[i].error.empty()) << placement << ": " << out[i].error;
      EXPECT_EQ(out[i].result.output_ids, plain[i].result.output_ids) << placement << " request " << i;
    }
    const auto stages = d.spec_stage_times();
    ASSERT_TRUE(stages) << placement;
    EXPECT_GT(stages->rounds, static_cast<int64_t>(reqs.size())) << placement;
    EXPECT_EQ(stages->chains_drafted_ahead, stages->rounds - 1) << placement;
    // One request at a time: every verify but each request's first follows a verify.
    EXPECT_LE(stages->turnarounds, stages->rounds - 1) << placement;
    EXPECT_GE(stages->turnarounds, stages->rounds - static_cast<int64_t>(reqs.size())) << placement;
    EXPECT_GT(stages->turnaround_ms, 0.0) << placement;
    // Each turnaround is counted in one length bucket, and none is longer than the longest.
    int64_t counted = 0;
    for (const int64_t c : stages->turnaround_buckets) counted += c;
    EXPECT_EQ(counted, stages->turnarounds) << placement;
    EXPECT_GE(stages->turnaround_max_ms * static_cast<double>(stages->turnarounds), stages->turnaround_ms) << placement;
  }
}

// The turnaround buckets: [0, 25 us), [25, 50), ... doubling to [800 us, 1.6 ms), then longer.
TEST(Speculative, TurnaroundsAreCountedByLength) {
  core::SpecStageTimes t;
  for (const double ms : {0.0, 0.024, 0.025, 0.3, 0.399, 1.6, 5.0}) t.add_turnaround(ms);
  EXPECT_EQ(t.turnarounds, 7);
  EXPECT_DOUBLE_EQ(t.turnaround_max_ms, 5.0);
  EXPECT_NEAR(t.turnaround_ms, 0.024 + 0.025 + 0.3 + 0.399 + 1.6 + 5.0, 1e-12);
  const std::array<int64_t, 8> want = {2, 1, 0, 0, 2, 0, 0, 2};
  EXPECT_EQ(t.turnaround_buckets, want);
}

// Requests with one prompt (n > 1 samples) share its K/V pages, with and without a draft:
// every sample's output equals the same request run alone, and all but the first prefilled
// only the prompt's last page's worth (cached_tokens). The prompt is longer than a chunk.
TEST(Speculative, SamplesSharingAPromptEqualEachAlone) {
  std::vector<core::GenerationRequest> reqs;
  auto base = mixed(1, 77, 12).front();
  base.prompt.clear();
  for (int t = 0; t < 60; ++t) base.prompt.push_back(3 + (t * 37) % 400);
  base.ignore_eos = true;
  for (int i = 0; i < 6; ++i) {
    auto r = base;
    r.sampling.temperature = i < 2 ? 0.0f : 0.8f;
    r.sampling.seed = i;
    reqs.push_back(r);
  }
  for (const auto& [alg, shape] : {std::pair<std::string, DraftShape>{"", {}}, {"EAGLE3", {3, 1, 0}}, {"EAGLE", {3, 2, 6}}, {"STANDALONE", {3, 1, 0}}})
    for (int64_t page : {1, 4}) {
      const auto together = run(options(alg, shape, 8192, page), reqs);
      int64_t cached = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(together[i].error.empty()) << together[i].error;
        const auto alone = run(options(alg, shape, 8192, page), {reqs[i]});
        EXPECT_EQ(together[i].result.output_ids, alone[0].result.output_ids) << alg << " page " << page << " request " << i;
        EXPECT_EQ(alone[0].result.cached_tokens, 0);
        cached += together[i].result.cached_tokens;
      }
      EXPECT_EQ(cached, 5 * (59 / page * page)) << alg << " page " << page;
    }
}

TEST(Speculative, EagleWithAHotTokenMapKeepsGreedyOutput) {
  // --speculative-token-map: the head drafts from every third token only.
  const auto path = std::filesystem::temp_directory_path() / ("aerie_hot_" + std::to_string(::getpid()) + ".json");
  {
    std::ofstream f(path);
    f << "[";
    for (int id = 0; id < 512; id += 3) f << (id ? "," : "") << id;
    f << "]";
  }
  const auto reqs = mixed(7, 31, 20);
  const auto plain = run(options("", {}, 8192, 1), reqs);
  for (const DraftShape shape : {DraftShape{3, 1, 0}, DraftShape{3, 2, 6}}) {
    auto o = options("EAGLE", shape, 8192, 4);
    o.speculative_token_map = path.string();
    const auto out = run(o, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(out[i].error.empty()) << out[i].error;
      EXPECT_EQ(out[i].result.output_ids, plain[i].result.output_ids) << "topk " << shape.topk << " request " << i;
    }
  }
  std::filesystem::remove(path);
}

TEST(Speculative, LogprobsEqualPlainLogprobs) {
  // Every committed token's log-probability (and top 3) comes from the verify row that chose
  // it: the same values plain decoding reports, greedy and sampled, chain and tree.
  for (float temperature : {0.0f, 0.8f}) {
    auto reqs = mixed(7, 41, 16);
    for (size_t i = 0; i < reqs.size(); ++i) {
      reqs[i].logprobs = i % 2 == 0 ? 3 : 0;
      reqs[i].sampling.temperature = temperature;
      reqs[i].sampling.seed = static_cast<int64_t>(i);
    }
    const auto plain = run(options("", {}, 8192, 1), reqs);
    for (const auto& [alg, shape] : {std::pair<std::string, DraftShape>{"STANDALONE", {3, 1, 0}}, {"EAGLE3", {3, 2, 6}}}) {
      const auto out = run(options(alg, shape, 8192, 4), reqs);
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(out[i].error.empty()) << out[i].error;
        const auto& got = out[i].result;
        ASSERT_EQ(got.output_logprobs.size(), got.output_ids.size()) << alg << " request " << i;
        if (temperature > 0.0f) {  // sampled: another draw, so check each value against its own token only
          for (size_t k = 0; k < got.output_ids.size(); ++k) {
            EXPECT_LE(got.output_logprobs[k].logprob, 0.0f);
            EXPECT_EQ(got.output_logprobs[k].top_ids.size(), reqs[i].logprobs > 0 ? 3u : 0u);
          }
          continue;
        }
        ASSERT_EQ(got.output_ids, plain[i].result.output_ids) << alg << " request " << i;
        for (size_t k = 0; k < got.output_ids.size(); ++k) {
          const auto& a = got.output_logprobs[k];
          const auto& b = plain[i].result.output_logprobs[k];
          EXPECT_NEAR(a.logprob, b.logprob, 1e-4) << alg << " request " << i << " token " << k;
          EXPECT_EQ(a.top_ids, b.top_ids) << alg << " request " << i << " token " << k;
          ASSERT_EQ(a.top_logprobs.size(), b.top_logprobs.size());
          for (size_t j = 0; j < a.top_logprobs.size(); ++j) EXPECT_NEAR(a.top_logprobs[j], b.top_logprobs[j], 1e-4);
        }
      }
    }
  }
}

TEST(Speculative, StandaloneSelfDraftAcceptsEveryDraftToken) {
  auto reqs = mixed(16, 7, 30);
  for (auto& r : reqs) r.ignore_eos = true, r.max_new_tokens = 25;
  for (int64_t steps : {1, 4, 7}) {
    const auto out = run(options("STANDALONE", {steps, 1, 0}, 8192, 1), reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(out[i].error.empty()) << out[i].error;
      ASSERT_EQ(out[i].result.output_ids.size(), 25u);
      // The prefill gives the first token; each verify then commits steps + 1.
      const int64_t want = (25 - 1 + steps) / (steps + 1);
      EXPECT_EQ(out[i].result.spec_verify_ct, want) << "steps " << steps << " request " << i;
    }
  }
}

// --speculative-chain-stop-probability: the self-draft accepts every token it drafts, so the
// verify count tells how long the chains were. Threshold 1 stops every chain at its first
// token (two tokens a verify); a threshold no product falls below runs the whole chain.
TEST(Speculative, ChainStopProbabilitySetsHowManyTokensAVerifyTakes) {
  auto reqs = mixed(16, 7, 30);
  for (auto& r : reqs) r.ignore_eos = true, r.max_new_tokens = 25;
  for (const auto& [tau, per_verify] : {std::pair<double, int64_t>{1.0, 2}, {1e-30, 6}}) {
    auto o = options("STANDALONE", {5, 1, 0}, 8192, 1);
    o.speculative_chain_stop_probability = tau;
    const auto out = run(o, reqs);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(out[i].error.empty()) << out[i].error;
      ASSERT_EQ(out[i].result.output_ids.size(), 25u);
      EXPECT_EQ(out[i].result.spec_verify_ct, (25 - 1 + per_verify - 1) / per_verify) << "threshold " << tau << " request " << i;
    }
  }
}

// Chains cut at different lengths (thresholds between the random heads' products of one, two
// and three tokens), batches of 1 and 7, in-process and on the DraftWorker actor, a pool tight
// enough to preempt: the output is still plain greedy decoding's, and so are the log-probabilities
// (read from each request's rows of a verify that holds fewer rows than planned).
TEST(Speculative, ChainStopProbabilityKeepsGreedyOutput) {
  for (int batch : {1, 7}) {
    auto reqs = mixed(batch, 300 + static_cast<uint32_t>(batch), 24);
    for (size_t i = 0; i < reqs.size(); ++i) reqs[i].logprobs = i % 2 == 0 ? 2 : -1;
    const auto plain = run(options("", {}, 8192, 1), reqs);
    for (const std::string alg : {"EAGLE", "EAGLE3", "STANDALONE"})
      for (double tau : {1.0, 1e-3, 1e-6, 1e-9})
        for (const std::string worker : {"in-process", "actor"}) {
          auto o = options(alg, {5, 1, 0}, 400, 4);
          o.speculative_chain_stop_probability = tau;
          o.draft_worker = worker;
          const auto spec = run(o, reqs);
          for (size_t i = 0; i < reqs.size(); ++i) {
            ASSERT_TRUE(spec[i].error.empty()) << alg << ": " << spec[i].error;
            EXPECT_EQ(spec[i].result.output_ids, plain[i].result.output_ids)
                << alg << " threshold " << tau << " " << worker << " batch " << batch << " request " << i;
            const auto& a = spec[i].result.output_logprobs;
            const auto& b = plain[i].result.output_logprobs;
            ASSERT_EQ(a.size(), b.size()) << "request " << i;
            for (size_t k = 0; k < a.size() && k < spec[i].result.output_ids.size(); ++k) {
              EXPECT_NEAR(a[k].logprob, b[k].logprob, 1e-4) << alg << " threshold " << tau << " batch " << batch << " request " << i << " token " << k;
              EXPECT_EQ(a[k].top_ids, b[k].top_ids);
            }
          }
        }
  }
}

// --enable-deterministic-inference on the CPU (kernels/batch_invariant.hpp: products in 16-row
// chunks of the small-batch kernel, attention row by row): the launch sets the switch; seven
// requests with prompts of up to 60 tokens (chunks of 24) answer, with their log-probabilities, as
// each does alone, and EAGLE3 and STANDALONE chains answer as plain decoding.
TEST(Speculative, DeterministicInferenceAnswersAsAloneAndAsPlainDecoding) {
  auto reqs = mixed(7, 77, 20);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].logprobs = i % 2 == 0 ? 2 : -1;
  auto deterministic = [](launch::DeploymentOptions o, int64_t running) {
    o.enable_deterministic_inference = true;
    o.max_running_requests = running;
    return o;
  };
  const auto batch = run(deterministic(options("", {}, 8192, 1), 7), reqs);
  EXPECT_TRUE(kernels::batch_invariant()) << "the launch sets the switch";
  const auto alone = run(deterministic(options("", {}, 8192, 1), 1), reqs);
  const auto eagle3 = run(deterministic(options("EAGLE3", {3, 1, 0}, 8192, 1), 7), reqs);
  const auto standalone = run(deterministic(options("STANDALONE", {4, 1, 0}, 8192, 1), 7), reqs);
  for (const auto* other : {&alone, &eagle3, &standalone})
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE((*other)[i].error.empty()) << (*other)[i].error;
      EXPECT_EQ((*other)[i].result.output_ids, batch[i].result.output_ids) << "request " << i;
      const auto& a = (*other)[i].result.output_logprobs;
      const auto& b = batch[i].result.output_logprobs;
      ASSERT_EQ(a.size(), b.size()) << "request " << i;
      for (size_t k = 0; k < a.size(); ++k) {
        if (other == &alone) EXPECT_EQ(a[k].logprob, b[k].logprob) << "request " << i << " token " << k;  // the same path, rows bit for bit
        else EXPECT_NEAR(a[k].logprob, b[k].logprob, 1e-5) << "request " << i << " token " << k;  // the verify's log-softmax
        EXPECT_EQ(a[k].top_ids, b[k].top_ids);
      }
    }
  run(options("", {}, 8192, 1), {reqs.front()});
  EXPECT_FALSE(kernels::batch_invariant()) << "a launch without the flag turns it off";
}

TEST(Speculative, ChainStopProbabilityIsRefusedForTreesOneStepChainsAndPlainDecoding) {
  {
    launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny"};
    o.speculative_chain_stop_probability = 0.2;
    try {
      launch::check_deployment_flags(o);
      FAIL() << "a chain stop was accepted without speculative decoding";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("it needs --speculative-algorithm"), std::string::npos) << e.what();
    }
  }
  for (const DraftShape shape : {DraftShape{3, 2, 6}, DraftShape{1, 1, 0}}) {
    launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny"};
    o.speculative_algorithm = "EAGLE3";
    o.speculative_num_steps = shape.steps;
    o.speculative_eagle_topk = shape.topk;
    o.speculative_num_draft_tokens = shape.draft_tokens;
    o.speculative_chain_stop_probability = 0.2;
    try {
      launch::check_deployment_flags(o);
      FAIL() << "a chain stop was accepted for steps " << shape.steps << " topk " << shape.topk;
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--speculative-chain-stop-probability cuts chains"), std::string::npos) << e.what();
    }
  }
}

TEST(Speculative, StandaloneSelfDraftTreeKeepsTheGreedyPath) {
  // A self-draft's tree holds the greedy path as deep as its cumulative scores rank it: the
  // verify accepts along it, and the accepted nodes (not in consecutive slots) must be
  // compacted for the output to stay equal to plain greedy.
  auto reqs = mixed(16, 9, 30);
  for (auto& r : reqs) r.ignore_eos = true, r.max_new_tokens = 25;
  const auto plain = run(options("", {}, 8192, 1), reqs);
  for (const DraftShape shape : {DraftShape{4, 2, 9}, DraftShape{3, 4, 16}}) {
    const auto out = run(options("STANDALONE", shape, 8192, 4), reqs);
    int64_t verifies = 0;
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(out[i].error.empty()) << out[i].error;
      EXPECT_EQ(out[i].result.output_ids, plain[i].result.output_ids) << "topk " << shape.topk << " request " << i;
      verifies += out[i].result.spec_verify_ct;
    }
    const double per_verify = static_cast<double>(16 * 24) / static_cast<double>(verifies);
    EXPECT_GT(per_verify, 2.0) << "topk " << shape.topk << ": tokens per verify";
    std::cout << "self-draft tree steps " << shape.steps << " topk " << shape.topk << ": " << per_verify << " tokens per verify\n";
  }
}

TEST(Speculative, SampledOutputFollowsThePlainDistribution) {
  // One short prompt, many seeds; top-k 4 at temperature 0.7 keeps the support small
  // enough to test the joint distribution of the 2nd and 3rd output tokens (the 1st comes
  // from the prefill, the rest from verifies with drafts).
  constexpr int kRuns = 3000;
  std::vector<core::GenerationRequest> reqs(kRuns);
  for (int i = 0; i < kRuns; ++i) {
    reqs[i].prompt = {5, 17, 42};
    reqs[i].max_new_tokens = 3;
    reqs[i].ignore_eos = true;
    reqs[i].sampling = {.temperature = 0.7f, .top_p = 1.0f, .top_k = 4, .min_p = 0.0f, .seed = 1000 + i};
  }
  auto histogram = [&](const std::vector<launch::RequestOutcome>& out) {
    std::map<std::pair<int32_t, int32_t>, int> h;
    for (const auto& o : out) {
      EXPECT_TRUE(o.error.empty()) << o.error;
      if (o.result.output_ids.size() == 3) ++h[{o.result.output_ids[1], o.result.output_ids[2]}];
    }
    return h;
  };
  auto o = options("", {}, 65536, 1);
  o.max_running_requests = 256;
  const auto plain = histogram(run(o, reqs));
  // The last: chains cut to their first token by a chain stop (verifies of 2 of the 3 planned rows).
  struct Config {
    std::string alg;
    DraftShape shape;
    double chain_stop = 0.0;
  };
  for (const auto& [alg, shape, chain_stop] : {Config{"STANDALONE", {2, 1, 0}}, Config{"EAGLE", {2, 1, 0}}, Config{"EAGLE3", {2, 3, 6}},
                                               Config{"EAGLE3", {2, 1, 0}, 1.0}}) {
    auto so = options(alg, shape, 65536, 1);
    so.max_running_requests = 256;
    so.speculative_chain_stop_probability = chain_stop;
    const auto spec = histogram(run(so, reqs));
    // Two-sample chi-square over the joint outcomes (cells with enough mass).
    double chi2 = 0;
    int cells = 0;
    std::map<std::pair<int32_t, int32_t>, std::pair<int, int>> both;
    for (auto& [k, v] : plain) both[k].first = v;
    for (auto& [k, v] : spec) both[k].second = v;
    int small_a = 0, small_b = 0;
    for (auto& [k, v] : both) {
      if (v.first + v.second < 20) {
        small_a += v.first, small_b += v.second;
        continue;
      }
      chi2 += std::pow(v.first - v.second, 2) / (v.first + v.second);
      ++cells;
    }
    if (small_a + small_b > 0) chi2 += std::pow(small_a - small_b, 2) / (small_a + small_b), ++cells;
    // 99.9% quantile of chi-square with (cells - 1) degrees of freedom, Wilson-Hilferty.
    const double dof = cells - 1, z = 3.09;
    const double limit = dof * std::pow(1 - 2 / (9 * dof) + z * std::sqrt(2 / (9 * dof)), 3);
    EXPECT_LT(chi2, limit) << alg << " topk " << shape.topk << " chain stop " << chain_stop << ": chi2 " << chi2 << " over " << cells << " cells";
    EXPECT_GT(cells, 4) << "the test distribution is too concentrated to tell anything";
  }
}
