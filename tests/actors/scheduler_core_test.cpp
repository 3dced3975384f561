// SchedulerCore on its own: the batches it plans and how it commits results, with a
// worker stand-in that answers every sampled row with (position of the row + 1).
#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include <limits>

#include <cmath>

#include "actors/core/logit_adjustments.hpp"
#include "actors/core/scheduler_core.hpp"
#include "kernels/error.hpp"

using namespace aerie;
using namespace aerie::core;

namespace {

SchedulerOptions options(int64_t chunk = 8192, int64_t max_running = 256) {
  return {.max_running_requests = max_running, .chunked_prefill_size = chunk, .eos_token_ids = {2}, .vocab_size = 1000,
          .context_length = 4096};
}

// Each call's prompt differs from the others' (equal prompts would share their pages)
// unless `first` names the first token.
GenerationRequest request(int prompt_len, int max_new, float temperature = 0.0f, int first = -1) {
  static int calls = 0;
  if (first < 0) first = 10 + (calls++ % 16) * 31;
  GenerationRequest r;
  for (int i = 0; i < prompt_len; ++i) r.prompt.push_back(first + i);
  r.max_new_tokens = max_new;
  r.sampling.temperature = temperature;
  return r;
}

// Answers each sampled row with the position of its token + 1 (never EOS for short tests).
transport::BatchResult answer(const transport::BatchMessage& b) {
  transport::BatchResult r{.seq = 0, .step_id = b.step_id, .rids = b.rids, .next_tokens = {}, .error = ""};
  for (int32_t row : b.logit_rows) r.next_tokens.push_back(100 + b.positions[static_cast<size_t>(row)]);
  return r;
}

}  // namespace

TEST(SchedulerCore, ChunksLongPromptsAndSamplesOnlyTheLastChunk) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options(/*chunk=*/8));
  s.submit(1, request(20, 2));
  auto b1 = s.plan_next();
  ASSERT_TRUE(b1);
  EXPECT_EQ(b1->input_ids.size(), 8u);
  EXPECT_TRUE(b1->rids.empty());  // first chunk: nothing to sample
  EXPECT_FALSE(s.plan_next());    // one batch in flight at a time
  auto u1 = s.on_result(answer(*b1));
  ASSERT_EQ(u1.size(), 1u);
  EXPECT_TRUE(u1[0].new_tokens.empty());
  auto b2 = s.plan_next();
  EXPECT_EQ(b2->positions.front(), 8);
  EXPECT_EQ(b2->kv_indices.size(), 16u);  // the context so far, this chunk included
  s.on_result(answer(*b2));
  auto b3 = s.plan_next();
  EXPECT_EQ(b3->input_ids.size(), 4u);
  ASSERT_EQ(b3->rids, std::vector<uint64_t>{1});
  EXPECT_EQ(b3->logit_rows, std::vector<int32_t>{3});
  auto u3 = s.on_result(answer(*b3));
  EXPECT_EQ(u3[0].new_tokens, std::vector<int32_t>{119});  // after position 19
  auto b4 = s.plan_next();  // a decode of the sampled token
  EXPECT_EQ(b4->input_ids, std::vector<int32_t>{119});
  EXPECT_EQ(b4->mode, transport::ForwardMode::kDecode);
  auto u4 = s.on_result(answer(*b4));
  ASSERT_TRUE(u4[0].finished);
  EXPECT_EQ(u4[0].result.output_ids, (std::vector<int32_t>{119, 120}));
  EXPECT_EQ(u4[0].result.finish_reason, "length");
  EXPECT_FALSE(s.has_work());
  EXPECT_EQ(s.free_pages(), 63);
}

TEST(SchedulerCore, MixesDecodesWithNewPromptsAndPreemptsWhenShort) {
  SchedulerCore s({.num_pages = 5, .page_size = 4}, options());  // 16 usable tokens
  s.submit(1, request(6, 8));
  s.submit(2, request(6, 8));
  auto b = s.plan_next();
  EXPECT_EQ(b->rids, (std::vector<uint64_t>{1, 2}));
  int finished = 0;
  for (;;) {
    for (auto& u : s.on_result(answer(*b))) finished += u.finished;
    if (!s.has_work()) break;
    b = s.plan_next();
    ASSERT_TRUE(b);
  }
  EXPECT_EQ(finished, 2);
  EXPECT_GT(s.stats().preemptions, 0);  // 2 x 13 tokens do not fit in 16 slots together
  EXPECT_EQ(s.free_pages(), 4);
}

