// Speculative decoding on a GPU: greedy output with speculation equals greedy output
// without it for EAGLE, EAGLE3 and STANDALONE at batch sizes 1, 16 and 64 (tiny shape, f32
// activations, so the only difference between the runs is the algorithm), and the
// STANDALONE self-draft accepts every draft token. Skips without a CUDA device.
#include <gtest/gtest.h>


#include <cmath>
#include <random>

#include "spec/draft_worker_core.hpp"
#include "kernels/buffer.hpp"
#include "kernels/topk.hpp"
#include "launch/deployment.hpp"
#include "model/llama_weights.hpp"
#include "spec/cuda_graph_buckets.hpp"
#include "spec/tree_acceptor.hpp"
#include "tests/test_util.hpp"
#include "launch/deployment_flags.hpp"
#include "tests/launch/random_requests.hpp"

using namespace aerie;

namespace {

std::vector<core::GenerationRequest> mixed(int n, uint32_t seed) { return aerie::testing::random_requests(n, seed, 60, 1, 24); }

std::vector<launch::RequestOutcome> run(const std::string& alg, const std::vector<core::GenerationRequest>& reqs, int64_t topk = 1,
                                        int64_t draft_tokens = 0, int64_t page = 1, bool graph_padding = true) {
  auto world = parallel::make_single_process_group();
  launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny", .device = "cuda", .dtype = "f32", .max_total_tokens = 16384,
                              .page_size = page, .max_running_requests = 64, .chunked_prefill_size = 64};
  o.speculative_algorithm = alg;
  o.speculative_num_steps = 3;
  o.speculative_eagle_topk = topk;
  o.speculative_num_draft_tokens = draft_tokens;
  o.disable_cuda_graph_padding = !graph_padding;
  if (!alg.empty()) launch::check_deployment_flags(o);
  launch::Deployment d(o, *world);
  return d.run(reqs);
}

// A draft core (16 requests, chains or trees of topk) for the tiny target on the GPU: a random EAGLE3 head
// (hc), or a random tiny Llama as a STANDALONE draft.
std::shared_ptr<spec::DraftWorkerCore> tiny_draft_core(bool eagle, const model::EagleHeadConfig& hc, const model::LlamaModel& target,
                                                      model::KvCache& kv, const Stream& stream, int64_t topk = 1) {
  std::unique_ptr<model::EagleHead> head;
  std::unique_ptr<model::LlamaModel> standalone;
  const auto& cfg = target.config();
  if (eagle)
    head = std::make_unique<model::EagleHead>(hc, model::random_eagle_head(hc, 11, Device::kCuda, DType::kF32), target);
  else
    standalone = std::make_unique<model::LlamaModel>(cfg, model::random_llama_weights(cfg, 6, Device::kCuda, DType::kF32, 0.1f), stream,
                                                     DType::kF32);
  return std::make_shared<spec::DraftWorkerCore>(eagle ? spec::SpecAlgorithm::kEagle3 : spec::SpecAlgorithm::kStandalone, std::move(head),
                                                 std::move(standalone), kv, target, 16, topk);
}

// Sixteen requests with prompts of 2-91 random tokens (request r's position p in slot
// 128 r + p), extended into each of `cores` (EAGLE: with stand-in target hidden states on
// the GPU); returns their proposals, each with `extra` slots of context after its first position.
std::vector<spec::DraftProposeSeq> prompt_sixteen(std::mt19937& rng, bool eagle, const model::EagleHeadConfig& hc,
                                                  const std::vector<spec::DraftWorkerCore*>& cores, int32_t extra) {
  std::vector<spec::DraftProposeSeq> ps;
  for (uint64_t rid = 1; rid <= 16; ++rid) {
    const int32_t n = 2 + static_cast<int32_t>(rng() % 90);
    const int32_t base = static_cast<int32_t>(128 * rid);  // slots of position p: base + p
    spec::DraftExtendSeq seq{.rid = rid, .tokens = {}, .first_position = 0, .slots = {}, .context = {}, .hidden_rows = {}, .keep = true};
    for (int32_t p = 0; p < n; ++p) {
      seq.tokens.push_back(static_cast<int32_t>(3 + rng() % 500));
      seq.slots.push_back(base + p);
      if (eagle) seq.hidden_rows.push_back(p);
    }
    seq.context = seq.slots;
    Buffer hidden;
    if (eagle) {
      const Buffer host = aerie::testing::random_buffer(rng, DType::kF32, {n, hc.input_width()});
      hidden = Buffer(Device::kCuda, DType::kF32, {n, hc.input_width()});
      hidden.copy_from_host(host.data(), host.nbytes());
    }
    for (auto* core : cores) core->extend({seq}, eagle ? hidden.view() : TensorView());
    const int32_t first = eagle ? n - 1 : n;
    std::vector<int32_t> context;
    for (int32_t p = 0; p < first + extra; ++p) context.push_back(base + p);
    ps.push_back({.rid = rid, .first_position = first, .context = context, .root_token = seq.tokens.back()});
  }
  return ps;
}

