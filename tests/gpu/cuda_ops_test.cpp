// Every CUDA op against the CPU reference over random shapes and dtypes (label gpu; skips
// without a GPU).
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/attention.hpp"
#include "kernels/chain_accept.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/embedding.hpp"
#include "kernels/future_tokens.hpp"
#include "kernels/gemm_tuning.hpp"
#include "kernels/logit_adjust.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"
#include "kernels/rope_kv_write.hpp"
#include "kernels/sampling.hpp"
#include "kernels/silu_mul.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;
using aerie::testing::random_buffer;
using aerie::testing::rel_error;
using aerie::testing::to_double;

namespace {

class CudaOps : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!cuda_available()) GTEST_SKIP() << "no CUDA device";
    stream_ = std::make_unique<OwnedStream>(Device::kCuda);
  }
  const Stream& gpu() const { return stream_->get(); }
  std::unique_ptr<OwnedStream> stream_;
};

Buffer to_gpu(const Buffer& host) {
  Buffer d(Device::kCuda, host.view().dtype, std::vector<int64_t>(host.view().shape.begin(), host.view().shape.begin() + host.view().ndim));
  d.copy_from_host(host.data(), host.nbytes());
  return d;
}
Buffer like_gpu(const Buffer& host) {
  Buffer d(Device::kCuda, host.view().dtype, std::vector<int64_t>(host.view().shape.begin(), host.view().shape.begin() + host.view().ndim));
  // Poison: every element the kernel should write must be written.
  cuda_runtime::memset_device(d.data(), 0x7f, static_cast<size_t>(d.nbytes()));
  return d;
}
Buffer to_cpu(const Buffer& dev) {
  cuda_runtime::device_synchronize();
  Buffer h(Device::kCpu, dev.view().dtype, std::vector<int64_t>(dev.view().shape.begin(), dev.view().shape.begin() + dev.view().ndim));
  dev.copy_to_host(h.data(), dev.nbytes());
  return h;
}
Buffer ints(const std::vector<int32_t>& v) {
  Buffer b(Device::kCpu, DType::kI32, {static_cast<int64_t>(v.size())});
  if (!v.empty()) b.copy_from_host(v.data(), b.nbytes());
  return b;
}
double tol(DType t) { return t == DType::kF32 ? 1e-5 : t == DType::kF16 ? 3e-3 : 2e-2; }

// A qkv_rope test's host inputs for m tokens: positions first + step * i, cache slots from the
// top three apart, and the usual RoPE frequencies for heads of `dim`.
struct RopeInputs {
  Buffer positions, slots, inv_freq;
};
RopeInputs rope_inputs(int64_t m, int64_t num_slots, int64_t dim, int32_t first, int32_t step) {
  std::vector<int32_t> pos, sl;
  for (int64_t i = 0; i < m; ++i) {
    pos.push_back(first + step * static_cast<int32_t>(i));
    sl.push_back(static_cast<int32_t>(num_slots - 1 - 3 * i));
  }
  std::vector<float> inv(static_cast<size_t>(dim / 2));
  for (int64_t i = 0; i < dim / 2; ++i) inv[static_cast<size_t>(i)] = 1.0f / std::pow(10000.0f, 2.0f * i / dim);
  Buffer inv_b(Device::kCpu, DType::kF32, {dim / 2});
  inv_b.copy_from_host(inv.data(), inv_b.nbytes());
  return {ints(pos), ints(sl), std::move(inv_b)};
}

}  // namespace

TEST_F(CudaOps, MatmulMatchesCpu) {
  std::mt19937 rng(1);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    for (auto [m, k, n] : std::vector<std::array<int64_t, 3>>{{1, 4096, 1024}, {3, 77, 45}, {17, 256, 512}, {128, 512, 128}}) {
      Buffer x = random_buffer(rng, t, {m, k}), w = random_buffer(rng, t, {n, k}), bias = random_buffer(rng, t, {n});
      for (DType out : {t, DType::kF32}) {
        Buffer y(Device::kCpu, out, {m, n});
        ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .bias = bias.view(), .y = y.view()}, Stream::cpu()).is_ok());
        Buffer dx = to_gpu(x), dw = to_gpu(w), db = to_gpu(bias), dy = like_gpu(y);
        ASSERT_TRUE(matmul({.x = dx.view(), .w = dw.view(), .bias = db.view(), .y = dy.view()}, gpu()).is_ok());
        EXPECT_LT(rel_error(to_double(to_cpu(dy).view()), to_double(y.view())), tol(out == DType::kF32 ? t : out))
            << dtype_name(t) << " " << m << "x" << k << "x" << n;
      }
    }
  }
}

// Products of 17-256 rows go through cuBLASLt with the algorithm timed fastest on the first call
// of each shape (kernels/cuda/matmul_lt.cuh): every candidate must give the product, a captured
// graph replays what the eager call computed, bit for bit, and a shape first seen under capture
// (no timing possible there) still gives the product.
TEST_F(CudaOps, TunedCublasLtProductsMatchCpuAndTheirGraphs) {
  std::mt19937 rng(24);
  for (DType t : {DType::kBF16, DType::kF16})
    for (int64_t m : {17, 32, 64, 256})
      for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{{1024, 3000}, {1000, 517}}) {  // 1000: rows 16-byte aligned only
        Buffer x = random_buffer(rng, t, {m, k}), w = random_buffer(rng, t, {n, k}, 0.05f);
        for (DType out : {t, DType::kF32}) {
          Buffer y(Device::kCpu, out, {m, n});
          ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .y = y.view()}, Stream::cpu()).is_ok());
          Buffer dx = to_gpu(x), dw = to_gpu(w), dy = like_gpu(y), dg = like_gpu(y);
          ASSERT_TRUE(matmul({.x = dx.view(), .w = dw.view(), .y = dy.view()}, gpu()).is_ok());
          EXPECT_LT(rel_error(to_double(to_cpu(dy).view()), to_double(y.view())), tol(out == DType::kF32 ? t : out))
              << dtype_name(t) << " m=" << m << " k=" << k << " n=" << n;
          cuda_runtime::begin_capture(gpu().handle());
          ASSERT_TRUE(matmul({.x = dx.view(), .w = dw.view(), .y = dg.view()}, gpu()).is_ok());
          void* graph = cuda_runtime::end_capture(gpu().handle());
          cuda_runtime::launch_graph(graph, gpu().handle());
          const Buffer eager = to_cpu(dy), replayed = to_cpu(dg);
          cuda_runtime::destroy_graph(graph);
          EXPECT_EQ(std::memcmp(eager.data(), replayed.data(), static_cast<size_t>(eager.nbytes())), 0)
              << "graph replay differs from the eager product: " << dtype_name(t) << " m=" << m << " k=" << k << " n=" << n;
        }
      }
  // A shape whose first call is captured.
  Buffer x = random_buffer(rng, DType::kBF16, {48, 768}), w = random_buffer(rng, DType::kBF16, {1536, 768}, 0.05f);
  Buffer y(Device::kCpu, DType::kBF16, {48, 1536});
  ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .y = y.view()}, Stream::cpu()).is_ok());
  Buffer dx = to_gpu(x), dw = to_gpu(w), dy = like_gpu(y);
  cuda_runtime::begin_capture(gpu().handle());
  ASSERT_TRUE(matmul({.x = dx.view(), .w = dw.view(), .y = dy.view()}, gpu()).is_ok());
  void* graph = cuda_runtime::end_capture(gpu().handle());
  cuda_runtime::launch_graph(graph, gpu().handle());
  EXPECT_LT(rel_error(to_double(to_cpu(dy).view()), to_double(y.view())), tol(DType::kBF16));
  cuda_runtime::destroy_graph(graph);
}

