// Tensor parallelism against one rank, run under `mpirun -np T` (every rank runs every test,
// so the collectives line up):
//   tp_parity_test [--device cpu|cuda]
// Each rank builds the whole model (TP1, a group of one) and its TP shard from the same
// seed, runs the same batches through both and compares: the communicator's collectives,
// the vocab-parallel embedding and LM head, one decoder layer (with biases, so the
// row-parallel bias is added once), whole models (KV heads split or replicated, tied or
// untied embeddings, a vocabulary that does not divide), EAGLE / EAGLE3 heads, and on CUDA
// graph replay of a TP decode step against eager. On CPU (fp32) the tolerance is tight; on
// CUDA (bf16) it is bf16's. Exits 77 (skip) with --device cuda without a GPU per rank.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <cstring>
#include <random>

#include "kernels/buffer.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/embedding.hpp"
#include "kernels/staging.hpp"
#include "launch/tp_context.hpp"
#include "model/eagle_head.hpp"
#include "model/llama_model.hpp"
#include "model/vocab_parallel.hpp"
#include "model/weight_layout.hpp"
#include "parallel/dp_padding.hpp"
#include "parallel/parallel_layout.hpp"
#include "spec/decode_graph_runner.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using aerie::testing::rel_error;
using aerie::testing::row_argmax;