// Garbage in the dummy KV slot 0 of every layer, which padded rows write and read: a padded
// row leaking into a real one would show.
void garbage_in_dummy_slot(model::KvCache& kv, int64_t layers, uint64_t seed, const Stream& stream) {
  for (int64_t l = 0; l < layers; ++l)
    for (const auto* t : {&kv.k(l), &kv.v(l)})
      ASSERT_TRUE(kernels::fill_normal({.x = t->slice_rows(0, 1), .seed = seed, .mean = 0.0f, .std = 1e4f}, stream).is_ok());
}

}  // namespace

TEST(CudaSpeculative, GreedyOutputEqualsPlainGreedy) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int batch : {1, 16, 64}) {
    const auto reqs = mixed(batch, 500 + static_cast<uint32_t>(batch));
    const auto plain = run("", reqs);
    for (const std::string alg : {"EAGLE", "EAGLE3", "STANDALONE"}) {
      const auto spec = run(alg, reqs);
      int differ = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
        if (spec[i].result.output_ids != plain[i].result.output_ids) ++differ;
        if (alg == "STANDALONE") {
          EXPECT_EQ(spec[i].result.spec_verify_ct, (static_cast<int64_t>(reqs[i].max_new_tokens) - 1 + 3) / 4) << "request " << i;
        }
      }
      EXPECT_EQ(differ, 0) << alg << " batch " << batch << ": " << differ << " of " << reqs.size() << " outputs differ";
    }
  }
}

TEST(CudaSpeculative, TreeGreedyOutputEqualsPlainGreedy) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  for (int batch : {1, 16, 64}) {
    const auto reqs = mixed(batch, 700 + static_cast<uint32_t>(batch));
    const auto plain = run("", reqs);
    for (const std::string alg : {"EAGLE", "EAGLE3", "STANDALONE"}) {
      const auto spec = run(alg, reqs, 4, 10, 4);
      int differ = 0;
      int64_t verifies = 0, tokens = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
        if (spec[i].result.output_ids != plain[i].result.output_ids) ++differ;
        verifies += spec[i].result.spec_verify_ct;
        tokens += static_cast<int64_t>(spec[i].result.output_ids.size()) - 1;
      }
      EXPECT_EQ(differ, 0) << alg << " tree batch " << batch << ": " << differ << " of " << reqs.size() << " outputs differ";
      if (alg == "STANDALONE" && batch >= 16) {  // the self-draft's greedy path is in the tree: several tokens per verify
        EXPECT_GT(static_cast<double>(tokens) / static_cast<double>(verifies), 2.0) << "batch " << batch;
      }
    }
  }
}

TEST(CudaSpeculative, LogprobsEqualPlainLogprobs) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto reqs = mixed(16, 900);
  for (size_t i = 0; i < reqs.size(); ++i) reqs[i].logprobs = i % 2 == 0 ? 2 : 0;
  const auto plain = run("", reqs);
  for (int64_t topk : {1, 4}) {
    const auto spec = run("STANDALONE", reqs, topk, topk == 1 ? 0 : 10, 4);
    for (size_t i = 0; i < reqs.size(); ++i) {
      ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
      ASSERT_EQ(spec[i].result.output_ids, plain[i].result.output_ids) << "request " << i;
      ASSERT_EQ(spec[i].result.output_logprobs.size(), plain[i].result.output_logprobs.size());
      for (size_t k = 0; k < spec[i].result.output_logprobs.size(); ++k) {
        EXPECT_NEAR(spec[i].result.output_logprobs[k].logprob, plain[i].result.output_logprobs[k].logprob, 1e-3)
            << "topk " << topk << " request " << i << " token " << k;
        EXPECT_EQ(spec[i].result.output_logprobs[k].top_ids, plain[i].result.output_logprobs[k].top_ids);
      }
    }
  }
}


