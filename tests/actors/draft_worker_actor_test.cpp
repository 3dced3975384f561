// The DraftWorker actor driven alone by injected messages (CPU, tiny model): a STANDALONE
// self-draft proposes exactly the target's greedy continuation, as a chain and inside a
// tree; an EAGLE3 head behind the actor (hidden states passed by reference) proposes what
// the same head proposes in a direct call; bad requests come back as errors and the actor
// keeps serving; DraftForget drops a request's state. Also CAF round trips of its messages.
#include <gtest/gtest.h>

#include <caf/all.hpp>
#include <random>

#include "actors/draft_worker_actor.hpp"
#include "actors/messages.hpp"
#include "tests/actors/actor_test_system.hpp"
#include "kernels/buffer.hpp"
#include "kernels/error.hpp"
#include "model/llama_weights.hpp"
#include "tests/actors/tiny_draft.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::actors;

namespace {

using System = aerie::testing::ActorTestSystem;
using aerie::testing::prompt_extend;
using aerie::testing::slots;
using aerie::testing::tiny;
using aerie::testing::tiny_model;

// The target's greedy continuation of `prompt`, n tokens, by plain forwards.
std::vector<int32_t> greedy(model::LlamaModel& m, const std::vector<int32_t>& prompt, int n) {
  model::KvCache kv(tiny(), model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
  std::vector<int32_t> tokens = prompt, out;
  int64_t done = 0;
  for (int i = 0; i < n; ++i) {
    model::ForwardBatch b;
    for (int64_t p = done; p < static_cast<int64_t>(tokens.size()); ++p) {
      b.input_ids.push_back(tokens[static_cast<size_t>(p)]);
      b.positions.push_back(static_cast<int32_t>(p));
      b.out_cache_loc.push_back(static_cast<int32_t>(p + 1));
    }
    for (int64_t p = 0; p < static_cast<int64_t>(tokens.size()); ++p) b.kv_indices.push_back(static_cast<int32_t>(p + 1));
    b.qo_indptr.push_back(b.num_tokens());
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
    b.logit_rows = {static_cast<int32_t>(b.num_tokens() - 1)};
    const TensorView logits = m.forward(b, kv);
    const float* row = logits.ptr<float>();
    const int32_t next = static_cast<int32_t>(std::max_element(row, row + logits.dim(1)) - row);
    done = static_cast<int64_t>(tokens.size());
    tokens.push_back(next);
    out.push_back(next);
  }
  return out;
}

DraftDone extend(caf::scoped_actor& self, const caf::actor& a, DraftExtend m) {
  DraftDone out{.step_id = 0, .error = "no reply"};
  self->request(a, std::chrono::seconds(30), std::move(m)).receive([&](DraftDone& d) { out = d; }, [&](caf::error&) {});
  return out;
}

DraftProposal propose(caf::scoped_actor& self, const caf::actor& a, DraftPropose m) {
  DraftProposal out{.step_id = 0, .trees = {}, .error = "no reply"};
  self->request(a, std::chrono::seconds(30), std::move(m)).receive([&](DraftProposal& p) { out = std::move(p); }, [&](caf::error&) {});
  return out;
}

struct Standalone {
  std::unique_ptr<model::LlamaModel> target = tiny_model(5);
  model::KvCache draft_kv{tiny(), model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32};
  std::shared_ptr<spec::DraftWorkerCore> core;
  explicit Standalone(int64_t topk)
      : core(std::make_shared<spec::DraftWorkerCore>(spec::SpecAlgorithm::kStandalone, nullptr, tiny_model(5), draft_kv, *target, 8, topk)) {}
};

}  // namespace

TEST(DraftWorkerActor, SelfDraftChainIsTheTargetsGreedyContinuation) {
  System s;
  Standalone d(1);
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, d.core, -1);
  caf::scoped_actor self{*s.sys};
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 7};
  const auto want = greedy(*d.target, prompt, 4);
  auto done = extend(self, actor, {.step_id = 1, .seqs = {prompt_extend(1, prompt)}, .hidden = {}});
  ASSERT_EQ(done.error, "");
  EXPECT_EQ(done.step_id, 1u);
  // The root is the last prompt token at position 4; a STANDALONE draft reads from 5 on.
  auto p = propose(self, actor, {.step_id = 2, .seqs = {{.rid = 1, .first_position = 5, .context = slots(0, 8), .root_token = 7}}, .steps = 4, .draft_tokens = 5});
  ASSERT_EQ(p.error, "");
  ASSERT_EQ(p.trees.size(), 1u);
  EXPECT_EQ(p.trees[0].tokens, (std::vector<int32_t>{7, want[0], want[1], want[2], want[3]}));
  EXPECT_EQ(p.trees[0].parents, (std::vector<int32_t>{-1, 0, 1, 2, 3}));
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST(DraftWorkerActor, SelfDraftTreeHoldsTheGreedyPath) {
  System s;
  Standalone d(3);
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, d.core, -1);
  caf::scoped_actor self{*s.sys};
  const std::vector<int32_t> prompt = {8, 3, 150, 22};
  const auto want = greedy(*d.target, prompt, 3);
  ASSERT_EQ(extend(self, actor, {.step_id = 1, .seqs = {prompt_extend(4, prompt)}, .hidden = {}}).error, "");
  // 3 steps of topk 3: 3 + 2 x 9 candidates, 10 nodes kept; scratch rows from position 4 on.
  auto p = propose(self, actor, {.step_id = 2, .seqs = {{.rid = 4, .first_position = 4, .context = slots(0, 4 + 2 * 3), .root_token = 22}}, .steps = 3, .draft_tokens = 10});
  ASSERT_EQ(p.error, "");
  ASSERT_EQ(p.trees.size(), 1u);
  const auto& t = p.trees[0];
  EXPECT_NO_THROW(t.validate());
  ASSERT_EQ(t.size(), 10);
  EXPECT_EQ(t.tokens[0], 22);
  // The greedy path is the top choice at every node: its first token is the root's best child.
  int32_t node = 0;
  int depth = 0;
  for (; depth < 3; ++depth) {
    int32_t next = -1;
    for (int32_t c : t.children(node))
      if (t.tokens[static_cast<size_t>(c)] == want[static_cast<size_t>(depth)]) next = c;
    if (next < 0) break;
    node = next;
  }
  EXPECT_GE(depth, 1) << "the greedy next token is not a child of the root";
  // The root's children are distinct tokens.
  auto kids = t.children(0);
  std::vector<int32_t> toks;
  for (int32_t c : kids) toks.push_back(t.tokens[static_cast<size_t>(c)]);
  std::sort(toks.begin(), toks.end());
  EXPECT_EQ(std::adjacent_find(toks.begin(), toks.end()), toks.end());
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST(DraftWorkerActor, BadRequestsComeBackAsErrorsAndForgetDropsState) {
  System s;
  Standalone d(1);
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, d.core, -1);
  caf::scoped_actor self{*s.sys};
  const std::vector<int32_t> prompt = {5, 6, 7};
  // Unknown request.
  auto p = propose(self, actor, {.step_id = 1, .seqs = {{.rid = 99, .first_position = 3, .context = slots(0, 5), .root_token = 7}}, .steps = 3, .draft_tokens = 4});
  EXPECT_NE(p.error.find("no draft state for request 99"), std::string::npos) << p.error;
  // Tokens and slots disagree.
  auto bad = prompt_extend(1, prompt);
  bad.slots.pop_back();
  EXPECT_NE(extend(self, actor, {.step_id = 2, .seqs = {bad}, .hidden = {}}).error.find("tokens and slots disagree"), std::string::npos);
  // A context too short for the chain.
  ASSERT_EQ(extend(self, actor, {.step_id = 3, .seqs = {prompt_extend(1, prompt)}, .hidden = {}}).error, "");
  p = propose(self, actor, {.step_id = 4, .seqs = {{.rid = 1, .first_position = 3, .context = slots(0, 3), .root_token = 7}}, .steps = 4, .draft_tokens = 5});
  EXPECT_NE(p.error.find("too short"), std::string::npos) << p.error;
  // Still serving.
  p = propose(self, actor, {.step_id = 5, .seqs = {{.rid = 1, .first_position = 3, .context = slots(0, 6), .root_token = 7}}, .steps = 4, .draft_tokens = 5});
  ASSERT_EQ(p.error, "");
  EXPECT_EQ(p.trees[0].size(), 5);
  EXPECT_EQ(p.step_id, 5u);
  // Forget: the state is gone (the forget and the request come from one sender, in order).
  self->send(actor, DraftForget{.rids = {1}});
  p = propose(self, actor, {.step_id = 6, .seqs = {{.rid = 1, .first_position = 3, .context = slots(0, 6), .root_token = 7}}, .steps = 4, .draft_tokens = 5});
  EXPECT_NE(p.error.find("no draft state for request 1"), std::string::npos) << p.error;
  EXPECT_FALSE(d.core->has_state(1));
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST(DraftWorkerActor, Eagle3HeadBehindTheActorMatchesADirectCall) {
  System s;
  auto target = tiny_model(5);
  const auto hc = model::EagleHeadConfig::for_target(model::EagleKind::kEagle3, tiny());
  auto make_core = [&](model::KvCache& kv) {
    auto head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, 11, Device::kCpu, DType::kF32), *target);
    return std::make_shared<spec::DraftWorkerCore>(spec::SpecAlgorithm::kEagle3, std::move(head), nullptr, kv, *target, 8, 1);
  };
  model::KvCache kv_a(hc.layer, model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
  model::KvCache kv_b(hc.layer, model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
  auto behind = make_core(kv_a);
  auto direct = make_core(kv_b);
  EXPECT_EQ(behind->info().aux_layers.size(), 3u);
  // Stand-in target hidden states: 6 rows of the 3 aux layers, concatenated.
  std::mt19937 rng(3);
  Buffer hidden = aerie::testing::random_buffer(rng, DType::kF32, {6, 3 * tiny().hidden_size});
  auto seq = prompt_extend(2, {9, 8, 7, 6, 5, 4});
  seq.hidden_rows = {0, 1, 2, 3, 4, 5};
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, behind, -1);
  caf::scoped_actor self{*s.sys};
  ASSERT_EQ(extend(self, actor, {.step_id = 1, .seqs = {seq}, .hidden = DeviceRows::of(hidden.view())}).error, "");
  direct->extend({seq}, hidden.view());
  // EAGLE reads from the root's position on (5).
  const spec::DraftProposeSeq ps{.rid = 2, .first_position = 5, .context = slots(0, 8), .root_token = 4};
  auto p = propose(self, actor, {.step_id = 2, .seqs = {ps}, .steps = 3, .draft_tokens = 4});
  ASSERT_EQ(p.error, "");
  const auto want = direct->propose({ps}, 3, 4);
  ASSERT_EQ(p.trees.size(), 1u);
  EXPECT_EQ(p.trees[0].tokens, want[0].tokens);
  EXPECT_EQ(p.trees[0].parents, want[0].parents);
  // Without the hidden states an EAGLE extend is refused.
  EXPECT_NE(extend(self, actor, {.step_id = 3, .seqs = {seq}, .hidden = {}}).error.find("hidden states"), std::string::npos);
  self->send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST(DraftWorkerActor, MessagesSurviveCafRoundTrips) {
  System s;
  auto round_trip = [&](auto x) {
    std::vector<char> buf;
    caf::binary_serializer sink{*s.sys, buf};
    EXPECT_FALSE(sink(x));
    decltype(x) y;
    caf::binary_deserializer source{*s.sys, buf};
    EXPECT_FALSE(source(y));
    return y;
  };
  DraftPropose p{.step_id = 3, .seqs = {{.rid = 1, .first_position = 4, .context = {1, 2, 3}, .root_token = 9}}, .steps = 2, .draft_tokens = 3};
  auto p2 = round_trip(p);
  EXPECT_EQ(p2.seqs[0].context, p.seqs[0].context);
  EXPECT_EQ(p2.seqs[0].root_token, 9);
  DraftProposal r{.step_id = 3, .trees = {spec::DraftTree::chain(9, std::vector<int32_t>{1, 2})}, .error = ""};
  EXPECT_EQ(round_trip(r).trees[0].parents, (std::vector<int32_t>{-1, 0, 1}));
  DraftExtend e{.step_id = 1, .seqs = {prompt_extend(1, {3, 4})}, .hidden = {.address = 64, .rows = 2, .cols = 8, .dtype = 1, .device = 0}};
  auto e2 = round_trip(e);
  EXPECT_EQ(e2.seqs[0].slots, e.seqs[0].slots);
  EXPECT_EQ(e2.hidden.address, 64u);
  DraftExtendVerified v{.step_id = 2, .seqs = {prompt_extend(1, {3, 4, 5})}, .argmax = {.address = 128, .rows = 3, .cols = 1, .dtype = 2, .device = 1},
                        .hidden = {}};
  auto v2 = round_trip(v);
  EXPECT_EQ(v2.seqs[0].tokens, v.seqs[0].tokens);
  EXPECT_EQ(v2.argmax.address, 128u);
  EXPECT_EQ(v2.argmax.rows, 3);
  EXPECT_EQ(v2.argmax.device, 1);
  DraftProposeAhead a{.step_id = 4, .seqs = {{.rid = 2, .first_position = 3, .context = {7, 8, 9}, .root_token = 5}}, .steps = 3};
  EXPECT_EQ(round_trip(a).step_id, 4u);
  EXPECT_EQ(round_trip(a).seqs[0].context, a.seqs[0].context);
  DraftAheadQueued q{.step_id = 4, .queued = true, .table = {.address = 256, .rows = 24, .cols = 1, .dtype = 2, .device = 1}, .stride = 8};
  const auto q2 = round_trip(q);
  EXPECT_TRUE(q2.queued);
  EXPECT_EQ(q2.table.address, 256u);
  EXPECT_EQ(q2.stride, 8);
}

// DraftPort::extend_verified_chains behind the actor: a self-draft (STANDALONE, the target
// itself) told of a verified chain whose second draft the verify rejects extends over the
// first draft and the bonus, as the core does when told them, so its next chain is the
// target's greedy continuation; a malformed one is reported by the next flush.
TEST(DraftWorkerClient, AnExtendBehindAChainVerifyCommitsWhatTheArgmaxAccepts) {
  System s;
  Standalone through_actor(1), direct(1);
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, through_actor.core, -1);
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 7};
  const auto want = greedy(*direct.target, prompt, 6);
  // Root 7 at position 4; a STANDALONE draft's committed tokens go at positions 5 on.
  const int32_t wrong = want[1] == 3 ? 4 : 3;
  spec::DraftExtendSeq verified{.rid = 1, .tokens = {7, want[0], wrong, want[2]}, .first_position = 5, .slots = slots(5, 9),
                                .context = slots(0, 5), .hidden_rows = {}, .keep = true};
  Buffer argmax(Device::kCpu, DType::kI32, {4});
  const std::vector<int32_t> rows = {want[0], want[1], 11, 12};  // d1 accepted, d2 not: the bonus is want[1]
  std::copy(rows.begin(), rows.end(), static_cast<int32_t*>(argmax.data()));
  spec::DraftExtendSeq committed{.rid = 1, .tokens = {want[0], want[1]}, .first_position = 5, .slots = slots(5, 7), .context = slots(0, 7),
                                 .hidden_rows = {}, .keep = true, .spare_slots = slots(7, 9)};
  direct.core->extend({prompt_extend(1, prompt)}, {});
  direct.core->extend({committed}, {});
  const std::vector<spec::DraftProposeSeq> next = {{.rid = 1, .first_position = 7, .context = slots(0, 9), .root_token = want[1]}};
  const auto expected = direct.core->propose(next, 3, 4);
  {
    DraftWorkerClient client(*s.sys, actor, through_actor.core->info());
    client.extend({prompt_extend(1, prompt)}, {});
    client.extend_verified_chains({verified}, argmax.view(), {});
    const auto trees = client.propose(next, 3, 4);
    ASSERT_EQ(trees.size(), 1u);
    EXPECT_EQ(trees[0].tokens, expected[0].tokens);
    EXPECT_EQ(trees[0].tokens, (std::vector<int32_t>{want[1], want[2], want[3], want[4]}));
    auto bad = verified;
    bad.slots.pop_back();
    client.extend_verified_chains({bad}, argmax.view(), {});
    EXPECT_THROW(client.flush(), aerie::Error);
    EXPECT_NO_THROW(client.flush());
  }
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST(DraftWorkerClient, ExtendsWithoutWaitingAndReportsErrorsOnTheNextCall) {
  System s;
  Standalone d(1);
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, d.core, -1);
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 7};
  const auto want = greedy(*d.target, prompt, 3);
  {
    DraftWorkerClient client(*s.sys, actor, d.core->info());
    EXPECT_EQ(client.info().algorithm, spec::SpecAlgorithm::kStandalone);
    client.extend({prompt_extend(1, prompt)}, {});  // returns at once; the proposal waits for it
    const auto trees = client.propose({{.rid = 1, .first_position = 5, .context = slots(0, 7), .root_token = 7}}, 3, 4);
    ASSERT_EQ(trees.size(), 1u);
    EXPECT_EQ(trees[0].tokens, (std::vector<int32_t>{7, want[0], want[1], want[2]}));
    // A bad extend is reported by the next flush, and the client keeps working.
    auto bad = prompt_extend(2, prompt);
    bad.context.pop_back();
    client.extend({bad}, {});
    EXPECT_THROW(client.flush(), aerie::Error);
    EXPECT_NO_THROW(client.flush());  // reported once
    client.forget({1});
    EXPECT_THROW(client.propose({{.rid = 1, .first_position = 5, .context = slots(0, 7), .root_token = 7}}, 3, 4), aerie::Error);
  }
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}