// A row count that is not a power of two takes the algorithm its bucket (the next power of two)
// was tuned with instead of timing the candidates again (kernels/gemm_tuning.hpp); the product is
// still right, and a graph of a reused shape replays the eager product bit for bit. Under
// ExactGemmTuning (graph warm-ups) and with the buckets off every new row count is timed; a
// borrowed algorithm is timed for its own row count once that recurs.
TEST_F(CudaOps, TunedCublasLtRowCountsShareTheirBucketsAlgorithm) {
  std::mt19937 rng(31);
  const int64_t k = 1024, n = 4200, rows = 160;  // 8.6 MB of weights: cuBLASLt from 17 rows (no chunked GEMV)
  Buffer x = random_buffer(rng, DType::kBF16, {rows, k}), w = random_buffer(rng, DType::kBF16, {n, k}, 0.05f);
  Buffer y(Device::kCpu, DType::kBF16, {rows, n});
  ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .y = y.view()}, Stream::cpu()).is_ok());
  Buffer dx = to_gpu(x), dw = to_gpu(w), dy = like_gpu(y);
  const size_t row_bytes = static_cast<size_t>(n) * 2;
  // Runs the first m rows; returns how the tuning counts moved.
  auto product = [&](int64_t m) {
    const GemmTuningCounts before = gemm_tuning_counts();
    const TensorView xv = dx.view().slice_rows(0, m), yv = dy.view().slice_rows(0, m);
    EXPECT_TRUE(matmul({.x = xv, .w = dw.view(), .y = yv}, gpu()).is_ok());
    const Buffer got = to_cpu(dy);
    Buffer got_rows(Device::kCpu, DType::kBF16, {m, n}), want_rows(Device::kCpu, DType::kBF16, {m, n});
    std::memcpy(got_rows.data(), got.data(), row_bytes * static_cast<size_t>(m));
    std::memcpy(want_rows.data(), y.data(), row_bytes * static_cast<size_t>(m));
    EXPECT_LT(rel_error(to_double(got_rows.view()), to_double(want_rows.view())), tol(DType::kBF16)) << "m=" << m;
    const GemmTuningCounts after = gemm_tuning_counts();
    return std::pair<int64_t, int64_t>{after.tuned - before.tuned, after.reused - before.reused};
  };
  using Moved = std::pair<int64_t, int64_t>;  // {timed, reused}
  EXPECT_EQ(product(64), (Moved{1, 0})) << "a bucket's own row count is timed";
  for (int64_t m : {33, 40, 47, 63}) EXPECT_EQ(product(m), (Moved{0, 1})) << "m=" << m << " takes bucket 64's algorithm";
  EXPECT_EQ(product(40), (Moved{0, 0})) << "a shape seen before keeps its plan";
  EXPECT_EQ(product(100), (Moved{1, 0})) << "bucket 128 has no algorithm yet: timed";
  EXPECT_EQ(product(90), (Moved{0, 1})) << "bucket 128 holds 100's algorithm until 128 comes";
  EXPECT_EQ(product(128), (Moved{1, 0})) << "the bucket's own count is timed even where the bucket has an algorithm";
  EXPECT_EQ(product(120), (Moved{0, 1}));
  {
    const ExactGemmTuning exact;  // as a graph runner's eager first run
    EXPECT_EQ(product(36), (Moved{1, 0})) << "a graph warm-up's row count is timed for itself";
  }
  EXPECT_EQ(product(37), (Moved{0, 1}));
  set_gemm_tuning_buckets(false);
  EXPECT_EQ(product(50), (Moved{1, 0})) << "buckets off: every new row count is timed";
  set_gemm_tuning_buckets(true);
  // A reused shape under a graph.
  Buffer dg = like_gpu(y);
  const TensorView xv = dx.view().slice_rows(0, 47);
  ASSERT_TRUE(matmul({.x = xv, .w = dw.view(), .y = dy.view().slice_rows(0, 47)}, gpu()).is_ok());
  cuda_runtime::begin_capture(gpu().handle());
  ASSERT_TRUE(matmul({.x = xv, .w = dw.view(), .y = dg.view().slice_rows(0, 47)}, gpu()).is_ok());
  void* graph = cuda_runtime::end_capture(gpu().handle());
  cuda_runtime::launch_graph(graph, gpu().handle());
  const Buffer eager = to_cpu(dy), replayed = to_cpu(dg);
  cuda_runtime::destroy_graph(graph);
  EXPECT_EQ(std::memcmp(eager.data(), replayed.data(), row_bytes * 47), 0) << "graph replay of a reused shape differs";
  // A borrowed algorithm's row count is timed for itself once it recurs (the call that borrowed
  // counts), or at once under ExactGemmTuning; never under capture.
  auto retuned = [] { return gemm_tuning_counts().retuned; };
  set_gemm_retune_after(3);
  int64_t r = retuned();
  EXPECT_EQ(product(45), (Moved{0, 1}));
  product(45);
  EXPECT_EQ(retuned(), r) << "two calls with the borrowed algorithm: not yet";
  EXPECT_EQ(product(45), (Moved{0, 0})) << "the retime is counted apart";
  EXPECT_EQ(retuned(), r + 1) << "the third call times 45 rows for themselves";
  product(45);
  EXPECT_EQ(retuned(), r + 1) << "an own algorithm is never timed again";
  EXPECT_EQ(product(55), (Moved{0, 1}));
  {
    const ExactGemmTuning exact;
    product(55);
    EXPECT_EQ(retuned(), r + 2) << "a graph warm-up times a borrowed row count at once";
  }
  set_gemm_retune_after(2);
  EXPECT_EQ(product(61), (Moved{0, 1}));
  const TensorView x61 = dx.view().slice_rows(0, 61);
  cuda_runtime::begin_capture(gpu().handle());
  ASSERT_TRUE(matmul({.x = x61, .w = dw.view(), .y = dg.view().slice_rows(0, 61)}, gpu()).is_ok());
  void* graph61 = cuda_runtime::end_capture(gpu().handle());
  EXPECT_EQ(retuned(), r + 2) << "due under capture: not timed there";
  cuda_runtime::launch_graph(graph61, gpu().handle());
  cuda_runtime::destroy_graph(graph61);
  product(61);
  EXPECT_EQ(retuned(), r + 3) << "the next eager call times it";
  set_gemm_retune_after(0);
  EXPECT_EQ(product(59), (Moved{0, 1}));
  for (int i = 0; i < 4; ++i) product(59);
  EXPECT_EQ(retuned(), r + 3) << "0: borrowed algorithms are kept";
  set_gemm_retune_after(kGemmRetuneAfterCalls);
}

TEST_F(CudaOps, GemvMatchesCpuForUpTo16Rows) {
  // Aerie's GEMVs serve up to 16 rows when allowed (verify and decode batches): 9-16 on the
  // tensor cores in a bucket of 16 rows, partly filled here; a short K over many rows (an LM head
  // like SmolLM2's, 576 wide, or its 700 and 1003 here; two rows up to K 2048) takes the
  // tensor-core path from one row on, and 3-8 rows over few weight rows (576, SmolLM2's down_proj;
  // 517) the CUDA-core one (kernels/gemv_rules.hpp).
  std::mt19937 rng(21);
  const int saved = gemv_max_rows();
  set_gemv_max_rows(16);
  for (DType t : {DType::kBF16, DType::kF16})
    // 17-128: the tensor-core GEMV in chunks of 16 over weights of up to 4 MiB (all of these; the
    // chunked rule, kernels/gemv_rules.hpp); 129: cuBLAS.
    for (int64_t m : {1, 2, 3, 4, 5, 6, 7, 8, 9, 13, 16, 17, 40, 65, 128, 129})
    for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{{2048, 1003}, {576, 1003}, {576, 9001}, {1536, 576}, {576, 517}, {576, 700}}) {  // n: not always a multiple of the rows per block
      Buffer x = random_buffer(rng, t, {m, k}), w = random_buffer(rng, t, {n, k}, 0.05f);
      for (DType out : {t, DType::kF32}) {
        Buffer y(Device::kCpu, out, {m, n});
        ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .bias = {}, .y = y.view()}, Stream::cpu()).is_ok());
        Buffer dx = to_gpu(x), dw = to_gpu(w), dy = like_gpu(y);
        ASSERT_TRUE(matmul({.x = dx.view(), .w = dw.view(), .bias = {}, .y = dy.view()}, gpu()).is_ok());
        EXPECT_LT(rel_error(to_double(to_cpu(dy).view()), to_double(y.view())), tol(out == DType::kF32 ? t : out))
            << dtype_name(t) << " m=" << m << " k=" << k << " n=" << n;
      }
    }
  set_gemv_max_rows(saved);
}

// FP8 copies of weights with a scale per row (kernels/matmul.hpp) against the CPU reference: the
// CUDA-core GEMV (1-2 rows, or K not a multiple of 64), the tensor-core GEMV (3-8 rows), two
// launches (9-16 rows), dequantized tiles through cuBLAS (f16 input, K not a multiple of 16),
// the weight as loaded past 16 rows; stored, SiLU-paired and RoPE epilogues.
Buffer row_scales(std::mt19937& rng, int64_t n) {
  Buffer s(Device::kCpu, DType::kF32, {n});
  std::uniform_real_distribution<float> u(1e-4f, 2e-3f);
  for (int64_t i = 0; i < n; ++i) s.view().ptr<float>()[i] = u(rng);
  return s;
}

TEST_F(CudaOps, Fp8WeightsMatchCpu) {
  std::mt19937 rng(23);
  for (DType t : {DType::kBF16, DType::kF16})
    for (int64_t m : {1, 2, 3, 5, 8, 9, 16, 17, 40})
      for (const auto& [k, n] : std::vector<std::pair<int64_t, int64_t>>{{2048, 1003}, {576, 9001}, {80, 1003}, {24, 300}}) {
        if (t == DType::kF16 && m != 3) continue;  // f16 input always takes the tiles
        Buffer x = random_buffer(rng, t, {m, k}), w8 = random_buffer(rng, DType::kF8E4M3, {n, k}, 100.0f), sc = row_scales(rng, n);
        Buffer bias = random_buffer(rng, t, {n}), w = random_buffer(rng, t, {n, k}, 0.05f);
        for (DType out : {t, DType::kF32}) {
          const bool with_bias = m % 2 == 1;
          Buffer y(Device::kCpu, out, {m, n});
          ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .bias = with_bias ? bias.view() : TensorView(), .w_fp8 = w8.view(),
                              .w_scale = sc.view(), .y = y.view()},
                             Stream::cpu()).is_ok());
          Buffer dx = to_gpu(x), dw = to_gpu(w), dw8 = to_gpu(w8), dsc = to_gpu(sc), db = to_gpu(bias), dy = like_gpu(y);
          ASSERT_TRUE(matmul({.x = dx.view(), .w = dw.view(), .bias = with_bias ? db.view() : TensorView(), .w_fp8 = dw8.view(),
                              .w_scale = dsc.view(), .y = dy.view()},
                             gpu()).is_ok());
          EXPECT_LT(rel_error(to_double(to_cpu(dy).view()), to_double(y.view())), tol(out == DType::kF32 ? t : out))
              << dtype_name(t) << " -> " << dtype_name(out) << " m=" << m << " k=" << k << " n=" << n;
        }
      }
  for (int64_t m : {1, 2, 5, 12, 20}) {
    const int64_t k = 512, inter = 384;
    Buffer x = random_buffer(rng, DType::kBF16, {m, k}), w8 = random_buffer(rng, DType::kF8E4M3, {2 * inter, k}, 100.0f);
    Buffer w = random_buffer(rng, DType::kBF16, {2 * inter, k}, 0.05f);
    Buffer sc = row_scales(rng, 2 * inter), gu(Device::kCpu, DType::kBF16, {m, 2 * inter}), out(Device::kCpu, DType::kBF16, {m, inter});
    ASSERT_TRUE(gate_up_silu({.x = x.view(), .w = w.view(), .w_fp8 = w8.view(), .w_scale = sc.view(), .gate_up = gu.view(), .out = out.view()},
                             Stream::cpu()).is_ok());
    Buffer dx = to_gpu(x), dw = to_gpu(w), dw8 = to_gpu(w8), dsc = to_gpu(sc), dgu = like_gpu(gu), dout = like_gpu(out);
    ASSERT_TRUE(gate_up_silu({.x = dx.view(), .w = dw.view(), .w_fp8 = dw8.view(), .w_scale = dsc.view(), .gate_up = dgu.view(), .out = dout.view()},
                             gpu()).is_ok());
    EXPECT_LT(rel_error(to_double(to_cpu(dout).view()), to_double(out.view())), tol(DType::kBF16)) << "gate_up_silu m=" << m;

    const int64_t qh = 8, kh = 2, dim = 64, slots = 64, width = (qh + 2 * kh) * dim;
    Buffer wq8 = random_buffer(rng, DType::kF8E4M3, {width, k}, 100.0f), scq = row_scales(rng, width);
    Buffer wq = random_buffer(rng, DType::kBF16, {width, k}, 0.05f);
    const auto [pos_b, sl_b, inv_b] = rope_inputs(m, slots, dim, 5, 300);
    Buffer qkv(Device::kCpu, DType::kBF16, {m, width}), q(Device::kCpu, DType::kBF16, {m, qh, dim});
    Buffer kc(Device::kCpu, DType::kBF16, {slots, kh, dim}), vc(Device::kCpu, DType::kBF16, {slots, kh, dim});
    kc.zero();
    vc.zero();
    Buffer dwq = to_gpu(wq), dwq8 = to_gpu(wq8), dscq = to_gpu(scq), dpos = to_gpu(pos_b), dsl = to_gpu(sl_b), dinv = to_gpu(inv_b);
    Buffer dqkv = like_gpu(qkv), dq = like_gpu(q), dkc = to_gpu(kc), dvc = to_gpu(vc);
    ASSERT_TRUE(qkv_rope({.x = x.view(), .w = wq.view(), .w_fp8 = wq8.view(), .w_scale = scq.view(), .qkv = qkv.view(), .positions = pos_b.view(), .inv_freq = inv_b.view(),
                          .slots = sl_b.view(), .q_out = q.view(), .k_cache = kc.view(), .v_cache = vc.view()},
                         Stream::cpu()).is_ok());
    ASSERT_TRUE(qkv_rope({.x = dx.view(), .w = dwq.view(), .w_fp8 = dwq8.view(), .w_scale = dscq.view(), .qkv = dqkv.view(), .positions = dpos.view(), .inv_freq = dinv.view(),
                          .slots = dsl.view(), .q_out = dq.view(), .k_cache = dkc.view(), .v_cache = dvc.view()},
                         gpu()).is_ok());
    EXPECT_LT(rel_error(to_double(to_cpu(dq).view()), to_double(q.view())), 2 * tol(DType::kBF16)) << "qkv_rope m=" << m;
    EXPECT_LT(rel_error(to_double(to_cpu(dkc).view()), to_double(kc.view())), 2 * tol(DType::kBF16)) << "qkv_rope m=" << m;
    EXPECT_LT(rel_error(to_double(to_cpu(dvc).view()), to_double(vc.view())), 2 * tol(DType::kBF16)) << "qkv_rope m=" << m;
  }
}

