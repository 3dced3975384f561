// Overlap scheduling (issue #15): the Scheduler plans batch N+1 while batch N runs, naming N's
// tokens by future slots that the worker resolves. Outputs must equal those of planning one
// batch at a time and of each request alone; late stops, aborts, preemption and failures
// must cost at most a wasted step, never a wrong token.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <optional>
#include <functional>
#include <map>
#include <random>
#include <thread>
#include <zmq.hpp>

#include "actors/core/completion_waiter.hpp"
#include "actors/core/device_future_tokens.hpp"
#include "actors/core/dp_step_coordinator.hpp"
#include "actors/core/forward_timeline.hpp"
#include "actors/core/future_tokens.hpp"
#include "actors/core/generation_engine.hpp"
#include "actors/core/scheduler_core.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/target_worker_actor.hpp"
#include "kernels/error.hpp"
#include "spec/draft_tree.hpp"
#include "tests/actors/actor_test_system.hpp"

using namespace aerie;
using namespace aerie::core;

namespace {

constexpr int32_t kEos = 2;

SchedulerOptions options(bool overlap, int64_t chunk = 8192, int64_t max_running = 256) {
  return {.max_running_requests = max_running, .chunked_prefill_size = chunk, .eos_token_ids = {kEos}, .vocab_size = 1000,
          .context_length = 4096, .overlap = overlap};
}

GenerationRequest request(int prompt_len, int max_new, int first) {
  GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(first + i);
  r.max_new_tokens = max_new;
  return r;
}

// A worker stand-in that behaves as TargetWorkerCore does with future tokens: it resolves a
// batch (failing it when a token is missing; a verify planned ahead is shifted by the extra
// tokens of the verify before it), samples next(last input token, position) for each sampled
// row, checks every verify's layout (a context of root + reserve slots, the verified nodes on
// the slots of positions root, root + 1, ...) and commits 1 + (root token + root position) %
// (steps + 1) tokens, each next(previous token, position), and keeps the tokens in the slots
// the batch names. A wrong resolution, position or shift changes every later token.
struct EchoWorker {
  FutureTokenMap futures;
  std::function<int32_t(int32_t, int32_t)> next = [](int32_t token, int32_t pos) { return 3 + (token * 31 + pos * 7) % 900; };
  int64_t batches = 0;
  transport::BatchResult run(transport::BatchMessage b) {
    ++batches;
    transport::BatchResult r{.seq = 0, .step_id = b.step_id, .rids = b.rids, .next_tokens = {}, .error = ""};
    try {
      if (FutureTokenMap::references(b.input_ids)) futures.resolve(b);
      if (b.mode == transport::ForwardMode::kVerify) {
        const int64_t S = b.spec_steps, reserve = spec::verify_reserve(S, b.spec_topk, b.spec_draft_tokens);
        for (size_t s = 0; s + 1 < b.qo_indptr.size(); ++s) {
          const auto q0 = static_cast<size_t>(b.qo_indptr[s]), k0 = static_cast<size_t>(b.kv_indptr[s]);
          const int32_t root = b.positions[q0];
          AERIE_CHECK(b.kv_indptr[s + 1] - b.kv_indptr[s] == root + reserve, "context of " << b.kv_indptr[s + 1] - b.kv_indptr[s]
                                                                                            << " slots for root " << root);
          for (size_t q = q0; q < static_cast<size_t>(b.qo_indptr[s + 1]); ++q)
            AERIE_CHECK(b.out_cache_loc[q] == b.kv_indices[k0 + static_cast<size_t>(root) + (q - q0)], "a verified node off its slot");
          int32_t token = b.input_ids[q0];
          const int32_t count = 1 + (token + root) % static_cast<int32_t>(S + 1);
          for (int32_t k = 0; k < count; ++k) r.next_tokens.push_back(token = next(token, root + k));
          r.token_counts.push_back(count);
        }
        futures.record_verify(b.future_slots, r.token_counts, r.next_tokens);
      } else {
        for (int32_t row : b.logit_rows) {
          const auto i = static_cast<size_t>(row);
          r.next_tokens.push_back(next(b.input_ids[i], b.positions[i]));
        }
        futures.record(b.future_slots, r.next_tokens);
      }
    } catch (const Error& e) {
      futures.forget(b.future_slots);
      r.next_tokens.clear();
      r.token_counts.clear();
      r.error = e.what();
    }
    return r;
  }
};

// Runs a scheduler to the end as the actors do: plan as far ahead as allowed, then run the
// oldest batch. Returns every finished request's result.
template <class Worker>
std::map<uint64_t, GenerationResult> run_all(SchedulerCore& s, Worker& w, int64_t* most_in_flight = nullptr) {
  std::map<uint64_t, GenerationResult> done;
  std::deque<transport::BatchMessage> sent;
  while (s.has_work()) {
    while (auto b = s.plan_next()) sent.push_back(std::move(*b));
    if (most_in_flight) *most_in_flight = std::max(*most_in_flight, static_cast<int64_t>(sent.size()));
    EXPECT_FALSE(sent.empty());
    if (sent.empty()) break;
    const auto r = w.run(std::move(sent.front()));
    sent.pop_front();
    EXPECT_EQ(r.error, "");
    for (auto& u : s.on_result(r))
      if (u.finished) done[u.rid] = std::move(u.result);
  }
  return done;
}

std::vector<GenerationRequest> mixed(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    auto r = request(1 + static_cast<int>(rng() % 20), 2 + static_cast<int>(rng() % 10), 10 + 37 * i);
    r.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

std::map<uint64_t, GenerationResult> run_requests(const std::vector<GenerationRequest>& reqs, bool overlap, model::KvCacheShape kv,
                                                  int64_t chunk = 8192, int64_t* most_in_flight = nullptr, SchedulerStats* stats = nullptr) {
  SchedulerCore s(kv, options(overlap, chunk));
  EchoWorker w;
  for (size_t i = 0; i < reqs.size(); ++i) s.submit(i, reqs[i]);
  auto done = run_all(s, w, most_in_flight);
  if (stats) *stats = s.stats();
  return done;
}

}  // namespace

TEST(FutureTokenMap, ResolvesWhatWasRecordedAndRefusesTheRest) {
  FutureTokenMap m;
  EXPECT_EQ(future_slot_of(future_token_ref(0)), 0);
  EXPECT_EQ(future_slot_of(future_token_ref(41)), 41);
  EXPECT_EQ(future_slot_of(7), -1);
  m.record(std::vector<int32_t>{3, -1, 0}, std::vector<int32_t>{30, 99, 10});
  std::vector<int32_t> ids{5, future_token_ref(3), future_token_ref(0)};
  EXPECT_TRUE(FutureTokenMap::references(ids));
  m.resolve(ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{5, 30, 10}));
  EXPECT_FALSE(FutureTokenMap::references(ids));
  std::vector<int32_t> never{future_token_ref(1)};  // slot 1 exists but was never filled
  EXPECT_THROW(m.resolve(never), Error);
  std::vector<int32_t> beyond{future_token_ref(100)};
  EXPECT_THROW(m.resolve(beyond), Error);
  m.forget(std::vector<int32_t>{3});
  std::vector<int32_t> forgotten{future_token_ref(3)};
  EXPECT_THROW(m.resolve(forgotten), Error);
  EXPECT_THROW(m.record(std::vector<int32_t>{1, 2}, std::vector<int32_t>{1}), Error);                     // lengths differ
  EXPECT_THROW(m.record(std::vector<int32_t>{FutureTokenMap::kMaxSlots}, std::vector<int32_t>{1}), Error);  // out of range
}

