// The draft runners (spec/draft_chain_runner.hpp, draft_tree_runner.hpp,
// draft_extend_runner.hpp) on the CPU, eagerly over the same kernels the CUDA graphs
// replay: each proposes exactly what step-by-step drafting proposes, and each leaves the
// state the step-by-step path leaves.
#include <gtest/gtest.h>

#include <random>

#include "actors/draft_worker_actor.hpp"
#include "kernels/future_tokens.hpp"
#include "spec/draft_worker_core.hpp"
#include "spec/verify_batch.hpp"
#include "kernels/buffer.hpp"
#include "model/eagle_head.hpp"
#include "tests/actors/actor_test_system.hpp"
#include "tests/actors/tiny_draft.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using aerie::testing::prompt_extend;
using aerie::testing::slots;
using aerie::testing::tiny;
using aerie::testing::tiny_model;

namespace {

// A draft of each kind the runners serve, for the tiny target.
struct DraftCase {
  std::string name;
  spec::SpecAlgorithm alg;
  model::EagleKind kind;
  int64_t draft_vocab;  // EAGLE3: a reduced vocabulary (0: the target's)
  bool hot;             // EAGLE: a hot-token map of every third id
  bool eagle() const { return alg != spec::SpecAlgorithm::kStandalone; }
  model::EagleHeadConfig head_config() const {
    auto hc = model::EagleHeadConfig::for_target(kind, tiny(), draft_vocab);
    if (hot)
      for (int32_t id = 0; id < tiny().vocab_size; id += 3) hc.hot_tokens.push_back(id);
    return hc;
  }
  // The draft's layer shape (its KV cache's).
  model::LlamaConfig layer() const { return eagle() ? head_config().layer : tiny(); }
  // A draft core of 8 requests: a random head (seed) or a random tiny Llama. lm_head_scale
  // (EAGLE3, whose LM head is its own): sharper draft distributions, so that log-probabilities,
  // not only the tokens' order, decide which candidates a tree keeps.
  std::shared_ptr<spec::DraftWorkerCore> core(const model::LlamaModel& target, model::KvCache& kv, uint64_t seed, int64_t topk,
                                              float lm_head_scale = 1.0f) const {
    std::unique_ptr<model::EagleHead> head;
    std::unique_ptr<model::LlamaModel> standalone;
    if (eagle()) {
      const auto hc = head_config();
      auto w = model::random_eagle_head(hc, seed, Device::kCpu, DType::kF32);
      if (w.lm_head.data() && lm_head_scale != 1.0f) {
        float* x = static_cast<float*>(w.lm_head.data());
        for (int64_t i = 0; i < w.lm_head.view().numel(); ++i) x[i] *= lm_head_scale;
      }
      head = std::make_unique<model::EagleHead>(hc, std::move(w), target);
    } else {
      standalone = tiny_model(6);
    }
    return std::make_shared<spec::DraftWorkerCore>(alg, std::move(head), std::move(standalone), kv, target, 8, topk);
  }
};

// Request rid's slots lie in a range of its own, 200 apart, so requests never share a slot.
std::vector<int32_t> own_range(std::vector<int32_t> v, uint64_t rid) {
  for (auto& s : v) s += static_cast<int32_t>(200 * rid);
  return v;
}

// Request rid's prompt of n random tokens as a draft extend in its own slot range (EAGLE:
// paired with random rows of 64 target hidden states).
spec::DraftExtendSeq random_prompt(std::mt19937& rng, uint64_t rid, int32_t n, bool eagle) {
  std::vector<int32_t> prompt;
  for (int32_t i = 0; i < n; ++i) prompt.push_back(static_cast<int32_t>(3 + rng() % 400));
  auto seq = prompt_extend(rid, prompt);
  seq.slots = own_range(seq.slots, rid);
  seq.context = own_range(seq.context, rid);
  if (eagle)
    for (int32_t i = 0; i < n; ++i) seq.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
  return seq;
}

// A verify's extend for request rid: `committed` random tokens from position `first` on.
spec::DraftExtendSeq random_verify(std::mt19937& rng, uint64_t rid, int32_t first, int32_t committed, bool eagle) {
  spec::DraftExtendSeq v{.rid = rid, .tokens = {}, .first_position = first, .slots = {}, .context = {}, .hidden_rows = {}, .keep = true};
  for (int32_t j = 0; j < committed; ++j) {
    v.tokens.push_back(static_cast<int32_t>(3 + rng() % 400));
    if (eagle) v.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
  }
  v.slots = own_range(slots(first, first + committed), rid);
  v.context = own_range(slots(0, first + committed), rid);
  return v;
}

// A tree proposal for request rid from position `first`: its context reaches the scratch
// positions of the steps' candidates.
spec::DraftProposeSeq tree_proposal(uint64_t rid, int32_t first, int64_t steps, int64_t topk, int32_t root) {
  return {.rid = rid, .first_position = first, .context = own_range(slots(0, first + static_cast<int32_t>((steps - 1) * topk)), rid),
          .root_token = root};
}

const DraftCase kEagle3{"EAGLE3", spec::SpecAlgorithm::kEagle3, model::EagleKind::kEagle3, 0, false};
const DraftCase kEagle3Reduced{"EAGLE3 reduced vocabulary", spec::SpecAlgorithm::kEagle3, model::EagleKind::kEagle3, 200, false};
const DraftCase kEagleHot{"EAGLE hot tokens", spec::SpecAlgorithm::kEagle, model::EagleKind::kEagle1, 0, true};
const DraftCase kStandalone{"STANDALONE", spec::SpecAlgorithm::kStandalone, model::EagleKind::kEagle1, 0, false};

// Two cores of one draft, one of them drafting ahead (its cache holds the scratch slots past a
// pool of 1000), chain runners of `steps` on both: what drafting ahead proposes is compared
// with what drafting when asked proposes.
struct AheadPair {
  std::unique_ptr<model::KvCache> kv_plain, kv_ahead;
  std::shared_ptr<spec::DraftWorkerCore> plain, ahead;
  AheadPair(const DraftCase& c, const model::LlamaModel& target, int64_t steps) {
    const auto pool = model::kv_shape_for_tokens(1000, 1);
    kv_plain = std::make_unique<model::KvCache>(c.layer(), pool, Device::kCpu, DType::kF32);
    kv_ahead = std::make_unique<model::KvCache>(c.layer(), model::kv_shape_for_tokens(1000 + spec::DraftWorkerCore::draft_ahead_slots(8, steps), 1),
                                                Device::kCpu, DType::kF32);
    plain = c.core(target, *kv_plain, 13, 1);
    ahead = c.core(target, *kv_ahead, 13, 1);
    for (auto* core : {plain.get(), ahead.get()}) core->enable_draft_runners(steps, 8, 1000, /*graphs=*/false);
    ahead->enable_draft_ahead(pool.num_slots());
  }
};

std::vector<std::vector<int32_t>> tokens_of(const std::vector<spec::DraftTree>& trees) {
  std::vector<std::vector<int32_t>> t;
  for (const auto& tree : trees) t.push_back(tree.tokens);
  return t;
}

// The chains a verify reads from a chain drafted ahead: its input ids name them
// (spec::chains_naming_device_tokens), resolved against the table as the verify's upload does.
std::vector<std::vector<int32_t>> chains_read_on_device(const spec::DeviceChains& d, const std::vector<spec::DraftProposeSeq>& asked,
                                                        int64_t steps) {
  std::vector<int32_t> roots;
  for (const auto& a : asked) roots.push_back(a.root_token);
  auto named = spec::chains_naming_device_tokens(d, roots, steps);
  for (auto& t : named) {
    const TensorView ids(t.tokens.data(), DType::kI32, {static_cast<int64_t>(t.tokens.size())}, Device::kCpu);
    EXPECT_TRUE(kernels::resolve_future_ids({.ids = ids, .table = d.table}, Stream::cpu()).is_ok());
  }
  return tokens_of(named);
}

}  // namespace

