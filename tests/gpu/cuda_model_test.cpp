// The model on the GPU: against the CPU reference, graph replay against eager for every
// bucket (and batches that need padding), one request's prefill graphs against eager, and the
// engine with and without graphs.
#include <gtest/gtest.h>

#include <random>

#include "actors/core/generation_engine.hpp"
#include "spec/verify_batch.hpp"
#include "spec/decode_graph_runner.hpp"
#include "spec/prefill_graph_runner.hpp"
#include "spec/draft_tree.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using aerie::testing::rel_error;
using aerie::testing::row_argmax;

namespace {

constexpr float kInitStd = 0.1f;  // larger than transformers' 0.02, so greedy margins are wide

struct GpuModel {
  model::LlamaConfig config = model::LlamaConfig::named_shape("tiny");
  OwnedStream stream{Device::kCuda};
  std::unique_ptr<model::LlamaModel> model;
  std::unique_ptr<model::KvCache> kv;
  GpuModel(DType act, int64_t kv_tokens = 8192) {
    model = std::make_unique<model::LlamaModel>(config, model::random_llama_weights(config, 11, Device::kCuda, act, kInitStd),
                                                stream.get(), act);
    kv = std::make_unique<model::KvCache>(config, model::kv_shape_for_tokens(kv_tokens, 4), Device::kCuda, act);
  }
};

std::vector<double> host_copy(const TensorView& t, const Stream& s) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  copy_async(h.data(), t.data, h.size() * 4, s);
  synchronize(s);
  return std::vector<double>(h.begin(), h.end());
}

// Tokens at positions context .. context + n - 1 of one sequence in slots 4.. (page 0 is the
// dummy page), as one forward with logits of every token: a prompt's prefill (context 0), a
// decode step (one token) or a chain verify of n tokens.
model::ForwardBatch tokens_at(const std::vector<int32_t>& ids, int32_t context) {
  model::ForwardBatch b;
  const int32_t n = static_cast<int32_t>(ids.size());
  for (int32_t p = 0; p < context + n; ++p) b.kv_indices.push_back(4 + p);
  for (int32_t i = 0; i < n; ++i) {
    b.input_ids.push_back(ids[static_cast<size_t>(i)]);
    b.positions.push_back(context + i);
    b.out_cache_loc.push_back(4 + context + i);
    b.logit_rows.push_back(i);
  }
  b.qo_indptr = {0, n};
  b.kv_indptr = {0, context + n};
  return b;
}

// A prefill of one prompt, logits of every position.
model::ForwardBatch prefill(const std::vector<int32_t>& ids) { return tokens_at(ids, 0); }

// A decode batch of `bs` sequences: random ids, contexts of min_len .. min_len + spread - 1
// tokens, sequence i in the slots from 4 + i * stride (page 0 is the dummy page).
model::ForwardBatch random_decode_batch(std::mt19937& rng, int64_t bs, int64_t vocab, int32_t min_len, int32_t spread, int32_t stride) {
  model::ForwardBatch batch;
  int32_t next_slot = 4;
  for (int64_t i = 0; i < bs; ++i) {
    const int32_t len = min_len + static_cast<int32_t>(rng() % static_cast<uint32_t>(spread));
    for (int32_t p = 0; p < len; ++p) batch.kv_indices.push_back(next_slot + p);
    batch.input_ids.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(vocab)));
    batch.positions.push_back(len - 1);
    batch.out_cache_loc.push_back(next_slot + len - 1);
    batch.qo_indptr.push_back(static_cast<int32_t>(i + 1));
    batch.kv_indptr.push_back(static_cast<int32_t>(batch.kv_indices.size()));
    batch.logit_rows.push_back(static_cast<int32_t>(i));
    next_slot += stride;
  }
  return batch;
}

class CudaModel : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

}  // namespace