// Verification on the device (kernels::tree_accept's CUDA backend) walks every tree as the
// CPU backend does: greedy and sampled requests mixed, chains and trees, temperature, top-k,
// top-p and min-p, a 32,000-token vocabulary, drafts made likely enough that paths of every
// length occur. Float sums in another order may move a top-p boundary, so up to 2 of the 96
// sampled requests may differ; greedy ones never.
TEST(CudaTreeAccept, WalksTreesAsTheCpuDoes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  std::mt19937 rng(17);
  std::normal_distribution<float> nd(0.0f, 2.0f);
  const int64_t V = 32000, B = 128;
  spec::DraftTree tree;  // root -> (1 -> 3 -> 5, 2 -> 4)
  tree.tokens = {0, 0, 0, 0, 0, 0};
  tree.parents = {-1, 0, 0, 1, 2, 3};
  const int64_t N = tree.size();
  std::vector<spec::DraftTree> trees;
  std::vector<model::SamplingRow> rows;
  Buffer logits(Device::kCpu, DType::kF32, {B * N, V});
  for (int64_t i = 0; i < logits.view().numel(); ++i) logits.view().ptr<float>()[i] = nd(rng);
  for (int64_t b = 0; b < B; ++b) {
    spec::DraftTree t = b % 2 ? tree : spec::DraftTree::chain(0, std::vector<int32_t>(static_cast<size_t>(N - 1), 0));
    for (int64_t i = 1; i < N; ++i) {
      t.tokens[static_cast<size_t>(i)] = static_cast<int32_t>(rng() % V);
      // Three in four parents' rows favour their draft (e^14 against 32,000 x e^2 for the
      // rest at temperature 1): accepted often, not always.
      const int64_t parent = t.parents[static_cast<size_t>(i)];
      if (rng() % 4 != 0) logits.view().ptr<float>()[(b * N + parent) * V + t.tokens[static_cast<size_t>(i)]] = 14.0f + nd(rng);
    }
    trees.push_back(t);
    model::SamplingRow r{.temperature = b % 4 == 0 ? 0.0f : (b % 4 == 1 ? 0.7f : 1.0f), .seed = 100 + b, .step = b};
    if (b % 8 == 2) r.top_k = 40;
    if (b % 8 == 3) r.top_p = 0.9f;
    if (b % 8 == 6) r.min_p = 0.05f;
    rows.push_back(r);
  }
  spec::TreeAcceptor cpu(Device::kCpu), gpu(Device::kCuda);
  const auto want = cpu.accept(logits.view(), trees, rows, Stream::cpu());
  Buffer dlogits(Device::kCuda, DType::kF32, {B * N, V});
  dlogits.copy_from_host(logits.data(), logits.nbytes());
  OwnedStream stream(Device::kCuda);
  const auto got = gpu.accept(dlogits.view(), trees, rows, stream.get());
  int differ = 0;
  std::vector<int> lengths(static_cast<size_t>(N), 0);
  for (int64_t b = 0; b < B; ++b) {
    const auto& w = want[static_cast<size_t>(b)];
    const auto& g = got[static_cast<size_t>(b)];
    ++lengths[w.path.size()];
    if (w.path == g.path && w.bonus == g.bonus) continue;
    ++differ;
    EXPECT_NE(rows[static_cast<size_t>(b)].temperature, 0.0f) << "greedy request " << b << " differs";
  }
  EXPECT_LE(differ, 2) << differ << " of " << B << " requests differ";
  EXPECT_GT(lengths[0], 0);
  EXPECT_GT(lengths[1] + lengths[2], 0);
  EXPECT_GT(lengths[3] + lengths[4] + lengths[5], 0);
}