TEST(OverlapSchedule, PlansOneBatchAheadWithFutureTokens) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options(true));
  s.submit(1, request(3, 3, 10));
  s.submit(2, request(2, 3, 50));
  auto b1 = s.plan_next();
  ASSERT_TRUE(b1);
  EXPECT_EQ(b1->mode, transport::ForwardMode::kExtend);
  ASSERT_EQ(b1->future_slots.size(), 2u);
  auto b2 = s.plan_next();  // planned before b1's result: its decodes name b1's tokens
  ASSERT_TRUE(b2);
  EXPECT_EQ(b2->mode, transport::ForwardMode::kDecode);
  EXPECT_EQ(b2->input_ids, (std::vector<int32_t>{future_token_ref(b1->future_slots[0]), future_token_ref(b1->future_slots[1])}));
  EXPECT_EQ(b2->positions, (std::vector<int32_t>{3, 2}));
  EXPECT_EQ(b2->sampling[0].step, 1);  // the output position of the token it samples
  EXPECT_NE(b2->future_slots[0], b1->future_slots[0]);
  EXPECT_EQ(s.in_flight(), 2);
  EXPECT_FALSE(s.plan_next());  // two in flight at most
  EchoWorker w;
  auto u1 = s.on_result(w.run(*b1));
  ASSERT_EQ(u1.size(), 2u);
  EXPECT_EQ(u1[0].new_tokens.size(), 1u);
  auto b3 = s.plan_next();
  ASSERT_TRUE(b3);
  EXPECT_EQ(b3->input_ids[0], future_token_ref(b2->future_slots[0]));
  EXPECT_EQ(b3->positions, (std::vector<int32_t>{4, 3}));
  EXPECT_FALSE(s.plan_next());  // max_new_tokens 3: after b3's token the requests end, no decode is planned past it
  s.on_result(w.run(*b2));
  EXPECT_FALSE(s.plan_next());
  auto u3 = s.on_result(w.run(*b3));
  ASSERT_EQ(u3.size(), 2u);
  EXPECT_TRUE(u3[0].finished && u3[1].finished);
  EXPECT_EQ(u3[0].result.output_ids.size(), 3u);
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.free_pages(), 63);
  EXPECT_EQ(w.batches, 3);  // no step wasted when max_new_tokens ends a request
}

TEST(OverlapSchedule, OutputsEqualPlanningOneBatchAtATimeAndEachRequestAlone) {
  const model::KvCacheShape roomy{.num_pages = 512, .page_size = 4};
  for (int64_t chunk : {int64_t{8192}, int64_t{7}}) {  // whole prompts, and chunked prefill mixing with decodes
    const auto reqs = mixed(12, 5);
    int64_t most = 0;
    SchedulerStats with_stats, without_stats;
    const auto with = run_requests(reqs, true, roomy, chunk, &most, &with_stats);
    const auto without = run_requests(reqs, false, roomy, chunk, nullptr, &without_stats);
    EXPECT_EQ(most, 2) << "chunk " << chunk;
    ASSERT_EQ(with.size(), reqs.size());
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto alone = run_requests({reqs[i]}, true, roomy, chunk);
      EXPECT_EQ(with.at(i).output_ids, without.at(i).output_ids) << "request " << i << " chunk " << chunk;
      EXPECT_EQ(with.at(i).output_ids, alone.at(0).output_ids) << "request " << i << " chunk " << chunk;
      EXPECT_EQ(static_cast<int64_t>(with.at(i).output_ids.size()), reqs[i].max_new_tokens);
    }
    EXPECT_EQ(with_stats.iterations, without_stats.iterations) << "chunk " << chunk;  // max_new_tokens wastes no step
  }
}

