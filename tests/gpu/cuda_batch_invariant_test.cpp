// Batch-invariant kernels on a GPU (--enable-deterministic-inference, kernels/batch_invariant.hpp):
// in bf16, a product's rows, a model's logits and a served answer do not depend, bit for bit, on
// what shares their batch. Without the switch these part at near-ties (a decode batch of 8 takes
// the GEMVs, its verify of 40 rows cuBLASLt; attention splits keys by the batch's size).
#include <gtest/gtest.h>

#include <random>

#include "kernels/batch_invariant.hpp"
#include "kernels/matmul.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "launch/deployment.hpp"
#include "launch/deployment_flags.hpp"
#include "model/llama_weights.hpp"
#include "spec/decode_graph_runner.hpp"
#include "tests/launch/random_requests.hpp"
#include "tests/test_util.hpp"

using namespace aerie;

namespace {

struct BatchInvariantScope {
  BatchInvariantScope() { kernels::set_batch_invariant(true); }
  ~BatchInvariantScope() { kernels::set_batch_invariant(false); }
};

class CudaBatchInvariant : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
  }
};

Buffer on_gpu(const Buffer& host) {
  const TensorView v = host.view();
  std::vector<int64_t> shape;
  for (int i = 0; i < v.ndim; ++i) shape.push_back(v.dim(i));
  Buffer d(Device::kCuda, v.dtype, shape);
  d.copy_from_host(host.data(), host.nbytes());
  return d;
}

std::vector<uint16_t> raw16(const TensorView& t, const Stream& s) {
  std::vector<uint16_t> h(static_cast<size_t>(t.numel()));
  copy_async(h.data(), t.data, h.size() * 2, s);
  synchronize(s);
  return h;
}

std::vector<float> raw32(const TensorView& t, const Stream& s) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  copy_async(h.data(), t.data, h.size() * 4, s);
  synchronize(s);
  return h;
}

// One sequence's new tokens at positions context.. in slots base.. (its context before them too).
struct Seq {
  std::vector<int32_t> ids;
  int32_t context = 0;
  int32_t base = 4;
};

model::ForwardBatch batch_of(const std::vector<Seq>& seqs) {
  model::ForwardBatch b;
  b.qo_indptr = {0};
  b.kv_indptr = {0};
  for (const Seq& s : seqs) {
    const auto n = static_cast<int32_t>(s.ids.size());
    for (int32_t p = 0; p < s.context + n; ++p) b.kv_indices.push_back(s.base + p);
    for (int32_t i = 0; i < n; ++i) {
      b.input_ids.push_back(s.ids[static_cast<size_t>(i)]);
      b.positions.push_back(s.context + i);
      b.out_cache_loc.push_back(s.base + s.context + i);
      b.logit_rows.push_back(static_cast<int32_t>(b.logit_rows.size()));
    }
    b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
  }
  return b;
}

}  // namespace

// Each row of an m-row product (stored in bf16 and in f32, and through the MLP's fused gate/up +
// SiLU) equals the row multiplied alone: SmolLM2's q/k/v and gate/up and a 4.5 MiB weight on the
// tensor-core GEMV (chunks of 16 rows past 16), its down_proj and a K of 584 on the CUDA-core
// GEMV (whole chunks of 8 in one launch, the rest after).
TEST_F(CudaBatchInvariant, ProductRowsEqualTheRowMultipliedAloneBitForBit) {
  BatchInvariantScope on;
  OwnedStream owned{Device::kCuda};
  const Stream& s = owned.get();
  std::mt19937 rng(3);
  for (const auto& [n, k] : std::vector<std::pair<int64_t, int64_t>>{{960, 576}, {576, 1536}, {3072, 576}, {2048, 1152}, {200, 584}}) {
    const Buffer w = on_gpu(aerie::testing::random_buffer(rng, DType::kBF16, {n, k}, 0.05f));
    for (const int64_t m : {1, 3, 8, 9, 16, 17, 40, 130}) {
      const Buffer x = on_gpu(aerie::testing::random_buffer(rng, DType::kBF16, {m, k}));
      Buffer y16(Device::kCuda, DType::kBF16, {m, n}), y32(Device::kCuda, DType::kF32, {m, n});
      Buffer act(Device::kCuda, DType::kBF16, {m, n / 2}), scratch(Device::kCuda, DType::kBF16, {m, n});
      ASSERT_TRUE(kernels::matmul({.x = x.view(), .w = w.view(), .y = y16.view()}, s).is_ok());
      ASSERT_TRUE(kernels::matmul({.x = x.view(), .w = w.view(), .y = y32.view()}, s).is_ok());
      ASSERT_TRUE(kernels::gate_up_silu({.x = x.view(), .w = w.view(), .gate_up = scratch.view(), .out = act.view()}, s).is_ok());
      const auto all16 = raw16(y16.view(), s), act_all = raw16(act.view(), s);
      const auto all32 = raw32(y32.view(), s);
      for (int64_t r = 0; r < m; r += (m > 20 ? 7 : 1)) {
        Buffer o16(Device::kCuda, DType::kBF16, {1, n}), o32(Device::kCuda, DType::kF32, {1, n});
        Buffer oact(Device::kCuda, DType::kBF16, {1, n / 2}), oscratch(Device::kCuda, DType::kBF16, {1, n});
        const TensorView xr = x.view().slice_rows(r, r + 1);
        ASSERT_TRUE(kernels::matmul({.x = xr, .w = w.view(), .y = o16.view()}, s).is_ok());
        ASSERT_TRUE(kernels::matmul({.x = xr, .w = w.view(), .y = o32.view()}, s).is_ok());
        ASSERT_TRUE(kernels::gate_up_silu({.x = xr, .w = w.view(), .gate_up = oscratch.view(), .out = oact.view()}, s).is_ok());
        const auto one16 = raw16(o16.view(), s), one_act = raw16(oact.view(), s);
        const auto one32 = raw32(o32.view(), s);
        size_t differ = 0;
        for (int64_t j = 0; j < n; ++j) {
          differ += all16[static_cast<size_t>(r * n + j)] != one16[static_cast<size_t>(j)];
          differ += all32[static_cast<size_t>(r * n + j)] != one32[static_cast<size_t>(j)];
          if (j < n / 2) differ += act_all[static_cast<size_t>(r * (n / 2) + j)] != one_act[static_cast<size_t>(j)];
        }
        EXPECT_EQ(differ, 0u) << "row " << r << " of " << m << " over [" << n << ", " << k << "]";
      }
    }
  }
}