TEST(SchedulerCore, RejectsWhatCanNeverRunWithClearErrors) {
  SchedulerCore s({.num_pages = 5, .page_size = 4}, options());
  EXPECT_THROW(s.submit(1, request(0, 4)), Error);
  EXPECT_THROW(s.submit(1, request(4, 0)), Error);
  EXPECT_THROW(s.submit(1, request(30, 4)), Error);  // beyond the 16-token pool
  auto bad = request(3, 3);
  bad.prompt[1] = 5000;
  EXPECT_THROW(s.submit(1, bad), Error);
  auto nan = request(3, 3, std::nanf(""));
  EXPECT_THROW(s.submit(1, nan), Error);
  auto huge = request(3, 0);
  huge.max_new_tokens = std::numeric_limits<int64_t>::max();  // used to wrap past the length check
  EXPECT_THROW(s.submit(1, huge), Error);
  huge.max_new_tokens = std::numeric_limits<int64_t>::max() - 2;
  EXPECT_THROW(s.submit(1, huge), Error);
  s.submit(1, request(3, 3));
  EXPECT_THROW(s.submit(1, request(3, 3)), Error);  // id in use
}

TEST(SchedulerCore, AbortsQueuedAndRunningRequests) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options());
  s.submit(1, request(5, 10));
  s.submit(2, request(5, 10));
  auto b = s.plan_next();
  auto running = s.abort(1);  // in the in-flight batch: reported now, retired with the result
  ASSERT_TRUE(running && running->finished);
  EXPECT_EQ(running->result.finish_reason, "abort");
  auto updates = s.on_result(answer(*b));
  EXPECT_EQ(updates.size(), 1u);  // only request 2
  EXPECT_EQ(s.num_requests(), 1u);
  s.submit(3, request(5, 10));
  auto queued = s.abort(3);
  ASSERT_TRUE(queued);
  EXPECT_FALSE(s.abort(3));
  EXPECT_FALSE(s.abort(42));
}

TEST(SchedulerCore, AFailedBatchFailsItsRequestsAndFreesTheirPages) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options());
  s.submit(1, request(5, 10));
  auto b = s.plan_next();
  transport::BatchResult r{.seq = 0, .step_id = b->step_id, .rids = {}, .next_tokens = {}, .error = "device lost"};
  auto u = s.on_result(r);
  ASSERT_EQ(u.size(), 1u);
  EXPECT_EQ(u[0].result.finish_reason, "error: device lost");
  EXPECT_EQ(s.free_pages(), 63);
  EXPECT_FALSE(s.has_work());
}

TEST(SchedulerCore, AMalformedResultFailsItsBatchInsteadOfTheScheduler) {
  // A result that cannot be the batch's (a worker bug, a corrupted frame): each case fails the
  // batch's requests with the reason and frees their pages; nothing throws and the scheduler
  // serves the next request.
  const std::vector<std::pair<std::string, std::function<void(transport::BatchResult&)>>> cases = {
      {"outside the vocabulary", [](transport::BatchResult& r) { r.next_tokens[0] = 5000; }},
      {"rids and", [](transport::BatchResult& r) { r.next_tokens.push_back(7); }},
      {"no token for request", [](transport::BatchResult& r) { r.rids[0] = 99, r.rids.resize(1), r.next_tokens.resize(1); }},
      {"appears twice", [](transport::BatchResult& r) { r.rids[1] = r.rids[0]; }},
      {"top logprobs", [](transport::BatchResult& r) { r.logprobs.assign(r.rids.size(), {.logprob = -1.0f, .top_ids = {1}, .top_logprobs = {}}); }},
      {"counts and", [](transport::BatchResult& r) { r.token_counts = {1}; }},
  };
  for (const auto& [needle, corrupt] : cases) {
    SchedulerCore s({.num_pages = 64, .page_size = 4}, options());
    s.submit(1, request(5, 10));
    s.submit(2, request(3, 10));
    auto b = s.plan_next();
    auto r = answer(*b);
    corrupt(r);
    std::vector<RequestUpdate> u;
    ASSERT_NO_THROW(u = s.on_result(r)) << needle;
    ASSERT_EQ(u.size(), 2u) << needle;
    for (const auto& x : u) {
      EXPECT_TRUE(x.finished);
      EXPECT_NE(x.result.finish_reason.find("malformed batch result"), std::string::npos) << x.result.finish_reason;
      EXPECT_NE(x.result.finish_reason.find(needle), std::string::npos) << x.result.finish_reason;
    }
    EXPECT_EQ(s.free_pages(), 63) << needle;
    s.submit(3, request(3, 2));  // still serving
    while (s.has_work()) s.on_result(answer(*s.plan_next()));
  }
}