TEST(OverlapSchedule, PreemptionUnderOverlapKeepsEveryOutput) {
  const auto reqs = mixed(10, 9);
  const auto roomy = run_requests(reqs, false, {.num_pages = 512, .page_size = 4});
  SchedulerStats stats;
  const auto tight = run_requests(reqs, true, {.num_pages = 14, .page_size = 4}, 8192, nullptr, &stats);  // 52 usable tokens
  EXPECT_GT(stats.preemptions, 0);
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(tight.at(i).output_ids, roomy.at(i).output_ids) << "request " << i;
}

TEST(OverlapSchedule, LateStopsCostOneWastedStepAndNoWrongToken) {
  // The worker samples EOS as request 1's third token and a stop token as request 2's second;
  // the batch planned meanwhile already decodes them once more: those rows are dropped.
  for (bool eos : {true, false}) {
    SchedulerCore s({.num_pages = 64, .page_size = 4}, options(true));
    auto r1 = request(3, eos ? 10 : 3, 10);
    auto r2 = request(3, 10, 500);
    r2.stop_token_ids = {777};
    s.submit(1, r1);
    s.submit(2, r2);
    EchoWorker w;
    w.next = [eos](int32_t token, int32_t pos) {
      if (token < 500 && pos == 4) return eos ? kEos : 3 + pos;  // request 1, its third token
      if (token >= 500 && pos == 3) return 777;                   // request 2, its second token
      return token >= 500 ? 500 + pos : 3 + pos;
    };
    const auto done = run_all(s, w);
    EXPECT_EQ(done.at(1).output_ids, (std::vector<int32_t>{5, 6, eos ? kEos : 7})) << eos;
    EXPECT_EQ(done.at(1).finish_reason, eos ? "stop" : "length");
    EXPECT_EQ(done.at(2).output_ids, (std::vector<int32_t>{502, 777}));
    EXPECT_EQ(done.at(2).finish_reason, "stop");
    EXPECT_EQ(s.free_pages(), 63);
    // Prefill + 2 decodes reach request 1's EOS; one more batch was planned before it came back.
    EXPECT_LE(w.batches, 4);
  }
}

TEST(OverlapSchedule, AbortWhileTwoBatchesAreInFlight) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options(true));
  s.submit(1, request(5, 8, 10));
  s.submit(2, request(4, 8, 300));
  auto b1 = s.plan_next();
  auto b2 = s.plan_next();
  ASSERT_TRUE(b1 && b2);
  const int64_t free_before = s.free_pages();
  auto aborted = s.abort(1);  // in both batches: reported now, its pages freed at once
  ASSERT_TRUE(aborted && aborted->finished);
  EXPECT_EQ(aborted->result.finish_reason, "abort");
  EXPECT_GT(s.free_pages(), free_before);
  EXPECT_FALSE(s.abort(1));
  s.submit(3, request(6, 4, 600));  // may take request 1's pages in the next batch (runs after both)
  EchoWorker w;
  std::map<uint64_t, GenerationResult> done;
  for (auto& u : s.on_result(w.run(*b1))) {
    EXPECT_NE(u.rid, 1u);
    if (u.finished) done[u.rid] = u.result;
  }
  for (auto& u : s.on_result(w.run(*b2))) {
    EXPECT_NE(u.rid, 1u);
    if (u.finished) done[u.rid] = u.result;
  }
  for (auto& [rid, r] : run_all(s, w)) done[rid] = r;
  const auto alone2 = run_requests({request(4, 8, 300)}, false, {.num_pages = 64, .page_size = 4});
  const auto alone3 = run_requests({request(6, 4, 600)}, false, {.num_pages = 64, .page_size = 4});
  EXPECT_EQ(done.at(2).output_ids, alone2.at(0).output_ids);
  EXPECT_EQ(done.at(3).output_ids, alone3.at(0).output_ids);
  EXPECT_EQ(s.free_pages(), 63);
}

TEST(OverlapSchedule, AFailedBatchFailsTheBatchThatNamesItsTokens) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options(true));
  s.submit(1, request(5, 8, 10));
  auto b1 = s.plan_next();
  auto b2 = s.plan_next();
  ASSERT_TRUE(b1 && b2);
  EchoWorker w;
  transport::BatchResult failed{.seq = 0, .step_id = b1->step_id, .rids = {}, .next_tokens = {}, .error = "device lost"};
  w.futures.forget(b1->future_slots);  // what the worker does with a failed batch's slots
  auto u1 = s.on_result(failed);
  ASSERT_EQ(u1.size(), 1u);
  EXPECT_EQ(u1[0].result.finish_reason, "error: device lost");
  const auto r2 = w.run(*b2);  // names b1's token: the worker refuses it rather than guess
  EXPECT_NE(r2.error.find("holds no token"), std::string::npos) << r2.error;
  EXPECT_TRUE(s.on_result(r2).empty());  // its request already ended
  EXPECT_EQ(s.free_pages(), 63);
  s.submit(2, request(3, 2, 40));  // still serving
  const auto done = run_all(s, w);
  EXPECT_EQ(done.at(2).output_ids.size(), 2u);
}