// A SmolLM2-shaped bf16 model (4 layers): eight sequences' plain decode steps (batch 8), their
// verify of 5 tokens each (40 rows), the first step beside a 200-token prompt (a mixed batch) and
// one sequence alone give the same logits bit for bit, eagerly and through the graphs; the
// prompt's logits equal its prefill alone.
TEST_F(CudaBatchInvariant, ModelRowsEqualWhateverTheirBatch) {
  BatchInvariantScope on;
  model::LlamaConfig cfg = model::LlamaConfig::named_shape("tiny");
  cfg.vocab_size = 1000, cfg.hidden_size = 576, cfg.intermediate_size = 1536, cfg.num_layers = 4, cfg.num_heads = 9,
  cfg.num_kv_heads = 3, cfg.head_dim = 64;
  OwnedStream owned{Device::kCuda};
  const Stream& s = owned.get();
  model::LlamaModel m(cfg, model::random_llama_weights(cfg, 17, Device::kCuda, DType::kBF16, 0.1f), s, DType::kBF16);
  model::KvCache kv(cfg, model::kv_shape_for_tokens(10 * 512 + 4, 4), Device::kCuda, DType::kBF16);
  for (int64_t l = 0; l < cfg.num_layers; ++l) {
    ASSERT_TRUE(kernels::fill_normal({.x = kv.k(l), .seed = 700 + static_cast<uint64_t>(l)}, s).is_ok());
    ASSERT_TRUE(kernels::fill_normal({.x = kv.v(l), .seed = 800 + static_cast<uint64_t>(l)}, s).is_ok());
  }
  constexpr int64_t kSeqs = 8, kQ = 5;
  const std::vector<int32_t> contexts = {37, 300, 5, 64, 129, 450, 200, 33};
  std::mt19937 rng(4);
  std::vector<Seq> seqs;
  for (int64_t i = 0; i < kSeqs; ++i) {
    Seq q{.ids = {}, .context = contexts[static_cast<size_t>(i)], .base = static_cast<int32_t>(4 + 512 * i)};
    for (int64_t t = 0; t < kQ; ++t) q.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(cfg.vocab_size)));
    seqs.push_back(q);
  }
  auto step = [&](int64_t t) {  // every sequence's token t, one decode batch
    std::vector<Seq> one;
    for (const Seq& q : seqs) one.push_back({.ids = {q.ids[static_cast<size_t>(t)]}, .context = q.context + static_cast<int32_t>(t), .base = q.base});
    return one;
  };
  spec::DecodeGraphRunner plain_graphs(m, kv, kSeqs, 2048), verify_graphs(m, kv, kSeqs, 2048, kQ);
  const int64_t V = cfg.vocab_size;
  for (const bool graphs : {false, true}) {
    // Plain steps: row (sequence i, token t) at plain[(i * kQ + t) * V ...].
    std::vector<float> plain(static_cast<size_t>(kSeqs * kQ * V));
    for (int64_t t = 0; t < kQ; ++t) {
      const model::ForwardBatch b = batch_of(step(t));
      const auto logits = raw32(graphs ? plain_graphs.replay(b) : m.forward(b, kv), s);
      for (int64_t i = 0; i < kSeqs; ++i)
        std::copy_n(logits.begin() + i * V, V, plain.begin() + (i * kQ + t) * V);
    }
    const model::ForwardBatch all = batch_of(seqs);
    ASSERT_TRUE(!graphs || verify_graphs.can_run(all));
    const auto verify = raw32(graphs ? verify_graphs.replay(all) : m.forward(all, kv), s);
    ASSERT_EQ(verify.size(), plain.size());
    size_t differ = 0;
    for (size_t j = 0; j < plain.size(); ++j) differ += verify[j] != plain[j];
    EXPECT_EQ(differ, 0u) << "a verify of " << kQ << " tokens x " << kSeqs << " sequences against their plain steps"
                          << (graphs ? " (graphs)" : " (eager)");
  }
  // Eager: token 0 of every sequence beside a 200-token prompt, and sequence 5 alone.
  std::vector<float> step0 = raw32(m.forward(batch_of(step(0)), kv), s);
  Seq prompt{.ids = {}, .context = 0, .base = static_cast<int32_t>(4 + 512 * kSeqs)};
  for (int i = 0; i < 200; ++i) prompt.ids.push_back(static_cast<int32_t>(rng() % static_cast<uint32_t>(V)));
  const std::vector<float> alone = raw32(m.forward(batch_of({prompt}), kv), s);
  std::vector<Seq> mixed = {prompt};
  for (const Seq& q : step(0)) mixed.push_back(q);
  const std::vector<float> mix = raw32(m.forward(batch_of(mixed), kv), s);
  ASSERT_EQ(mix.size(), alone.size() + step0.size());
  size_t differ_prompt = 0, differ_steps = 0;
  for (size_t j = 0; j < alone.size(); ++j) differ_prompt += mix[j] != alone[j];
  for (size_t j = 0; j < step0.size(); ++j) differ_steps += mix[alone.size() + j] != step0[j];
  EXPECT_EQ(differ_prompt, 0u) << "a prompt's logits beside eight decodes against its prefill alone";
  EXPECT_EQ(differ_steps, 0u) << "eight decodes' logits beside a prompt against their batch alone";
  const std::vector<float> five = raw32(m.forward(batch_of({step(0)[5]}), kv), s);
  size_t differ_one = 0;
  for (int64_t j = 0; j < V; ++j) differ_one += five[static_cast<size_t>(j)] != step0[static_cast<size_t>(5 * V + j)];
  EXPECT_EQ(differ_one, 0u) << "one sequence alone against its row of the batch of 8";
}