// The EAGLE3 head's paired norm: each half bit for bit what rms_norm gives on the GPU (the
// vectorized kernel for bf16/f16, the scalar one for f32), the copy of b exact.
TEST_F(CudaOps, RmsNormPairEqualsTwoNormsOnTheGpu) {
  std::mt19937 rng(29);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    const int64_t rows = 5, hidden = 4096;
    Buffer a = random_buffer(rng, t, {rows, hidden}), b = random_buffer(rng, t, {rows, hidden});
    Buffer wa = random_buffer(rng, t, {hidden}), wb = random_buffer(rng, t, {hidden});
    Buffer y(Device::kCpu, t, {rows, 2 * hidden}), copy(Device::kCpu, t, {rows, hidden}), ya(Device::kCpu, t, {rows, hidden});
    Buffer da = to_gpu(a), db = to_gpu(b), dwa = to_gpu(wa), dwb = to_gpu(wb), dy = like_gpu(y), dcopy = like_gpu(copy);
    Buffer dya = like_gpu(ya), dyb = like_gpu(ya);
    ASSERT_TRUE(rms_norm_pair({.a = da.view(), .weight_a = dwa.view(), .b = db.view(), .weight_b = dwb.view(), .y = dy.view(),
                               .b_copy = dcopy.view(), .eps = 1e-5f},
                              gpu()).is_ok());
    ASSERT_TRUE(rms_norm({.x = da.view(), .weight = dwa.view(), .y = dya.view(), .eps = 1e-5f}, gpu()).is_ok());
    ASSERT_TRUE(rms_norm({.x = db.view(), .weight = dwb.view(), .y = dyb.view(), .eps = 1e-5f}, gpu()).is_ok());
    const Buffer hy = to_cpu(dy), hya = to_cpu(dya), hyb = to_cpu(dyb), hcopy = to_cpu(dcopy);
    const size_t row = static_cast<size_t>(hidden) * dtype_size(t);
    for (int64_t r = 0; r < rows; ++r) {
      EXPECT_EQ(std::memcmp(static_cast<const char*>(hy.data()) + 2 * r * row, static_cast<const char*>(hya.data()) + r * row, row), 0)
          << dtype_name(t) << " row " << r;
      EXPECT_EQ(std::memcmp(static_cast<const char*>(hy.data()) + (2 * r + 1) * row, static_cast<const char*>(hyb.data()) + r * row, row), 0)
          << dtype_name(t) << " row " << r;
    }
    EXPECT_EQ(std::memcmp(hcopy.data(), b.data(), static_cast<size_t>(b.nbytes())), 0) << dtype_name(t);
    ASSERT_TRUE(rms_norm_pair({.a = a.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = y.view(), .eps = 1e-5f},
                              Stream::cpu()).is_ok());
    EXPECT_LT(rel_error(to_double(hy.view()), to_double(y.view())), tol(t)) << dtype_name(t);
  }
}

// With a_ids (an EAGLE-3 draft step's token embedding gathered by the norm): the first half is
// rms_norm of the table's rows, as embedding() then rms_norm_pair give; an id outside the table
// gives zeros on the GPU (an error on the CPU), as embedding() with zero_outside.
TEST_F(CudaOps, RmsNormPairGathersTheTablesRowsByIdOnTheGpu) {
  std::mt19937 rng(31);
  for (DType t : {DType::kF32, DType::kBF16}) {
    const int64_t rows = 4, hidden = 576, table_rows = 50;
    Buffer table = random_buffer(rng, t, {table_rows, hidden}), b = random_buffer(rng, t, {rows, hidden});
    Buffer wa = random_buffer(rng, t, {hidden}), wb = random_buffer(rng, t, {hidden});
    const std::vector<int32_t> ids = {7, 49, 0, 7};
    Buffer hids(Device::kCpu, DType::kI32, {rows});
    std::memcpy(hids.data(), ids.data(), ids.size() * 4);
    Buffer dtable = to_gpu(table), db = to_gpu(b), dwa = to_gpu(wa), dwb = to_gpu(wb), dids = to_gpu(hids);
    Buffer y(Device::kCpu, t, {rows, 2 * hidden}), dy = like_gpu(y), dgathered = like_gpu(b), dref = like_gpu(y), dcopy = like_gpu(b);
    ASSERT_TRUE(rms_norm_pair({.a = dtable.view(), .weight_a = dwa.view(), .b = db.view(), .weight_b = dwb.view(), .y = dy.view(),
                               .b_copy = dcopy.view(), .a_ids = dids.view(), .eps = 1e-5f},
                              gpu()).is_ok());
    ASSERT_TRUE(embedding({.ids = dids.view(), .table = dtable.view(), .out = dgathered.view()}, gpu()).is_ok());
    ASSERT_TRUE(rms_norm_pair({.a = dgathered.view(), .weight_a = dwa.view(), .b = db.view(), .weight_b = dwb.view(), .y = dref.view(),
                               .eps = 1e-5f},
                              gpu()).is_ok());
    const Buffer hy = to_cpu(dy), href = to_cpu(dref);
    EXPECT_EQ(std::memcmp(hy.data(), href.data(), static_cast<size_t>(hy.nbytes())), 0) << dtype_name(t);
    EXPECT_EQ(std::memcmp(to_cpu(dcopy).data(), b.data(), static_cast<size_t>(b.nbytes())), 0) << dtype_name(t);
    ASSERT_TRUE(rms_norm_pair({.a = table.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = y.view(),
                               .a_ids = hids.view(), .eps = 1e-5f},
                              Stream::cpu()).is_ok());
    EXPECT_LT(rel_error(to_double(hy.view()), to_double(y.view())), tol(t)) << dtype_name(t);
    // Row 1 names a row past the table: its first half is zeros, the rest as before.
    hids.view().ptr<int32_t>()[1] = static_cast<int32_t>(table_rows);
    const Buffer dbad_ids = to_gpu(hids);
    ASSERT_TRUE(rms_norm_pair({.a = dtable.view(), .weight_a = dwa.view(), .b = db.view(), .weight_b = dwb.view(), .y = dy.view(),
                               .a_ids = dbad_ids.view(), .eps = 1e-5f},
                              gpu()).is_ok());
    const Buffer hy2 = to_cpu(dy);
    const size_t row = static_cast<size_t>(hidden) * dtype_size(t);
    const std::vector<char> zeros(row, 0);
    EXPECT_EQ(std::memcmp(static_cast<const char*>(hy2.data()) + 2 * row, zeros.data(), row), 0) << dtype_name(t);
    EXPECT_EQ(std::memcmp(static_cast<const char*>(hy2.data()) + 3 * row, static_cast<const char*>(href.data()) + 3 * row, row), 0);
    EXPECT_EQ(std::memcmp(hy2.data(), href.data(), 2 * row), 0);
  }
}