TEST(OverlapSchedule, PenaltiesKeepOneBatchInFlight) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options(true));
  auto r = request(3, 4, 10);
  r.sampling.repetition_penalty = 1.3f;  // reads the request's output when planned
  s.submit(1, r);
  s.submit(2, request(3, 4, 100));
  ASSERT_TRUE(s.plan_next());
  EXPECT_FALSE(s.plan_next());
  EXPECT_FALSE(s.can_plan());
}

namespace {

SchedulerOptions spec_options(bool overlap, int64_t steps, int64_t topk = 1, int64_t draft_tokens = 0) {
  auto o = options(overlap, 16);
  o.spec_overlap = overlap;
  o.spec_steps = steps, o.spec_topk = topk, o.spec_draft_tokens = draft_tokens;
  return o;
}

std::map<uint64_t, GenerationResult> run_spec(const std::vector<GenerationRequest>& reqs, const SchedulerOptions& o, model::KvCacheShape kv,
                                              int64_t* most_in_flight = nullptr, SchedulerStats* stats = nullptr) {
  SchedulerCore s(kv, o);
  EchoWorker w;
  for (size_t i = 0; i < reqs.size(); ++i) s.submit(i, reqs[i]);
  auto done = run_all(s, w, most_in_flight);
  if (stats) *stats = s.stats();
  EXPECT_EQ(s.free_pages(), kv.num_pages - 1);
  return done;
}

}  // namespace

TEST(OverlapSchedule, WithoutSpecOverlapASpeculativeSchedulerKeepsOneBatchInFlight) {
  auto o = spec_options(true, 3);
  o.spec_overlap = false;
  SchedulerCore s({.num_pages = 64, .page_size = 4}, o);
  s.submit(1, request(3, 4, 10));
  s.submit(2, request(5, 4, 300));
  auto b = s.plan_next();
  ASSERT_TRUE(b);
  EXPECT_TRUE(b->future_slots.empty());
  EXPECT_FALSE(s.plan_next());
}

TEST(OverlapSchedule, ASpeculativeSchedulerPlansTheNextVerifyAhead) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, spec_options(true, 3));
  s.submit(1, request(3, 20, 10));
  auto extend = s.plan_next();
  ASSERT_TRUE(extend);
  EXPECT_EQ(extend->mode, transport::ForwardMode::kExtend);
  EXPECT_FALSE(s.plan_next());  // its verify needs the draft state the extend leaves
  EchoWorker w;
  s.on_result(w.run(*extend));
  auto v1 = s.plan_next();
  auto v2 = s.plan_next();  // before v1's result: names v1's last token, room for 3 more tokens
  ASSERT_TRUE(v1 && v2);
  EXPECT_EQ(v1->mode, transport::ForwardMode::kVerify);
  EXPECT_EQ(v2->input_ids[0], future_token_ref(v1->future_slots[0]));
  EXPECT_EQ(v2->positions[0], v1->positions[0] + 1);  // laid out as if v1 committed one token
  const int64_t reserve = spec::verify_reserve(3, 1, 4);
  EXPECT_EQ(v2->kv_indices.size(), static_cast<size_t>(v2->positions[0] + 3 + reserve));
  EXPECT_EQ(v2->sampling[0].step, v1->sampling[0].step + 1);
  EXPECT_FALSE(s.plan_next());
  const auto r1 = w.run(*v1);
  ASSERT_EQ(r1.error, "");
  const int64_t free_before = s.free_pages();
  s.on_result(r1);
  EXPECT_GE(s.free_pages(), free_before);  // the surplus past what v2 now needs goes back
  const auto r2 = w.run(*v2);
  ASSERT_EQ(r2.error, "");
  EXPECT_EQ(r2.token_counts.size(), 1u);
}

TEST(OverlapSchedule, SpeculativeOutputsEqualWithOverlapOnAndOffAndAlone) {
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < 9; ++i) {
    auto r = request(2 + 5 * i % 23, 6 + (7 * i) % 19, 40 + 53 * i);
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  for (auto [steps, topk, nodes] : {std::tuple<int64_t, int64_t, int64_t>{1, 1, 0}, {3, 1, 0}, {5, 1, 0}, {3, 2, 6}}) {
    for (int64_t pages : {int64_t{512}, int64_t{30}}) {  // roomy, and tight enough to preempt
      const model::KvCacheShape kv{.num_pages = pages, .page_size = 4};
      int64_t most = 0;
      SchedulerStats stats;
      const auto on = run_spec(reqs, spec_options(true, steps, topk, nodes), kv, &most, &stats);
      const auto off = run_spec(reqs, spec_options(false, steps, topk, nodes), kv);
      EXPECT_EQ(most, 2);
      if (pages == 30) {
        EXPECT_GT(stats.preemptions, 0) << steps;
      }
      ASSERT_EQ(on.size(), reqs.size());
      for (size_t i = 0; i < reqs.size(); ++i) {
        const auto alone = run_spec({reqs[i]}, spec_options(true, steps, topk, nodes), {.num_pages = 512, .page_size = 4});
        EXPECT_EQ(on.at(i).output_ids, off.at(i).output_ids) << "steps " << steps << " pages " << pages << " request " << i;
        EXPECT_EQ(on.at(i).output_ids, alone.at(0).output_ids) << "steps " << steps << " pages " << pages << " request " << i;
        EXPECT_EQ(static_cast<int64_t>(on.at(i).output_ids.size()), reqs[i].max_new_tokens);
      }
    }
  }
}