// On the device too, the first committed token follows the target whatever the tree holds
// (root children 3 then 1; chi-square at 99.9%, 4 degrees of freedom).
TEST(CudaTreeAccept, FirstTokenFollowsTheTarget) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const int64_t V = 5, trials = 40000;
  spec::DraftTree t;
  t.tokens = {0, 3, 1, 2, 4};
  t.parents = {-1, 0, 0, 1, 2};
  const std::vector<float> root = {0.5f, 1.0f, -0.5f, 0.2f, 0.0f};
  Buffer logits(Device::kCpu, DType::kF32, {trials * t.size(), V});
  std::fill(logits.view().ptr<float>(), logits.view().ptr<float>() + logits.view().numel(), 0.0f);
  std::vector<model::SamplingRow> rows;
  for (int64_t i = 0; i < trials; ++i) {
    std::copy(root.begin(), root.end(), logits.view().ptr<float>() + i * t.size() * V);
    rows.push_back({.temperature = 1.0f, .seed = i});
  }
  Buffer dlogits(Device::kCuda, DType::kF32, {trials * t.size(), V});
  dlogits.copy_from_host(logits.data(), logits.nbytes());
  OwnedStream stream(Device::kCuda);
  spec::TreeAcceptor gpu(Device::kCuda);
  const auto acc = gpu.accept(dlogits.view(), std::vector<spec::DraftTree>(static_cast<size_t>(trials), t), rows, stream.get());
  std::vector<double> p(static_cast<size_t>(V)), count(static_cast<size_t>(V), 0.0);
  double z = 0;
  for (int64_t v = 0; v < V; ++v) z += (p[static_cast<size_t>(v)] = std::exp(root[static_cast<size_t>(v)] - 1.0));
  for (auto& x : p) x /= z;
  for (const auto& a : acc) count[static_cast<size_t>(a.committed(t)[0])] += 1;
  double chi = 0;
  for (int64_t v = 0; v < V; ++v) {
    const double e = p[static_cast<size_t>(v)] * static_cast<double>(trials);
    chi += (count[static_cast<size_t>(v)] - e) * (count[static_cast<size_t>(v)] - e) / e;
  }
  EXPECT_LT(chi, 18.47);
}

// Sampled speculative decoding end to end on the GPU: every algorithm serves seeded
// temperature-0.8 requests, chain and tree, and a second run repeats every token.
TEST(CudaSpeculative, SampledOutputRepeatsWithTheSameSeeds) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  auto reqs = mixed(16, 700);
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = 0.8f;
    reqs[i].sampling.top_p = i % 2 ? 0.9f : 1.0f;
    reqs[i].sampling.seed = static_cast<int64_t>(i);
  }
  for (const std::string alg : {"EAGLE3", "STANDALONE"})
    for (int64_t topk : {1, 4}) {
      const auto a = run(alg, reqs, topk, topk == 1 ? 0 : 8), b = run(alg, reqs, topk, topk == 1 ? 0 : 8);
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(a[i].error.empty()) << a[i].error;
        EXPECT_EQ(a[i].result.output_ids.size(), static_cast<size_t>(reqs[i].max_new_tokens)) << alg << " request " << i;
        EXPECT_EQ(a[i].result.output_ids, b[i].result.output_ids) << alg << " topk " << topk << " request " << i;
      }
    }
}

// The draft chain as one CUDA graph per bucket proposes what step-by-step drafting proposes,
// for every batch size up to 16 (most padded up to their bucket), EAGLE3 with a reduced
// vocabulary and STANDALONE; the dummy KV slot that padded rows write and read is filled with
// garbage before every replay, so a padded row leaking into a real one would show.
TEST(CudaDraftChain, GraphsProposeWhatStepByStepDraftingProposes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto cfg = model::LlamaConfig::named_shape("tiny");
  OwnedStream stream(Device::kCuda);
  model::LlamaModel target(cfg, model::random_llama_weights(cfg, 5, Device::kCuda, DType::kF32, 0.1f), stream.get(), DType::kF32);
  std::mt19937 rng(17);
  for (const bool eagle : {true, false}) {
    const auto hc = model::EagleHeadConfig::for_target(model::EagleKind::kEagle3, cfg, 200);
    const model::LlamaConfig layer = eagle ? hc.layer : cfg;
    const auto shape = model::kv_shape_for_tokens(17 * 128, 1);
    model::KvCache kv_a(layer, shape, Device::kCuda, DType::kF32), kv_b(layer, shape, Device::kCuda, DType::kF32);
    auto make_core = [&](model::KvCache& kv) { return tiny_draft_core(eagle, hc, target, kv, stream.get()); };
    auto stepwise = make_core(kv_a);
    auto graphed = make_core(kv_b);
    graphed->enable_draft_runners(4, 16, shape.usable_tokens(), /*graphs=*/true);
    ASSERT_TRUE(graphed->chain_runner() && graphed->chain_runner()->graphs());
    const auto ps = prompt_sixteen(rng, eagle, hc, {stepwise.get(), graphed.get()}, 5);
    for (size_t bs = 1; bs <= ps.size(); ++bs) {
      const std::vector<spec::DraftProposeSeq> batch(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(bs));
      garbage_in_dummy_slot(kv_b, layer.num_layers, 7 + bs, stream.get());
      const auto want = stepwise->propose_chain(batch, 4);
      const auto got = graphed->propose_chain(batch, 4);
      EXPECT_EQ(got, want) << (eagle ? "EAGLE3" : "STANDALONE") << " batch " << bs << " bucket " << graphed->chain_runner()->bucket_for(bs);
    }
  }
}