TEST(SchedulerCore, StopsAtEosAndStopTokens) {
  SchedulerCore s({.num_pages = 64, .page_size = 4}, options());
  auto r = request(3, 10);
  r.stop_token_ids = {104};
  s.submit(1, r);
  std::vector<int32_t> out;
  while (s.has_work()) {
    auto b = s.plan_next();
    for (auto& u : s.on_result(answer(*b)))
      if (u.finished) {
        out = u.result.output_ids;
        EXPECT_EQ(u.result.finish_reason, "stop");
      }
  }
  EXPECT_EQ(out, (std::vector<int32_t>{102, 103, 104}));
}

// Penalties, logit_bias and min_new_tokens become one entry per token for the sampled row.
TEST(LogitAdjustments, OneEntryPerTokenWithTheRulesCombined) {
  transport::BatchMessage b;
  SamplingOptions s;
  s.repetition_penalty = 1.5f;
  s.frequency_penalty = 0.5f;
  s.presence_penalty = 0.25f;
  s.logit_bias = {{9, 2.0f}, {4, -1.0f}};
  s.min_new_tokens = 5;
  const std::vector<int32_t> prompt = {4, 6}, output = {6, 6, 8}, banned = {2};
  append_logit_adjustments(b, 3, prompt, output, s, banned);
  EXPECT_EQ(b.adjust_ids, (std::vector<int32_t>{2, 4, 6, 8, 9}));
  EXPECT_EQ(b.adjust_rows, (std::vector<int32_t>(5, 3)));
  EXPECT_EQ(b.adjust_rep, (std::vector<float>{1.0f, 1.5f, 1.5f, 1.5f, 1.0f}));
  EXPECT_TRUE(std::isinf(b.adjust_add[0]) && b.adjust_add[0] < 0);  // EOS banned: 3 of 5 tokens out
  EXPECT_EQ(b.adjust_bias, (std::vector<float>{0.0f, -1.0f, 0.0f, 0.0f, 2.0f}));
  EXPECT_FLOAT_EQ(b.adjust_add[1], 0.0f);                           // 4: prompt only (repetition) + bias
  EXPECT_FLOAT_EQ(b.adjust_add[2], -(0.5f * 2 + 0.25f));            // 6: twice in the output
  EXPECT_FLOAT_EQ(b.adjust_add[3], -(0.5f + 0.25f));                // 8: once
  EXPECT_FLOAT_EQ(b.adjust_add[4], 0.0f);                           // 9: bias only
  transport::BatchMessage after;
  const std::vector<int32_t> long_output = {6, 6, 8, 1, 1};
  append_logit_adjustments(after, 0, prompt, long_output, s, banned);
  EXPECT_EQ(std::count(after.adjust_ids.begin(), after.adjust_ids.end(), 2), 0);  // min_new_tokens reached: EOS free again
}

TEST(SchedulerCore, PenaltiesAreRefusedOnASpeculativeServer) {
  SchedulerOptions o{.eos_token_ids = {2}, .vocab_size = 100, .context_length = 64, .spec_steps = 3};
  SchedulerCore c({.num_pages = 64, .page_size = 4}, o);
  GenerationRequest r{.prompt = {5, 6}, .max_new_tokens = 4};
  r.sampling.presence_penalty = 0.5f;
  EXPECT_THROW(c.submit(1, r), Error);
  r.sampling.presence_penalty = 0.0f;
  EXPECT_NO_THROW(c.submit(1, r));
  SchedulerCore plain({.num_pages = 64, .page_size = 4}, SchedulerOptions{.eos_token_ids = {2}, .vocab_size = 100, .context_length = 64});
  r.sampling.logit_bias = {{100, 1.0f}};  // outside the vocabulary
  EXPECT_THROW(plain.submit(2, r), Error);
}

