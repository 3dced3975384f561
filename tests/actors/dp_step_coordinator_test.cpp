// The DP-attention lock-step coordinator, driven by message injection (no actors, no ranks).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <sstream>

#include "actors/core/dp_step_coordinator.hpp"
#include "actors/core/forward_batch_of.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "spec/cuda_graph_buckets.hpp"

using namespace aerie;
using core::DpStepCoordinator;
using transport::BatchMessage;
using transport::ForwardMode;

namespace {

// A plan of `requests` requests with `per` tokens each, in `mode`.
BatchMessage plan(ForwardMode mode, int requests, int per = 1) {
  BatchMessage m;
  m.mode = mode;
  for (int r = 0; r < requests; ++r) {
    m.rids.push_back(static_cast<uint64_t>(r));
    for (int t = 0; t < per; ++t) m.input_ids.push_back(1);
  }
  if (mode == ForwardMode::kVerify) m.spec_draft_tokens = per;
  return m;
}

core::DpStepOptions options(int groups) { return {.dp_size = groups, .bucket_sizes = spec::cuda_graph_bucket_sizes(64)}; }

}  // namespace

TEST(DpStepCoordinator, AGroupWithoutWorkGetsAnIdleBatchOfTheSameStep) {
  DpStepCoordinator c(options(3));
  const uint64_t id = c.begin_step();
  c.offer(0, plan(ForwardMode::kDecode, 5));
  EXPECT_FALSE(c.collected());
  c.offer(1, std::nullopt);
  c.offer(2, plan(ForwardMode::kDecode, 3));
  ASSERT_TRUE(c.collected());
  auto msgs = c.release();
  ASSERT_TRUE(msgs);
  ASSERT_EQ(msgs->size(), 3u);
  EXPECT_EQ((*msgs)[1].mode, ForwardMode::kIdle);
  EXPECT_TRUE((*msgs)[1].input_ids.empty());
  for (const auto& m : *msgs) {
    EXPECT_EQ(m.step_id, id);
    EXPECT_EQ(m.global_num_tokens, (std::vector<int64_t>{5, 0, 3}));
    EXPECT_EQ(m.dp_padding, 1);  // 8 * 2 > 5 * 3: MAX_LEN
    EXPECT_EQ(m.bucket, 5);
    EXPECT_EQ(m.dp_tokens_per_request, 1);
  }
  EXPECT_EQ(c.last_step().idle_groups, 1);
  // The step ends when every group, the idle one included, has answered.
  EXPECT_FALSE(c.on_result(0));
  EXPECT_FALSE(c.on_result(2));
  EXPECT_TRUE(c.on_result(1));
  EXPECT_EQ(c.phase(), DpStepCoordinator::Phase::kIdle);
  EXPECT_EQ(c.begin_step(), id + 1);
}

TEST(DpStepCoordinator, NoWorkAnywhereSkipsTheStep) {
  DpStepCoordinator c(options(2));
  c.begin_step();
  c.offer(0, std::nullopt);
  c.offer(1, plan(ForwardMode::kDecode, 0));  // an empty plan is idle too
  EXPECT_FALSE(c.release());
  EXPECT_EQ(c.phase(), DpStepCoordinator::Phase::kIdle);
  EXPECT_EQ(c.steps_run(), 0u);
}

TEST(DpStepCoordinator, AnExtendAnywhereMeansSumLenAndNoBucket) {
  DpStepCoordinator c(options(2));
  c.begin_step();
  c.offer(0, plan(ForwardMode::kExtend, 1, 40));
  c.offer(1, plan(ForwardMode::kVerify, 2, 4));
  auto msgs = c.release();
  ASSERT_TRUE(msgs);
  for (const auto& m : *msgs) {
    EXPECT_EQ(m.dp_padding, 2);
    EXPECT_EQ(m.bucket, 0);
    EXPECT_EQ(m.global_num_tokens, (std::vector<int64_t>{40, 8}));
  }
  // The plan each rank rebuilds from its message: the gathered rows are the sum.
  const auto p = core::dp_plan_of((*msgs)[1]);
  EXPECT_EQ(p.gathered_rows, 48);
  EXPECT_EQ(p.offsets, (std::vector<int64_t>{0, 40}));
}

