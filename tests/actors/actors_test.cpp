// The actors driven by injected messages: the Scheduler with a stand-in worker, the
// TargetWorker with injected batches, the Router with stand-in schedulers; and CAF
// serialization round trips of every message type.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <mutex>
#include <thread>
#include <zmq.hpp>

#include "actors/core/generation_engine.hpp"
#include "actors/frontend_actor.hpp"
#include "actors/messages.hpp"
#include "tests/actors/actor_test_system.hpp"
#include "actors/router_actor.hpp"
#include "actors/scheduler_actor.hpp"
#include "actors/target_worker_actor.hpp"
#include "kernels/error.hpp"

using namespace aerie;
using namespace aerie::actors;
using namespace std::chrono_literals;

namespace {

using System = aerie::testing::ActorTestSystem;

template <class T>
T caf_round_trip(caf::actor_system& sys, T x) {
  std::vector<char> buf;
  caf::binary_serializer sink{sys, buf};
  EXPECT_FALSE(sink(x));
  T y;
  caf::binary_deserializer source{sys, buf};
  EXPECT_FALSE(source(y));
  return y;
}

core::GenerationRequest request(int prompt_len, int max_new) {
  core::GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(10 + i);
  r.max_new_tokens = max_new;
  r.sampling.temperature = 0.0f;
  r.ignore_eos = true;
  return r;
}

transport::BatchResult answer(const transport::BatchMessage& b) {
  transport::BatchResult r{.seq = 0, .step_id = b.step_id, .rids = b.rids, .next_tokens = {}, .error = ""};
  for (int32_t row : b.logit_rows) r.next_tokens.push_back(100 + b.positions[static_cast<size_t>(row)]);
  return r;
}

core::SchedulerOptions scheduler_options() {
  return {.max_running_requests = 16, .chunked_prefill_size = 64, .eos_token_ids = {2}, .vocab_size = 512, .context_length = 4096};
}

// A Scheduler actor (`behaviour`: scheduler_actor, or DP attention's lock-step one) over a
// 64-page pool, whose worker (or DP coordinator) is the test's scoped actor `peer`.
template <class Behaviour>
caf::actor spawn_scheduler(System& s, Behaviour behaviour, caf::scoped_actor& peer) {
  return s.sys->spawn(behaviour, model::KvCacheShape{.num_pages = 64, .page_size = 4}, scheduler_options(), caf::actor_cast<caf::actor>(peer),
                      SchedulerFaults{});
}

}  // namespace

TEST(ActorMessages, CafRoundTrips) {
  System s;
  SubmitRequest sub{7, request(5, 3)};
  sub.request.sampling = {.temperature = 0.5f, .top_p = 0.9f, .top_k = 7, .min_p = 0.1f, .seed = 99};
  sub.request.stop_token_ids = {3, 4};
  auto sub2 = caf_round_trip(*s.sys, sub);
  EXPECT_EQ(sub2.rid, 7u);
  EXPECT_EQ(sub2.request.prompt, sub.request.prompt);
  EXPECT_EQ(sub2.request.sampling.top_k, 7);
  EXPECT_EQ(sub2.request.stop_token_ids, sub.request.stop_token_ids);
  RequestDone done{3, {.output_ids = {1, 2}, .finish_reason = "stop", .prompt_tokens = 9}, ""};
  auto done2 = caf_round_trip(*s.sys, done);
  EXPECT_EQ(done2.result.output_ids, done.result.output_ids);
  EXPECT_EQ(done2.result.finish_reason, "stop");
  SubmitGroup group{{sub, SubmitRequest{8, request(2, 1)}}};
  group.members[0].group_follows = true;
  auto group2 = caf_round_trip(*s.sys, group);
  ASSERT_EQ(group2.members.size(), 2u);
  EXPECT_EQ(group2.members[0].rid, 7u);
  EXPECT_TRUE(group2.members[0].group_follows);
  EXPECT_EQ(group2.members[1].rid, 8u);
  EXPECT_FALSE(group2.members[1].group_follows);
  transport::BatchMessage b;
  b.step_id = 4;
  b.mode = transport::ForwardMode::kDecode;
  b.input_ids = {1, 2};
  b.sampling = {{.temperature = 1.0f, .top_p = 0.5f, .min_p = 0.0f, .top_k = 3, .seed = 1, .step = 2}};
  EXPECT_EQ(caf_round_trip(*s.sys, b), b);
  transport::BatchResult r{.seq = 1, .step_id = 4, .rids = {9}, .next_tokens = {5}, .error = "x"};
  EXPECT_EQ(caf_round_trip(*s.sys, r), r);
}