// Requests with the same prompt (n > 1 samples) share its K/V: the first computes the prompt,
// the others wait for it, then take its pages for every whole page before the last prompt
// position and prefill only the rest. Pages are freed when their last holder ends.
// The request computing a shared prompt ends with its first token (EOS here): the samples
// waiting for it still take its prompt pages instead of computing the prompt again, and every
// page is free once all have ended.
TEST(SchedulerCore, SamplesTakeThePromptOfARequestThatEndsAtOnce) {
  for (int64_t page : {1, 4}) {
    SchedulerCore s({.num_pages = 64, .page_size = page}, options());
    const int64_t free0 = s.free_pages();
    for (uint64_t rid = 1; rid <= 3; ++rid) s.submit(rid, request(10, 3, 0.0f, /*first=*/10));
    auto b1 = s.plan_next();
    ASSERT_TRUE(b1);
    ASSERT_EQ(b1->rids, (std::vector<uint64_t>{1}));
    const std::vector<int32_t> prompt_slots(b1->kv_indices.begin(), b1->kv_indices.begin() + 9);
    transport::BatchResult eos{.seq = 0, .step_id = b1->step_id, .rids = b1->rids, .next_tokens = {2}, .error = ""};
    auto ended = s.on_result(eos);
    ASSERT_EQ(ended.size(), 1u);
    EXPECT_TRUE(ended[0].finished);
    auto b2 = s.plan_next();
    ASSERT_TRUE(b2);
    EXPECT_EQ(b2->rids, (std::vector<uint64_t>{2, 3}));
    const int64_t shared = 9 / page * page;
    for (size_t seq = 0; seq < 2; ++seq) {
      EXPECT_EQ(b2->qo_indptr[seq + 1] - b2->qo_indptr[seq], 10 - shared);
      for (int64_t t = 0; t < shared; ++t)
        EXPECT_EQ(b2->kv_indices[static_cast<size_t>(b2->kv_indptr[seq] + t)], prompt_slots[static_cast<size_t>(t)]) << "position " << t;
    }
    std::vector<RequestUpdate> done;
    for (auto b = std::move(b2); b; b = s.plan_next())
      for (auto& u : s.on_result(answer(*b)))
        if (u.finished) done.push_back(u);
    ASSERT_EQ(done.size(), 2u);
    for (const auto& u : done) EXPECT_EQ(u.result.cached_tokens, shared) << u.rid;
    EXPECT_EQ(s.free_pages(), free0);
  }
}

TEST(SchedulerCore, RequestsWithTheSamePromptShareItsPages) {
  for (int64_t page : {1, 4}) {
    SchedulerCore s({.num_pages = 64, .page_size = page}, options());
    const int64_t free0 = s.free_pages();
    for (uint64_t rid = 1; rid <= 3; ++rid) s.submit(rid, request(10, 3, 1.0f, /*first=*/10));
    s.submit(4, request(6, 3));  // another prompt: no sharing
    auto b1 = s.plan_next();
    ASSERT_TRUE(b1);
    EXPECT_EQ(b1->rids, (std::vector<uint64_t>{1, 4})) << "the samples wait for the first to compute the prompt";
    const std::vector<int32_t> prompt_slots(b1->kv_indices.begin(), b1->kv_indices.begin() + 9);
    s.on_result(answer(*b1));
    auto b2 = s.plan_next();
    ASSERT_TRUE(b2);
    const int64_t shared = 9 / page * page;  // 9 (page 1) or 8 (page 4)
    EXPECT_EQ(b2->rids, (std::vector<uint64_t>{1, 4, 2, 3}));
    for (size_t seq = 2; seq < 4; ++seq) {  // the samples: their own positions [shared, 10)
      const int32_t q0 = b2->qo_indptr[seq], q1 = b2->qo_indptr[seq + 1], k0 = b2->kv_indptr[seq];
      EXPECT_EQ(q1 - q0, 10 - shared);
      EXPECT_EQ(b2->positions[static_cast<size_t>(q0)], shared);
      for (int64_t t = 0; t < shared; ++t)
        EXPECT_EQ(b2->kv_indices[static_cast<size_t>(k0 + t)], prompt_slots[static_cast<size_t>(t)]) << "position " << t;
      for (int32_t q = q0; q < q1; ++q)  // what they write is their own
        EXPECT_EQ(std::count(prompt_slots.begin(), prompt_slots.end(), b2->out_cache_loc[static_cast<size_t>(q)]), 0);
    }
    EXPECT_EQ(s.stats().shared_prefix_tokens, 2 * shared);
    // The first sample aborted: the others keep its pages; all free once everything ends.
    s.on_result(answer(*b2));
    ASSERT_TRUE(s.abort(1));
    std::vector<RequestUpdate> done;
    while (auto b = s.plan_next()) {
      auto u = s.on_result(answer(*b));
      for (auto& x : u)
        if (x.finished) done.push_back(x);
    }
    ASSERT_EQ(done.size(), 3u);
    for (const auto& u : done) EXPECT_EQ(u.result.cached_tokens, u.rid == 4 ? 0 : shared) << u.rid;
    EXPECT_EQ(s.free_pages(), free0);
  }
}