// The chain runner (spec/draft_chain_runner.hpp: every step's input token and hidden state
// fed on the device, one copy back) proposes exactly what step-by-step drafting proposes:
// EAGLE3 with its full and a reduced vocabulary (ids mapped on the device), EAGLE with a
// hot-token map, STANDALONE; three requests at different positions.
TEST(DraftChainRunner, ProposesWhatStepByStepDraftingProposes) {
  auto target = tiny_model(5);
  std::mt19937 rng(9);
  for (const DraftCase& c : {kEagle3, kEagle3Reduced, kEagleHot, kStandalone}) {
    const auto hc = c.head_config();
    const bool eagle = c.eagle();
    model::KvCache kv_a(c.layer(), model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
    model::KvCache kv_b(c.layer(), model::kv_shape_for_tokens(256, 1), Device::kCpu, DType::kF32);
    auto make_core = [&](model::KvCache& kv) { return c.core(*target, kv, 11, 1); };
    auto stepwise = make_core(kv_a);
    auto chained = make_core(kv_b);
    chained->enable_draft_runners(4, 8, 256, /*graphs=*/false);
    ASSERT_NE(chained->chain_runner(), nullptr);
    const int64_t width = eagle ? hc.input_width() : 0;
    std::vector<spec::DraftProposeSeq> ps;
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
  for (auto alg : {spec::SpecAlgorithm::kEagle3, spec::SpecAlgorithm::kEagle, spec::SpecAlgorithm::kStandalone}) {
    const bool eagle = alg != spec::SpecAlgorithm::kStandalone;
    auto hc = model::EagleHeadConfig::for_target(alg == spec::SpecAlgorithm::kEagle ? model::EagleKind::kEagle1 : model::EagleKind::kEagle3, tiny(),
                                                 alg == spec::SpecAlgorithm::kEagle3 ? 200 : 0);
    const model::LlamaConfig layer = eagle ? hc.layer : tiny();
    model::KvCache kv_a(layer, model::kv_shape_for_tokens(512, 1), Device::kCpu, DType::kF32);
    model::KvCache kv_b(layer, model::kv_shape_for_tokens(512, 1), Device::kCpu, DType::kF32);
    auto make_core = [&](model::KvCache& kv, bool fixed) {
      std::unique_ptr<model::EagleHead> head;
      std::unique_ptr<model::LlamaModel> standalone;
      if (eagle) head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, 12, Device::kCpu, DType::kF32), *target);
      else standalone = tiny_model(6);
      auto c = std::make_shared<spec::DraftWorkerCore>(alg, std::move(head), std::move(standalone), kv, *target, 8, 1);
      c->enable_draft_runners(kSteps, 8, 512, /*graphs=*/false, /*fixed_width_extend=*/fixed);
      return c;
    };
    auto variable = make_core(kv_a, false);
    auto fixed = make_core(kv_b, true);
    ASSERT_EQ(variable->extend_runner(), nullptr);
    ASSERT_NE(fixed->extend_runner(), nullptr);
    const int64_t width = eagle ? hc.input_width() : 0;
    const std::vector<int32_t> committed_counts = {1, 2, 4};
    std::vector<spec::DraftExtendSeq> prompts, verifies;
    std::vector<spec::DraftProposeSeq> ps;
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
      spec::DraftExtendSeq v{.rid = rid, .tokens = {}, .first_position = first, .slots = {}, .context = {}, .hidden_rows = {}, .keep = true};
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

// One request's prompt extend at a token-count bucket's width (the prompt runners of
// enable_draft_runners' prompt_graph_max_tokens: padding tokens after the prompt on the dummy
// slot 0) leaves what the eager extend leaves: the same draft K/V in every slot but the dummy
// one, and the same next proposals. Prompts below, at and above a bucket's size (5, 16, 17 and
// 40 tokens over widths 16, 32, 64) and one past the largest (70: eager in both); chains of
// EAGLE3 (reduced vocabulary), EAGLE (hot tokens) and STANDALONE, and their trees of topk 2.
TEST(DraftExtendRunner, OneRequestsPromptAtABucketWidthLeavesWhatTheEagerExtendLeaves) {
  auto target = tiny_model(5);
  std::mt19937 rng(41);
  constexpr int64_t kSteps = 4, kDraftTokens = 8;
  for (const int64_t topk : {1, 2})
    for (const DraftCase& c : {kEagle3Reduced, kEagleHot, kStandalone}) {
      const std::string what = c.name + " topk " + std::to_string(topk);
      const bool eagle = c.eagle();
      model::KvCache kv_a(c.layer(), model::kv_shape_for_tokens(1200, 1), Device::kCpu, DType::kF32);
      model::KvCache kv_b(c.layer(), model::kv_shape_for_tokens(1200, 1), Device::kCpu, DType::kF32);
      auto eager = c.core(*target, kv_a, 13, topk, 200.0f);
      auto bucketed = c.core(*target, kv_b, 13, topk, 200.0f);
      eager->enable_draft_runners(kSteps, 8, 1200, /*graphs=*/false);
      bucketed->enable_draft_runners(kSteps, 8, 1200, /*graphs=*/false, /*fixed_width_extend=*/{}, /*prompt_graph_max_tokens=*/64);
      EXPECT_TRUE(eager->prompt_extend_widths().empty()) << what;
      EXPECT_EQ(bucketed->prompt_extend_widths(), (std::vector<int64_t>{16, 32, 64})) << what;
      Buffer hidden;
      if (eagle) hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, c.head_config().input_width()});
      std::vector<spec::DraftProposeSeq> ps;
      const std::vector<int32_t> lengths = {5, 16, 17, 40, 70};
      for (uint64_t rid = 1; rid <= lengths.size(); ++rid) {
        const int32_t n = lengths[rid - 1];
        const auto prompt = random_prompt(rng, rid, n, eagle);
        for (auto* core : {eager.get(), bucketed.get()}) core->extend({prompt}, eagle ? hidden.view() : TensorView());
        const int32_t first = eagle ? n - 1 : n;
        ps.push_back(topk > 1 ? tree_proposal(rid, first, kSteps, topk, prompt.tokens.back())
                              : spec::DraftProposeSeq{.rid = rid, .first_position = first,
                                                      .context = own_range(slots(0, first + static_cast<int32_t>(kSteps)), rid),
                                                      .root_token = prompt.tokens.back()});
      }
      for (int64_t l = 0; l < c.layer().num_layers; ++l)
        for (const auto& [a, b] : {std::pair{kv_a.k(l), kv_b.k(l)}, std::pair{kv_a.v(l), kv_b.v(l)}}) {
          const int64_t row = a.numel() / a.dim(0);
          const auto* x = static_cast<const float*>(a.data);
          const auto* y = static_cast<const float*>(b.data);
          double worst = 0;
          for (int64_t i = row; i < a.numel(); ++i) worst = std::max(worst, static_cast<double>(std::abs(x[i] - y[i])));  // past slot 0
          EXPECT_LT(worst, 1e-4) << what << " layer " << l;
        }
      if (topk > 1) {
        const auto want = eager->propose_tree(ps, kSteps, kDraftTokens);
        const auto got = bucketed->propose_tree(ps, kSteps, kDraftTokens);
        ASSERT_EQ(got.size(), want.size()) << what;
        for (size_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i].tokens, want[i].tokens) << what << " request " << i;
      } else {
        EXPECT_EQ(bucketed->propose_chain(ps, kSteps), eager->propose_chain(ps, kSteps)) << what;
      }
    }
}