// The tree draft as one CUDA graph per bucket (spec/draft_tree_runner.hpp) proposes the
// trees step-by-step tree drafting proposes, for every batch size up to 16 (most padded up to
// their bucket), topk 4 over 4 steps, EAGLE3 with a reduced vocabulary and STANDALONE; the
// dummy KV slot that padded requests write and read holds garbage before every replay.
TEST(CudaDraftTree, GraphsProposeWhatStepByStepDraftingProposes) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto cfg = model::LlamaConfig::named_shape("tiny");
  OwnedStream stream(Device::kCuda);
  model::LlamaModel target(cfg, model::random_llama_weights(cfg, 5, Device::kCuda, DType::kF32, 0.1f), stream.get(), DType::kF32);
  std::mt19937 rng(19);
  constexpr int64_t kTopk = 4, kSteps = 4, kDraftTokens = 12;
  for (const bool eagle : {true, false}) {
    const auto hc = model::EagleHeadConfig::for_target(model::EagleKind::kEagle3, cfg, 200);
    const model::LlamaConfig layer = eagle ? hc.layer : cfg;
    const auto shape = model::kv_shape_for_tokens(17 * 128, 1);
    model::KvCache kv_a(layer, shape, Device::kCuda, DType::kF32), kv_b(layer, shape, Device::kCuda, DType::kF32);
    auto stepwise = tiny_draft_core(eagle, hc, target, kv_a, stream.get(), kTopk);
    auto graphed = tiny_draft_core(eagle, hc, target, kv_b, stream.get(), kTopk);
    graphed->enable_draft_runners(kSteps, 16, shape.usable_tokens(), /*graphs=*/true);
    ASSERT_TRUE(graphed->tree_runner() && graphed->tree_runner()->graphs());
    const auto ps = prompt_sixteen(rng, eagle, hc, {stepwise.get(), graphed.get()}, static_cast<int32_t>((kSteps - 1) * kTopk));
    for (size_t bs = 1; bs <= ps.size(); ++bs) {
      const std::vector<spec::DraftProposeSeq> batch(ps.begin(), ps.begin() + static_cast<std::ptrdiff_t>(bs));
      garbage_in_dummy_slot(kv_b, layer.num_layers, 7 + bs, stream.get());
      const auto want = stepwise->propose_tree(batch, kSteps, kDraftTokens);
      const auto got = graphed->propose_tree(batch, kSteps, kDraftTokens);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < bs; ++i) {
        EXPECT_EQ(got[i].tokens, want[i].tokens) << (eagle ? "EAGLE3" : "STANDALONE") << " batch " << bs << " request " << i << " bucket "
                                                 << graphed->tree_runner()->bucket_for(static_cast<int64_t>(bs));
        EXPECT_EQ(got[i].parents, want[i].parents) << (eagle ? "EAGLE3" : "STANDALONE") << " batch " << bs << " request " << i;
      }
    }
  }
}