TEST(OverlapSchedule, ASpeculativeLateStopAndAnAbortWithTwoVerifiesInFlight) {
  // EOS inside a verify's tokens: the verify planned meanwhile is dropped, the output ends at EOS.
  auto eos_at = [](int32_t token, int32_t pos) { return pos == 9 ? kEos : 3 + (token * 31 + pos * 7) % 900; };
  for (bool overlap : {true, false}) {
    SchedulerCore s({.num_pages = 64, .page_size = 4}, spec_options(overlap, 3));
    s.submit(1, request(4, 30, 10));
    s.submit(2, request(5, 12, 300));
    EchoWorker w;
    w.next = eos_at;
    const auto done = run_all(s, w);
    EXPECT_EQ(done.at(1).output_ids.back(), kEos);
    EXPECT_EQ(done.at(1).output_ids.size(), 7u);  // sampled after positions 3..9
    EXPECT_EQ(done.at(1).finish_reason, "stop");
    EXPECT_EQ(s.free_pages(), 63);
  }
  SchedulerCore s({.num_pages = 64, .page_size = 4}, spec_options(true, 3));
  s.submit(1, request(4, 30, 10));
  s.submit(2, request(5, 12, 300));
  EchoWorker w;
  s.on_result(w.run(*s.plan_next()));  // the extend
  auto v1 = s.plan_next();
  auto v2 = s.plan_next();
  ASSERT_TRUE(v1 && v2);
  ASSERT_TRUE(s.abort(1));
  for (auto& u : s.on_result(w.run(*v1))) EXPECT_NE(u.rid, 1u);
  for (auto& u : s.on_result(w.run(*v2))) EXPECT_NE(u.rid, 1u);
  std::map<uint64_t, GenerationResult> done = run_all(s, w);
  EXPECT_EQ(done.at(2).output_ids, run_spec({request(5, 12, 300)}, spec_options(false, 3), {.num_pages = 64, .page_size = 4}).at(0).output_ids);
  EXPECT_EQ(s.free_pages(), 63);
}

namespace {

struct TinyModel {
  model::LlamaConfig config = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel model{config, model::random_llama_weights(config, 3, Device::kCpu, DType::kF32), Stream::cpu(), DType::kF32};
  std::vector<GenerationResult> run(const std::vector<GenerationRequest>& reqs, int64_t pool_tokens, EngineOptions opts) {
    model::KvCache kv(config, model::kv_shape_for_tokens(pool_tokens, 4), Device::kCpu, DType::kF32);
    GenerationEngine engine(model, kv, opts);
    return engine.generate(reqs);
  }
};

std::vector<GenerationRequest> model_requests(int n, uint32_t seed, float temperature) {
  std::mt19937 rng(seed);
  std::vector<GenerationRequest> reqs;
  for (int i = 0; i < n; ++i) {
    GenerationRequest r;
    const int len = 1 + static_cast<int>(rng() % 24);
    for (int t = 0; t < len; ++t) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    r.max_new_tokens = 3 + static_cast<int64_t>(rng() % 10);
    r.sampling.temperature = temperature;
    r.sampling.top_k = 40;
    r.sampling.seed = 100 + i;
    r.ignore_eos = true;
    reqs.push_back(std::move(r));
  }
  return reqs;
}

}  // namespace

TEST(OverlapSchedule, TheModelsTokensEqualWithOverlapOnAndOffAndAlone) {
  TinyModel f;
  for (float temperature : {0.0f, 0.9f}) {
    const auto reqs = model_requests(10, 17, temperature);
    const auto on = f.run(reqs, 4096, {.max_running_requests = 16, .max_prefill_tokens = 16, .overlap = true});
    const auto off = f.run(reqs, 4096, {.max_running_requests = 16, .max_prefill_tokens = 16, .overlap = false});
    const auto tight = f.run(reqs, 96, {.max_running_requests = 16, .max_prefill_tokens = 16, .overlap = true});  // preempts
    for (size_t i = 0; i < reqs.size(); ++i) {
      const auto alone = f.run({reqs[i]}, 4096, {.overlap = true});
      EXPECT_EQ(on[i].output_ids, off[i].output_ids) << "request " << i << " temperature " << temperature;
      EXPECT_EQ(on[i].output_ids, alone[0].output_ids) << "request " << i << " temperature " << temperature;
      EXPECT_EQ(tight[i].output_ids, off[i].output_ids) << "request " << i << " temperature " << temperature;
    }
  }
}

// A worker on the tiny model, and one request's prompt batch with, planned before its
// result, the decode that names the prompt's token by its future slot.
class WorkerWithBatchesAhead : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NO_FATAL_FAILURE(plan()); }
  TinyModel f;
  model::KvCache kv{f.config, model::kv_shape_for_tokens(256, 4), Device::kCpu, DType::kF32};
  TargetWorkerCore worker{f.model, kv, {}};
  SchedulerCore s{kv.shape(), scheduler_options_for(f.config, 8, 64, /*overlap=*/true)};
  std::optional<transport::BatchMessage> b1, b2;
  void plan() {
    GenerationRequest r;
    r.prompt = {5, 9, 11};
    r.max_new_tokens = 3;
    r.ignore_eos = true;
    s.submit(1, r);
    b1 = s.plan_next();
    b2 = s.plan_next();
    ASSERT_TRUE(b1 && b2);
    ASSERT_LT(b2->input_ids[0], 0);
  }
};