// The tree runner (spec/draft_tree_runner.hpp: the frontier, its paths and the candidates
// built on the device, one copy back) proposes exactly the trees step-by-step tree drafting
// proposes, for topk 2 and 4: EAGLE3 with a reduced vocabulary (ids mapped on the device),
// EAGLE with a hot-token map, STANDALONE; three requests at different positions, once after
// their prompts and again after a verify's extend (the first tokens and log-probabilities
// the extend leaves on the device must equal the host's).
TEST(DraftTreeRunner, ProposesWhatStepByStepDraftingProposes) {
  auto target = tiny_model(5);
  std::mt19937 rng(21);
  constexpr int64_t kSteps = 5, kDraftTokens = 16;  // deep enough that the verify trees hold nodes of the last forwards
  for (const int64_t topk : {2, 4})
    for (const DraftCase& c : {kEagle3Reduced, kEagleHot, kStandalone}) {
      const std::string what = c.name + " topk " + std::to_string(topk);
      const auto hc = c.head_config();
      const bool eagle = c.eagle();
      model::KvCache kv_a(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
      model::KvCache kv_b(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
      auto make_core = [&](model::KvCache& kv) { return c.core(*target, kv, 13, topk); };
      auto stepwise = make_core(kv_a);
      auto runner = make_core(kv_b);
      runner->enable_draft_runners(kSteps, 8, 1024, /*graphs=*/false);
      ASSERT_NE(runner->tree_runner(), nullptr) << what;
      ASSERT_EQ(runner->chain_runner(), nullptr) << what;
      const int64_t width = eagle ? hc.input_width() : 0;
      Buffer hidden;
      if (eagle) hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, width});
      auto check = [&](const std::vector<spec::DraftProposeSeq>& ps, const char* when) {
        const auto want = stepwise->propose_tree(ps, kSteps, kDraftTokens);
        const auto got = runner->propose_tree(ps, kSteps, kDraftTokens);
        ASSERT_EQ(got.size(), want.size()) << what << " " << when;
        for (size_t i = 0; i < got.size(); ++i) {
          EXPECT_EQ(got[i].tokens, want[i].tokens) << what << " " << when << " request " << i;
          EXPECT_EQ(got[i].parents, want[i].parents) << what << " " << when << " request " << i;
          EXPECT_EQ(got[i].size(), kDraftTokens) << what << " " << when << " request " << i;
        }
      };
      std::vector<spec::DraftProposeSeq> ps;
      std::vector<int32_t> lengths;
      for (uint64_t rid = 1; rid <= 3; ++rid) {
        const int32_t n = static_cast<int32_t>(4 + 3 * rid);
        const auto seq = random_prompt(rng, rid, n, eagle);
        stepwise->extend({seq}, eagle ? hidden.view() : TensorView());
        runner->extend({seq}, eagle ? hidden.view() : TensorView());
        ps.push_back(tree_proposal(rid, eagle ? n - 1 : n, kSteps, topk, seq.tokens.back()));
        lengths.push_back(n);
      }
      check(ps, "after the prompts");
      // A verify committed 1, 2 and 3 tokens: the extend over them, then the next proposal.
      std::vector<spec::DraftExtendSeq> verifies;
      for (uint64_t rid = 1; rid <= 3; ++rid) {
        const int32_t n = lengths[rid - 1], a = static_cast<int32_t>(rid), first = eagle ? n : n + 1;
        verifies.push_back(random_verify(rng, rid, first, a, eagle));
        ps[rid - 1] = tree_proposal(rid, eagle ? first + a - 1 : first + a, kSteps, topk, verifies.back().tokens.back());
      }
      stepwise->extend(verifies, eagle ? hidden.view() : TensorView());
      runner->extend(verifies, eagle ? hidden.view() : TensorView());
      check(ps, "after a verify");
    }
}