TEST_F(CudaOps, GateUpSiluMatchesCpuFusedAndUnfused) {
  std::mt19937 rng(8);
  for (DType t : {DType::kBF16, DType::kF16}) {
    // 1 and 2 rows run the fused CUDA-core GEMV (the tensor-core one over more than 576 rows at
    // K 512, and at two rows K 2048), 5-16 the tensor-core one (13: a partly filled bucket; 5 over
    // 576 rows the CUDA-core one), 32-128 the tensor-core one in chunks of 16, 129 cuBLAS and silu_mul.
    for (int64_t m : {1, 2, 5, 13, 16, 32, 40, 128, 129})
    for (const int64_t k : {512, 2048})
    for (const int64_t inter : {384, 288, 512}) {
      Buffer x = random_buffer(rng, t, {m, k}), w = random_buffer(rng, t, {2 * inter, k}), bias = random_buffer(rng, t, {2 * inter});
      Buffer gu(Device::kCpu, t, {m, 2 * inter}), out(Device::kCpu, t, {m, inter});
      ASSERT_TRUE(gate_up_silu({.x = x.view(), .w = w.view(), .bias = bias.view(), .gate_up = gu.view(), .out = out.view()}, Stream::cpu()).is_ok());
      Buffer dx = to_gpu(x), dw = to_gpu(w), db = to_gpu(bias), dgu = like_gpu(gu), dout = like_gpu(out);
      ASSERT_TRUE(gate_up_silu({.x = dx.view(), .w = dw.view(), .bias = db.view(), .gate_up = dgu.view(), .out = dout.view()}, gpu()).is_ok());
      EXPECT_LT(rel_error(to_double(to_cpu(dout).view()), to_double(out.view())), tol(t)) << dtype_name(t) << " m=" << m << " k=" << k << " inter=" << inter;
    }
  }
}

TEST_F(CudaOps, QkvRopeMatchesCpuFusedAndUnfused) {
  std::mt19937 rng(10);
  for (DType t : {DType::kBF16, DType::kF16}) {
    // 1 and 2 rows run the fused CUDA-core GEMV epilogue (the tensor-core one over more than 576
    // rows at K 512, and at two rows K 2048), 5-16 the tensor-core one (5 over 512 rows the
    // CUDA-core one), 32-128 the tensor-core one in chunks of 16, 129 cuBLAS.
    for (int64_t m : {1, 2, 5, 13, 16, 32, 40, 128, 129})
    for (const int64_t hidden : {512, 2048})
    for (const auto& [qh, kh] : std::vector<std::pair<int64_t, int64_t>>{{8, 2}, {6, 1}, {12, 2}}) {
      const int64_t dim = 64, slots = 400, width = (qh + 2 * kh) * dim;
      Buffer x = random_buffer(rng, t, {m, hidden}), w = random_buffer(rng, t, {width, hidden}, 0.05f), bias = random_buffer(rng, t, {width});
      const auto [pos_b, sl_b, inv_b] = rope_inputs(m, slots, dim, 7, 1000);
      Buffer qkv(Device::kCpu, t, {m, width}), q(Device::kCpu, t, {m, qh, dim});
      Buffer kc(Device::kCpu, t, {slots, kh, dim}), vc(Device::kCpu, t, {slots, kh, dim});
      kc.zero();
      vc.zero();
      Buffer dx = to_gpu(x), dw = to_gpu(w), db = to_gpu(bias), dpos = to_gpu(pos_b), dsl = to_gpu(sl_b), dinv = to_gpu(inv_b);
      Buffer dqkv = like_gpu(qkv), dq = like_gpu(q), dkc = to_gpu(kc), dvc = to_gpu(vc);
      ASSERT_TRUE(qkv_rope({.x = x.view(), .w = w.view(), .bias = bias.view(), .qkv = qkv.view(), .positions = pos_b.view(),
                            .inv_freq = inv_b.view(), .slots = sl_b.view(), .q_out = q.view(), .k_cache = kc.view(), .v_cache = vc.view()},
                           Stream::cpu()).is_ok());
      ASSERT_TRUE(qkv_rope({.x = dx.view(), .w = dw.view(), .bias = db.view(), .qkv = dqkv.view(), .positions = dpos.view(),
                            .inv_freq = dinv.view(), .slots = dsl.view(), .q_out = dq.view(), .k_cache = dkc.view(), .v_cache = dvc.view()},
                           gpu()).is_ok());
      EXPECT_LT(rel_error(to_double(to_cpu(dq).view()), to_double(q.view())), 2 * tol(t)) << dtype_name(t) << " m=" << m << " k=" << hidden << " n=" << width;
      EXPECT_LT(rel_error(to_double(to_cpu(dkc).view()), to_double(kc.view())), 2 * tol(t)) << dtype_name(t) << " m=" << m << " k=" << hidden << " n=" << width;
      EXPECT_LT(rel_error(to_double(to_cpu(dvc).view()), to_double(vc.view())), 2 * tol(t)) << dtype_name(t) << " m=" << m << " k=" << hidden << " n=" << width;
    }
  }
}

TEST_F(CudaOps, NormRopeSiluEmbeddingMatchCpu) {
  std::mt19937 rng(2);
  for (DType t : {DType::kF32, DType::kBF16, DType::kF16}) {
    const int64_t rows = 7, hidden = 4096;
    Buffer x = random_buffer(rng, t, {rows, hidden}), w = random_buffer(rng, t, {hidden}), res = random_buffer(rng, t, {rows, hidden});
    Buffer y(Device::kCpu, t, {rows, hidden});
    Buffer dx = to_gpu(x), dw = to_gpu(w), dres = to_gpu(res), dy = like_gpu(y);
    ASSERT_TRUE(rms_norm({.x = x.view(), .weight = w.view(), .residual = res.view(), .y = y.view()}, Stream::cpu()).is_ok());
    ASSERT_TRUE(rms_norm({.x = dx.view(), .weight = dw.view(), .residual = dres.view(), .y = dy.view()}, gpu()).is_ok());
    EXPECT_LT(rel_error(to_double(to_cpu(dy).view()), to_double(y.view())), tol(t)) << dtype_name(t);
    EXPECT_LT(rel_error(to_double(to_cpu(dres).view()), to_double(res.view())), tol(t)) << dtype_name(t);

    // 300 columns: four outputs per thread; 301: one (the unaligned fallback).
    for (int64_t inter : {300, 301}) {
      Buffer gu = random_buffer(rng, t, {5, 2 * inter}), o(Device::kCpu, t, {5, inter});
      Buffer dgu = to_gpu(gu), dout = like_gpu(o);
      ASSERT_TRUE(silu_mul({.gate_up = gu.view(), .out = o.view()}, Stream::cpu()).is_ok());
      ASSERT_TRUE(silu_mul({.gate_up = dgu.view(), .out = dout.view()}, gpu()).is_ok());
      EXPECT_LT(rel_error(to_double(to_cpu(dout).view()), to_double(o.view())), tol(t)) << dtype_name(t) << " inter " << inter;
    }

    const int64_t qh = 8, kh = 2, dim = 128;
    std::vector<float> inv(dim / 2);
    for (int64_t i = 0; i < dim / 2; ++i) inv[static_cast<size_t>(i)] = 1.0f / std::pow(500000.0f, 2.0f * i / dim);
    Buffer inv_b(Device::kCpu, DType::kF32, {dim / 2});
    inv_b.copy_from_host(inv.data(), inv_b.nbytes());
    // 9 tokens: each token's heads spread over several blocks; 700: all of a token's heads in one
    // block (prompts).
    for (int64_t tokens : {9, 700}) {
      Buffer qkv = random_buffer(rng, t, {tokens, (qh + 2 * kh) * dim});
      std::vector<int32_t> pos = {0, 1, 2, 100, 4095, 17, 8000, 3, 65000}, slots(static_cast<size_t>(tokens));
      for (int64_t i = 9; i < tokens; ++i) pos.push_back(static_cast<int32_t>(rng() % 70000));
      for (int64_t i = 0; i < tokens; ++i) slots[static_cast<size_t>(i)] = static_cast<int32_t>((i * 7 + 3) % (tokens + 3));
      Buffer pos_b = ints(pos), slot_b = ints(slots), q(Device::kCpu, t, {tokens, qh, dim});
      Buffer kc(Device::kCpu, t, {tokens + 3, kh, dim}), vc(Device::kCpu, t, {tokens + 3, kh, dim});
      kc.zero();
      vc.zero();
      Buffer dqkv = to_gpu(qkv), dpos = to_gpu(pos_b), dslot = to_gpu(slot_b), dinv = to_gpu(inv_b), dq = like_gpu(q);
      Buffer dkc = to_gpu(kc), dvc = to_gpu(vc);
      ASSERT_TRUE(rope_kv_write({.qkv = qkv.view(), .positions = pos_b.view(), .inv_freq = inv_b.view(), .slots = slot_b.view(),
                                 .q_out = q.view(), .k_cache = kc.view(), .v_cache = vc.view()}, Stream::cpu()).is_ok());
      ASSERT_TRUE(rope_kv_write({.qkv = dqkv.view(), .positions = dpos.view(), .inv_freq = dinv.view(), .slots = dslot.view(),
                                 .q_out = dq.view(), .k_cache = dkc.view(), .v_cache = dvc.view()}, gpu()).is_ok());
      EXPECT_LT(rel_error(to_double(to_cpu(dq).view()), to_double(q.view())), tol(t) * 2) << dtype_name(t) << " tokens " << tokens;
      EXPECT_LT(rel_error(to_double(to_cpu(dkc).view()), to_double(kc.view())), tol(t) * 2) << dtype_name(t) << " tokens " << tokens;
      EXPECT_LT(rel_error(to_double(to_cpu(dvc).view()), to_double(vc.view())), 1e-7) << dtype_name(t) << " tokens " << tokens;
    }
    const int64_t tokens = 9;
    std::vector<int32_t> pos = {0, 1, 2, 100, 4095, 17, 8000, 3, 65000};
    Buffer pos_b = ints(pos), dpos = to_gpu(pos_b), dinv = to_gpu(inv_b);

    // The unfused rope agrees with the fused one.
    Buffer q2 = random_buffer(rng, t, {tokens, qh, dim}), k2 = random_buffer(rng, t, {tokens, kh, dim});
    Buffer dq2 = to_gpu(q2), dk2 = to_gpu(k2);
    ASSERT_TRUE(rope({.q = q2.view(), .k = k2.view(), .positions = pos_b.view(), .inv_freq = inv_b.view()}, Stream::cpu()).is_ok());
    ASSERT_TRUE(rope({.q = dq2.view(), .k = dk2.view(), .positions = dpos.view(), .inv_freq = dinv.view()}, gpu()).is_ok());
    EXPECT_LT(rel_error(to_double(to_cpu(dq2).view()), to_double(q2.view())), tol(t) * 2);
    EXPECT_LT(rel_error(to_double(to_cpu(dk2).view()), to_double(k2.view())), tol(t) * 2);

    Buffer table = random_buffer(rng, t, {1000, 64}), ids = ints({999, 0, 5, 5}), emb(Device::kCpu, t, {4, 64});
    Buffer dtable = to_gpu(table), dids = to_gpu(ids), demb = like_gpu(emb);
    ASSERT_TRUE(embedding({.ids = ids.view(), .table = table.view(), .out = emb.view()}, Stream::cpu()).is_ok());
    ASSERT_TRUE(embedding({.ids = dids.view(), .table = dtable.view(), .out = demb.view()}, gpu()).is_ok());
    EXPECT_EQ(to_double(to_cpu(demb).view()), to_double(emb.view()));
  }
}