namespace {

launch::TpContext* g_tp = nullptr;
Device g_device = Device::kCpu;

DType act() { return g_device == Device::kCpu ? DType::kF32 : DType::kBF16; }
// Relative error allowed between the TP and the one-rank result: summation order only (fp32),
// or bf16 rounding of the activations (each rank rounds its partial sums).
double tolerance() { return g_device == Device::kCpu ? 1e-5 : 3e-2; }

std::vector<double> host_of(const TensorView& t, const Stream& s) {
  std::vector<float> h(static_cast<size_t>(t.numel()));
  if (t.dtype == DType::kF32) {
    copy_async(h.data(), t.data, h.size() * 4, s);
    synchronize(s);
  } else {
    std::vector<uint16_t> raw(static_cast<size_t>(t.numel()));
    copy_async(raw.data(), t.data, raw.size() * 2, s);
    synchronize(s);
    for (size_t i = 0; i < raw.size(); ++i) h[i] = load_as_float(raw.data(), t.dtype, static_cast<int64_t>(i));
  }
  return {h.begin(), h.end()};
}

// Two prompts of different lengths (a ragged prefill) into pages from slot 4 on, logits at
// every position.
model::ForwardBatch ragged_prefill(int64_t vocab, uint32_t seed) {
  std::mt19937 rng(seed);
  model::ForwardBatch b;
  int32_t slot = 4;
  for (int64_t len : {23, 6}) {
    const auto first_slot = slot;
    for (int64_t p = 0; p < len; ++p) {
      b.input_ids.push_back(static_cast<int32_t>(rng() % vocab));
      b.positions.push_back(static_cast<int32_t>(p));
      b.out_cache_loc.push_back(slot++);
      b.logit_rows.push_back(static_cast<int32_t>(b.logit_rows.size()));
    }
    for (int32_t s = first_slot; s < slot; ++s) b.kv_indices.push_back(s);
    b.qo_indptr.push_back(static_cast<int32_t>(b.input_ids.size()));
    b.kv_indptr.push_back(static_cast<int32_t>(b.kv_indices.size()));
  }
  return b;
}

// One decode step after ragged_prefill: each sequence's next token at its next slot.
model::ForwardBatch decode_after(const model::ForwardBatch& pre, const std::vector<int32_t>& next) {
  model::ForwardBatch d;
  for (int64_t s = 0; s < pre.batch_size(); ++s) {
    const auto q0 = pre.qo_indptr[static_cast<size_t>(s)], q1 = pre.qo_indptr[static_cast<size_t>(s + 1)];
    const int32_t slot = 100 + static_cast<int32_t>(s);
    d.input_ids.push_back(next[static_cast<size_t>(s)]);
    d.positions.push_back(q1 - q0);
    d.out_cache_loc.push_back(slot);
    for (int32_t q = q0; q < q1; ++q) d.kv_indices.push_back(pre.out_cache_loc[static_cast<size_t>(q)]);
    d.kv_indices.push_back(slot);
    d.qo_indptr.push_back(static_cast<int32_t>(s + 1));
    d.kv_indptr.push_back(static_cast<int32_t>(d.kv_indices.size()));
    d.logit_rows.push_back(static_cast<int32_t>(s));
  }
  return d;
}

// Decode step k (from 0) after ragged_prefill: sequence s writes slot 100 + 10 k + s at
// position len + k, attending over its prompt and its earlier decode slots.
model::ForwardBatch decode_chain(const model::ForwardBatch& pre, int64_t k, const std::vector<int32_t>& next) {
  model::ForwardBatch d;
  for (int64_t s = 0; s < pre.batch_size(); ++s) {
    const auto q0 = pre.qo_indptr[static_cast<size_t>(s)], q1 = pre.qo_indptr[static_cast<size_t>(s + 1)];
    for (int32_t q = q0; q < q1; ++q) d.kv_indices.push_back(pre.out_cache_loc[static_cast<size_t>(q)]);
    for (int64_t j = 0; j <= k; ++j) d.kv_indices.push_back(static_cast<int32_t>(100 + 10 * j + s));
    d.input_ids.push_back(next[static_cast<size_t>(s)]);
    d.positions.push_back(static_cast<int32_t>(q1 - q0 + k));
    d.out_cache_loc.push_back(static_cast<int32_t>(100 + 10 * k + s));
    d.qo_indptr.push_back(static_cast<int32_t>(s + 1));
    d.kv_indptr.push_back(static_cast<int32_t>(d.kv_indices.size()));
    d.logit_rows.push_back(static_cast<int32_t>(s));
  }
  return d;
}

// The whole model on this rank (a group of one) and this rank's TP shard of it.
struct Pair {
  model::LlamaConfig config;
  OwnedStream stream{g_device};
  std::unique_ptr<model::LlamaModel> whole, shard;
  std::unique_ptr<model::KvCache> whole_kv, shard_kv;
  explicit Pair(model::LlamaConfig c, uint64_t seed = 7) : config(std::move(c)) {
    whole = std::make_unique<model::LlamaModel>(config, model::random_llama_weights(config, seed, g_device, act(), 0.1f), stream.get(), act());
    shard = std::make_unique<model::LlamaModel>(config, model::random_llama_weights(config, seed, g_device, act(), 0.1f, {}, g_tp->shard),
                                                stream.get(), act(), g_tp->tp);
    whole_kv = std::make_unique<model::KvCache>(whole->local_config(), model::kv_shape_for_tokens(512, 4), g_device, act());
    shard_kv = std::make_unique<model::KvCache>(shard->local_config(), model::kv_shape_for_tokens(512, 4), g_device, act());
  }
  // Logits of the whole and the shard for the same batch.
  std::pair<std::vector<double>, std::vector<double>> logits(const model::ForwardBatch& b) {
    auto a = host_of(whole->forward(b, *whole_kv), stream.get());
    auto s = host_of(shard->forward(b, *shard_kv), stream.get());
    return {std::move(a), std::move(s)};
  }
};

// Close in norm, and the same greedy token in every row where one rank's winner leads its
// runner-up by more than the rounding noise between the two (4x the RMS difference; on
// CPU that is ~1e-6, so only exact ties may differ).
void expect_close(const std::vector<double>& tp, const std::vector<double>& one, int64_t vocab, const std::string& what) {
  ASSERT_EQ(tp.size(), one.size()) << what;
  EXPECT_LT(rel_error(tp, one), tolerance()) << what << " on rank " << g_tp->world->rank();
  double sq = 0;
  for (size_t i = 0; i < tp.size(); ++i) sq += (tp[i] - one[i]) * (tp[i] - one[i]);
  const double margin = 4.0 * std::sqrt(sq / static_cast<double>(tp.size()));
  const auto a = row_argmax(tp, vocab), b = row_argmax(one, vocab);
  int64_t decisive = 0;
  for (size_t r = 0; r < a.size(); ++r) {
    const auto row = one.begin() + static_cast<int64_t>(r) * vocab;
    std::vector<double> v(row, row + vocab);
    std::nth_element(v.begin(), v.begin() + 1, v.end(), std::greater<>());
    if (v[0] - v[1] <= margin) continue;
    ++decisive;
    EXPECT_EQ(a[r], b[r]) << what << ": row " << r << " greedy token differs on rank " << g_tp->world->rank() << " (lead "
                          << v[0] - v[1] << ", noise margin " << margin << ")";
  }
  EXPECT_GE(decisive, static_cast<int64_t>(a.size()) / 2) << what << ": too few rows with a clear winner to compare";
}

model::LlamaConfig tiny() { return model::LlamaConfig::named_shape("tiny"); }

}  // namespace