// A tree verify's draft extend at the fixed width (the extend runner with the tree runner's
// pools: the k best first tokens and their log-probabilities instead of the argmax) leaves the
// state the variable-width extend leaves: after the prompts and a verify extend of 1, 3 and 6
// committed tokens (a path of up to steps + 1), both cores propose the same trees. Topk 2 and 4;
// EAGLE3 with a reduced vocabulary, EAGLE with hot tokens, STANDALONE; the padding writes the
// reserved positions after the committed tokens, which the next proposal writes before it reads.
TEST(DraftExtendRunner, TreeExtendAtFixedWidthLeavesTheStateOfTheVariableWidthOne) {
  auto target = tiny_model(5);
  std::mt19937 rng(33);
  constexpr int64_t kSteps = 5, kDraftTokens = 16;
  for (const int64_t topk : {2, 4})
    for (const DraftCase& c : {kEagle3Reduced, kEagleHot, kStandalone}) {
      const std::string what = c.name + " topk " + std::to_string(topk);
      const bool eagle = c.eagle();
      model::KvCache kv_a(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
      model::KvCache kv_b(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
      auto variable = c.core(*target, kv_a, 13, topk, 200.0f);
      auto fixed = c.core(*target, kv_b, 13, topk, 200.0f);
      variable->enable_draft_runners(kSteps, 8, 1024, /*graphs=*/false, /*fixed_width_extend=*/false);
      fixed->enable_draft_runners(kSteps, 8, 1024, /*graphs=*/false, /*fixed_width_extend=*/true);
      ASSERT_EQ(variable->extend_runner(), nullptr) << what;
      ASSERT_NE(fixed->extend_runner(), nullptr) << what;
      Buffer hidden;
      if (eagle) hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, c.head_config().input_width()});
      const std::vector<int32_t> committed_counts = {1, 3, static_cast<int32_t>(kSteps) + 1};
      std::vector<spec::DraftExtendSeq> prompts, verifies;
      std::vector<spec::DraftProposeSeq> ps;
      for (uint64_t rid = 1; rid <= 3; ++rid) {
        const int32_t n = static_cast<int32_t>(4 + 3 * rid);
        prompts.push_back(random_prompt(rng, rid, n, eagle));
        const int32_t a1 = committed_counts[rid - 1], first = eagle ? n : n + 1;
        auto v = random_verify(rng, rid, first, a1, eagle);
        v.spare_slots = own_range(slots(first + a1, first + static_cast<int32_t>(kSteps) + 1), rid);
        verifies.push_back(v);
        ps.push_back(tree_proposal(rid, eagle ? first + a1 - 1 : first + a1, kSteps, topk, v.tokens.back()));
      }
      for (auto* core : {variable.get(), fixed.get()}) {
        core->extend(prompts, eagle ? hidden.view() : TensorView());
        core->extend(verifies, eagle ? hidden.view() : TensorView());
      }
      const auto want = variable->propose_tree(ps, kSteps, kDraftTokens);
      const auto got = fixed->propose_tree(ps, kSteps, kDraftTokens);
      ASSERT_EQ(got.size(), want.size()) << what;
      for (size_t i = 0; i < got.size(); ++i) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << what << " request " << i;
        EXPECT_EQ(got[i].parents, want[i].parents) << what << " request " << i;
      }
    }
}