TEST(SchedulerActor, DrivesRequestsWithInjectedWorkerResults) {
  System s;
  caf::scoped_actor client{*s.sys}, worker{*s.sys};
  auto scheduler = spawn_scheduler(s, scheduler_actor, worker);
  auto h1 = client->request(scheduler, caf::infinite, SubmitRequest{1, request(5, 3)});
  auto h2 = client->request(scheduler, caf::infinite, SubmitRequest{2, request(3, 2)});
  auto bad = client->request(scheduler, caf::infinite, SubmitRequest{3, request(0, 2)});  // rejected at once
  bad.receive([](RequestDone& d) { EXPECT_NE(d.error.find("prompt is empty"), std::string::npos); },
              [](caf::error&) { ADD_FAILURE() << "no reply"; });
  // Play the worker: answer every batch the scheduler sends until both requests are done.
  int batches = 0;
  for (; batches < 10; ++batches) {
    bool got = false;
    worker->receive([&](transport::BatchMessage& b) -> transport::BatchResult {
                      got = true;
                      return answer(b);
                    },
                    caf::after(std::chrono::milliseconds(200)) >> [] {});
    if (!got) break;
  }
  EXPECT_EQ(batches, 3);  // one prefill of both, then two decodes (request 2 ends after one)
  h1.receive([](RequestDone& d) {
               EXPECT_EQ(d.result.output_ids, (std::vector<int32_t>{104, 105, 106}));
               EXPECT_EQ(d.result.finish_reason, "length");
             },
             [](caf::error&) { ADD_FAILURE(); });
  h2.receive([](RequestDone& d) { EXPECT_EQ(d.result.output_ids, (std::vector<int32_t>{102, 103})); },
             [](caf::error&) { ADD_FAILURE(); });
}

// The n samples of one prompt come as a group: the Scheduler plans nothing until the last
// member is in, so the first computes the prompt and the others share its whole pages however
// fast it finishes (one output token here: it ends with its prefill). Sent one by one, a
// sample that finished before the next arrived left it nothing to share (a fidelity.hf_parity
// failure on a busy CI machine: cached_tokens 0 for every sample).
TEST(SchedulerActor, AGroupIsAdmittedTogetherAndSharesItsPrompt) {
  System s;
  caf::scoped_actor client{*s.sys}, worker{*s.sys};
  auto scheduler = spawn_scheduler(s, scheduler_actor, worker);
  auto member = [](uint64_t rid, bool follows) {
    SubmitRequest m{rid, request(9, 1)};  // 9 prompt tokens: 2 whole pages of 4 before the last
    m.group_follows = follows;
    return m;
  };
  std::vector<decltype(client->request(scheduler, caf::infinite, SubmitRequest{}))> done;
  done.push_back(client->request(scheduler, caf::infinite, member(1, true)));
  done.push_back(client->request(scheduler, caf::infinite, member(2, true)));
  bool early = false;
  worker->receive([&](transport::BatchMessage& b) -> transport::BatchResult {
                    early = true;
                    return answer(b);
                  },
                  caf::after(300ms) >> [] {});
  EXPECT_FALSE(early) << "a batch was planned before the group's last member came";
  done.push_back(client->request(scheduler, caf::infinite, member(3, false)));
  std::vector<std::vector<uint64_t>> batches;
  for (int i = 0; i < 10; ++i) {
    bool got = false;
    worker->receive([&](transport::BatchMessage& b) -> transport::BatchResult {
                      got = true;
                      batches.push_back(b.rids);
                      return answer(b);
                    },
                    caf::after(300ms) >> [] {});
    if (!got) break;
  }
  ASSERT_GE(batches.size(), 2u);
  EXPECT_EQ(batches[0], (std::vector<uint64_t>{1}));  // the others wait for its prompt pages
  std::vector<int64_t> cached;
  for (auto& h : done)
    h.receive([&](RequestDone& d) { cached.push_back(d.result.cached_tokens); }, [](caf::error&) { ADD_FAILURE(); });
  EXPECT_EQ(cached, (std::vector<int64_t>{0, 8, 8}));
}