TEST(Communicator, CollectivesGiveEveryRankTheSameAnswer) {
  auto& c = *g_tp->tp;
  const int n = c.size(), r = c.rank();
  OwnedStream s(g_device);
  const int64_t len = 6;
  // all_reduce: element i of rank r is r * 10 + i; the sum is i * n + 10 * n(n-1)/2.
  Buffer x(g_device, DType::kF32, {len});
  std::vector<float> h(len);
  for (int64_t i = 0; i < len; ++i) h[static_cast<size_t>(i)] = static_cast<float>(r * 10 + i);
  x.copy_from_host(h.data(), x.nbytes());
  c.all_reduce_sum(x.view(), s.get());
  auto got = host_of(x.view(), s.get());
  for (int64_t i = 0; i < len; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<double>(i * n + 10 * n * (n - 1) / 2));
  // all_gather: rank blocks in order.
  Buffer all(g_device, DType::kF32, {n * len});
  x.copy_from_host(h.data(), x.nbytes());
  c.all_gather(x.view(), all.view(), s.get());
  got = host_of(all.view(), s.get());
  for (int q = 0; q < n; ++q)
    for (int64_t i = 0; i < len; ++i) EXPECT_EQ(got[static_cast<size_t>(q * len + i)], static_cast<double>(q * 10 + i));
  // reduce_scatter: rank r gets block r of the sum of `all` over ranks (n copies of it).
  Buffer mine(g_device, DType::kF32, {len});
  c.reduce_scatter_sum(all.view(), mine.view(), s.get());
  got = host_of(mine.view(), s.get());
  for (int64_t i = 0; i < len; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<double>(n * (r * 10 + i)));
  // broadcast from the last rank.
  x.copy_from_host(h.data(), x.nbytes());
  c.broadcast(x.view(), n - 1, s.get());
  got = host_of(x.view(), s.get());
  for (int64_t i = 0; i < len; ++i) EXPECT_EQ(got[static_cast<size_t>(i)], static_cast<double>((n - 1) * 10 + i));
}