// Drafting ahead (spec::DraftWorkerCore::enable_draft_ahead): the next round's chain, enqueued
// right after the round with its draft K/V in scratch slots past the pool, is handed out when
// the round asks for the same requests, positions, roots and context slots, and proposes what
// a core without it proposes; any other round drafts afresh (and proposes what that core does).
// chains_on_device hands its tokens out where the device wrote them. EAGLE3 with a reduced
// vocabulary and EAGLE with hot tokens, three requests.
TEST(DraftWorkerCore, ADraftAheadProposesWhatTheRoundAsksFor) {
  auto target = tiny_model(5);
  std::mt19937 rng(12);
  constexpr int64_t kSteps = 4;
  for (const DraftCase& c : {kEagle3Reduced, kEagleHot}) {
    AheadPair cores(c, *target, kSteps);
    auto& plain = cores.plain;
    auto& ahead = cores.ahead;
    const int64_t width = c.head_config().input_width();
    Buffer hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, width});
    std::vector<spec::DraftProposeSeq> round;
    for (uint64_t rid = 1; rid <= 3; ++rid) {
      const int32_t n = static_cast<int32_t>(5 + 4 * rid);
      const auto prompt = random_prompt(rng, rid, n, true);
      for (auto* core : {plain.get(), ahead.get()}) core->extend({prompt}, hidden.view());
      round.push_back({.rid = rid, .first_position = n - 1, .context = own_range(slots(0, n + static_cast<int32_t>(kSteps)), rid),
                       .root_token = prompt.tokens.back()});
    }
    auto asked_ahead = [&](const std::vector<spec::DraftProposeSeq>& seqs) {
      auto next = seqs;
      for (auto& s : next) s.context.resize(static_cast<size_t>(s.first_position));
      ahead->propose_ahead(next, kSteps);
    };
    // The same round: taken from the draft ahead.
    asked_ahead(round);
    EXPECT_EQ(tokens_of(ahead->propose(round, kSteps, 0)), tokens_of(plain->propose(round, kSteps, 0))) << c.name;
    EXPECT_EQ(ahead->ahead_hits(), 1) << c.name;
    // Two of its requests (the third ended): taken.
    asked_ahead(round);
    ahead->forget(std::vector<uint64_t>{2});
    const std::vector<spec::DraftProposeSeq> two = {round[0], round[2]};
    EXPECT_EQ(tokens_of(ahead->propose(two, kSteps, 0)), tokens_of(plain->propose(two, kSteps, 0))) << c.name;
    EXPECT_EQ(ahead->ahead_hits(), 2) << c.name;
    // Another root, other context slots, a request extended since, another chain length: afresh.
    auto other_root = two;
    other_root[1].root_token += 1;
    auto other_slots = two;
    other_slots[0].context[3] = 990;
    for (const auto& asked : {other_root, other_slots}) {
      asked_ahead(two);
      EXPECT_EQ(tokens_of(ahead->propose(asked, kSteps, 0)), tokens_of(plain->propose(asked, kSteps, 0))) << c.name;
    }
    asked_ahead(two);
    const auto verify = random_verify(rng, 3, two[1].first_position, 2, true);
    for (auto* core : {plain.get(), ahead.get()}) core->extend({verify}, hidden.view());
    auto after = two;
    after[1].first_position += 2;
    after[1].root_token = verify.tokens.back();
    after[1].context = own_range(slots(0, after[1].first_position + static_cast<int32_t>(kSteps)), 3);
    EXPECT_EQ(tokens_of(ahead->propose(after, kSteps, 0)), tokens_of(plain->propose(after, kSteps, 0))) << c.name;
    asked_ahead(after);
    EXPECT_EQ(tokens_of(ahead->propose(after, kSteps - 1, 0)), tokens_of(plain->propose(after, kSteps - 1, 0))) << c.name;
    EXPECT_EQ(ahead->ahead_hits(), 2) << c.name;
    EXPECT_EQ(ahead->ahead_misses(), 4) << c.name;
    // Read where the device wrote them (the verify's future-token table), then collected: the
    // same chains. Not for a round the draft ahead does not cover (then propose()).
    asked_ahead(after);
    EXPECT_FALSE(ahead->chains_on_device(other_root, kSteps)) << c.name;
    const auto d = ahead->chains_on_device(after, kSteps);
    ASSERT_TRUE(d) << c.name;
    const auto want = tokens_of(plain->propose(after, kSteps, 0));
    EXPECT_EQ(chains_read_on_device(*d, after, kSteps), want) << c.name;
    EXPECT_EQ(tokens_of(ahead->collect_chains()), want) << c.name;
    EXPECT_EQ(ahead->ahead_hits(), 3) << c.name;
  }
}