// Served end to end in bf16 (random tiny weights at transformers' 0.02: near-ties everywhere):
// with --enable-deterministic-inference greedy EAGLE3 and STANDALONE chains answer as plain
// decoding at batches 8 and 32, and plain decoding answers each request as it does alone.
TEST_F(CudaBatchInvariant, Bf16GreedyAnswersDoNotDependOnTheBatchOrOnSpeculation) {
  BatchInvariantScope off_after;  // each deployment sets the switch from its flag; off again after the test
  auto run = [](const std::string& alg, const std::vector<core::GenerationRequest>& reqs, int64_t running) {
    auto world = parallel::make_single_process_group();
    launch::DeploymentOptions o{.load_format = "dummy", .model_shape = "tiny", .device = "cuda", .dtype = "bf16",
                                .max_total_tokens = 16384, .page_size = 1, .max_running_requests = running, .chunked_prefill_size = 64};
    o.enable_deterministic_inference = true;
    o.speculative_algorithm = alg;
    o.speculative_num_steps = 3;
    if (!alg.empty()) launch::check_deployment_flags(o);
    launch::Deployment d(o, *world);
    return d.run(reqs);
  };
  for (const int batch : {8, 32}) {
    const auto reqs = aerie::testing::random_requests(batch, 900 + static_cast<uint32_t>(batch), 60, 1, 24);
    const auto plain = run("", reqs, batch);
    const auto one_at_a_time = run("", reqs, 1);
    for (const std::string alg : {"", "EAGLE3", "STANDALONE"}) {
      const auto got = alg.empty() ? one_at_a_time : run(alg, reqs, batch);
      int differ = 0;
      for (size_t i = 0; i < reqs.size(); ++i) {
        ASSERT_TRUE(got[i].error.empty()) << got[i].error;
        ASSERT_TRUE(plain[i].error.empty()) << plain[i].error;
        differ += got[i].result.output_ids != plain[i].result.output_ids;
      }
      EXPECT_EQ(differ, 0) << (alg.empty() ? "one request at a time" : alg) << " at batch " << batch << ": " << differ << " of "
                           << reqs.size() << " answers differ from plain decoding's";
    }
  }
}