// The IPC one-shot all-reduce (bf16 up to 2 MB) against NCCL alone, and what it hands to
// NCCL (f32, not a multiple of 16 bytes, larger than its buffer).
TEST(Communicator, IpcAllReduceMatchesNccl) {
  if (g_device != Device::kCuda) GTEST_SKIP() << "CUDA IPC is CUDA's";
  auto nccl = parallel::make_communicator(*g_tp->world, Device::kCuda, {.custom_all_reduce = false});
  auto& ipc = *g_tp->tp;
  OwnedStream s(Device::kCuda);
  for (int64_t n : {int64_t{8}, int64_t{4096}, int64_t{4096 * 33}, int64_t{4096 * 256}, int64_t{4096 * 33 + 7}, int64_t{4096 * 1100}}) {
    for (DType dt : {DType::kBF16, DType::kF32}) {
      Buffer a(Device::kCuda, dt, {n}), b(Device::kCuda, dt, {n});
      std::vector<float> h(static_cast<size_t>(n));
      for (int64_t i = 0; i < n; ++i) h[static_cast<size_t>(i)] = static_cast<float>((i * 7 + g_tp->world->rank() * 13) % 97) / 31.0f;
      std::vector<uint8_t> raw(static_cast<size_t>(a.nbytes()));
      for (int64_t i = 0; i < n; ++i) store_from_float(raw.data(), dt, i, h[static_cast<size_t>(i)]);
      a.copy_from_host(raw.data(), a.nbytes());
      b.copy_from_host(raw.data(), b.nbytes());
      nccl->all_reduce_sum(a.view(), s.get());
      ipc.all_reduce_sum(b.view(), s.get());
      const auto x = host_of(a.view(), s.get()), y = host_of(b.view(), s.get());
      if (g_tp->world->size() == 2) {
        EXPECT_EQ(x, y) << n << " " << dtype_name(dt);  // one rounding of one sum
      } else {
        EXPECT_LT(rel_error(y, x), 1e-2) << n << " " << dtype_name(dt);
      }
    }
  }
}

// Replayed graphs of the IPC all-reduce (8 KB and 512 KB), whose call counter and buffer
// phases advance on the device from replay to replay.
// The fused all-reduce + residual add + RMSNorm against NCCL followed by the norm kernel.
TEST(Communicator, FusedAllReduceNormMatchesNcclThenNorm) {
  if (g_device != Device::kCuda) GTEST_SKIP() << "CUDA IPC is CUDA's";
  auto nccl = parallel::make_communicator(*g_tp->world, Device::kCuda, {.custom_all_reduce = false});
  auto& ipc = *g_tp->tp;
  OwnedStream s(Device::kCuda);
  for (int64_t rows : {int64_t{1}, int64_t{7}, int64_t{200}}) {
    const int64_t hidden = 4096;
    auto make = [&](uint64_t seed, float std, bool same_on_every_rank) {
      return model::random_buffer(seed + (same_on_every_rank ? 0 : 100 * static_cast<uint64_t>(g_tp->world->rank())), {rows, hidden}, std,
                                  Device::kCuda, DType::kBF16);
    };
    Buffer xa = make(1, 1.0f, false), xb = make(1, 1.0f, false), ra = make(2, 1.0f, true), rb = make(2, 1.0f, true);
    Buffer w = model::random_buffer(3, {hidden}, 0.0f, Device::kCuda, DType::kBF16, 1.5f);
    Buffer ya(Device::kCuda, DType::kBF16, {rows, hidden}), yb(Device::kCuda, DType::kBF16, {rows, hidden});
    for (int rep = 0; rep < 3; ++rep) {  // the channel's phases turn over
      nccl->all_reduce_residual_rms_norm(xa.view(), ra.view(), w.view(), ya.view(), 1e-5f, s.get());
      ipc.all_reduce_residual_rms_norm(xb.view(), rb.view(), w.view(), yb.view(), 1e-5f, s.get());
    }
    const auto x1 = host_of(xa.view(), s.get()), x2 = host_of(xb.view(), s.get());
    const auto r1 = host_of(ra.view(), s.get()), r2 = host_of(rb.view(), s.get());
    if (g_tp->world->size() == 2) {
      EXPECT_EQ(x1, x2) << rows;
      EXPECT_EQ(r1, r2) << rows;
    }
    EXPECT_LT(rel_error(host_of(yb.view(), s.get()), host_of(ya.view(), s.get())), 1e-2) << rows;
  }
}