TEST(SchedulerActor, AWorkerErrorFailsTheBatchsRequests) {
  System s;
  caf::scoped_actor client{*s.sys}, worker{*s.sys};
  auto scheduler = spawn_scheduler(s, scheduler_actor, worker);
  auto h = client->request(scheduler, caf::infinite, SubmitRequest{1, request(5, 3)});
  worker->receive([](transport::BatchMessage& b) -> transport::BatchResult {
    return {.seq = 0, .step_id = b.step_id, .rids = {}, .next_tokens = {}, .error = "out of device memory"};
  });
  h.receive([](RequestDone& d) { EXPECT_EQ(d.result.finish_reason, "error: out of device memory"); },
            [](caf::error&) { ADD_FAILURE(); });
}

// DP attention's lock-step Scheduler plans only when its coordinator asks (PlanStep). A result
// that leaves work to plan must say so (WorkArrived): with overlap the coordinator may have
// collected the next step's plans before the result arrived, found nothing, and gone idle
// (launch.mpi_dp_attention hung ~1 run in 14 that way, the 300-token prompt's next chunk waiting
// for the pages a finishing request freed).
TEST(LockstepSchedulerActor, AResultThatLeavesWorkWakesTheCoordinator) {
  System s;
  caf::scoped_actor client{*s.sys}, coordinator{*s.sys};
  auto scheduler = spawn_scheduler(s, lockstep_scheduler_actor, coordinator);
  auto done = client->request(scheduler, caf::infinite, SubmitRequest{1, request(5, 3)});
  bool woken = false;
  auto expect_wake = [&](bool want, const char* when) {
    woken = false;
    coordinator->receive([&](WorkArrived) { woken = true; }, caf::after(want ? 2s : 300ms) >> [] {});
    EXPECT_EQ(woken, want) << when;
  };
  expect_wake(true, "a submitted request wakes the coordinator");
  auto plan = [&](uint64_t step) {
    StepPlan p;
    coordinator->request(scheduler, caf::infinite, PlanStep{step}).receive([&](StepPlan& x) { p = std::move(x); },
                                                                          [](caf::error&) { ADD_FAILURE() << "no plan"; });
    return p;
  };
  StepPlan prefill = plan(1);
  ASSERT_TRUE(prefill.has_batch);
  // The next step is collected while the prefill runs: the request's batch is in flight, so
  // there is nothing to plan yet.
  EXPECT_FALSE(plan(2).has_batch);
  coordinator->send(scheduler, StepOutcome{answer(prefill.batch)});
  expect_wake(true, "the prefill's result leaves two tokens to decode");
  for (uint64_t step = 3; step < 10; ++step) {
    StepPlan p = plan(step);
    if (!p.has_batch) break;
    coordinator->send(scheduler, StepOutcome{answer(p.batch)});
    if (p.batch.positions.back() == 6) expect_wake(false, "the last token's result leaves nothing to plan");
    else expect_wake(true, "a decode's result leaves the next token");
  }
  done.receive([](RequestDone& d) { EXPECT_EQ(d.result.output_ids, (std::vector<int32_t>{104, 105, 106})); },
               [](caf::error&) { ADD_FAILURE() << "no answer"; });
}

TEST(TargetWorkerActor, AnswersInjectedBatchesLikeTheCore) {
  System s;
  auto cfg = model::LlamaConfig::named_shape("tiny");
  auto make = [&] {
    auto m = std::make_shared<model::LlamaModel>(cfg, model::random_llama_weights(cfg, 5, Device::kCpu, DType::kF32, 0.1f), Stream::cpu(),
                                                 DType::kF32);
    auto kv = std::make_shared<model::KvCache>(cfg, model::kv_shape_for_tokens(256, 4), Device::kCpu, DType::kF32);
    return std::pair{m, kv};
  };
  auto [m1, kv1] = make();
  auto [m2, kv2] = make();
  auto core1 = std::make_shared<core::TargetWorkerCore>(*m1, *kv1, core::WorkerOptions{});
  core::TargetWorkerCore core2(*m2, *kv2, {});
  auto worker = s.sys->spawn<caf::detached>(target_worker_actor, core1);
  core::SchedulerCore planner(kv1->shape(), core::scheduler_options_for(cfg, 16, 64));
  planner.submit(1, request(7, 4));
  planner.submit(2, request(3, 4));
  caf::scoped_actor self{*s.sys};
  while (planner.has_work()) {
    auto b = planner.plan_next();
    ASSERT_TRUE(b);
    auto expected = core2.execute(*b);
    transport::BatchResult got;
    self->request(worker, caf::infinite, *b).receive([&](transport::BatchResult& r) { got = r; },
                                                     [](caf::error&) { ADD_FAILURE() << "no reply"; });
    for (auto* r : {&got, &expected}) r->forward_seconds = r->gap_seconds = 0;  // timings differ
    EXPECT_EQ(got, expected);
    planner.on_result(got);
  }
  // A malformed batch comes back as an error, and the worker keeps serving.
  transport::BatchMessage bad;
  bad.input_ids = {1};
  bad.rids = {1};
  self->request(worker, caf::infinite, bad).receive([](transport::BatchResult& r) { EXPECT_FALSE(r.error.empty()); },
                                                    [](caf::error&) { ADD_FAILURE(); });
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}