TEST(DraftWorkerActor, Eagle1WithAHotTokenMapDraftsOnlyHotTokens) {
  System s;
  auto target = tiny_model(5);
  auto hc = model::EagleHeadConfig::for_target(model::EagleKind::kEagle1, tiny());
  for (int32_t id = 0; id < tiny().vocab_size; id += 3) hc.hot_tokens.push_back(id);
  model::KvCache kv(hc.layer, model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
  for (int64_t topk : {1, 3}) {
    auto head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, 11, Device::kCpu, DType::kF32), *target);
    EXPECT_EQ(head->vocab(), static_cast<int64_t>(hc.hot_tokens.size()));
    auto core = std::make_shared<spec::DraftWorkerCore>(spec::SpecAlgorithm::kEagle, std::move(head), nullptr, kv, *target, 8, topk);
    auto actor = s.spawn_stopped_at_end(draft_worker_actor, core, -1);
    caf::scoped_actor self{*s.sys};
    std::mt19937 rng(4);
    Buffer hidden = aerie::testing::random_buffer(rng, DType::kF32, {5, tiny().hidden_size});
    auto seq = prompt_extend(3, {11, 12, 13, 14, 15});
    seq.hidden_rows = {0, 1, 2, 3, 4};
    ASSERT_EQ(extend(self, actor, {.step_id = 1, .seqs = {seq}, .hidden = DeviceRows::of(hidden.view())}).error, "");
    auto p = propose(self, actor, {.step_id = 2, .seqs = {{.rid = 3, .first_position = 4, .context = slots(0, 4 + 2 * 3 + 1), .root_token = 15}},
                                   .steps = 3, .draft_tokens = topk == 1 ? 4 : 8});
    ASSERT_EQ(p.error, "");
    const auto& t = p.trees[0];
    for (int64_t i = 1; i < t.size(); ++i) EXPECT_EQ(t.tokens[static_cast<size_t>(i)] % 3, 0) << "topk " << topk << " node " << i;
    self->send_exit(actor, caf::exit_reason::user_shutdown);
  }
}