// A verified chain of `width` tokens at position `first` (root, then drafts; random tokens and,
// for an EAGLE draft, hidden rows), the verify's argmax rows that accept `accepted` of its drafts,
// and what the host commits from them (the accepted drafts, then the bonus token).
struct VerifiedChain {
  spec::DraftExtendSeq verified, committed;
  std::vector<int32_t> argmax;
};
VerifiedChain verified_chain(std::mt19937& rng, uint64_t rid, int32_t first, int64_t accepted, int64_t width, bool eagle) {
  VerifiedChain c;
  auto& v = c.verified;
  v = {.rid = rid, .tokens = {}, .first_position = first, .slots = own_range(slots(first, first + static_cast<int32_t>(width)), rid),
       .context = own_range(slots(0, first), rid), .hidden_rows = {}, .keep = true};
  for (int64_t j = 0; j < width; ++j) {
    v.tokens.push_back(static_cast<int32_t>(3 + rng() % 400));
    if (eagle) v.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
  }
  const int64_t a = accepted;
  c.argmax.resize(static_cast<size_t>(width));
  for (int64_t j = 0; j < width; ++j) c.argmax[j] = j < a ? v.tokens[j + 1] : static_cast<int32_t>(3 + rng() % 400);
  if (a < width - 1 && c.argmax[a] == v.tokens[a + 1]) c.argmax[a] += 1;  // the first draft not accepted
  c.committed = {.rid = rid, .tokens = {c.argmax.begin(), c.argmax.begin() + a + 1}, .first_position = first,
                 .slots = {v.slots.begin(), v.slots.begin() + a + 1}, .context = own_range(slots(0, first + static_cast<int32_t>(a) + 1), rid),
                 .hidden_rows = {}, .keep = true, .spare_slots = {v.slots.begin() + a + 1, v.slots.end()}};
  if (eagle) c.committed.hidden_rows.assign(v.hidden_rows.begin(), v.hidden_rows.begin() + a + 1);
  return c;
}

