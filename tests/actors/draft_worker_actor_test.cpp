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
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::actors;

namespace {

using System = aerie::testing::ActorTestSystem;

const model::LlamaConfig& tiny() {
  static const auto c = model::LlamaConfig::named_shape("tiny");
  return c;
}

std::unique_ptr<model::LlamaModel> tiny_model(uint64_t seed) {
  return std::make_unique<model::LlamaModel>(tiny(), model::random_llama_weights(tiny(), seed, Device::kCpu, DType::kF32, 0.1f), Stream::cpu(),
                                             DType::kF32);
}

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

std::vector<int32_t> slots(int32_t from, int32_t to) {  // slots of positions [from, to): position p lives in slot p + 1
  std::vector<int32_t> s;
  for (int32_t p = from; p < to; ++p) s.push_back(p + 1);
  return s;
}

core::DraftExtendSeq prompt_extend(uint64_t rid, const std::vector<int32_t>& prompt) {
  const auto n = static_cast<int32_t>(prompt.size());
  return {.rid = rid, .tokens = prompt, .first_position = 0, .slots = slots(0, n), .context = slots(0, n), .hidden_rows = {}, .keep = true};
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
  std::shared_ptr<core::DraftWorkerCore> core;
  explicit Standalone(int64_t topk)
      : core(std::make_shared<core::DraftWorkerCore>(core::SpecAlgorithm::kStandalone, nullptr, tiny_model(5), draft_kv, *target, 8, topk)) {}
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
    return std::make_shared<core::DraftWorkerCore>(core::SpecAlgorithm::kEagle3, std::move(head), nullptr, kv, *target, 8, 1);
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
  const core::DraftProposeSeq ps{.rid = 2, .first_position = 5, .context = slots(0, 8), .root_token = 4};
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
}

TEST(DraftWorkerClient, ExtendsWithoutWaitingAndReportsErrorsOnTheNextCall) {
  System s;
  Standalone d(1);
  auto actor = s.spawn_stopped_at_end(draft_worker_actor, d.core, -1);
  const std::vector<int32_t> prompt = {5, 17, 42, 99, 7};
  const auto want = greedy(*d.target, prompt, 3);
  {
    DraftWorkerClient client(*s.sys, actor, d.core->info());
    EXPECT_EQ(client.info().algorithm, core::SpecAlgorithm::kStandalone);
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
    auto core = std::make_shared<core::DraftWorkerCore>(core::SpecAlgorithm::kEagle, std::move(head), nullptr, kv, *target, 8, topk);
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

// The chain runner (spec/draft_chain_runner.hpp: every step's input token and hidden state
// fed on the device, one copy back) proposes exactly what step-by-step drafting proposes:
// EAGLE3 with its full and a reduced vocabulary (ids mapped on the device), EAGLE with a
// hot-token map, STANDALONE; three requests at different positions.
TEST(DraftChainRunner, ProposesWhatStepByStepDraftingProposes) {
  auto target = tiny_model(5);
  std::mt19937 rng(9);
  struct Case {
    std::string name;
    core::SpecAlgorithm alg;
    model::EagleKind kind;
    int64_t draft_vocab;
    bool hot;
  };
  const Case cases[] = {{"EAGLE3", core::SpecAlgorithm::kEagle3, model::EagleKind::kEagle3, 0, false},
                        {"EAGLE3 reduced vocabulary", core::SpecAlgorithm::kEagle3, model::EagleKind::kEagle3, 200, false},
                        {"EAGLE hot tokens", core::SpecAlgorithm::kEagle, model::EagleKind::kEagle1, 0, true},
                        {"STANDALONE", core::SpecAlgorithm::kStandalone, model::EagleKind::kEagle1, 0, false}};
  for (const auto& c : cases) {
    auto hc = model::EagleHeadConfig::for_target(c.kind, tiny(), c.draft_vocab);
    if (c.hot)
      for (int32_t id = 0; id < tiny().vocab_size; id += 3) hc.hot_tokens.push_back(id);
    const bool eagle = c.alg != core::SpecAlgorithm::kStandalone;
    const model::LlamaConfig layer = eagle ? hc.layer : tiny();
    model::KvCache kv_a(layer, model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
    model::KvCache kv_b(layer, model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
    auto make_core = [&](model::KvCache& kv) {
      std::unique_ptr<model::EagleHead> head;
      std::unique_ptr<model::LlamaModel> standalone;
      if (eagle)
        head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, 11, Device::kCpu, DType::kF32), *target);
      else
        standalone = tiny_model(6);
      return std::make_shared<core::DraftWorkerCore>(c.alg, std::move(head), std::move(standalone), kv, *target, 8, 1);
    };
    auto stepwise = make_core(kv_a);
    auto chained = make_core(kv_b);
    chained->enable_chain_runner(4, 8, 256, /*graphs=*/false);
    ASSERT_NE(chained->chain_runner(), nullptr);
    const int64_t width = eagle ? hc.input_width() : 0;
    std::vector<core::DraftProposeSeq> ps;
    for (uint64_t rid = 1; rid <= 3; ++rid) {
      const int32_t n = static_cast<int32_t>(4 + 3 * rid);
      std::vector<int32_t> prompt;
      for (int32_t i = 0; i < n; ++i) prompt.push_back(static_cast<int32_t>(3 + rng() % 400));
      // Each request in its own slot range: 64 slots apart.
      auto seq = prompt_extend(rid, prompt);
      for (auto& s : seq.slots) s += static_cast<int32_t>(64 * rid);
      for (auto& s : seq.context) s += static_cast<int32_t>(64 * rid);
      Buffer hidden;
      if (eagle) {
        hidden = aerie::testing::random_buffer(rng, DType::kF32, {n, width});
        for (int32_t i = 0; i < n; ++i) seq.hidden_rows.push_back(i);
      }
      stepwise->extend({seq}, eagle ? hidden.view() : TensorView());
      chained->extend({seq}, eagle ? hidden.view() : TensorView());
      auto context = slots(0, n + 4);
      for (auto& s : context) s += static_cast<int32_t>(64 * rid);
      ps.push_back({.rid = rid, .first_position = eagle ? n - 1 : n, .context = context, .root_token = prompt.back()});
    }
    const auto want = stepwise->propose_chain(ps, 4);
    const auto got = chained->propose_chain(ps, 4);
    EXPECT_EQ(got, want) << c.name;
    for (const auto& d : got) EXPECT_EQ(d.size(), 4u) << c.name;
  }
}

// A chain verify's draft extend at its fixed width (spec/draft_extend_runner.hpp: committed
// tokens, then padding tokens at the reserved positions after them) leaves the state the
// variable-width extend leaves: after a prompt extend and a verify extend of 1, 2 or 4
// committed tokens per request, both cores propose the same chains. EAGLE3 (reduced
// vocabulary), EAGLE and STANDALONE; the padding writes slots the other core never touches.
TEST(DraftExtendRunner, FixedWidthExtendLeavesTheStateOfTheVariableWidthOne) {
  auto target = tiny_model(5);
  std::mt19937 rng(10);
  constexpr int64_t kSteps = 3;  // chain width: 4 tokens per extend
  for (auto alg : {core::SpecAlgorithm::kEagle3, core::SpecAlgorithm::kEagle, core::SpecAlgorithm::kStandalone}) {
    const bool eagle = alg != core::SpecAlgorithm::kStandalone;
    auto hc = model::EagleHeadConfig::for_target(alg == core::SpecAlgorithm::kEagle ? model::EagleKind::kEagle1 : model::EagleKind::kEagle3, tiny(),
                                                 alg == core::SpecAlgorithm::kEagle3 ? 200 : 0);
    const model::LlamaConfig layer = eagle ? hc.layer : tiny();
    model::KvCache kv_a(layer, model::kv_shape_for_tokens(512, 1), Device::kCpu, DType::kF32);
    model::KvCache kv_b(layer, model::kv_shape_for_tokens(512, 1), Device::kCpu, DType::kF32);
    auto make_core = [&](model::KvCache& kv, bool fixed) {
      std::unique_ptr<model::EagleHead> head;
      std::unique_ptr<model::LlamaModel> standalone;
      if (eagle) head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, 12, Device::kCpu, DType::kF32), *target);
      else standalone = tiny_model(6);
      auto c = std::make_shared<core::DraftWorkerCore>(alg, std::move(head), std::move(standalone), kv, *target, 8, 1);
      c->enable_chain_runner(kSteps, 8, 512, /*graphs=*/false, /*fixed_width_extend=*/fixed);
      return c;
    };
    auto variable = make_core(kv_a, false);
    auto fixed = make_core(kv_b, true);
    ASSERT_EQ(variable->extend_runner(), nullptr);
    ASSERT_NE(fixed->extend_runner(), nullptr);
    const int64_t width = eagle ? hc.input_width() : 0;
    const std::vector<int32_t> committed_counts = {1, 2, 4};
    std::vector<core::DraftExtendSeq> prompts, verifies;
    std::vector<core::DraftProposeSeq> ps;
    Buffer hidden;
    if (eagle) hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, width});
    for (uint64_t rid = 1; rid <= 3; ++rid) {
      const auto off = static_cast<int32_t>(100 * rid);  // each request in its own slot range
      const int32_t n = static_cast<int32_t>(5 + 2 * rid);
      std::vector<int32_t> prompt;
      for (int32_t i = 0; i < n; ++i) prompt.push_back(static_cast<int32_t>(3 + rng() % 400));
      auto p = prompt_extend(rid, prompt);
      for (auto& s : p.slots) s += off;
      for (auto& s : p.context) s += off;
      if (eagle)
        for (int32_t i = 0; i < n; ++i) p.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
      prompts.push_back(p);
      // The verify: a + 1 committed tokens at positions n .. n + a (EAGLE pairs them with
      // the target's hidden rows; STANDALONE runs them one position later), the reservation
      // covering positions up to first + steps.
      const int32_t a1 = committed_counts[rid - 1];
      const int32_t first = eagle ? n : n + 1;
      core::DraftExtendSeq v{.rid = rid, .tokens = {}, .first_position = first, .slots = {}, .context = {}, .hidden_rows = {}, .keep = true};
      for (int32_t j = 0; j < a1; ++j) {
        v.tokens.push_back(static_cast<int32_t>(3 + rng() % 400));
        if (eagle) v.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
      }
      auto all = slots(0, first + static_cast<int32_t>(kSteps) + 1);
      for (auto& s : all) s += off;
      v.slots.assign(all.begin() + first, all.begin() + first + a1);
      v.context.assign(all.begin(), all.begin() + first + a1);
      v.spare_slots.assign(all.begin() + first + a1, all.end());
      verifies.push_back(v);
      // The next proposal from the last committed token on.
      auto context = slots(0, first + a1 + static_cast<int32_t>(kSteps));
      for (auto& s : context) s += off;
      ps.push_back({.rid = rid, .first_position = eagle ? first + a1 - 1 : first + a1, .context = context, .root_token = v.tokens.back()});
    }
    for (auto* c : {variable.get(), fixed.get()}) {
      c->extend(prompts, eagle ? hidden.view() : TensorView());
      c->extend(verifies, eagle ? hidden.view() : TensorView());
    }
    const auto want = variable->propose_chain(ps, kSteps);
    const auto got = fixed->propose_chain(ps, kSteps);
    EXPECT_EQ(got, want) << static_cast<int>(alg);
  }
}