namespace {

// One ragged attention batch (random q, shuffled slots, an optional random mask) on the CPU
// reference and on the GPU with the given splits and query tokens per block.
struct AttentionCase {
  int64_t qh, kh, dim;
  DType dtype;
  bool masked;
  int splits;
  int tokens_per_block;
  std::vector<int32_t> q_lens, kv_lens;
  // q's values times this: at 1 the scores have a standard deviation of about 1, so the weight
  // spreads over many keys; a real model's scores are larger and a few keys take most of it
  // (what the splits' merge must get right).
  float q_scale = 1.0f;
  bool tensor_cores_if_fit = false;  // AttentionParams::tensor_cores_if_fit
};

void expect_attention_matches_cpu(std::mt19937& rng, const AttentionCase& c, const Stream& gpu) {
  const int64_t slots = std::max<int64_t>(1100, std::accumulate(c.kv_lens.begin(), c.kv_lens.end(), int64_t{0}));
  std::vector<int32_t> perm(slots);
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  std::vector<int32_t> qo = {0}, kvp = {0}, kvi, mi = {0};
  std::vector<uint8_t> mask;
  size_t next = 0;
  for (size_t b = 0; b < c.q_lens.size(); ++b) {
    qo.push_back(qo.back() + c.q_lens[b]);
    kvp.push_back(kvp.back() + c.kv_lens[b]);
    for (int32_t j = 0; j < c.kv_lens[b]; ++j) kvi.push_back(perm[next++]);
    for (int32_t i = 0; c.masked && i < c.q_lens[b] * c.kv_lens[b]; ++i) mask.push_back(rng() % 4 != 0);
    mi.push_back(static_cast<int32_t>(mask.size()));
  }
  const int64_t T = qo.back();
  const DType t = c.dtype;
  Buffer q = random_buffer(rng, t, {T, c.qh, c.dim}, c.q_scale), kc = random_buffer(rng, t, {slots, c.kh, c.dim});
  Buffer vc = random_buffer(rng, t, {slots, c.kh, c.dim}), out(Device::kCpu, t, {T, c.qh, c.dim});
  Buffer qo_b = ints(qo), kvp_b = ints(kvp), kvi_b = ints(kvi), mi_b = ints(mi);
  Buffer mask_b(Device::kCpu, DType::kU8, {static_cast<int64_t>(std::max<size_t>(1, mask.size()))});
  if (c.masked) mask_b.copy_from_host(mask.data(), static_cast<int64_t>(mask.size()));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.dim));
  ASSERT_TRUE(attention({.q = q.view(), .k_cache = kc.view(), .v_cache = vc.view(), .out = out.view(), .qo_indptr = qo_b.view(),
                         .kv_indptr = kvp_b.view(), .kv_indices = kvi_b.view(), .custom_mask = c.masked ? mask_b.view() : TensorView(),
                         .mask_indptr = c.masked ? mi_b.view() : TensorView(), .scale = scale}, Stream::cpu()).is_ok());
  Buffer dq = to_gpu(q), dkc = to_gpu(kc), dvc = to_gpu(vc), dout = like_gpu(out), dqo = to_gpu(qo_b), dkvp = to_gpu(kvp_b);
  Buffer dkvi = to_gpu(kvi_b), dmi = to_gpu(mi_b), dmask = to_gpu(mask_b);
  Buffer ws(Device::kCuda, DType::kF32, {attention_workspace_floats(T, c.qh, c.dim, c.splits)});
  ASSERT_TRUE(attention({.q = dq.view(), .k_cache = dkc.view(), .v_cache = dvc.view(), .out = dout.view(), .qo_indptr = dqo.view(),
                         .kv_indptr = dkvp.view(), .kv_indices = dkvi.view(), .custom_mask = c.masked ? dmask.view() : TensorView(),
                         .mask_indptr = c.masked ? dmi.view() : TensorView(), .scale = scale, .num_splits = c.splits,
                         .workspace = ws.view(), .tokens_per_block = c.tokens_per_block, .tensor_cores_if_fit = c.tensor_cores_if_fit},
                        gpu).is_ok());
  EXPECT_LT(rel_error(to_double(to_cpu(dout).view()), to_double(out.view())), t == DType::kF32 ? 1e-5 : 1e-2)
      << "heads " << c.qh << "/" << c.kh << " dim " << c.dim << " " << dtype_name(t) << " masked " << c.masked << " splits " << c.splits
      << " tokens per block " << c.tokens_per_block << " q scale " << c.q_scale;
}

}  // namespace

TEST_F(CudaOps, AttentionMatchesCpuForRaggedBatchesMasksGroupsAndSplits) {
  std::mt19937 rng(3);
  struct Shape { int64_t qh, kh, dim; };
  for (Shape s : {Shape{32, 8, 128}, Shape{4, 4, 64}, Shape{32, 2, 128}, Shape{8, 1, 256}})
    for (DType t : {DType::kBF16, DType::kF32})
      for (bool masked : {false, true})
        for (int splits : {1, 3, 16, 64})  // prefill 37, extend 5 over 300, decode over 700, decode over 1
          expect_attention_matches_cpu(rng, {s.qh, s.kh, s.dim, t, masked, splits, 1, {37, 5, 1, 1}, {37, 300, 700, 1}}, gpu());
}

// Prefill-shaped batches (16 or more new tokens per sequence on average) run on the tensor
// cores (ops_attention_prefill.cu): whole prompts, extend chunks over cached tokens, tiles
// of 128 queries cut anywhere, GQA groups, head dims 64, 96 and 128, bf16 and f16.
TEST_F(CudaOps, PrefillAttentionOnTensorCoresMatchesCpu) {
  std::mt19937 rng(14);
  struct Shape { int64_t qh, kh, dim; };
  for (Shape s : {Shape{32, 8, 128}, Shape{4, 4, 64}, Shape{32, 2, 128}, Shape{9, 3, 64}, Shape{6, 2, 96}})
    for (DType t : {DType::kBF16, DType::kF16}) {
      AttentionParams probe{.q = TensorView(nullptr, t, {411, s.qh, s.dim}, Device::kCuda),
                            .k_cache = TensorView(nullptr, t, {1100, s.kh, s.dim}, Device::kCuda),
                            .v_cache = TensorView(nullptr, t, {1100, s.kh, s.dim}, Device::kCuda),
                            .out = TensorView(nullptr, t, {411, s.qh, s.dim}, Device::kCuda),
                            .qo_indptr = TensorView(nullptr, DType::kI32, {5}, Device::kCuda)};
      EXPECT_TRUE(attention_prefill_on_tensor_cores(probe)) << "the tensor-core path must take this batch";
      // A prompt of 130, 64 new over 100, a prompt of 17, 200 new over 456.
      expect_attention_matches_cpu(rng, {s.qh, s.kh, s.dim, t, false, 1, 1, {130, 64, 17, 200}, {130, 100, 17, 456}}, gpu());
    }
}

// Decode and verify batches whose blocks fill the GPU run on the tensor cores
// (ops_attention_decode.cu): one token or 2-4 tokens per block (rows = group x tokens <= 16),
// causal or a tree mask, splits, GQA groups 1-8, head dims 64 and 128, bf16 and f16; the
// contexts are ragged (empty splits, partial last tiles, a sequence that sees one key).
TEST_F(CudaOps, DecodeAttentionOnTensorCoresMatchesCpu) {
  std::mt19937 rng(15);
  const int num_sms = cuda_runtime::sm_count();
  struct Shape { int64_t qh, kh, dim; };
  for (Shape s : {Shape{32, 8, 128}, Shape{9, 3, 64}, Shape{4, 4, 64}, Shape{24, 4, 128}})
    for (DType t : {DType::kBF16, DType::kF16})
      for (int tpb : {1, 2, 4}) {
        if ((s.qh / s.kh) * tpb > kAttentionDecodeTcMaxRows) continue;
        // Enough sequences of 4 query tokens (1 for one token per block) that the blocks fill the SMs.
        const int q_len = tpb == 1 ? 1 : 4;
        const int seqs = static_cast<int>((num_sms * tpb + s.kh * q_len - 1) / (s.kh * q_len)) + 3;
        std::vector<int32_t> q_lens(static_cast<size_t>(seqs), q_len), kv_lens;
        for (int i = 0; i < seqs; ++i) kv_lens.push_back(i == 0 ? q_len : q_len + static_cast<int32_t>(rng() % 600));
        const int64_t tokens = static_cast<int64_t>(seqs) * q_len;
        AttentionParams probe{.q = TensorView(nullptr, t, {tokens, s.qh, s.dim}, Device::kCuda),
                              .k_cache = TensorView(nullptr, t, {1100, s.kh, s.dim}, Device::kCuda),
                              .v_cache = TensorView(nullptr, t, {1100, s.kh, s.dim}, Device::kCuda),
                              .out = TensorView(nullptr, t, {tokens, s.qh, s.dim}, Device::kCuda),
                              .qo_indptr = TensorView(nullptr, DType::kI32, {seqs + 1}, Device::kCuda), .tokens_per_block = tpb};
        ASSERT_TRUE(attention_decode_on_tensor_cores(probe, num_sms)) << "the tensor-core decode path must take this batch";
        for (bool masked : {false, true})
          for (int splits : {1, 3, 16, 64})
            expect_attention_matches_cpu(rng, {s.qh, s.kh, s.dim, t, masked, splits, tpb, q_lens, kv_lens}, gpu());
      }
}