TEST(Communicator, AllReduceInsideACudaGraph) {
  if (g_device != Device::kCuda) GTEST_SKIP() << "CUDA graphs are CUDA's";
  auto& c = *g_tp->tp;
  OwnedStream s(Device::kCuda);
  for (int64_t n : {int64_t{4096}, int64_t{4096 * 64}}) {
    Buffer x(Device::kCuda, DType::kBF16, {n});
    c.all_reduce_sum(x.view(), s.get());  // warm-up outside the capture
    synchronize(s.get());
    cuda_runtime::begin_capture(s.get().handle());
    c.all_reduce_sum(x.view(), s.get());
    void* graph = cuda_runtime::end_capture(s.get().handle());
    for (float v : {1.0f, 3.0f, 5.0f}) {
      std::vector<uint16_t> h(static_cast<size_t>(n), float_to_bf16(v * static_cast<float>(c.rank() + 1)));
      x.copy_from_host(h.data(), x.nbytes());
      cuda_runtime::launch_graph(graph, s.get().handle());
      const auto got = host_of(x.view(), s.get());
      const double want = v * c.size() * (c.size() + 1) / 2.0;
      EXPECT_EQ(got.front(), want) << n;
      EXPECT_EQ(got.back(), want) << n;
    }
    cuda_runtime::destroy_graph(graph);
  }
}

TEST(VocabParallel, EmbeddingAndLmHeadMatchTheWholeTable) {
  // 509 rows: not divisible by 2 or 4, so the last shard is padded.
  const int64_t vocab = 509, hidden = 64, rows = 7;
  OwnedStream s(g_device);
  Buffer table = model::random_buffer(3, {vocab, hidden}, 0.5f, g_device, act());
  Buffer shard = model::vocab_shard_of(model::random_buffer(3, {vocab, hidden}, 0.5f, g_device, act()), g_tp->shard);
  std::vector<int32_t> ids = {0, 508, 254, 255, 127, 128, 381};
  Buffer idb(g_device, DType::kI32, {rows});
  idb.copy_from_host(ids.data(), idb.nbytes());
  Buffer whole_out(g_device, act(), {rows, hidden}), tp_out(g_device, act(), {rows, hidden});
  ASSERT_TRUE(kernels::embedding({.ids = idb.view(), .table = table.view(), .out = whole_out.view()}, s.get()).is_ok());
  auto& tp = *g_tp->tp;
  model::vocab_parallel_embedding(idb.view(), shard.view(), g_tp->shard.first_vocab(vocab), tp_out.view(), tp, s.get());
  // A lookup is a copy: exact on every device.
  EXPECT_EQ(host_of(tp_out.view(), s.get()), host_of(whole_out.view(), s.get()));

  Buffer whole_logits(g_device, DType::kF32, {rows, vocab}), tp_logits(g_device, DType::kF32, {rows, vocab});
  const int64_t per = g_tp->shard.vocab_rows(vocab);
  Buffer s1(g_device, DType::kF32, {rows * per}), s2(g_device, DType::kF32, {tp.size() * rows * per});
  auto solo = parallel::make_single_communicator();
  model::vocab_parallel_logits(whole_out.view(), table.view(), vocab, whole_logits.view(), {}, *solo, s.get());
  model::vocab_parallel_logits(whole_out.view(), shard.view(), vocab, tp_logits.view(), {.shard_logits = s1.view(), .gathered = s2.view()}, tp,
                               s.get());
  // Each logit is one dot product on one rank: the same as the whole table's up to the GEMM's
  // own blocking.
  expect_close(host_of(tp_logits.view(), s.get()), host_of(whole_logits.view(), s.get()), vocab, "LM head");
}

TEST(DecoderLayer, OneLayerWithBiasesMatchesTheWholeLayer) {
  model::LlamaConfig c = tiny();
  c.num_layers = 1;
  c.attention_bias = c.mlp_bias = true;  // the row-parallel biases must be added once
  Pair p(c);
  auto [one, tp] = p.logits(ragged_prefill(c.vocab_size, 1));
  expect_close(tp, one, c.vocab_size, "one layer with biases");
}