TEST_F(WorkerWithBatchesAhead, TheWorkerResolvesFutureTokensAndRefusesMissingOnes) {
  const auto r1 = worker.execute(*b1);
  ASSERT_EQ(r1.error, "");
  // The same decode with the token written out gives the same token.
  auto explicit_b2 = *b2;
  explicit_b2.input_ids[0] = r1.next_tokens[0];
  explicit_b2.future_slots.clear();
  model::KvCache kv2(f.config, model::kv_shape_for_tokens(256, 4), Device::kCpu, DType::kF32);
  TargetWorkerCore worker2(f.model, kv2, {});
  auto explicit_b1 = *b1;
  explicit_b1.future_slots.clear();
  ASSERT_EQ(worker2.execute(explicit_b1).next_tokens, r1.next_tokens);
  const auto r2 = worker.execute(*b2);
  ASSERT_EQ(r2.error, "");
  EXPECT_EQ(r2.next_tokens, worker2.execute(explicit_b2).next_tokens);
  // A batch naming a slot nobody filled fails with a clear error; the worker stays usable.
  auto missing = *b2;
  missing.input_ids[0] = future_token_ref(999);
  EXPECT_NE(worker.execute(missing).error.find("holds no token"), std::string::npos);
  auto uneven = explicit_b2;
  uneven.future_slots = {1, 2};
  EXPECT_NE(worker.execute(uneven).error.find("future slots"), std::string::npos);
  EXPECT_EQ(worker.execute(explicit_b2).error, "");
}

// The worker enqueues batch 2, which names batch 1's token by its slot, before batch 1's
// result is collected (the actor does so under overlap scheduling): the token is resolved
// from the device table, and the results come back in launch order, equal to running the
// batches one at a time with the token written out.
TEST_F(WorkerWithBatchesAhead, TheWorkerLaunchesTheNextBatchBeforeCollectingTheLast) {
  worker.launch(*b1);
  worker.launch(*b2);
  EXPECT_EQ(worker.in_flight(), 2u);
  const auto r1 = worker.collect();
  const auto r2 = worker.collect();
  EXPECT_EQ(worker.in_flight(), 0u);
  ASSERT_EQ(r1.error, "");
  ASSERT_EQ(r2.error, "");
  EXPECT_EQ(r1.step_id, b1->step_id);
  EXPECT_EQ(r2.step_id, b2->step_id);
  model::KvCache kv2(f.config, model::kv_shape_for_tokens(256, 4), Device::kCpu, DType::kF32);
  TargetWorkerCore one_at_a_time(f.model, kv2, {});
  auto plain1 = *b1, plain2 = *b2;
  plain1.future_slots.clear();
  plain2.future_slots.clear();
  plain2.input_ids[0] = r1.next_tokens.at(0);
  EXPECT_EQ(one_at_a_time.execute(plain1).next_tokens, r1.next_tokens);
  EXPECT_EQ(one_at_a_time.execute(plain2).next_tokens, r2.next_tokens);
  // A batch refused at launch is collected in its turn with its error.
  auto missing = *b2;
  missing.input_ids[0] = future_token_ref(4242);
  worker.launch(missing);
  EXPECT_TRUE(worker.oldest_done());
  EXPECT_NE(worker.collect().error.find("holds no token"), std::string::npos);
}

// The device table's host side: a slot holds a token once a batch recorded one there, and
// no longer once its batch failed; slots outside the table are refused.
TEST(DeviceFutureTokens, KnowsWhichSlotsHoldATokenAndResolvesThem) {
  DeviceFutureTokens futures(Device::kCpu, 16);
  Buffer tokens(Device::kCpu, DType::kI32, {2});
  const std::vector<int32_t> values = {40, 41};
  tokens.copy_from_host(values.data(), 8);
  const std::vector<int32_t> slots = {3, -1};
  EXPECT_THROW(futures.check(std::vector<int32_t>{future_token_ref(3)}), Error);
  futures.record(tokens.view(), slots, Stream::cpu());
  futures.check(std::vector<int32_t>{7, future_token_ref(3)});
  EXPECT_EQ(futures.table().ptr<int32_t>()[3], 40);
  EXPECT_THROW(futures.check(std::vector<int32_t>{future_token_ref(16)}), Error);
  EXPECT_THROW(futures.record(tokens.view(), std::vector<int32_t>{3, 16}, Stream::cpu()), Error);
  EXPECT_THROW(futures.record(tokens.view(), std::vector<int32_t>{3}, Stream::cpu()), Error);
  futures.forget(slots);
  EXPECT_THROW(futures.check(std::vector<int32_t>{future_token_ref(3)}), Error);
}

// The waiter tells its owner about each watched mark, in order, after the mark's work ran
// (CPU marks: at once).
TEST(CompletionWaiter, NotifiesOnceForEachMarkInOrder) {
  std::mutex mu;
  std::condition_variable cv;
  int notified = 0;
  {
    CompletionWaiter waiter([&] {
      std::lock_guard<std::mutex> lock(mu);
      ++notified;
      cv.notify_all();
    });
    for (int i = 0; i < 5; ++i) {
      auto e = std::make_shared<StreamEvent>(Device::kCpu);
      e->record(Stream::cpu());
      waiter.watch(e);
    }
    std::unique_lock<std::mutex> lock(mu);
    ASSERT_TRUE(cv.wait_for(lock, std::chrono::seconds(10), [&] { return notified == 5; }));
  }
  EXPECT_EQ(notified, 5);
}