// One sequence (a batch-1 decode, or a chain-5 verify of 6 tokens in blocks of 2 or 1 tokens)
// forced onto the tensor-core decode kernel whatever the policy says (which takes SmolLM2's
// verify of 6 in 18 one-token blocks there itself): scores as a real model's (q x 12: a few keys take the
// weight) and as the tests above, 1-64 splits, short and long contexts. (Written to chase the
// wrong tokens such batches gave on the real SmolLM2; it passed, and the fault was a stale q
// under programmatic launch, which CudaModel.Bf16GraphReplayEqualsEagerAtSmallBatches covers.)
TEST_F(CudaOps, DecodeAttentionOnTensorCoresMatchesCpuForOneSequence) {
  std::mt19937 rng(17);
  struct Shape { int64_t qh, kh, dim; };
  struct Layout { int tpb, q_len; };  // a decode; a verify of 6 in blocks of 2 tokens, and of 1 (kAttentionOneTokenBlocks)
  for (Shape s : {Shape{9, 3, 64}, Shape{32, 8, 128}})
    for (Layout l : {Layout{1, 1}, Layout{2, 6}, Layout{1, 6}}) {
      const int tpb = l.tpb, q_len = l.q_len;
      for (int kv : {90, 700})
        for (int splits : {1, 3, 16, 64})
          for (float q_scale : {1.0f, 12.0f})
            expect_attention_matches_cpu(rng, {s.qh, s.kh, s.dim, DType::kBF16, false, splits, tpb, {q_len}, {q_len + kv}, q_scale, true},
                                         gpu());
    }
}

TEST_F(CudaOps, AttentionSharesTilesAmongAVerifysTokens) {
  // Verify-like batches (a few query tokens per sequence, causal or a tree mask), with one
  // block serving 1, 2, 4 or 8 tokens of a sequence (up to 32 rows of heads x tokens).
  std::mt19937 rng(13);
  struct Shape { int64_t qh, kh, dim; };
  for (Shape s : {Shape{32, 8, 128}, Shape{4, 4, 64}, Shape{8, 1, 256}})
    for (DType t : {DType::kBF16, DType::kF32})
      for (bool masked : {false, true})
        for (int splits : {1, 3, 16})
          for (int tpb : {1, 2, 4, 8})
            if ((s.qh / s.kh) * tpb <= 32)
              expect_attention_matches_cpu(rng, {s.qh, s.kh, s.dim, t, masked, splits, tpb, {8, 16, 8, 24}, {300, 700, 8, 40}}, gpu());
}

// The future-token kernels against the CPU reference: recorded at their slots (rows of -1
// keep nothing), resolved in place, plain ids untouched.
TEST_F(CudaOps, FutureTokensMatchCpu) {
  std::mt19937 rng(7);
  const int64_t slots = 1000, rows = 300;
  std::vector<int32_t> slot_of(static_cast<size_t>(slots));
  std::iota(slot_of.begin(), slot_of.end(), 0);
  std::shuffle(slot_of.begin(), slot_of.end(), rng);
  slot_of.resize(static_cast<size_t>(rows));
  for (size_t i = 0; i < slot_of.size(); i += 7) slot_of[i] = -1;
  std::vector<int32_t> tokens(static_cast<size_t>(rows)), ids(700);
  for (auto& t : tokens) t = static_cast<int32_t>(rng() % 50000);
  for (auto& id : ids) id = rng() % 2 ? static_cast<int32_t>(rng() % 50000) : -static_cast<int32_t>(rng() % slots) - 1;
  Buffer table = ints(std::vector<int32_t>(static_cast<size_t>(slots), 3)), t = ints(tokens), s = ints(slot_of), i = ints(ids);
  Buffer dtable = to_gpu(table), dt = to_gpu(t), ds = to_gpu(s), di = to_gpu(i);
  ASSERT_TRUE(record_future_tokens({.tokens = t.view(), .slots = s.view(), .table = table.view()}, Stream::cpu()).is_ok());
  ASSERT_TRUE(resolve_future_ids({.ids = i.view(), .table = table.view()}, Stream::cpu()).is_ok());
  ASSERT_TRUE(record_future_tokens({.tokens = dt.view(), .slots = ds.view(), .table = dtable.view()}, gpu()).is_ok());
  ASSERT_TRUE(resolve_future_ids({.ids = di.view(), .table = dtable.view()}, gpu()).is_ok());
  const Buffer table_back = to_cpu(dtable), ids_back = to_cpu(di);
  EXPECT_EQ(std::vector<int32_t>(table_back.view().ptr<int32_t>(), table_back.view().ptr<int32_t>() + slots),
            std::vector<int32_t>(table.view().ptr<int32_t>(), table.view().ptr<int32_t>() + slots));
  EXPECT_EQ(std::vector<int32_t>(ids_back.view().ptr<int32_t>(), ids_back.view().ptr<int32_t>() + 700),
            std::vector<int32_t>(i.view().ptr<int32_t>(), i.view().ptr<int32_t>() + 700));
}

// Row gathers (embedding) and scatters in both CUDA layouts: 16-byte words (rows of whole words,
// up to several words a thread and past the words a thread keeps in flight) and the element /
// 4-byte path (odd widths), with a vocab-parallel shard's ids outside the table giving zeros.
TEST_F(CudaOps, RowGathersAndScattersMatchCpu) {
  std::mt19937 rng(31);
  for (DType t : {DType::kBF16, DType::kF32}) {
    for (int64_t width : {int64_t{8}, int64_t{4096}, int64_t{3 * 4096 + 8}, int64_t{40000}, int64_t{7}}) {
      const std::string what = std::string(dtype_name(t)) + " width " + std::to_string(width);
      Buffer table = random_buffer(rng, t, {6, width}), dtable = to_gpu(table);
      Buffer ids = ints({1005, 1000, 1003, 7, 1003}), dids = to_gpu(ids);  // table rows are ids 1000..1005; 7 is another shard's
      Buffer emb(Device::kCpu, t, {5, width}), demb = like_gpu(emb);
      ASSERT_TRUE(embedding({.ids = ids.view(), .table = table.view(), .out = emb.view(), .first_id = 1000, .zero_outside = true},
                            Stream::cpu()).is_ok());
      ASSERT_TRUE(embedding({.ids = dids.view(), .table = dtable.view(), .out = demb.view(), .first_id = 1000, .zero_outside = true},
                            gpu()).is_ok());
      EXPECT_EQ(to_double(to_cpu(demb).view()), to_double(emb.view())) << what;
      // Scatter the gathered rows into a pool; rows not named keep what they held.
      Buffer pool = random_buffer(rng, t, {9, width}), dpool = to_gpu(pool);
      Buffer rows = ints({8, 0, 4, 2, 5}), drows = to_gpu(rows);
      ASSERT_TRUE(scatter_rows({.src = emb.view(), .rows = rows.view(), .out = pool.view()}, Stream::cpu()).is_ok());
      ASSERT_TRUE(scatter_rows({.src = demb.view(), .rows = drows.view(), .out = dpool.view()}, gpu()).is_ok());
      EXPECT_EQ(to_double(to_cpu(dpool).view()), to_double(pool.view())) << what;
    }
  }
}

TEST_F(CudaOps, KvMoveMatchesCpu) {
  std::mt19937 rng(12);
  // 70 layers: more than one launch takes (64), so the second launch's layers are checked too.
  const int layers = 70;
  std::vector<Buffer> kc, vc, dkc, dvc;
  std::vector<TensorView> ks, vs, dks, dvs;
  for (int l = 0; l < layers; ++l) {
    kc.push_back(random_buffer(rng, DType::kBF16, {40, 2, 64}));
    vc.push_back(random_buffer(rng, DType::kBF16, {40, 2, 64}));
    dkc.push_back(to_gpu(kc.back())), dvc.push_back(to_gpu(vc.back()));
    ks.push_back(kc.back().view()), vs.push_back(vc.back().view()), dks.push_back(dkc.back().view()), dvs.push_back(dvc.back().view());
  }
  Buffer src = ints({7, 9, 12, 30}), dst = ints({6, 7, 8, 30});  // 7 is read, then written
  Buffer dsrc = to_gpu(src), ddst = to_gpu(dst);
  ASSERT_TRUE(kv_move({.src_slots = src.view(), .dst_slots = dst.view(), .k_caches = ks, .v_caches = vs}, Stream::cpu()).is_ok());
  ASSERT_TRUE(kv_move({.src_slots = dsrc.view(), .dst_slots = ddst.view(), .k_caches = dks, .v_caches = dvs}, gpu()).is_ok());
  for (int l = 0; l < layers; ++l) {
    EXPECT_EQ(to_double(to_cpu(dkc[l]).view()), to_double(kc[l].view())) << "layer " << l;
    EXPECT_EQ(to_double(to_cpu(dvc[l]).view()), to_double(vc[l].view())) << "layer " << l;
  }
}