TEST(Model, TinyPrefillAndDecodeMatch) {
  Pair p(tiny());
  const auto pre = ragged_prefill(p.config.vocab_size, 2);
  auto [one, tp] = p.logits(pre);
  expect_close(tp, one, p.config.vocab_size, "tiny prefill");
  // Decode one step from the last position's greedy token of each sequence.
  const auto am = row_argmax(one, p.config.vocab_size);
  std::vector<int32_t> next = {static_cast<int32_t>(am[22]), static_cast<int32_t>(am[28])};
  auto [one_d, tp_d] = p.logits(decode_after(pre, next));
  expect_close(tp_d, one_d, p.config.vocab_size, "tiny decode");
}

TEST(Model, ReplicatedKvHeadsTiedEmbeddingsAndAnOddVocabulary) {
  model::LlamaConfig c = tiny();
  c.num_kv_heads = 1;  // fewer KV heads than ranks: replicated
  c.tie_word_embeddings = true;
  c.vocab_size = 501;  // not divisible by the TP size
  Pair p(c);
  auto [one, tp] = p.logits(ragged_prefill(c.vocab_size, 3));
  expect_close(tp, one, c.vocab_size, "replicated KV, tied, odd vocabulary");
}

// The hidden states captured for EAGLE-3 are whole on every rank.
TEST(Model, CapturedHiddenStatesMatch) {
  Pair p(tiny());
  p.whole->set_hidden_capture({.final_normed = true, .aux_layers = {0, 1}});
  p.shard->set_hidden_capture({.final_normed = true, .aux_layers = {0, 1}});
  p.logits(ragged_prefill(p.config.vocab_size, 4));
  const auto a = host_of(p.whole->captured_hidden(), p.stream.get()), b = host_of(p.shard->captured_hidden(), p.stream.get());
  EXPECT_LT(rel_error(b, a), tolerance());
}

// (kind, replicated): the head sharded like the target, or whole on every rank.
class EagleHeads : public ::testing::TestWithParam<std::tuple<model::EagleKind, bool>> {};

TEST_P(EagleHeads, HeadLogitsMatch) {
  Pair p(tiny());
  const auto [kind, replicated] = GetParam();
  // EAGLE3 with a reduced draft vocabulary (vocab-parallel over 200 rows).
  auto hc = model::EagleHeadConfig::for_target(kind, p.config, kind == model::EagleKind::kEagle3 ? 200 : 0);
  model::EagleHead whole(hc, model::random_eagle_head(hc, 5, g_device, act()), *p.whole);
  hc.replicated = replicated;
  model::EagleHead shard(hc, model::random_eagle_head(hc, 5, g_device, act(), replicated ? model::TpShard{} : g_tp->shard), *p.shard);
  model::KvCache wkv(whole.local_layer(), model::kv_shape_for_tokens(512, 4), g_device, act());
  model::KvCache skv(shard.local_layer(), model::kv_shape_for_tokens(512, 4), g_device, act());
  const auto b = ragged_prefill(p.config.vocab_size, 5);
  // The same input hidden states on every rank: random, seeded.
  Buffer hidden = model::random_buffer(9, {b.num_tokens(), hc.input_width()}, 1.0f, g_device, act());
  const auto one = host_of(whole.forward(b, hidden.view(), wkv), p.stream.get());
  const auto tp = host_of(shard.forward(b, hidden.view(), skv), p.stream.get());
  expect_close(tp, one, whole.vocab(), kind == model::EagleKind::kEagle3 ? "EAGLE3 head" : "EAGLE head");
  EXPECT_LT(rel_error(host_of(shard.out_hidden(), p.stream.get()), host_of(whole.out_hidden(), p.stream.get())), tolerance());
}

INSTANTIATE_TEST_SUITE_P(Kinds, EagleHeads,
                         ::testing::Combine(::testing::Values(model::EagleKind::kEagle1, model::EagleKind::kEagle3), ::testing::Bool()));