// A chain verify's draft extend as a CUDA graph per bucket (spec/draft_extend_runner.hpp,
// fixed width steps + 1, padded up to the bucket) leaves the state the eager variable-width
// extend leaves: rounds of verify extends of 1-4 committed tokens over batches of 1-16
// requests (most padded), each followed by a proposal that must equal the eager core's; the
// dummy slot 0 holds garbage before every extend, so a padded request leaking into a real
// one would show. EAGLE3 (reduced vocabulary) and STANDALONE.
TEST(CudaDraftExtend, GraphsLeaveTheStateOfTheEagerExtend) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto cfg = model::LlamaConfig::named_shape("tiny");
  OwnedStream stream(Device::kCuda);
  model::LlamaModel target(cfg, model::random_llama_weights(cfg, 5, Device::kCuda, DType::kF32, 0.1f), stream.get(), DType::kF32);
  std::mt19937 rng(18);
  constexpr int64_t kSteps = 3;
  for (const bool eagle : {true, false}) {
    const auto hc = model::EagleHeadConfig::for_target(model::EagleKind::kEagle3, cfg, 200);
    const model::LlamaConfig layer = eagle ? hc.layer : cfg;
    const auto shape = model::kv_shape_for_tokens(17 * 128, 1);
    model::KvCache kv_a(layer, shape, Device::kCuda, DType::kF32), kv_b(layer, shape, Device::kCuda, DType::kF32);
    auto make_core = [&](model::KvCache& kv) { return tiny_draft_core(eagle, hc, target, kv, stream.get()); };
    auto eager = make_core(kv_a);
    auto graphed = make_core(kv_b);
    eager->enable_draft_runners(kSteps, 16, shape.usable_tokens(), /*graphs=*/false, /*fixed_width_extend=*/false);
    graphed->enable_draft_runners(kSteps, 16, shape.usable_tokens(), /*graphs=*/true);
    ASSERT_TRUE(graphed->extend_runner() && graphed->extend_runner()->graphs());
    ASSERT_EQ(eager->extend_runner(), nullptr);
    Buffer hidden;
    if (eagle) {  // stand-in target hidden states, on the GPU
      const Buffer host = aerie::testing::random_buffer(rng, DType::kF32, {64, hc.input_width()});
      hidden = Buffer(Device::kCuda, DType::kF32, {64, hc.input_width()});
      hidden.copy_from_host(host.data(), host.nbytes());
    }
    const TensorView hv = eagle ? hidden.view() : TensorView();
    std::vector<int32_t> next(17);  // each request's first position of its next verify extend
    std::vector<spec::DraftExtendSeq> prompts;
    for (uint64_t rid = 1; rid <= 16; ++rid) {
      const int32_t n = 2 + static_cast<int32_t>(rng() % 40), base = static_cast<int32_t>(128 * rid);
      spec::DraftExtendSeq seq{.rid = rid, .tokens = {}, .first_position = 0, .slots = {}, .context = {}, .hidden_rows = {}, .keep = true};
      for (int32_t p = 0; p < n; ++p) {
        seq.tokens.push_back(static_cast<int32_t>(3 + rng() % 500));
        seq.slots.push_back(base + p);
        if (eagle) seq.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
      }
      seq.context = seq.slots;
      prompts.push_back(seq);
      next[rid] = eagle ? n : n + 1;
    }
    eager->extend(prompts, hv);
    graphed->extend(prompts, hv);
    for (int64_t bs : {1, 3, 5, 11, 16, 7}) {
      std::vector<spec::DraftExtendSeq> verifies;
      std::vector<spec::DraftProposeSeq> ps;
      for (uint64_t rid = 1; rid <= static_cast<uint64_t>(bs); ++rid) {
        const int32_t base = static_cast<int32_t>(128 * rid), first = next[rid], a1 = 1 + static_cast<int32_t>(rng() % (kSteps + 1));
        spec::DraftExtendSeq v{.rid = rid, .tokens = {}, .first_position = first, .slots = {}, .context = {}, .hidden_rows = {}, .keep = true};
        for (int32_t j = 0; j < a1; ++j) {
          v.tokens.push_back(static_cast<int32_t>(3 + rng() % 500));
          v.slots.push_back(base + first + j);
          if (eagle) v.hidden_rows.push_back(static_cast<int32_t>(rng() % 64));
        }
        for (int32_t p = 0; p < first + a1; ++p) v.context.push_back(base + p);
        for (int32_t p = first + a1; p <= first + static_cast<int32_t>(kSteps); ++p) v.spare_slots.push_back(base + p);
        verifies.push_back(v);
        next[rid] = first + a1;
        std::vector<int32_t> context;
        for (int32_t p = 0; p < first + a1 + static_cast<int32_t>(kSteps); ++p) context.push_back(base + p);
        ps.push_back({.rid = rid, .first_position = eagle ? first + a1 - 1 : first + a1, .context = context, .root_token = v.tokens.back()});
      }
      garbage_in_dummy_slot(kv_b, layer.num_layers, 70 + static_cast<uint64_t>(bs), stream.get());
      eager->extend(verifies, hv);
      graphed->extend(verifies, hv);
      EXPECT_EQ(graphed->propose_chain(ps, kSteps), eager->propose_chain(ps, kSteps))
          << (eagle ? "EAGLE3" : "STANDALONE") << " batch " << bs << " bucket " << graphed->extend_runner()->bucket_for(bs);
    }
  }
}