// The extend right behind a greedy chain verify (DraftWorkerCore::extend_verified_chains):
// from each request's verified chain and the verify's argmax, through the fixed-width extend
// runner (committed tokens and last row found by kernels::greedy_chain_accept) and, without a
// runner, by reading the argmax back, it leaves the state that the extend of the host's
// committed tokens leaves: the next chains are the same. Requests accepting none, two and every
// draft; EAGLE3 with a reduced vocabulary, EAGLE with hot tokens, STANDALONE.
TEST(DraftWorkerCore, AnExtendBehindAChainVerifyLeavesTheStateOfTheHostAcceptedOne) {
  auto target = tiny_model(5);
  std::mt19937 rng(41);
  constexpr int64_t kSteps = 4, kWidth = kSteps + 1;
  for (const DraftCase& c : {kEagle3Reduced, kEagleHot, kStandalone}) {
    const bool eagle = c.eagle();
    model::KvCache kv_host(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
    model::KvCache kv_runner(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
    model::KvCache kv_read_back(c.layer(), model::kv_shape_for_tokens(1024, 1), Device::kCpu, DType::kF32);
    auto host = c.core(*target, kv_host, 17, 1, 200.0f);
    auto runner = c.core(*target, kv_runner, 17, 1, 200.0f);
    auto read_back = c.core(*target, kv_read_back, 17, 1, 200.0f);
    host->enable_draft_runners(kSteps, 8, 1024, /*graphs=*/false, /*fixed_width_extend=*/false);
    runner->enable_draft_runners(kSteps, 8, 1024, /*graphs=*/false, /*fixed_width_extend=*/true);
    read_back->enable_draft_runners(kSteps, 8, 1024, /*graphs=*/false, /*fixed_width_extend=*/false);
    ASSERT_NE(runner->extend_runner(), nullptr) << c.name;
    Buffer hidden;
    if (eagle) hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, c.head_config().input_width()});
    const TensorView h = eagle ? hidden.view() : TensorView();
    const std::vector<int64_t> accepted = {0, 2, kSteps};
    std::vector<spec::DraftExtendSeq> verified, committed;
    std::vector<int32_t> argmax;
    std::vector<spec::DraftProposeSeq> next;
    for (uint64_t rid = 1; rid <= 3; ++rid) {
      const int32_t n = static_cast<int32_t>(5 + 3 * rid), first = eagle ? n : n + 1;
      const auto prompt = random_prompt(rng, rid, n, eagle);
      for (auto* core : {host.get(), runner.get(), read_back.get()}) core->extend({prompt}, h);
      // The verified chain and an argmax that accepts `a` of its drafts.
      const int64_t a = accepted[rid - 1];
      const VerifiedChain c = verified_chain(rng, rid, first, a, kWidth, eagle);
      argmax.insert(argmax.end(), c.argmax.begin(), c.argmax.end());
      verified.push_back(c.verified);
      committed.push_back(c.committed);
      const int32_t root = first + static_cast<int32_t>(a) + (eagle ? 0 : 1);
      next.push_back({.rid = rid, .first_position = root, .context = own_range(slots(0, root + static_cast<int32_t>(kSteps)), rid),
                      .root_token = c.committed.tokens.back()});
    }
    Buffer argmax_rows(Device::kCpu, DType::kI32, {static_cast<int64_t>(argmax.size())});
    std::copy(argmax.begin(), argmax.end(), static_cast<int32_t*>(argmax_rows.data()));
    host->extend(committed, h);
    runner->extend_verified_chains(verified, argmax_rows.view(), h);
    read_back->extend_verified_chains(verified, argmax_rows.view(), h);
    const auto want = host->propose_chain(next, kSteps);
    EXPECT_EQ(runner->propose_chain(next, kSteps), want) << c.name << ": through the extend runner";
    EXPECT_EQ(read_back->propose_chain(next, kSteps), want) << c.name << ": the argmax read back";
  }
}

// Drafting ahead behind the extend (DraftWorkerCore::draft_ahead_behind_verified_chains): once a
// greedy chain verify's extend is enqueued, the core reads the argmax back and queues the next
// round's chain itself, before anyone asks; the target worker's later propose_ahead of the
// requests it committed finds that chain queued and leaves it, and the round takes it and
// proposes what a core that extended the host's committed tokens and drafted afresh proposes.
// Requests accepting none, two and every draft (EAGLE3 with a reduced vocabulary), through the
// fixed-width extend runner and with the argmax read back (no runner). Off, the same round
// drafts ahead only when asked.
TEST(DraftWorkerCore, ADraftAheadBehindTheExtendIsTheOneTheRoundAsksFor) {
  auto target = tiny_model(5);
  std::mt19937 rng(43);
  constexpr int64_t kSteps = 4, kWidth = kSteps + 1;
  const DraftCase& c = kEagle3Reduced;
  for (const bool fixed_width : {true, false})
  for (const bool behind : {true, false}) {
    const auto pool = model::kv_shape_for_tokens(1000, 1);
    model::KvCache kv_plain(c.layer(), pool, Device::kCpu, DType::kF32);
    model::KvCache kv_ahead(c.layer(), model::kv_shape_for_tokens(1000 + spec::DraftWorkerCore::draft_ahead_slots(8, kSteps), 1), Device::kCpu,
                            DType::kF32);
    auto plain = c.core(*target, kv_plain, 13, 1);
    auto ahead = c.core(*target, kv_ahead, 13, 1);
    plain->enable_draft_runners(kSteps, 8, 1000, /*graphs=*/false, /*fixed_width_extend=*/false);
    ahead->enable_draft_runners(kSteps, 8, 1000, /*graphs=*/false, fixed_width);
    ASSERT_EQ(ahead->extend_runner() != nullptr, fixed_width);
    ahead->enable_draft_ahead(pool.num_slots());
    ahead->draft_ahead_behind_verified_chains(behind);
    Buffer hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, c.head_config().input_width()});
    const std::vector<int64_t> accepted = {0, 2, kSteps};
    std::vector<spec::DraftExtendSeq> verified, committed;
    std::vector<int32_t> argmax;
    std::vector<spec::DraftProposeSeq> next, round;
    for (uint64_t rid = 1; rid <= 3; ++rid) {
      const int32_t n = static_cast<int32_t>(5 + 3 * rid);
      const auto prompt = random_prompt(rng, rid, n, true);
      for (auto* core : {plain.get(), ahead.get()}) core->extend({prompt}, hidden.view());
      const int64_t a = accepted[rid - 1];
      const VerifiedChain c = verified_chain(rng, rid, n, a, kWidth, true);
      argmax.insert(argmax.end(), c.argmax.begin(), c.argmax.end());
      verified.push_back(c.verified);
      committed.push_back(c.committed);
      // What the target worker asks for after accepting: root one past the committed tokens.
      const int32_t root = n + static_cast<int32_t>(a) + 1;
      const int32_t root_token = c.committed.tokens.back();
      next.push_back({.rid = rid, .first_position = root, .context = own_range(slots(0, root), rid), .root_token = root_token});
      // The next verify's: its context holds the slots of the positions it drafts too.
      round.push_back({.rid = rid, .first_position = root, .context = own_range(slots(0, root + static_cast<int32_t>(kSteps)), rid),
                       .root_token = root_token});
    }
    Buffer argmax_rows(Device::kCpu, DType::kI32, {static_cast<int64_t>(argmax.size())});
    std::copy(argmax.begin(), argmax.end(), static_cast<int32_t*>(argmax_rows.data()));
    plain->extend(committed, hidden.view());
    ahead->extend_verified_chains(verified, argmax_rows.view(), hidden.view());
    const std::string what = std::string(fixed_width ? "extend runner" : "argmax read back") + (behind ? ", behind" : ", asked");
    EXPECT_EQ(ahead->ahead_on_device().has_value(), behind) << what << ": queued before anyone asked";
    ahead->propose_ahead(next, kSteps);
    EXPECT_EQ(ahead->ahead_already_queued(), behind ? 1 : 0) << what;
    const auto d = ahead->chains_on_device(round, kSteps);
    ASSERT_TRUE(d) << what;
    const auto want = tokens_of(plain->propose(round, kSteps, 0));
    EXPECT_EQ(chains_read_on_device(*d, round, kSteps), want) << what;
    EXPECT_EQ(tokens_of(ahead->collect_chains()), want) << what;
    EXPECT_EQ(ahead->ahead_hits(), 1) << what;
    EXPECT_EQ(ahead->ahead_misses(), 0) << what;
  }
}