// The owner may be destroyed by the waiter's own thread (the worker actor's last reference is
// the one notify() holds for its send): that must end the thread, not throw from a self-join.
TEST(CompletionWaiter, MayBeDestroyedFromItsOwnNotify) {
  std::mutex mu;
  std::condition_variable cv;
  bool destroyed = false;
  std::unique_ptr<CompletionWaiter> waiter;
  std::unique_lock<std::mutex> hold(mu);  // notify() runs only once `waiter` is set
  waiter = std::make_unique<CompletionWaiter>([&] {
    std::unique_ptr<CompletionWaiter> mine;
    {
      std::lock_guard<std::mutex> lock(mu);
      mine = std::move(waiter);
    }
    mine.reset();  // ~CompletionWaiter on the waiter's own thread
    std::lock_guard<std::mutex> lock(mu);
    destroyed = true;
    cv.notify_all();
  });
  for (int i = 0; i < 3; ++i) {  // marks after the first are dropped with the waiter
    auto e = std::make_shared<StreamEvent>(Device::kCpu);
    e->record(Stream::cpu());
    waiter->watch(e);
  }
  ASSERT_TRUE(cv.wait_for(hold, std::chrono::seconds(10), [&] { return destroyed; }));
  EXPECT_EQ(waiter, nullptr);
}

TEST(DpStepCoordinator, OverlapRunsTwoStepsAndHandsResultsBackInOrder) {
  DpStepCoordinator c({.dp_size = 2, .bucket_sizes = {1, 2, 4}, .depth = 2});
  auto decode = [](int n) {
    transport::BatchMessage m;
    m.mode = transport::ForwardMode::kDecode;
    for (int i = 0; i < n; ++i) m.input_ids.push_back(5), m.rids.push_back(static_cast<uint64_t>(i));
    return m;
  };
  const uint64_t s1 = c.begin_step();
  c.offer(0, decode(2));
  c.offer(1, std::nullopt);
  ASSERT_TRUE(c.release());
  EXPECT_TRUE(c.can_begin());  // the next step collects while the first runs
  const uint64_t s2 = c.begin_step();
  EXPECT_EQ(s2, s1 + 1);
  c.offer(0, decode(2));
  c.refuse(1, "bad plan");
  ASSERT_TRUE(c.release());
  EXPECT_FALSE(c.can_begin());  // two running
  EXPECT_THROW(c.begin_step(), Error);
  // Group 1 answers step 1 (idle) then step 2 (its refused plan ran idle).
  EXPECT_FALSE(c.answer_has_batch(1));
  EXPECT_EQ(c.answer_refusal(1), "");
  EXPECT_FALSE(c.on_result(1));
  EXPECT_EQ(c.answer_refusal(1), "bad plan");
  EXPECT_FALSE(c.on_result(1));
  EXPECT_TRUE(c.answer_has_batch(0));
  EXPECT_TRUE(c.on_result(0));  // step 1 complete
  EXPECT_TRUE(c.can_begin());
  EXPECT_TRUE(c.on_result(0));  // step 2 complete
  EXPECT_EQ(c.phase(), DpStepCoordinator::Phase::kIdle);
  EXPECT_THROW(c.on_result(0), Error);
}

TEST(SchedulerActor, WithOverlapSendsTheNextBatchBeforeTheFirstComesBack) {
  aerie::testing::ActorTestSystem sys;
  caf::scoped_actor client{*sys.sys}, worker{*sys.sys};
  auto o = options(true, 64, 16);
  auto scheduler = sys.sys->spawn(actors::scheduler_actor, model::KvCacheShape{.num_pages = 64, .page_size = 4}, o,
                                  caf::actor_cast<caf::actor>(worker), actors::SchedulerFaults{});
  auto r1 = request(5, 4, 10);
  r1.ignore_eos = true;
  auto h = client->request(scheduler, caf::infinite, actors::SubmitRequest{1, r1});
  // Take two batches before answering either, then answer in order, always one behind.
  EchoWorker w;
  std::deque<std::pair<transport::BatchMessage, caf::response_promise>> held;
  int batches = 0;
  for (;;) {
    bool got = false;
    worker->receive(
        [&](transport::BatchMessage& b) {
          got = true;
          ++batches;
          held.emplace_back(b, worker->make_response_promise());
        },
        caf::after(std::chrono::milliseconds(300)) >> [] {});
    if (got && held.size() < 2) continue;
    if (held.empty()) break;
    if (batches == 1) {
      ADD_FAILURE() << "only one batch was sent before the first result";
    }
    held.front().second.deliver(w.run(held.front().first));
    held.pop_front();
  }
  h.receive([](actors::RequestDone& d) { EXPECT_EQ(d.result.output_ids.size(), 4u); }, [](caf::error&) { ADD_FAILURE(); });
  EXPECT_EQ(batches, 4);  // prefill + 3 decodes, the last decode planned while the third ran
}