// WorkerStop (what a launch sends before it takes the model down): answered after the batch
// in flight has run (its result comes first); later batches are refused with an error.
TEST(TargetWorkerActor, StopRunsWhatIsInFlightThenRefusesBatches) {
  System s;
  auto cfg = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel m(cfg, model::random_llama_weights(cfg, 5, Device::kCpu, DType::kF32, 0.1f), Stream::cpu(), DType::kF32);
  model::KvCache kv(cfg, model::kv_shape_for_tokens(256, 4), Device::kCpu, DType::kF32);
  auto core = std::make_shared<core::TargetWorkerCore>(m, kv, core::WorkerOptions{});
  auto worker = s.sys->spawn<caf::detached>(target_worker_actor, core);
  core::SchedulerCore planner(kv.shape(), core::scheduler_options_for(cfg, 16, 64));
  planner.submit(1, request(7, 4));
  auto batch = planner.plan_next();
  ASSERT_TRUE(batch);
  caf::scoped_actor self{*s.sys};
  // The batch and the stop go out back to back: the result is answered before the stop.
  std::vector<std::string> order;
  auto result = self->request(worker, caf::infinite, *batch);
  auto stop = self->request(worker, caf::infinite, WorkerStop{});
  result.receive(
      [&](transport::BatchResult& r) {
        EXPECT_TRUE(r.error.empty()) << r.error;
        EXPECT_EQ(r.step_id, batch->step_id);
        order.push_back("result");
      },
      [](caf::error&) { ADD_FAILURE() << "no result"; });
  stop.receive([&](WorkerStop) { order.push_back("stop"); }, [](caf::error&) { ADD_FAILURE() << "no stop"; });
  EXPECT_EQ(order, (std::vector<std::string>{"result", "stop"}));
  transport::BatchMessage late = *batch;
  late.step_id += 1;
  self->request(worker, caf::infinite, late)
      .receive(
          [&](transport::BatchResult& r) {
            EXPECT_EQ(r.error, "the target worker has stopped");
            EXPECT_EQ(r.step_id, late.step_id);
            EXPECT_EQ(r.rids, late.rids);
          },
          [](caf::error&) { ADD_FAILURE() << "no reply to a batch after the stop"; });
  // A second stop is answered too.
  self->request(worker, caf::infinite, WorkerStop{}).receive([](WorkerStop) {}, [](caf::error&) { ADD_FAILURE(); });
  self->send_exit(worker, caf::exit_reason::user_shutdown);
}