// A chain drafted ahead behind the DraftWorker actor: the client mirrors what it asked for, so
// chains_on_device() answers from its own copy and the DraftWorker's answer to the draft ahead
// (no round trip), and the chains it names are the ones a draft without drafting ahead
// proposes; collect_chains() brings the same chains to the host (and checks the DraftWorker gave
// the same rows). A round the draft ahead does not cover (another root, a request forgotten
// since) drafts afresh through propose().
TEST(DraftWorkerClient, NamesTheChainDraftedAheadWithoutAskingTheDraftWorker) {
  auto target = tiny_model(5);
  std::mt19937 rng(19);
  constexpr int64_t kSteps = 4;
  const DraftCase& c = kEagle3Reduced;
  AheadPair cores(c, *target, kSteps);
  auto& plain = cores.plain;
  auto& ahead = cores.ahead;
  aerie::testing::ActorTestSystem s;
  auto actor = s.spawn_stopped_at_end(actors::draft_worker_actor, ahead, -1);
  {
    actors::DraftWorkerClient client(*s.sys, actor, ahead->info());
    Buffer hidden = aerie::testing::random_buffer(rng, DType::kF32, {64, c.head_config().input_width()});
    std::vector<spec::DraftProposeSeq> round;
    for (uint64_t rid = 1; rid <= 3; ++rid) {
      const int32_t n = static_cast<int32_t>(5 + 4 * rid);
      const auto prompt = random_prompt(rng, rid, n, true);
      plain->extend({prompt}, hidden.view());
      client.extend({prompt}, hidden.view());
      round.push_back({.rid = rid, .first_position = n - 1, .context = own_range(slots(0, n + static_cast<int32_t>(kSteps)), rid),
                       .root_token = prompt.tokens.back()});
    }
    // The whole round, then two of its requests: named on the device, then collected.
    for (const auto& asked : {round, std::vector<spec::DraftProposeSeq>{round[2], round[0]}}) {
      client.propose_ahead(round, kSteps);
      const auto d = client.chains_on_device(asked, kSteps);
      ASSERT_TRUE(d);
      client.flush();  // nothing in flight: the ahead's chain is enqueued, its table written in order
      const auto want = tokens_of(plain->propose(asked, kSteps, 0));
      const std::vector<spec::DraftTree> got = client.collect_chains();  // after it, the table holds the chains
      EXPECT_EQ(chains_read_on_device(*d, asked, kSteps), want);
      EXPECT_EQ(tokens_of(got), want);
    }
    EXPECT_EQ(ahead->ahead_hits(), 2);
    // Another root, or a request forgotten since: not on the device; propose() drafts afresh.
    auto other_root = round;
    other_root[1].root_token += 1;
    client.propose_ahead(round, kSteps);
    EXPECT_FALSE(client.chains_on_device(other_root, kSteps));
    EXPECT_EQ(tokens_of(client.propose(other_root, kSteps, 0)), tokens_of(plain->propose(other_root, kSteps, 0)));
    client.propose_ahead(round, kSteps);
    client.forget({2});
    plain->forget(std::vector<uint64_t>{2});
    EXPECT_FALSE(client.chains_on_device(round, kSteps));
    const std::vector<spec::DraftProposeSeq> kept = {round[0], round[2]};
    EXPECT_TRUE(client.chains_on_device(kept, kSteps));
    EXPECT_EQ(tokens_of(client.collect_chains()), tokens_of(plain->propose(kept, kSteps, 0)));
    EXPECT_EQ(ahead->ahead_hits(), 3);
  }
  caf::anon_send_exit(actor, caf::exit_reason::user_shutdown);
}