// A TP decode step captured in a CUDA graph (its all-reduces and gathers inside) gives the
// eager step's logits, on the Llama-3.2-1B shape cut to 4 layers.
TEST(Graphs, TpDecodeReplayMatchesEager) {
  if (g_device != Device::kCuda) GTEST_SKIP() << "CUDA graphs are CUDA's";
  model::LlamaConfig c = model::LlamaConfig::named_shape("llama-3.2-1b");
  c.num_layers = 4;
  Pair p(c);
  const auto pre = ragged_prefill(c.vocab_size, 6);
  auto [one, tp] = p.logits(pre);
  expect_close(tp, one, c.vocab_size, "1B-shape prefill");
  const auto am = row_argmax(one, c.vocab_size);
  const auto dec = decode_after(pre, {static_cast<int32_t>(am[22]), static_cast<int32_t>(am[28])});
  const auto eager = host_of(p.shard->forward(dec, *p.shard_kv), p.stream.get());
  spec::DecodeGraphRunner graphs(*p.shard, *p.shard_kv, 8, 256);
  const auto replayed = host_of(graphs.replay(dec), p.stream.get());
  EXPECT_LT(rel_error(replayed, eager), 1e-3);
  EXPECT_EQ(row_argmax(replayed, c.vocab_size), row_argmax(eager, c.vocab_size));
  const auto whole = host_of(p.whole->forward(dec, *p.whole_kv), p.stream.get());
  expect_close(replayed, whole, c.vocab_size, "1B-shape decode replay against one rank");
}

// DP attention over the whole world (T ranks) in D groups: every group runs its own batch
// through the DP-attention model (attention on its rows over its attention-TP group, the MLP
// over all ranks on every group's rows) and gets the logits one process gets for that batch
// alone: prefill steps (SUM_LEN), a step where one group is idle, a step where one group
// decodes while the others prefill, and decode steps under MAX_LEN padded to a bucket.
class DpAttention : public ::testing::TestWithParam<int> {};