// One request's prompt extend through the prompt graphs (a graph per token-count bucket, 16
// to 64 here, the padding tokens on the dummy slot 0 full of garbage before each) leaves the
// state of the eager extend: sixteen prompts of 2-91 tokens (those past 64 extend eagerly in
// both cores), then every request's chain proposed by both. EAGLE3 and STANDALONE.
TEST(CudaDraftExtend, PromptGraphsLeaveTheStateOfTheEagerExtend) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  const auto cfg = model::LlamaConfig::named_shape("tiny");
  OwnedStream stream(Device::kCuda);
  model::LlamaModel target(cfg, model::random_llama_weights(cfg, 5, Device::kCuda, DType::kF32, 0.1f), stream.get(), DType::kF32);
  std::mt19937 rng(19);
  for (const bool eagle : {true, false}) {
    const auto hc = model::EagleHeadConfig::for_target(model::EagleKind::kEagle3, cfg, 200);
    const model::LlamaConfig layer = eagle ? hc.layer : cfg;
    const auto shape = model::kv_shape_for_tokens(17 * 128, 1);
    model::KvCache kv_a(layer, shape, Device::kCuda, DType::kF32), kv_b(layer, shape, Device::kCuda, DType::kF32);
    auto eager = tiny_draft_core(eagle, hc, target, kv_a, stream.get());
    auto graphed = tiny_draft_core(eagle, hc, target, kv_b, stream.get());
    eager->enable_draft_runners(4, 16, shape.usable_tokens(), /*graphs=*/false, /*fixed_width_extend=*/false);
    graphed->enable_draft_runners(4, 16, shape.usable_tokens(), /*graphs=*/true, {}, /*prompt_graph_max_tokens=*/64);
    ASSERT_EQ(graphed->prompt_extend_widths(), (std::vector<int64_t>{16, 32, 64}));
    garbage_in_dummy_slot(kv_b, layer.num_layers, 90, stream.get());
    const auto ps = prompt_sixteen(rng, eagle, hc, {eager.get(), graphed.get()}, 4);
    EXPECT_EQ(graphed->propose_chain(ps, 4), eager->propose_chain(ps, 4)) << (eagle ? "EAGLE3" : "STANDALONE");
  }
}

// --disable-cuda-graph-padding: a batch of 11 requests (no bucket of exactly 11) decodes,
// verifies and drafts eagerly while batches of captured sizes replay; the greedy outputs equal
// plain decoding's, chain and tree. (The draft runners once dereferenced the missing bucket.)
TEST(CudaSpeculative, WithoutGraphPaddingOddBatchesRunEagerly) {
  if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  struct Restore {  // the launch set the process-wide policy; later tests expect the default
    ~Restore() { spec::set_graph_bucket_policy({}); }
  } restore;
  const auto reqs = mixed(11, 901);
  const auto plain = run("", reqs, 1, 0, 1, /*graph_padding=*/false);
  for (const std::string alg : {"EAGLE3", "STANDALONE"})
    for (int64_t topk : {1, 4}) {
      const auto spec = run(alg, reqs, topk, topk == 1 ? 0 : 8, 1, /*graph_padding=*/false);
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(spec[i].error.empty()) << spec[i].error;
        EXPECT_EQ(spec[i].result.output_ids, plain[i].result.output_ids) << alg << " topk " << topk << " request " << i;
      }
    }
}