// A batch says what it is (transport::ForwardMode) and the worker holds it to that: an IDLE
// batch with tokens, a DECODE without, a VERIFY to a worker without a draft and a mode no
// enum names each come back as an error naming the batch; a well-formed IDLE batch runs.
TEST(TargetWorkerCore, RefusesBatchesWhoseModeDisagreesWithThem) {
  auto cfg = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel m(cfg, model::random_llama_weights(cfg, 5, Device::kCpu, DType::kF32, 0.1f), Stream::cpu(), DType::kF32);
  model::KvCache kv(cfg, model::kv_shape_for_tokens(64, 1), Device::kCpu, DType::kF32);
  core::TargetWorkerCore worker(m, kv, {});
  auto batch = [](transport::ForwardMode mode, bool tokens) {
    transport::BatchMessage b;
    b.step_id = 9;
    b.mode = mode;
    if (tokens) {
      b.rids = {1};
      b.input_ids = {5};
      b.positions = {0};
      b.out_cache_loc = {1};
      b.qo_indptr = {0, 1};
      b.kv_indptr = {0, 1};
      b.kv_indices = {1};
      b.logit_rows = {0};
      b.sampling = {transport::SamplingRowMsg{}};
    }
    return b;
  };
  const struct {
    transport::BatchMessage b;
    const char* says;
  } bad[] = {{batch(transport::ForwardMode::kIdle, true), "is IDLE but carries tokens"},
             {batch(transport::ForwardMode::kDecode, false), "has no tokens but is not IDLE"},
             {batch(transport::ForwardMode::kVerify, true), "is a VERIFY, but this worker has no draft model"},
             {batch(static_cast<transport::ForwardMode>(17), true), "has no forward mode (17)"}};
  for (const auto& c : bad) {
    const auto r = worker.execute(c.b);
    EXPECT_NE(r.error.find(c.says), std::string::npos) << r.error;
    EXPECT_NE(r.error.find("batch 9"), std::string::npos) << r.error;
  }
  EXPECT_EQ(worker.execute(batch(transport::ForwardMode::kIdle, false)).error, "");
  const auto ok = worker.execute(batch(transport::ForwardMode::kDecode, true));
  EXPECT_EQ(ok.error, "");
  EXPECT_EQ(ok.next_tokens.size(), 1u);
}

TEST(RouterActor, SpreadsRequestsOverTheLeastBusySchedulers) {
  System s;
  caf::scoped_actor client{*s.sys}, a{*s.sys}, b{*s.sys};
  auto router = s.sys->spawn(router_actor, std::vector<caf::actor>{caf::actor_cast<caf::actor>(a), caf::actor_cast<caf::actor>(b)},
                             std::shared_ptr<core::EngineFault>{});
  std::vector<decltype(client->request(router, caf::infinite, SubmitRequest{}))> pending;
  for (uint64_t rid = 0; rid < 4; ++rid) pending.push_back(client->request(router, caf::infinite, SubmitRequest{rid, request(2, 1)}));
  std::vector<uint64_t> at_a, at_b;
  for (int i = 0; i < 2; ++i) {
    a->receive([&](SubmitRequest& r) -> RequestDone {
      at_a.push_back(r.rid);
      return {r.rid, {.output_ids = {1}, .finish_reason = "length", .prompt_tokens = 2}, ""};
    });
    b->receive([&](SubmitRequest& r) -> RequestDone {
      at_b.push_back(r.rid);
      return {r.rid, {.output_ids = {2}, .finish_reason = "length", .prompt_tokens = 2}, ""};
    });
  }
  EXPECT_EQ(at_a.size(), 2u);
  EXPECT_EQ(at_b.size(), 2u);
  for (auto& h : pending)
    h.receive([](RequestDone& d) { EXPECT_EQ(d.result.finish_reason, "length"); }, [](caf::error&) { ADD_FAILURE(); });
}

// A group goes to one Scheduler, in order, every member but the last marked as followed; each
// member's reply goes to its stream_to, and a member without one is dropped.
TEST(RouterActor, SendsAGroupToOneSchedulerInOrder) {
  System s;
  caf::scoped_actor client{*s.sys}, a{*s.sys}, b{*s.sys}, sample1{*s.sys}, sample2{*s.sys};
  auto router = s.sys->spawn(router_actor, std::vector<caf::actor>{caf::actor_cast<caf::actor>(a), caf::actor_cast<caf::actor>(b)},
                             std::shared_ptr<core::EngineFault>{});
  auto busy = client->request(router, caf::infinite, SubmitRequest{9, request(2, 1)});  // a (ties go to the first): the group goes to b
  SubmitGroup group;
  group.members.push_back({1, request(3, 1), caf::actor_cast<caf::actor>(sample1)});
  group.members.push_back({2, request(3, 1), caf::actor{}});  // nobody to answer: dropped
  group.members.push_back({3, request(3, 1), caf::actor_cast<caf::actor>(sample2)});
  client->send(router, std::move(group));
  std::vector<std::pair<uint64_t, bool>> at_b;
  for (int i = 0; i < 2; ++i)
    b->receive([&](SubmitRequest& r) -> RequestDone {
      at_b.emplace_back(r.rid, r.group_follows);
      return {r.rid, {.output_ids = {static_cast<int32_t>(r.rid)}, .finish_reason = "length", .prompt_tokens = 3}, ""};
    });
  EXPECT_EQ(at_b, (std::vector<std::pair<uint64_t, bool>>{{1, true}, {3, false}}));
  b->receive([](SubmitRequest&) { ADD_FAILURE() << "the member without stream_to was sent"; }, caf::after(100ms) >> [] {});
  sample1->receive([](RequestDone& d) { EXPECT_EQ(d.rid, 1u); }, caf::after(5s) >> [] { ADD_FAILURE() << "no reply for 1"; });
  sample2->receive([](RequestDone& d) { EXPECT_EQ(d.rid, 3u); }, caf::after(5s) >> [] { ADD_FAILURE() << "no reply for 3"; });
  a->receive([](SubmitRequest& r) -> RequestDone {
    EXPECT_EQ(r.rid, 9u);
    EXPECT_FALSE(r.group_follows);
    return {r.rid, {.output_ids = {1}, .finish_reason = "length", .prompt_tokens = 2}, ""};
  });
  busy.receive([](RequestDone&) {}, [](caf::error&) { ADD_FAILURE(); });
}