// The chain acceptance behind a verify: every accepted count 0..n-1 occurs, and a bucket's
// padded requests.
// SideCopyStream (kernels/staging.hpp): a copy out on the side stream after mark() reads what
// the main stream's work before the mark wrote; a copy in on the side stream after mark() waits
// for the main stream's read of the buffer before the mark; after end() the main stream reads
// what the side copied in. 128-MB buffers, so that a copy not ordered against the main stream's
// work would overlap it and read or write the wrong data.
TEST_F(CudaOps, SideCopiesFollowTheMarkedWorkAndPrecedeTheMainStreamsNext) {
  SideCopyStream side(gpu());
  const int64_t n = int64_t{32} << 20;
  const size_t bytes = static_cast<size_t>(n) * sizeof(float);
  Buffer x(Device::kCuda, DType::kF32, {n}), read(Device::kCuda, DType::kF32, {n}), after(Device::kCuda, DType::kF32, {n});
  x.zero();
  // The reference: what the fill writes, made on the main stream and read back after a sync.
  ASSERT_TRUE(fill_normal({.x = read.view(), .seed = 5}, gpu()).is_ok());
  std::vector<float> want(static_cast<size_t>(n));
  copy_async(want.data(), read.data(), bytes, gpu());
  synchronize(gpu());
  // 1. Out: the main stream fills x, the side stream copies it back.
  HostStaging out(Device::kCuda, bytes);
  ASSERT_TRUE(fill_normal({.x = x.view(), .seed = 5}, gpu()).is_ok());
  side.mark();
  const Stream& s = side.begin();
  copy_async(out.data(), x.data(), bytes, s);
  StreamEvent copied(Device::kCuda);
  copied.record(s);
  copied.wait();
  EXPECT_EQ(std::memcmp(out.data(), want.data(), bytes), 0) << "the copy out read x before the fill had written it";
  // 2. In: the main stream reads x, the side stream overwrites it with sevens, then the main
  // stream reads it again.
  HostStaging sevens(Device::kCuda, bytes);
  std::fill(sevens.as<float>(), sevens.as<float>() + n, 7.0f);
  copy_async(read.data(), x.data(), bytes, gpu());
  side.mark();
  copy_async(x.data(), sevens.data(), bytes, side.begin());
  side.end();
  copy_async(after.data(), x.data(), bytes, gpu());
  synchronize(gpu());
  std::vector<float> got(static_cast<size_t>(n));
  read.copy_to_host(got.data(), bytes);
  EXPECT_EQ(std::memcmp(got.data(), want.data(), bytes), 0) << "the copy in overwrote x before the main stream had read it";
  after.copy_to_host(got.data(), bytes);
  EXPECT_TRUE(std::all_of(got.begin(), got.end(), [](float v) { return v == 7.0f; })) << "the main stream read x before the copy in";
}

TEST_F(CudaOps, GreedyChainAcceptMatchesCpu) {
  std::mt19937 rng(21);
  const int64_t n = 6, batch = 12, rows = 16;
  Buffer drafts(Device::kCpu, DType::kI32, {batch * n}), argmax(Device::kCpu, DType::kI32, {batch * n});
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t accept = b % n;
    for (int64_t j = 0; j < n; ++j) drafts.view().ptr<int32_t>()[b * n + j] = static_cast<int32_t>(rng() % 50);
    for (int64_t j = 0; j < n; ++j) {
      int32_t& x = argmax.view().ptr<int32_t>()[b * n + j];
      x = j < accept ? drafts.view().ptr<int32_t>()[b * n + j + 1] : static_cast<int32_t>(50 + rng() % 50);  // never a draft
    }
  }
  Buffer last(Device::kCpu, DType::kI32, {rows}), tokens(Device::kCpu, DType::kI32, {rows * n});
  ASSERT_TRUE(greedy_chain_accept({.drafts = drafts.view(), .argmax = argmax.view(), .tokens_per_request = n, .last_rows = last.view(),
                                   .tokens = tokens.view()},
                                  Stream::cpu())
                  .is_ok());
  Buffer ddrafts = to_gpu(drafts), dargmax = to_gpu(argmax), dlast = like_gpu(last), dtokens = like_gpu(tokens);
  ASSERT_TRUE(greedy_chain_accept({.drafts = ddrafts.view(), .argmax = dargmax.view(), .tokens_per_request = n, .last_rows = dlast.view(),
                                   .tokens = dtokens.view()},
                                  gpu())
                  .is_ok());
  EXPECT_EQ(to_double(to_cpu(dlast).view()), to_double(last.view()));
  EXPECT_EQ(to_double(to_cpu(dtokens).view()), to_double(tokens.view()));
  for (int64_t b = 0; b < batch; ++b) EXPECT_EQ(last.view().ptr<int32_t>()[b], b * n + b % n) << b;
}

TEST_F(CudaOps, GreedyTopKLogSoftmaxAndFillMatchCpu) {
  std::mt19937 rng(4);
  const int64_t B = 6, V = 128256;
  Buffer logits = random_buffer(rng, DType::kF32, {B, V}, 3.0f);
  logits.view().ptr<float>()[2 * V + 77] = logits.view().ptr<float>()[2 * V + 76] = 50.0f;  // a tie: lower id wins
  Buffer dlogits = to_gpu(logits);
  auto host_vec = [](auto v, DType t, int64_t n) {
    Buffer b(Device::kCpu, t, {n});
    for (int64_t i = 0; i < n; ++i) {
      if (t == DType::kF32) b.view().ptr<float>()[i] = static_cast<float>(v);
      if (t == DType::kI32) b.view().ptr<int32_t>()[i] = static_cast<int32_t>(v);
      if (t == DType::kI64) b.view().ptr<int64_t>()[i] = static_cast<int64_t>(v) + i;
    }
    return b;
  };
  Buffer temp = host_vec(0.0, DType::kF32, B), tp = host_vec(1.0, DType::kF32, B), tk = host_vec(-1, DType::kI32, B);
  Buffer mp = host_vec(0.0, DType::kF32, B), sd = host_vec(5, DType::kI64, B), st = host_vec(0, DType::kI64, B);
  Buffer out(Device::kCpu, DType::kI32, {B});
  ASSERT_TRUE(sample({.logits = logits.view(), .temperature = temp.view(), .top_p = tp.view(), .top_k = tk.view(), .min_p = mp.view(),
                      .seed = sd.view(), .step = st.view(), .out = out.view()}, Stream::cpu()).is_ok());
  Buffer dtemp = to_gpu(temp), dtp = to_gpu(tp), dtk = to_gpu(tk), dmp = to_gpu(mp), dsd = to_gpu(sd), dst = to_gpu(st), dout = like_gpu(out);
  ASSERT_TRUE(sample({.logits = dlogits.view(), .temperature = dtemp.view(), .top_p = dtp.view(), .top_k = dtk.view(), .min_p = dmp.view(),
                      .seed = dsd.view(), .step = dst.view(), .out = dout.view()}, gpu()).is_ok());
  Buffer got = to_cpu(dout);
  for (int64_t b = 0; b < B; ++b) EXPECT_EQ(got.view().ptr<int32_t>()[b], out.view().ptr<int32_t>()[b]) << b;
  EXPECT_EQ(got.view().ptr<int32_t>()[2], 76);
  // The multi-block row maximum (with a workspace) picks the same tokens.
  Buffer scratch(Device::kCuda, DType::kF32, {sample_workspace_floats(B)});
  Buffer dout2 = like_gpu(out);
  ASSERT_TRUE(sample({.logits = dlogits.view(), .temperature = dtemp.view(), .top_p = dtp.view(), .top_k = dtk.view(), .min_p = dmp.view(),
                      .seed = dsd.view(), .step = dst.view(), .out = dout2.view(), .workspace = scratch.view()}, gpu()).is_ok());
  Buffer got2 = to_cpu(dout2);
  for (int64_t b = 0; b < B; ++b) EXPECT_EQ(got2.view().ptr<int32_t>()[b], out.view().ptr<int32_t>()[b]) << b;
  // Through an id map (a draft vocabulary's target ids) into two outputs, as draft steps run.
  Buffer map(Device::kCpu, DType::kI32, {V, 1});
  for (int64_t v = 0; v < V; ++v) map.view().ptr<int32_t>()[v] = static_cast<int32_t>((v * 7919 + 13) % 200000);
  Buffer dmap = to_gpu(map), dout3 = like_gpu(out), dcopy3 = like_gpu(out);
  ASSERT_TRUE(sample({.logits = dlogits.view(), .temperature = dtemp.view(), .top_p = dtp.view(), .top_k = dtk.view(), .min_p = dmp.view(),
                      .seed = dsd.view(), .step = dst.view(), .out = dout3.view(), .id_map = dmap.view(), .out_copy = dcopy3.view(),
                      .workspace = scratch.view()}, gpu()).is_ok());
  Buffer got3 = to_cpu(dout3), copy3 = to_cpu(dcopy3);
  for (int64_t b = 0; b < B; ++b) {
    const int32_t want = map.view().ptr<int32_t>()[out.view().ptr<int32_t>()[b]];
    EXPECT_EQ(got3.view().ptr<int32_t>()[b], want) << b;
    EXPECT_EQ(copy3.view().ptr<int32_t>()[b], want) << b;
  }

  for (int64_t k : {1, 5, 64}) {
    Buffer vals(Device::kCpu, DType::kF32, {B, k}), idx(Device::kCpu, DType::kI32, {B, k});
    ASSERT_TRUE(topk({.x = logits.view(), .values = vals.view(), .indices = idx.view()}, Stream::cpu()).is_ok());
    Buffer dvals = like_gpu(vals), didx = like_gpu(idx);
    ASSERT_TRUE(topk({.x = dlogits.view(), .values = dvals.view(), .indices = didx.view()}, gpu()).is_ok());
    EXPECT_EQ(to_double(to_cpu(didx).view()), to_double(idx.view())) << "k=" << k;
    EXPECT_EQ(to_double(to_cpu(dvals).view()), to_double(vals.view())) << "k=" << k;
  }

  Buffer ls(Device::kCpu, DType::kF32, {B, V}), dls = like_gpu(ls);
  ASSERT_TRUE(log_softmax({.logits = logits.view(), .out = ls.view()}, Stream::cpu()).is_ok());
  ASSERT_TRUE(log_softmax({.logits = dlogits.view(), .out = dls.view()}, gpu()).is_ok());
  EXPECT_LT(rel_error(to_double(to_cpu(dls).view()), to_double(ls.view())), 1e-5);

  Buffer f(Device::kCpu, DType::kF32, {100000}), df = like_gpu(f);
  ASSERT_TRUE(fill_normal({.x = f.view(), .seed = 9, .std = 0.5f}, Stream::cpu()).is_ok());
  ASSERT_TRUE(fill_normal({.x = df.view(), .seed = 9, .std = 0.5f}, gpu()).is_ok());
  EXPECT_LT(rel_error(to_double(to_cpu(df).view()), to_double(f.view())), 1e-5);
}