TEST_F(CudaModel, ForwardMatchesTheCpuReference) {
  auto cfg = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel cpu(cfg, model::random_llama_weights(cfg, 11, Device::kCpu, DType::kF32, kInitStd), Stream::cpu(), DType::kF32);
  model::KvCache cpu_kv(cfg, model::kv_shape_for_tokens(8192, 4), Device::kCpu, DType::kF32);
  std::vector<int32_t> ids;
  std::mt19937 rng(5);
  for (int i = 0; i < 300; ++i) ids.push_back(static_cast<int32_t>(rng() % cfg.vocab_size));
  const TensorView ref_view = cpu.forward(prefill(ids), cpu_kv);
  const std::vector<double> ref = aerie::testing::to_double(ref_view);
  for (DType act : {DType::kF32, DType::kBF16}) {
    GpuModel g(act);
    const auto got = host_copy(g.model->forward(prefill(ids), *g.kv), g.stream.get());
    const double err = rel_error(got, ref);
    EXPECT_LT(err, act == DType::kF32 ? 1e-4 : 3e-2) << dtype_name(act);
    if (act == DType::kF32) {
      EXPECT_EQ(row_argmax(got, cfg.vocab_size), row_argmax(ref, cfg.vocab_size));
    }
  }
}

TEST_F(CudaModel, GraphReplayEqualsEagerForEveryBucketAndPaddedBatches) {
  GpuModel g(DType::kF32, 256 * 64 + 64);
  spec::DecodeGraphRunner runner(*g.model, *g.kv, 256, 4096);
  ASSERT_EQ(runner.buckets().size(), 51u);
  std::mt19937 rng(6);
  // Random K/V everywhere, so every context is meaningful.
  for (int64_t l = 0; l < g.config.num_layers; ++l) {
    ASSERT_TRUE(kernels::fill_normal({.x = g.kv->k(l), .seed = 100 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
    ASSERT_TRUE(kernels::fill_normal({.x = g.kv->v(l), .seed = 200 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
  }
  std::vector<int64_t> sizes;
  for (int64_t b : runner.buckets()) {
    sizes.push_back(b);
    if (b > 1) sizes.push_back(b - 1);  // needs padding up to b
  }
  for (int64_t bs : sizes) {
    const model::ForwardBatch batch = random_decode_batch(rng, bs, g.config.vocab_size, 1, 60, 64);
    ASSERT_TRUE(runner.can_run(batch)) << bs;
    const auto eager = host_copy(g.model->forward(batch, *g.kv), g.stream.get());
    const auto graph = host_copy(runner.replay(batch), g.stream.get());
    ASSERT_EQ(graph.size(), eager.size()) << bs;
    EXPECT_LT(rel_error(graph, eager), 1e-5) << "batch " << bs << " bucket " << runner.bucket_for(bs);
    EXPECT_EQ(row_argmax(graph, g.config.vocab_size), row_argmax(eager, g.config.vocab_size)) << bs;
  }
}

// bf16 at batches 1-4, where the small-batch tensor-core decode attention runs split behind the
// QKV kernel with programmatic launch (kernels/attention.hpp): in a graph the kernels overlap
// most, and a load of q that ignored the wait read the previous layer's q there, which op tests
// (nothing runs before the kernel) never saw. SmolLM2's heads (9 / 3, dim 64), 12 layers.
TEST_F(CudaModel, Bf16GraphReplayEqualsEagerAtSmallBatches) {
  model::LlamaConfig cfg = model::LlamaConfig::named_shape("tiny");
  cfg.hidden_size = 576, cfg.intermediate_size = 1024, cfg.num_layers = 12, cfg.num_heads = 9, cfg.num_kv_heads = 3, cfg.head_dim = 64;
  OwnedStream stream{Device::kCuda};
  model::LlamaModel m(cfg, model::random_llama_weights(cfg, 12, Device::kCuda, DType::kBF16, kInitStd), stream.get(), DType::kBF16);
  model::KvCache kv(cfg, model::kv_shape_for_tokens(4 * 512 + 64, 4), Device::kCuda, DType::kBF16);
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    ASSERT_TRUE(kernels::fill_normal({.x = kv.k(l), .seed = 300 + static_cast<uint64_t>(l)}, stream.get()).is_ok());
    ASSERT_TRUE(kernels::fill_normal({.x = kv.v(l), .seed = 400 + static_cast<uint64_t>(l)}, stream.get()).is_ok());
  }
  spec::DecodeGraphRunner runner(m, kv, 4, 2048);
  std::mt19937 rng(8);
  for (int round = 0; round < 4; ++round)
    for (int64_t bs = 1; bs <= 4; ++bs) {
      // Contexts of 40-439 tokens: 2-14 splits of 32 keys.
      const model::ForwardBatch batch = random_decode_batch(rng, bs, cfg.vocab_size, 40, 400, 512);
      ASSERT_TRUE(runner.can_run(batch)) << bs;
      const auto eager = host_copy(m.forward(batch, kv), stream.get());
      const auto graph = host_copy(runner.replay(batch), stream.get());
      ASSERT_EQ(graph.size(), eager.size()) << bs;
      // The same kernels and splits: equal up to bf16 rounding (a stale q gives errors near 1).
      EXPECT_LT(rel_error(graph, eager), 2e-2) << "batch " << bs << " round " << round;
      EXPECT_EQ(row_argmax(graph, cfg.vocab_size), row_argmax(eager, cfg.vocab_size)) << "batch " << bs << " round " << round;
    }
}

// A chain verify of 4 or 6 tokens of a small model computes each row exactly as the plain
// decode step of that token does (bf16, SmolLM2's shapes; kernels/cuda/ops_matmul.cu): each GEMV
// sums an output row the same way whatever the rows, the GEMV chosen for K = 576 depends on N
// alone (more than 576 weight rows on the tensor cores, at most 576 on the CUDA cores), down_proj
// (K = 1536, N = 576) stays on the CUDA cores at 1-8 rows, and attention over a short context
// takes the tensor-core kernel a decode step takes (one token a block up to 6 tokens and for 7,
// two for 8, kernels/attention.hpp) and splits every row's keys alike. So greedy speculative
// answers are plain decoding's in bf16 too (chains of 3-5 and 7 steps: every one of 200-500
// held-out answers on the H200 and H100; chain 6 in 65 of 200 while its 7 tokens took the CUDA-core
// attention kernel); eagerly and through the graphs the engine replays.
TEST_F(CudaModel, Bf16VerifyRowsOfASmallModelEqualItsPlainStepsBitForBit) {
  model::LlamaConfig cfg = model::LlamaConfig::named_shape("tiny");
  cfg.vocab_size = 1000, cfg.hidden_size = 576, cfg.intermediate_size = 1536, cfg.num_layers = 4, cfg.num_heads = 9,
  cfg.num_kv_heads = 3, cfg.head_dim = 64;
  OwnedStream stream{Device::kCuda};
  model::LlamaModel m(cfg, model::random_llama_weights(cfg, 13, Device::kCuda, DType::kBF16, kInitStd), stream.get(), DType::kBF16);
  model::KvCache kv(cfg, model::kv_shape_for_tokens(2048, 4), Device::kCuda, DType::kBF16);
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    ASSERT_TRUE(kernels::fill_normal({.x = kv.k(l), .seed = 500 + static_cast<uint64_t>(l)}, stream.get()).is_ok());
    ASSERT_TRUE(kernels::fill_normal({.x = kv.v(l), .seed = 600 + static_cast<uint64_t>(l)}, stream.get()).is_ok());
  }
  spec::DecodeGraphRunner plain_graphs(m, kv, 1, 2048);
  std::mt19937 rng(9);
  for (const int64_t q : {4, 5, 6, 7, 8}) {
    spec::DecodeGraphRunner verify_graphs(m, kv, 1, 2048, q);
    for (const int32_t context : {37, 300}) {
      std::vector<int32_t> ids;
      for (int64_t i = 0; i < q; ++i) ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(cfg.vocab_size)));
      for (const bool graphs : {false, true}) {
        std::vector<double> steps;
        for (int64_t i = 0; i < q; ++i) {
          const model::ForwardBatch one = tokens_at({ids[static_cast<size_t>(i)]}, context + static_cast<int32_t>(i));
          const auto logits = host_copy(graphs ? plain_graphs.replay(one) : m.forward(one, kv), stream.get());
          steps.insert(steps.end(), logits.begin(), logits.end());
        }
        const model::ForwardBatch all = tokens_at(ids, context);
        ASSERT_TRUE(!graphs || verify_graphs.can_run(all));
        const auto verify = host_copy(graphs ? verify_graphs.replay(all) : m.forward(all, kv), stream.get());
        ASSERT_EQ(verify.size(), steps.size());
        size_t differ = 0;
        for (size_t j = 0; j < verify.size(); ++j) differ += verify[j] != steps[j];
        EXPECT_EQ(differ, 0u) << "logits of a verify of " << q << " tokens after " << context << (graphs ? " (graphs)" : " (eager)")
                              << " differ from its plain steps' (rel error " << rel_error(verify, steps) << ")";
      }
    }
  }
}

TEST_F(CudaModel, ChainVerifyGraphEqualsEagerWithCapturedHiddenStates) {
  // Graphs of 4 new tokens per sequence (the verify of a chain of 3 drafts), with the
  // hidden states a draft reads captured: logits, in-graph argmax and captured states equal
  // the eager forward's for full and padded buckets.
  GpuModel g(DType::kF32, 16 * 64 + 64);
  g.model->set_hidden_capture({.final_normed = true, .aux_layers = {0, g.config.num_layers - 1}});
  constexpr int64_t q = 4;
  spec::DecodeGraphRunner runner(*g.model, *g.kv, 16, 4096, q);
  EXPECT_EQ(runner.tokens_per_seq(), q);
  std::mt19937 rng(7);
  for (int64_t l = 0; l < g.config.num_layers; ++l) {
    ASSERT_TRUE(kernels::fill_normal({.x = g.kv->k(l), .seed = 300 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
    ASSERT_TRUE(kernels::fill_normal({.x = g.kv->v(l), .seed = 400 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
  }
  for (int64_t bs : {1, 3, 8, 11, 16}) {
    model::ForwardBatch batch;
    batch.qo_indptr = {0};
    batch.kv_indptr = {0};
    int32_t next_slot = 4;  // page 0 is the dummy page
    for (int64_t i = 0; i < bs; ++i) {
      const int32_t len = q + static_cast<int32_t>(rng() % 50);
      for (int32_t p = 0; p < len; ++p) batch.kv_indices.push_back(next_slot + p);
      for (int32_t p = len - static_cast<int32_t>(q); p < len; ++p) {
        batch.input_ids.push_back(static_cast<int32_t>(rng() % g.config.vocab_size));
        batch.positions.push_back(p);
        batch.out_cache_loc.push_back(next_slot + p);
        batch.logit_rows.push_back(static_cast<int32_t>(batch.logit_rows.size()));
      }
      batch.qo_indptr.push_back(static_cast<int32_t>(batch.input_ids.size()));
      batch.kv_indptr.push_back(static_cast<int32_t>(batch.kv_indices.size()));
      next_slot += 64;
    }
    ASSERT_TRUE(runner.can_run(batch)) << bs;
    const auto eager = host_copy(g.model->forward(batch, *g.kv), g.stream.get());
    const auto eager_hidden = host_copy(g.model->captured_hidden(), g.stream.get());
    const auto graph = host_copy(runner.replay(batch), g.stream.get());
    const auto graph_hidden = host_copy(g.model->captured_hidden(), g.stream.get());
    ASSERT_EQ(graph.size(), eager.size()) << bs;
    EXPECT_LT(rel_error(graph, eager), 1e-5) << "batch " << bs << " bucket " << runner.bucket_for(bs);
    ASSERT_EQ(graph_hidden.size(), eager_hidden.size()) << bs;
    EXPECT_LT(rel_error(graph_hidden, eager_hidden), 1e-5) << "batch " << bs;
    const auto argmax = runner.last_greedy_tokens();
    const auto expected = row_argmax(eager, g.config.vocab_size);
    ASSERT_EQ(argmax.size(), expected.size());
    for (size_t r = 0; r < argmax.size(); ++r) EXPECT_EQ(argmax[r], expected[r]) << "batch " << bs << " row " << r;
  }
  // A decode batch (one token per sequence) is not this runner's.
  model::ForwardBatch decode;
  decode.input_ids = {1};
  decode.positions = {0};
  decode.out_cache_loc = {4};
  decode.kv_indices = {4};
  decode.qo_indptr = {0, 1};
  decode.kv_indptr = {0, 1};
  decode.logit_rows = {0};
  EXPECT_FALSE(runner.can_run(decode));
  g.model->set_hidden_capture({});
}

TEST_F(CudaModel, TreeVerifyGraphEqualsEagerUnderItsMask) {
  // Graphs of 6-node draft trees (masked verifies): each sequence a different tree shape,
  // nodes at root + depth, for full and padded buckets (the dummy slot full of garbage);
  // logits, in-graph argmax and the captured hidden states equal the eager forward's. An
  // unmasked batch is not this runner's.
  GpuModel g(DType::kF32, 16 * 64 + 64);
  g.model->set_hidden_capture({.final_normed = true, .aux_layers = {0}});
  constexpr int64_t q = 6;
  spec::DecodeGraphRunner runner(*g.model, *g.kv, 16, 4096, q, /*masked=*/true);
  EXPECT_TRUE(runner.masked());
  std::mt19937 rng(8);
  for (int64_t l = 0; l < g.config.num_layers; ++l) {
    ASSERT_TRUE(kernels::fill_normal({.x = g.kv->k(l), .seed = 500 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
    ASSERT_TRUE(kernels::fill_normal({.x = g.kv->v(l), .seed = 600 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
  }
  for (int64_t bs : {1, 5, 8, 13, 16}) {
    std::vector<spec::DraftTree> trees;
    std::vector<std::vector<int32_t>> slots;
    std::vector<spec::VerifySequence> seqs;
    int32_t next_slot = 4;
    for (int64_t i = 0; i < bs; ++i) {
      spec::DraftTree t;
      t.tokens.push_back(static_cast<int32_t>(rng() % g.config.vocab_size));
      t.parents.push_back(-1);
      for (int64_t n = 1; n < q; ++n) {
        t.tokens.push_back(static_cast<int32_t>(rng() % g.config.vocab_size));
        t.parents.push_back(static_cast<int32_t>(rng() % n));  // any earlier node: shapes differ per sequence
      }
      trees.push_back(t);
      const int32_t root = static_cast<int32_t>(rng() % 40);
      std::vector<int32_t> s;
      for (int32_t p = 0; p < root + q; ++p) s.push_back(next_slot + p);
      slots.push_back(s);
      next_slot += 64;
    }
    for (int64_t i = 0; i < bs; ++i)
      seqs.push_back({.tree = &trees[static_cast<size_t>(i)], .root_position = static_cast<int32_t>(slots[static_cast<size_t>(i)].size() - q),
                      .slots = &slots[static_cast<size_t>(i)]});
    const model::ForwardBatch batch = spec::verify_forward_batch(seqs, /*tree_mask=*/true);
    ASSERT_TRUE(runner.can_run(batch)) << bs;
    const auto eager = host_copy(g.model->forward(batch, *g.kv), g.stream.get());
    const auto eager_hidden = host_copy(g.model->captured_hidden(), g.stream.get());
    // Garbage in the dummy slot 0, which only padded sequences read and write: a padded row
    // leaking into a real one would show.
    for (int64_t l = 0; l < g.config.num_layers; ++l)
      for (const TensorView* t : {&g.kv->k(l), &g.kv->v(l)})
        ASSERT_TRUE(kernels::fill_normal({.x = t->slice_rows(0, 1), .seed = 9 + static_cast<uint64_t>(bs), .mean = 0.0f, .std = 1e4f},
                                         g.stream.get()).is_ok());
    const auto graph = host_copy(runner.replay(batch), g.stream.get());
    const auto graph_hidden = host_copy(g.model->captured_hidden(), g.stream.get());
    ASSERT_EQ(graph.size(), eager.size()) << bs;
    EXPECT_LT(rel_error(graph, eager), 1e-5) << "batch " << bs << " bucket " << runner.bucket_for(bs);
    EXPECT_LT(rel_error(graph_hidden, eager_hidden), 1e-5) << "batch " << bs;
    const auto argmax = runner.last_greedy_tokens();
    const auto expected = row_argmax(eager, g.config.vocab_size);
    ASSERT_EQ(argmax.size(), expected.size());
    for (size_t r = 0; r < argmax.size(); ++r) EXPECT_EQ(argmax[r], expected[r]) << "batch " << bs << " row " << r;
    model::ForwardBatch unmasked = batch;
    unmasked.custom_mask.clear();
    unmasked.mask_indptr.clear();
    EXPECT_FALSE(runner.can_run(unmasked));
  }
  g.model->set_hidden_capture({});
}

// One request's prefill through the prefill graphs (new tokens padded up to a token-count
// bucket inside the sequence) against the eager forward: the last token's logits, the hidden
// states a draft reads and the K/V rows written, for prompts at, below and above a bucket's
// size, after a cached prefix, and a chunk that wants no logits. Each path writes a cache of its
// own, filled alike beforehand (so a prefix is meaningful and a wrong slot shows).
TEST_F(CudaModel, PrefillGraphEqualsEagerWithAndWithoutACachedPrefix) {
  GpuModel g(DType::kF32, 4096);
  g.model->set_hidden_capture({.final_normed = true, .aux_layers = {0, g.config.num_layers - 1}});
  model::KvCache graph_kv(g.config, model::kv_shape_for_tokens(4096, 4), Device::kCuda, DType::kF32);
  for (model::KvCache* kv : {g.kv.get(), &graph_kv})
    for (int64_t l = 0; l < g.config.num_layers; ++l) {
      ASSERT_TRUE(kernels::fill_normal({.x = kv->k(l), .seed = 500 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
      ASSERT_TRUE(kernels::fill_normal({.x = kv->v(l), .seed = 600 + static_cast<uint64_t>(l)}, g.stream.get()).is_ok());
    }
  spec::PrefillGraphRunner runner(*g.model, graph_kv, 128, 2048);
  EXPECT_EQ(runner.buckets(), (std::vector<int64_t>{16, 32, 64, 128}));
  std::mt19937 rng(9);
  struct Case {
    int32_t prefix, tokens;
    bool logits;
  };
  int32_t first_slot = 4;  // page 0 is the dummy page
  for (const Case c : {Case{0, 1, true}, Case{0, 5, true}, Case{0, 16, true}, Case{0, 17, true}, Case{0, 64, true}, Case{0, 100, true},
                       Case{0, 128, true}, Case{37, 30, true}, Case{200, 64, true}, Case{50, 40, false}}) {
    model::ForwardBatch b;
    for (int32_t p = 0; p < c.prefix + c.tokens; ++p) b.kv_indices.push_back(first_slot + p);
    for (int32_t p = c.prefix; p < c.prefix + c.tokens; ++p) {
      b.input_ids.push_back(static_cast<int32_t>(rng() % g.config.vocab_size));
      b.positions.push_back(p);
      b.out_cache_loc.push_back(first_slot + p);
    }
    b.qo_indptr = {0, c.tokens};
    b.kv_indptr = {0, c.prefix + c.tokens};
    if (c.logits) b.logit_rows = {c.tokens - 1};
    const std::string what = "prefix " + std::to_string(c.prefix) + ", " + std::to_string(c.tokens) + " tokens";
    ASSERT_TRUE(runner.can_run(b)) << what;
    const auto eager = host_copy(g.model->forward(b, *g.kv), g.stream.get());
    const auto eager_hidden = host_copy(g.model->captured_hidden(), g.stream.get());
    const auto graph = host_copy(runner.replay(b), g.stream.get());
    const auto graph_hidden = host_copy(g.model->captured_hidden(), g.stream.get());
    ASSERT_EQ(graph.size(), c.logits ? static_cast<size_t>(g.config.vocab_size) : 0u) << what;
    ASSERT_EQ(graph.size(), eager.size()) << what;
    if (c.logits) {
      EXPECT_LT(rel_error(graph, eager), 1e-4) << what;
      EXPECT_EQ(row_argmax(graph, g.config.vocab_size), row_argmax(eager, g.config.vocab_size)) << what;
    }
    ASSERT_EQ(graph_hidden.size(), eager_hidden.size()) << what;
    EXPECT_LT(rel_error(graph_hidden, eager_hidden), 1e-4) << what;
    for (int64_t l = 0; l < g.config.num_layers; ++l) {
      const int64_t from = first_slot + c.prefix, to = from + c.tokens;
      EXPECT_LT(rel_error(host_copy(graph_kv.k(l).slice_rows(from, to), g.stream.get()), host_copy(g.kv->k(l).slice_rows(from, to), g.stream.get())),
                1e-5)
          << what << " layer " << l << " K";
      EXPECT_LT(rel_error(host_copy(graph_kv.v(l).slice_rows(from, to), g.stream.get()), host_copy(g.kv->v(l).slice_rows(from, to), g.stream.get())),
                1e-5)
          << what << " layer " << l << " V";
    }
    first_slot += 300;  // past this case's 264 slots at most
  }
  // Not this runner's: two requests, more tokens than the largest bucket, a mask, two logit rows.
  model::ForwardBatch two;
  two.input_ids = {1, 2};
  two.positions = {0, 0};
  two.out_cache_loc = {4, 8};
  two.kv_indices = {4, 8};
  two.qo_indptr = {0, 1, 2};
  two.kv_indptr = {0, 1, 2};
  two.logit_rows = {0, 1};
  EXPECT_FALSE(runner.can_run(two));
  model::ForwardBatch one = prefill(std::vector<int32_t>(129, 3));
  EXPECT_FALSE(runner.can_run(one));  // 129 tokens (and a logit row for each)
  one = prefill(std::vector<int32_t>(20, 3));
  EXPECT_FALSE(runner.can_run(one));  // a logit row for each token
  one.logit_rows = {19};
  EXPECT_TRUE(runner.can_run(one));
  one.custom_mask.assign(20 * 20, 1);
  one.mask_indptr = {0, 400};
  EXPECT_FALSE(runner.can_run(one));
  g.model->set_hidden_capture({});
}

// bf16, SmolLM2's heads (9 / 3, dim 64), 12 layers: a prefill graph runs the tensor-core
// prefill kernel unsplit (an eager short prefill runs split, on other kernels), inside a graph
// whose kernels overlap under programmatic launch. Its last-token logits stay as close to the
// f32 forward of the same weights as the eager bf16 forward's are (a stale input would put them
// near 1 apart), for prompts below, at and above a bucket's size.
TEST_F(CudaModel, Bf16PrefillGraphIsAsCloseToF32AsTheEagerPrefill) {
  model::LlamaConfig cfg = model::LlamaConfig::named_shape("tiny");
  cfg.hidden_size = 576, cfg.intermediate_size = 1024, cfg.num_layers = 12, cfg.num_heads = 9, cfg.num_kv_heads = 3, cfg.head_dim = 64;
  OwnedStream stream{Device::kCuda};
  model::LlamaModel f32(cfg, model::random_llama_weights(cfg, 12, Device::kCuda, DType::kF32, kInitStd), stream.get(), DType::kF32);
  model::LlamaModel bf16(cfg, model::random_llama_weights(cfg, 12, Device::kCuda, DType::kBF16, kInitStd), stream.get(), DType::kBF16);
  model::KvCache kv32(cfg, model::kv_shape_for_tokens(1024, 4), Device::kCuda, DType::kF32);
  model::KvCache kv16(cfg, model::kv_shape_for_tokens(1024, 4), Device::kCuda, DType::kBF16);
  model::KvCache kv_graph(cfg, model::kv_shape_for_tokens(1024, 4), Device::kCuda, DType::kBF16);
  spec::PrefillGraphRunner runner(bf16, kv_graph, 128, 1024);
  std::mt19937 rng(10);
  for (int n : {5, 16, 37, 64, 100, 128}) {
    std::vector<int32_t> ids;
    for (int i = 0; i < n; ++i) ids.push_back(static_cast<int32_t>(rng() % cfg.vocab_size));
    model::ForwardBatch b = prefill(ids);
    b.logit_rows = {n - 1};
    ASSERT_TRUE(runner.can_run(b)) << n;
    const auto ref = host_copy(f32.forward(b, kv32), stream.get());
    const auto eager = host_copy(bf16.forward(b, kv16), stream.get());
    const auto graph = host_copy(runner.replay(b), stream.get());
    // (This random model's bf16 rounding alone gives 0.05-0.22: measured on the H200.)
    const double eager_err = rel_error(eager, ref), graph_err = rel_error(graph, ref);
    EXPECT_LT(graph_err, 1.25 * eager_err + 5e-3) << n << " tokens (eager " << eager_err << ")";
    EXPECT_LT(graph_err, 0.5) << n << " tokens";
  }
}

TEST_F(CudaModel, EngineOutputsMatchCpuWithAndWithoutGraphs) {
  std::mt19937 rng(7);
  std::vector<core::GenerationRequest> reqs;
  for (int i = 0; i < 24; ++i) {
    core::GenerationRequest r;
    const int len = 1 + static_cast<int>(rng() % 40);
    for (int t = 0; t < len; ++t) r.prompt.push_back(3 + static_cast<int32_t>(rng() % 500));
    r.max_new_tokens = 8 + static_cast<int64_t>(rng() % 16);
    r.sampling.temperature = 0.0f;
    r.ignore_eos = true;
    reqs.push_back(r);
  }
  auto cfg = model::LlamaConfig::named_shape("tiny");
  model::LlamaModel cpu(cfg, model::random_llama_weights(cfg, 11, Device::kCpu, DType::kF32, kInitStd), Stream::cpu(), DType::kF32);
  model::KvCache cpu_kv(cfg, model::kv_shape_for_tokens(4096, 4), Device::kCpu, DType::kF32);
  const auto ref = core::GenerationEngine(cpu, cpu_kv, {}).generate(reqs);
  for (int64_t graph_bs : {0, 32}) {
    GpuModel g(DType::kF32, 4096);
    core::GenerationEngine engine(*g.model, *g.kv, {.cuda_graph_max_bs = graph_bs});
    const auto got = engine.generate(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].output_ids, ref[i].output_ids) << "request " << i << " graphs " << graph_bs;
    if (graph_bs > 0) {
      EXPECT_GT(engine.stats().graph_replays, 0);
    }
  }
  // One request at a time, so every prefill is one request's and replays a prefill graph
  // (a one-token prompt replays the decode graph): whole prompts, and prompts in chunks of 16
  // (the last chunk's logits only).
  int64_t longer_prompts = 0;
  for (const auto& r : reqs) longer_prompts += r.prompt.size() > 1 ? 1 : 0;
  for (int64_t chunk : {int64_t{16384}, int64_t{16}}) {
    GpuModel g(DType::kF32, 4096);
    core::GenerationEngine engine(
        *g.model, *g.kv, {.max_running_requests = 1, .max_prefill_tokens = chunk, .cuda_graph_max_bs = 32, .prefill_graph_max_tokens = 64});
    const auto got = engine.generate(reqs);
    for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(got[i].output_ids, ref[i].output_ids) << "request " << i << " chunks of " << chunk;
    EXPECT_GE(engine.stats().prefill_graph_replays, longer_prompts) << "chunks of " << chunk;
  }
}