TEST(FrontendActor, TurnsLinesIntoRequestsAndRepliesIntoLines) {
  System s;
  caf::scoped_actor client{*s.sys}, router{*s.sys};
  std::mutex mu;
  std::vector<std::string> lines;
  auto parse = [](const std::string& text) -> std::pair<std::string, core::GenerationRequest> {
    if (text == "bad") throw Error("malformed request");
    return {text, request(3, 2)};
  };
  auto write = [&](const std::string& l) {
    std::lock_guard<std::mutex> lock(mu);
    lines.push_back(l);
  };
  auto frontend = s.sys->spawn(frontend_actor, caf::actor_cast<caf::actor>(router), parse, write);
  client->send(frontend, ClientLine{"bad"});
  client->send(frontend, ClientLine{"first"});
  router->receive([](SubmitRequest& r) -> RequestDone {
    return {r.rid, {.output_ids = {7, 8}, .finish_reason = "length", .prompt_tokens = 3}, ""};
  });
  client->request(frontend, caf::infinite, DrainRequest{}).receive([](bool drained) { EXPECT_TRUE(drained); },
                                                                  [](caf::error&) { ADD_FAILURE(); });
  std::lock_guard<std::mutex> lock(mu);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_NE(lines[0].find("invalid_request"), std::string::npos) << lines[0];
  EXPECT_NE(lines[1].find("\"output_ids\":[7,8]"), std::string::npos) << lines[1];
  EXPECT_NE(lines[1].find("\"rid\":\"first\""), std::string::npos) << lines[1];
}

TEST(RemoteWorkerActor, CarriesBatchesOverZeroMqAndSkipsStaleResults) {
  System s;
  zmq::context_t ctx;
  auto link = std::make_shared<RemoteWorkerLink>();
  link->to_worker = std::make_unique<transport::ZmqSender>(ctx, "inproc://to-worker", true);
  link->from_worker = std::make_unique<transport::ZmqReceiver>(ctx, "inproc://from-worker", true);
  transport::ZmqReceiver worker_in(ctx, "inproc://to-worker", false);
  transport::ZmqSender worker_out(ctx, "inproc://from-worker", false);
  auto remote = s.sys->spawn<caf::detached>(remote_worker_actor, link);
  // The other rank: answers with a stale result first, then the right one.
  std::thread other([&] {
    auto m = worker_in.receive(std::chrono::seconds(5));
    ASSERT_TRUE(m && std::holds_alternative<transport::BatchMessage>(*m));
    const auto& b = std::get<transport::BatchMessage>(*m);
    worker_out.send(transport::BatchResult{.seq = 0, .step_id = b.step_id + 100, .rids = {}, .next_tokens = {}, .logprobs = {}, .token_counts = {}, .error = ""});
    worker_out.send(answer(b));
  });
  transport::BatchMessage b;
  b.step_id = 3;
  b.positions = {0, 1};
  b.rids = {5};
  b.logit_rows = {1};
  caf::scoped_actor self{*s.sys};
  self->request(remote, caf::infinite, b).receive(
      [](transport::BatchResult& r) {
        EXPECT_EQ(r.step_id, 3u);
        EXPECT_EQ(r.next_tokens, std::vector<int32_t>{101});
      },
      [](caf::error&) { ADD_FAILURE(); });
  other.join();
  self->send_exit(remote, caf::exit_reason::user_shutdown);
}