TEST(DpStepCoordinator, VerifyBucketsCountRequests) {
  DpStepCoordinator c(options(2));
  c.begin_step();
  c.offer(0, plan(ForwardMode::kVerify, 9, 4));  // 36 tokens, 9 requests
  c.offer(1, plan(ForwardMode::kVerify, 7, 4));
  auto msgs = c.release();
  ASSERT_TRUE(msgs);
  EXPECT_EQ((*msgs)[0].bucket, 10);  // 9 requests pad to the bucket of 10, not of 36 tokens
  EXPECT_EQ((*msgs)[0].dp_tokens_per_request, 4);
  const auto p = core::dp_plan_of((*msgs)[0]);
  EXPECT_EQ(p.tokens_per_rank, 40);
  EXPECT_EQ(p.gathered_rows, 80);
  // A decode beside a verify shares no graph: eager.
  c.on_result(0);
  c.on_result(1);
  c.begin_step();
  c.offer(0, plan(ForwardMode::kVerify, 3, 4));
  c.offer(1, plan(ForwardMode::kDecode, 3));
  EXPECT_EQ(c.release()->at(0).bucket, 0);
}

TEST(DpStepCoordinator, OutOfTurnCallsAreErrors) {
  DpStepCoordinator c(options(2));
  EXPECT_THROW(c.offer(0, std::nullopt), Error);  // no step collecting
  c.begin_step();
  EXPECT_THROW(c.begin_step(), Error);
  c.offer(0, std::nullopt);
  EXPECT_THROW(c.offer(0, std::nullopt), Error);  // twice
  EXPECT_THROW(c.offer(2, std::nullopt), Error);  // no such group
  EXPECT_THROW(c.release(), Error);               // group 1 has not offered
  BatchMessage short_verify = plan(ForwardMode::kVerify, 2, 3);
  short_verify.input_ids.pop_back();  // not requests x draft tokens
  EXPECT_THROW(c.offer(1, short_verify), Error);
}

// Every rank rebuilds the step's plan from its own group's message and logs it: for 1,000
// random steps of growing and shrinking batches, every group's message gives the same
// bucket, mode and gathered layout, the bucket holds every group's requests, and the debug
// lines every rank writes (core::log_dp_step, as the worker does) name the same bucket.
TEST(DpStepCoordinator, EveryGroupGetsTheSameBucketForAThousandRandomSteps) {
  std::mt19937 rng(11);
  std::map<uint64_t, std::set<std::string>> logged;  // step -> "bucket B padding P" lines seen
  log::set_level(log::Level::kDebug);
  log::set_test_sink([&](log::Level, const std::string& line) {
    const auto at = line.find("DP step ");
    if (at == std::string::npos) return;
    std::istringstream in(line.substr(at + 8));
    uint64_t step = 0;
    std::string rest;
    in >> step;
    std::getline(in, rest);
    logged[step].insert(rest.substr(0, rest.find(" tokens")));
  });
  const int groups = 4;
  DpStepCoordinator c(options(groups));
  int bucketed = 0, idle_steps = 0;
  for (int step = 0; step < 1000; ++step) {
    c.begin_step();
    const bool verify = rng() % 2 == 0;
    const int per = verify ? 4 : 1;
    for (int g = 0; g < groups; ++g) {
      const int requests = static_cast<int>(rng() % 5 == 0 ? 0 : rng() % 80);
      const bool extend = rng() % 10 == 0;
      if (requests == 0) c.offer(g, std::nullopt);
      else c.offer(g, extend ? plan(ForwardMode::kExtend, 1, requests) : plan(verify ? ForwardMode::kVerify : ForwardMode::kDecode, requests, per));
    }
    auto msgs = c.release();
    if (!msgs) {
      ++idle_steps;
      continue;
    }
    const auto first = core::dp_plan_of(msgs->front());
    for (const auto& m : *msgs) {
      core::log_dp_step(m);
      const auto p = core::dp_plan_of(m);
      EXPECT_EQ(m.bucket, msgs->front().bucket);
      EXPECT_EQ(p.mode, first.mode);
      EXPECT_EQ(p.offsets, first.offsets);
      EXPECT_EQ(p.gathered_rows, first.gathered_rows);
      if (m.bucket > 0) {
        EXPECT_GE(static_cast<int64_t>(m.bucket) * m.dp_tokens_per_request, static_cast<int64_t>(m.input_ids.size()));
      }
    }
    bucketed += msgs->front().bucket > 0 ? 1 : 0;
    for (int g = 0; g < groups; ++g) c.on_result(g);
  }
  log::set_test_sink({});
  log::set_level(log::Level::kWarning);
  EXPECT_GT(bucketed, 100);  // the test saw padded steps, not only eager ones
  EXPECT_EQ(c.steps_run() + static_cast<uint64_t>(idle_steps), 1000u);
  EXPECT_EQ(logged.size(), c.steps_run());
  for (const auto& [step, lines] : logged) EXPECT_EQ(lines.size(), 1u) << "step " << step << " logged different buckets";
}