// Greedy rows of draft (16,384 and 32,000), target (49,152) and other vocabularies, on both sides
// of the one-block bound (kSampleOneBlockArgmaxVocab) and of the 16-byte loads (a row length not
// a multiple of 4, a maximum in each lane of a float4, ties, the row's last id): the same tokens
// as the CPU with and without the workspace.
TEST_F(CudaOps, GreedyRowsOfEveryLengthMatchCpuWithOrWithoutAWorkspace) {
  std::mt19937 rng(12);
  const int64_t B = 6;
  for (const int64_t V : {int64_t{7}, int64_t{1001}, int64_t{16384}, int64_t{32000}, int64_t{32001}, int64_t{49152}, kSampleOneBlockArgmaxVocab,
                          kSampleOneBlockArgmaxVocab + 4}) {
    Buffer logits = random_buffer(rng, DType::kF32, {B, V}, 3.0f);
    float* l = logits.view().ptr<float>();
    l[0 * V + (V - 1)] = 40.0f;                                     // the last id
    for (int64_t b = 1; b < std::min<int64_t>(B, 5); ++b) l[b * V + (V / 2 / 4) * 4 + (b - 1) % 4] = 45.0f;  // each lane of a float4
    if (V > 9) {
      l[5 * V + 9] = l[5 * V + 8] = 50.0f;  // a tie: the lower id
    }
    Buffer temp(Device::kCpu, DType::kF32, {B}), tp(Device::kCpu, DType::kF32, {B}), tk(Device::kCpu, DType::kI32, {B});
    Buffer mp(Device::kCpu, DType::kF32, {B}), sd(Device::kCpu, DType::kI64, {B}), st(Device::kCpu, DType::kI64, {B});
    temp.zero(), tk.zero(), mp.zero(), sd.zero(), st.zero();
    for (int64_t b = 0; b < B; ++b) tp.view().ptr<float>()[b] = 1.0f;
    Buffer out(Device::kCpu, DType::kI32, {B});
    ASSERT_TRUE(sample({.logits = logits.view(), .temperature = temp.view(), .top_p = tp.view(), .top_k = tk.view(), .min_p = mp.view(),
                        .seed = sd.view(), .step = st.view(), .out = out.view()}, Stream::cpu()).is_ok());
    Buffer dlogits = to_gpu(logits), dtemp = to_gpu(temp), dtp = to_gpu(tp), dtk = to_gpu(tk), dmp = to_gpu(mp), dsd = to_gpu(sd), dst = to_gpu(st);
    Buffer scratch(Device::kCuda, DType::kF32, {sample_workspace_floats(B)});
    for (bool with_workspace : {false, true}) {
      Buffer dout = like_gpu(out);
      ASSERT_TRUE(sample({.logits = dlogits.view(), .temperature = dtemp.view(), .top_p = dtp.view(), .top_k = dtk.view(), .min_p = dmp.view(),
                          .seed = dsd.view(), .step = dst.view(), .out = dout.view(),
                          .workspace = with_workspace ? scratch.view() : TensorView()}, gpu()).is_ok());
      const Buffer got = to_cpu(dout);
      for (int64_t b = 0; b < B; ++b)
        EXPECT_EQ(got.view().ptr<int32_t>()[b], out.view().ptr<int32_t>()[b]) << "V=" << V << " row " << b << " workspace " << with_workspace;
    }
    EXPECT_EQ(out.view().ptr<int32_t>()[0], V - 1) << V;
    if (V > 9) {
      EXPECT_EQ(out.view().ptr<int32_t>()[5], 8) << V;
    }
  }
}

TEST_F(CudaOps, SamplingFollowsTheFilteredDistribution) {
  // 8-token logits, many seeded draws per configuration, chi-square at 99.9%.
  const std::vector<float> lg = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, 0.2f};
  const double chi999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};
  struct Knobs { float t, p, mp; int32_t k; };
  for (Knobs kn : {Knobs{1.0f, 1.0f, 0.0f, -1}, Knobs{0.7f, 1.0f, 0.0f, 3}, Knobs{1.0f, 0.6f, 0.0f, -1}, Knobs{1.0f, 1.0f, 0.3f, -1}}) {
    const int64_t B = 4096, V = 8;
    const int rounds = 8;
    Buffer l(Device::kCpu, DType::kF32, {B, V}), t(Device::kCpu, DType::kF32, {B}), p(Device::kCpu, DType::kF32, {B});
    Buffer k(Device::kCpu, DType::kI32, {B}), m(Device::kCpu, DType::kF32, {B}), sd(Device::kCpu, DType::kI64, {B}), st(Device::kCpu, DType::kI64, {B});
    for (int64_t b = 0; b < B; ++b) {
      std::copy(lg.begin(), lg.end(), l.view().ptr<float>() + b * V);
      t.view().ptr<float>()[b] = kn.t;
      p.view().ptr<float>()[b] = kn.p;
      k.view().ptr<int32_t>()[b] = kn.k;
      m.view().ptr<float>()[b] = kn.mp;
      sd.view().ptr<int64_t>()[b] = 100 + b;
    }
    Buffer dl = to_gpu(l), dt = to_gpu(t), dp = to_gpu(p), dk = to_gpu(k), dm = to_gpu(m), dsd = to_gpu(sd);
    Buffer dout(Device::kCuda, DType::kI32, {B});
    std::vector<int64_t> counts(V, 0);
    for (int r = 0; r < rounds; ++r) {
      for (int64_t b = 0; b < B; ++b) st.view().ptr<int64_t>()[b] = r;
      Buffer dst = to_gpu(st);
      ASSERT_TRUE(sample({.logits = dl.view(), .temperature = dt.view(), .top_p = dp.view(), .top_k = dk.view(), .min_p = dm.view(),
                          .seed = dsd.view(), .step = dst.view(), .out = dout.view()}, gpu()).is_ok());
      Buffer got = to_cpu(dout);
      for (int64_t b = 0; b < B; ++b) ++counts[static_cast<size_t>(got.view().ptr<int32_t>()[b])];
    }
    // Expected: softmax(l / t), filtered as the CPU reference filters, renormalised.
    std::vector<double> pr(V);
    double z = 0;
    for (int64_t v = 0; v < V; ++v) z += (pr[static_cast<size_t>(v)] = std::exp((lg[static_cast<size_t>(v)] - 2.0) / kn.t));
    for (auto& x : pr) x /= z;
    std::vector<size_t> order(V);
    std::iota(order.begin(), order.end(), 0);
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return pr[a] > pr[b]; });
    size_t keep = kn.k > 0 ? static_cast<size_t>(kn.k) : V;
    double cum = 0;
    for (size_t i = 0; i < keep; ++i) {
      cum += pr[order[i]];
      if (cum >= kn.p) { keep = i + 1; break; }
    }
    while (keep > 1 && pr[order[keep - 1]] < kn.mp * pr[order[0]]) --keep;
    std::vector<double> expect(V, 0.0);
    double kept = 0;
    for (size_t i = 0; i < keep; ++i) kept += pr[order[i]];
    for (size_t i = 0; i < keep; ++i) expect[order[i]] = pr[order[i]] / kept;
    const double n = static_cast<double>(B) * rounds;
    double chi = 0;
    int dof = -1;
    for (int64_t v = 0; v < V; ++v) {
      if (expect[static_cast<size_t>(v)] == 0) {
        EXPECT_EQ(counts[static_cast<size_t>(v)], 0) << "filtered token " << v << " was drawn";
        continue;
      }
      const double e = expect[static_cast<size_t>(v)] * n;
      chi += (counts[static_cast<size_t>(v)] - e) * (counts[static_cast<size_t>(v)] - e) / e;
      ++dof;
    }
    if (dof > 0) {
      EXPECT_LT(chi, chi999[dof]) << "t=" << kn.t << " p=" << kn.p << " k=" << kn.k << " min_p=" << kn.mp;
    }
  }
}

TEST_F(CudaOps, LogitAdjustMatchesCpu) {
  std::mt19937 rng(17);
  const int64_t rows = 5, vocab = 1000;
  Buffer logits = random_buffer(rng, DType::kF32, {rows, vocab});
  // Distinct (row, id) pairs: penalties, a bias and a ban.
  std::vector<int32_t> r, id;
  std::vector<float> bias, rep, add;
  for (int32_t row = 0; row < rows; ++row)
    for (int32_t k = 0; k < 40; ++k) {
      r.push_back(row), id.push_back(static_cast<int32_t>((k * 37 + row * 11) % vocab));
      bias.push_back(k % 4 == 0 ? 2.5f : 0.0f), rep.push_back(k % 3 == 0 ? 1.0f : 1.3f);
      add.push_back(k == 5 ? -INFINITY : -0.1f * static_cast<float>(k % 7));
    }
  Buffer fbias(Device::kCpu, DType::kF32, {static_cast<int64_t>(bias.size())}), frep(Device::kCpu, DType::kF32, {static_cast<int64_t>(rep.size())}),
      fadd(Device::kCpu, DType::kF32, {static_cast<int64_t>(add.size())});
  fbias.copy_from_host(bias.data(), fbias.nbytes());
  frep.copy_from_host(rep.data(), frep.nbytes());
  fadd.copy_from_host(add.data(), fadd.nbytes());
  Buffer rows_h = ints(r), ids_h = ints(id);
  Buffer d_logits = to_gpu(logits), d_rows = to_gpu(rows_h), d_ids = to_gpu(ids_h), d_bias = to_gpu(fbias), d_rep = to_gpu(frep),
         d_add = to_gpu(fadd);
  OwnedStream cpu(Device::kCpu);
  ASSERT_TRUE(logit_adjust({.logits = logits.view(), .rows = rows_h.view(), .ids = ids_h.view(), .bias = fbias.view(), .rep = frep.view(), .add = fadd.view()}, cpu.get()).is_ok());
  ASSERT_TRUE(logit_adjust({.logits = d_logits.view(), .rows = d_rows.view(), .ids = d_ids.view(), .bias = d_bias.view(), .rep = d_rep.view(), .add = d_add.view()}, gpu()).is_ok());
  const Buffer back = to_cpu(d_logits);
  const float* a = logits.view().ptr<float>();
  const float* b = back.view().ptr<float>();
  for (int64_t i = 0; i < rows * vocab; ++i) {
    if (std::isinf(a[i])) ASSERT_EQ(a[i], b[i]) << i;  // a banned token
    else ASSERT_NEAR(a[i], b[i], 1e-6f * (1.0f + std::fabs(a[i]))) << i;  // (a fused multiply-add may round once less)
  }
}