TEST_P(DpAttention, EveryGroupGetsItsOwnBatchsLogits) {
  const int world = g_tp->world->size(), D = GetParam();
  if (D > world || world % D != 0 || world == 1) GTEST_SKIP() << "DP attention over " << D << " groups needs a multiple of " << D << " ranks";
  const parallel::ParallelLayout layout{.tp_size = world, .dp_size = D, .dp_attention = true};
  parallel::ParallelGroups groups = parallel::make_parallel_groups(*g_tp->world, layout);
  auto dp = std::make_shared<model::DpAttentionGroups>();
  dp->mlp = parallel::make_communicator(*groups.tp, g_device);
  dp->peers = parallel::make_communicator(*groups.dp, g_device);
  dp->attn = parallel::make_communicator(*groups.attn_tp, g_device);
  const model::TpShard shard{.rank = dp->attn->rank(), .size = dp->attn->size(), .mlp_rank = dp->mlp->rank(), .mlp_size = dp->mlp->size()};
  const int g = dp->dp_rank();
  model::LlamaConfig c = tiny();
  c.num_kv_heads = 1;  // replicated over an attention group of 2
  c.mlp_bias = true;   // the MLP's bias added once over all ranks
  OwnedStream stream(g_device);
  model::LlamaModel whole(c, model::random_llama_weights(c, 9, g_device, act(), 0.1f), stream.get(), act());
  model::LlamaModel dpa(c, model::random_llama_weights(c, 9, g_device, act(), 0.1f, {}, shard), stream.get(), act(), dp->attn, dp);
  model::KvCache whole_kv(whole.local_config(), model::kv_shape_for_tokens(512, 4), g_device, act());
  model::KvCache dpa_kv(dpa.local_config(), model::kv_shape_for_tokens(512, 4), g_device, act());
  const std::vector<int64_t> buckets = {4, 8};

  // One step: `mine` is this group's batch (empty: idle), `counts` every group's tokens.
  auto step = [&](const model::ForwardBatch& mine, const std::vector<int64_t>& counts, bool extend, const std::string& what) {
    const auto plan = parallel::plan_dp_padding(counts, extend, buckets);
    dpa.set_dp_plan(plan);
    if (mine.num_tokens() == 0) {
      dpa.forward_idle(dpa_kv);
      return plan;
    }
    const auto got = host_of(dpa.forward(mine, dpa_kv), stream.get());
    const auto want = host_of(whole.forward(mine, whole_kv), stream.get());
    expect_close(got, want, c.vocab_size, what + " (group " + std::to_string(g) + ")");
    return plan;
  };
  std::vector<model::ForwardBatch> prefill;
  for (int i = 0; i < D; ++i) prefill.push_back(ragged_prefill(c.vocab_size, 20 + static_cast<uint32_t>(i)));
  auto counts_of = [&](auto&& tokens_of) {
    std::vector<int64_t> n;
    for (int i = 0; i < D; ++i) n.push_back(tokens_of(i));
    return n;
  };
  // Step 1: group 0 prefills, the others are idle.
  auto p1 = step(g == 0 ? prefill[0] : model::ForwardBatch{}, counts_of([&](int i) { return i == 0 ? prefill[0].num_tokens() : 0; }), true,
                 "prefill beside idle groups");
  EXPECT_EQ(p1.mode, parallel::DpPaddingMode::kSumLen);
  // Step 2: group 0 decodes while the others prefill.
  const std::vector<int32_t> next = {5, 9};
  const auto dec0 = decode_chain(prefill[0], 0, next);
  auto p2 = step(g == 0 ? dec0 : prefill[static_cast<size_t>(g)],
                 counts_of([&](int i) { return i == 0 ? dec0.num_tokens() : prefill[static_cast<size_t>(i)].num_tokens(); }), true,
                 "decode beside prefills");
  EXPECT_EQ(p2.mode, parallel::DpPaddingMode::kSumLen);
  // Step 3: every group decodes its two sequences: MAX_LEN, padded to the bucket of 4.
  const int64_t own_decodes = g == 0 ? 1 : 0;  // group 0 decoded in step 2 already
  auto p3 = step(decode_chain(prefill[static_cast<size_t>(g)], own_decodes, next), counts_of([&](int) { return int64_t{2}; }), false,
                 "decode padded to a bucket");
  EXPECT_EQ(p3.mode, parallel::DpPaddingMode::kMaxLen);
  ASSERT_TRUE(p3.bucket);
  EXPECT_EQ(*p3.bucket, 4);
  // Step 4 (4 groups): group 0 idles while the others decode: MAX_LEN, and the idle group
  // runs the bucket's padded requests as a replayed graph would.
  if (D < 3) return;
  auto p4 = step(g == 0 ? model::ForwardBatch{} : decode_chain(prefill[static_cast<size_t>(g)], 1, next),
                 counts_of([&](int i) { return i == 0 ? int64_t{0} : int64_t{2}; }), false, "decode beside an idle group");
  EXPECT_EQ(p4.mode, parallel::DpPaddingMode::kMaxLen);
  ASSERT_TRUE(p4.bucket);
}

INSTANTIATE_TEST_SUITE_P(Groups, DpAttention, ::testing::Values(2, 4));

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  for (int i = 1; i + 1 < argc; ++i)
    if (std::strcmp(argv[i], "--device") == 0) g_device = parse_device(argv[i + 1]);
  try {
    // One GPU per rank (mpirun's ranks on this node); fewer: skipped, as gpu tests are.
    const char* ranks = std::getenv("OMPI_COMM_WORLD_LOCAL_SIZE");
    if (g_device == Device::kCuda && (!cuda_available() || cuda_runtime::device_count() < (ranks ? std::atoi(ranks) : 1))) {
      std::printf("tp_parity_test: needs a CUDA device per rank, skipped\n");
      return 77;
    }
    auto tp = launch::make_tp_context(&argc, &argv, g_device, 0);
    g_tp = &tp;
    std::printf("tp_parity_test: rank %d of %d, %s\n", tp.world->rank(), tp.world->size(), device_name(g_device));
    const int rc = RUN_ALL_TESTS();
    g_tp = nullptr;
    return rc;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "tp_parity_test: %s\n", e.what());
    return 1;
  }
}