TEST(RemoteWorkerActor, ForwardsTheNextBatchBeforeTheLastResultComesBack) {
  aerie::testing::ActorTestSystem sys;
  zmq::context_t ctx;
  auto link = std::make_shared<actors::RemoteWorkerLink>();
  link->to_worker = std::make_unique<transport::ZmqSender>(ctx, "inproc://to-worker-overlap", true);
  link->from_worker = std::make_unique<transport::ZmqReceiver>(ctx, "inproc://from-worker-overlap", true);
  transport::ZmqReceiver worker_in(ctx, "inproc://to-worker-overlap", false);
  transport::ZmqSender worker_out(ctx, "inproc://from-worker-overlap", false);
  auto remote = sys.sys->spawn<caf::detached>(actors::remote_worker_actor, link);
  // The other rank takes both batches before it answers the first.
  std::thread other([&] {
    std::vector<transport::BatchMessage> got;
    for (int i = 0; i < 2; ++i) {
      auto m = worker_in.receive(std::chrono::seconds(5));
      ASSERT_TRUE(m && std::holds_alternative<transport::BatchMessage>(*m));
      got.push_back(std::get<transport::BatchMessage>(*m));
    }
    for (const auto& b : got)
      worker_out.send(transport::BatchResult{.seq = 0, .step_id = b.step_id, .rids = b.rids, .next_tokens = {static_cast<int32_t>(b.step_id)},
                                             .logprobs = {}, .token_counts = {}, .error = ""});
  });
  caf::scoped_actor self{*sys.sys};
  transport::BatchMessage b;
  b.rids = {5};
  b.step_id = 7;
  auto first = self->request(remote, caf::infinite, b);
  b.step_id = 8;
  auto second = self->request(remote, caf::infinite, b);
  first.receive([](transport::BatchResult& r) { EXPECT_EQ(r.next_tokens, std::vector<int32_t>{7}); }, [](caf::error&) { ADD_FAILURE(); });
  second.receive([](transport::BatchResult& r) { EXPECT_EQ(r.next_tokens, std::vector<int32_t>{8}); }, [](caf::error&) { ADD_FAILURE(); });
  other.join();
  self->send_exit(remote, caf::exit_reason::user_shutdown);
}

// Prefill first, but under overlap a prompt batch does not follow another while requests wait
// to be verified: a stream of arrivals cannot hold their tokens back batch after batch.
TEST(OverlapSchedule, ArrivalsDoNotHoldVerifiesBack) {
  SchedulerCore s({.num_pages = 128, .page_size = 4}, spec_options(true, 3));
  s.submit(1, request(4, 30, 10));
  EchoWorker w;
  s.on_result(w.run(*s.plan_next()));  // request 1's prompt
  auto v1 = s.plan_next();
  ASSERT_TRUE(v1);
  EXPECT_EQ(v1->mode, transport::ForwardMode::kVerify);
  s.submit(2, request(5, 10, 300));
  auto e2 = s.plan_next();  // behind a verify: the new prompt goes first
  ASSERT_TRUE(e2);
  EXPECT_EQ(e2->mode, transport::ForwardMode::kExtend);
  s.on_result(w.run(*v1));
  s.submit(3, request(6, 10, 600));
  auto next = s.plan_next();  // behind a prompt batch, with request 1 waiting: its verify
  ASSERT_TRUE(next);
  EXPECT_EQ(next->mode, transport::ForwardMode::kVerify);
  EXPECT_EQ(next->rids, std::vector<uint64_t>{1});
  s.on_result(w.run(*e2));
  auto e3 = s.plan_next();  // behind that verify: request 3's prompt
  ASSERT_TRUE(e3);
  EXPECT_EQ(e3->mode, transport::ForwardMode::kExtend);
}

// The worker's timeline: each batch's time and the idle gap before it (on the CPU, the host
// clock). Only lower bounds are checked: a sleep lasts at least as long as asked.
TEST(ForwardTimeline, TimesEachBatchAndTheGapBeforeIt) {
  using namespace std::chrono_literals;
  ForwardTimeline t(Device::kCpu, 50ms);
  t.begin(Stream::cpu());
  std::this_thread::sleep_for(2ms);
  const ForwardTimes first = t.end(Stream::cpu());
  EXPECT_GE(first.forward_seconds, 0.002);
  EXPECT_EQ(first.gap_seconds, 0.0);  // nothing before it
  std::this_thread::sleep_for(3ms);
  t.begin(Stream::cpu());
  const ForwardTimes second = t.end(Stream::cpu());
  EXPECT_GE(second.gap_seconds, 0.003);
  std::this_thread::sleep_for(60ms);  // longer than max_gap: a time without work, not idle
  t.begin(Stream::cpu());
  EXPECT_EQ(t.end(Stream::cpu()).gap_seconds, 0.0);
  // Two batches marked before either is collected (launched ahead): collected in order.
  t.begin(Stream::cpu());
  std::this_thread::sleep_for(2ms);
  t.mark_end(Stream::cpu());
  std::this_thread::sleep_for(1ms);
  t.begin(Stream::cpu());
  t.mark_end(Stream::cpu());
  const ForwardTimes a = t.collect();
  const ForwardTimes b = t.collect();
  EXPECT_GE(a.forward_seconds, 0.002);
  EXPECT_GE(b.gap_seconds, 0.001);
  EXPECT_THROW(t.collect(), Error);
}

// Results answered from the host leave their times on the timeline; collect_done takes, in
// order and without waiting, at most the number asked of the batches whose work has run (on
// the CPU, every marked one), summing their times.
TEST(ForwardTimeline, CollectDoneSumsTheMarkedBatchesUpToTheNumberAsked) {
  using namespace std::chrono_literals;
  ForwardTimeline t(Device::kCpu, 50ms);
  for (int i = 0; i < 3; ++i) {
    t.begin(Stream::cpu());
    std::this_thread::sleep_for(2ms);
    t.mark_end(Stream::cpu());
  }
  size_t collected = 99;
  const ForwardTimes two = t.collect_done(2, collected);
  EXPECT_EQ(collected, 2u);
  EXPECT_GE(two.forward_seconds, 0.004);
  const ForwardTimes rest = t.collect_done(5, collected);
  EXPECT_EQ(collected, 1u);
  EXPECT_GE(rest.forward_seconds, 0.002);
  const ForwardTimes none = t.collect_done(5, collected);
  EXPECT_EQ(collected, 0u);
  EXPECT_EQ(none.forward_seconds, 0.0);
  EXPECT_THROW(t.collect(), Error);
}
