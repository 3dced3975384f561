// Every CPU op against an independent double-precision computation, over random shapes
// and dtypes.
#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/attention.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/small_batch_gemm.hpp"
#include "kernels/cpu/vector_exp.hpp"
#include "kernels/embedding.hpp"
#include "kernels/future_tokens.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"
#include "kernels/silu_mul.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;
using aerie::testing::random_buffer;
using aerie::testing::rel_error;
using aerie::testing::to_double;

namespace {
const Stream kCpu = Stream::cpu();
// fp32 results land near 1e-6; bf16/f16 outputs are rounded once at the end.
double tolerance(DType out) { return out == DType::kF32 ? 1e-5 : out == DType::kF16 ? 2e-3 : 1e-2; }
}  // namespace

class OpsByDType : public ::testing::TestWithParam<DType> {};
INSTANTIATE_TEST_SUITE_P(AllFloat, OpsByDType, ::testing::Values(DType::kF32, DType::kBF16, DType::kF16),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

TEST_P(OpsByDType, MatmulMatchesReference) {
  std::mt19937 rng(11);
  for (int trial = 0; trial < 6; ++trial) {
    const int64_t m = 1 + rng() % 9, k = 1 + rng() % 70, n = 1 + rng() % 40;
    Buffer x = random_buffer(rng, GetParam(), {m, k}), w = random_buffer(rng, GetParam(), {n, k});
    Buffer bias = random_buffer(rng, GetParam(), {n});
    Buffer y(Device::kCpu, GetParam(), {m, n});
    const bool with_bias = trial % 2;
    ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .bias = with_bias ? bias.view() : TensorView(), .y = y.view()}, kCpu).is_ok());
    auto xd = to_double(x.view()), wd = to_double(w.view()), bd = to_double(bias.view());
    std::vector<double> ref(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double s = with_bias ? bd[static_cast<size_t>(j)] : 0.0;
        for (int64_t c = 0; c < k; ++c) s += xd[static_cast<size_t>(i * k + c)] * wd[static_cast<size_t>(j * k + c)];
        ref[static_cast<size_t>(i * n + j)] = s;
      }
    EXPECT_LT(rel_error(to_double(y.view()), ref), tolerance(GetParam())) << m << "x" << k << "x" << n;
  }
}

// The CPU backend's vectorisable exp (SiLU, softmax) against libm, over the range that
// matters and past both clamps.
TEST(CpuVectorExp, WithinFourUlpOfLibmAndClampedToNormalFloats) {
  double worst = 0.0;
  for (float x = -87.0f; x <= 88.0f; x += 0.0137f) {
    const double ref = std::exp(static_cast<double>(x));
    worst = std::max(worst, std::abs(cpu::vector_exp(x) - ref) / ref);
  }
  EXPECT_LT(worst, 4 * 6e-8);
  EXPECT_TRUE(std::isfinite(cpu::vector_exp(1000.0f)));
  EXPECT_GT(cpu::vector_exp(1000.0f), 1e38f);
  EXPECT_GE(cpu::vector_exp(-1000.0f), 0.0f);
  EXPECT_LT(cpu::vector_exp(-1000.0f), 1e-37f);
  EXPECT_EQ(cpu::vector_exp(0.0f), 1.0f);
}

// f32 products go to oneDNN when the build has it; the blocked reference loop stays for
// tests and other dtypes. Both against double precision, at prefill-sized shapes too.
TEST(CpuMatmul, FastPathAndReferenceLoopBothMatchDoublePrecision) {
  std::mt19937 rng(21);
  const int64_t shapes[][3] = {{1, 576, 192}, {3, 70, 33}, {8, 576, 300}, {17, 129, 65}, {128, 576, 96}, {130, 1536, 40}};
  for (const auto& s : shapes) {
    const int64_t m = s[0], k = s[1], n = s[2];
    Buffer x = random_buffer(rng, DType::kF32, {m, k}), w = random_buffer(rng, DType::kF32, {n, k});
    Buffer bias = random_buffer(rng, DType::kF32, {n});
    auto xd = to_double(x.view()), wd = to_double(w.view()), bd = to_double(bias.view());
    std::vector<double> ref(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double acc = bd[static_cast<size_t>(j)];
        for (int64_t c = 0; c < k; ++c) acc += xd[static_cast<size_t>(i * k + c)] * wd[static_cast<size_t>(j * k + c)];
        ref[static_cast<size_t>(i * n + j)] = acc;
      }
    for (bool reference : {false, true}) {
      set_cpu_gemm_reference(reference);
      if (reference) {
        EXPECT_FALSE(cpu_gemm_uses_blas());
      }
      Buffer y(Device::kCpu, DType::kF32, {m, n});
      ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .bias = bias.view(), .y = y.view()}, kCpu).is_ok());
      EXPECT_LT(rel_error(to_double(y.view()), ref), 1e-5) << m << "x" << k << "x" << n << (reference ? " reference" : " fast path");
    }
    set_cpu_gemm_reference(false);
  }
}

// Decode and verify batches (up to 16 rows) go through the small-batch kernel, whose sums run
// in the same order for every batch size: a row's product is bit-identical alone or batched
// (as with the reference loop). Speculative verification relies on nothing less.
TEST(CpuMatmul, SmallBatchRowsEqualTheSameRowsAlone) {
  if (!cpu::small_batch_gemm_available() && cpu_gemm_uses_blas()) GTEST_SKIP() << "oneDNN takes small batches on this CPU";
  std::mt19937 rng(22);
  const int64_t k = 581, n = 203;  // k not a multiple of 16, n not of 4: the masked tails too
  Buffer x = random_buffer(rng, DType::kF32, {cpu::kSmallBatchMaxRows, k}), w = random_buffer(rng, DType::kF32, {n, k});
  Buffer batched(Device::kCpu, DType::kF32, {cpu::kSmallBatchMaxRows, n});
  ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .y = batched.view()}, kCpu).is_ok());
  for (int64_t i = 0; i < cpu::kSmallBatchMaxRows; ++i) {
    Buffer alone(Device::kCpu, DType::kF32, {1, n});
    ASSERT_TRUE(matmul({.x = x.view().slice_rows(i, i + 1), .w = w.view(), .y = alone.view()}, kCpu).is_ok());
    EXPECT_EQ(to_double(alone.view()), to_double(batched.view().slice_rows(i, i + 1))) << "row " << i;
  }
}

// The small-batch kernel's sums, written out in scalars (sixteen lane sums of fused
// multiply-adds, zeros past k, then the fixed tree): every instruction set the CPU has must
// give exactly these bits, so AVX2 and AVX-512 machines decode alike.
TEST(CpuMatmul, SmallBatchKernelSumsInTheDocumentedOrderOnEveryIsa) {
  std::mt19937 rng(23);
  // Every x-row count a tile takes (5: tiles of 4 and 1 rows).
  for (const int64_t m : {1, 2, 3, 5}) {
    const int64_t k = 595, n = 37;  // odd sizes: masked column tails, partial weight tiles
    Buffer x = random_buffer(rng, DType::kF32, {m, k}), w = random_buffer(rng, DType::kF32, {n, k});
    const float* xp = x.view().ptr<float>();
    const float* wp = w.view().ptr<float>();
    std::vector<float> want(static_cast<size_t>(m * n));
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        float lane[16] = {};
        for (int64_t c = 0; c < (k + 15) / 16 * 16; ++c) {
          const float a = c < k ? xp[i * k + c] : 0.0f, b = c < k ? wp[j * k + c] : 0.0f;
          lane[c % 16] = std::fma(a, b, lane[c % 16]);
        }
        for (int width = 8; width >= 1; width /= 2)
          for (int u = 0; u < width; ++u) lane[u] += lane[u + width];
        want[static_cast<size_t>(i * n + j)] = lane[0];
      }
    int ran = 0;
    for (auto isa : {cpu::SmallBatchIsa::kAvx2, cpu::SmallBatchIsa::kAvx512}) {
      if (!cpu::small_batch_gemm_supports(isa)) continue;
      ++ran;
      std::vector<float> got(static_cast<size_t>(m * n), -1.0f);
      cpu::small_batch_gemm_on(isa, m, n, k, xp, wp, got.data());
      for (size_t e = 0; e < got.size(); ++e)
        ASSERT_EQ(got[e], want[e]) << (isa == cpu::SmallBatchIsa::kAvx2 ? "AVX2" : "AVX-512") << " output " << e << ", " << m << " rows";
    }
    if (ran == 0) GTEST_SKIP() << "this CPU has neither AVX2 + FMA nor AVX-512";
  }
}

// bf16 weights with f32 activations (the CPU keeps a bf16 draft head so): up to 16 rows the
// small-batch kernel widens them in registers and gives exactly the bits of the f32 copy of
// the weight, on every instruction set; more rows reach oneDNN widened a block at a time and
// agree with double precision. Odd k and n: the column tail and partial weight tiles.
TEST(CpuMatmul, Bf16WeightsGiveTheProductsOfTheirF32Widening) {
  std::mt19937 rng(24);
  const int64_t k = 595, n = 4100;  // n over one widened block (2^18 / k rows)
  Buffer w16 = random_buffer(rng, DType::kBF16, {n, k});
  Buffer w32(Device::kCpu, DType::kF32, {n, k});
  convert_to_float(w16.view().data, DType::kBF16, n * k, w32.view().ptr<float>());
  for (int64_t m : {1, 4, 7, 16}) {
    Buffer x = random_buffer(rng, DType::kF32, {m, k});
    Buffer want(Device::kCpu, DType::kF32, {m, n}), got(Device::kCpu, DType::kF32, {m, n});
    ASSERT_TRUE(matmul({.x = x.view(), .w = w32.view(), .y = want.view()}, kCpu).is_ok());
    ASSERT_TRUE(matmul({.x = x.view(), .w = w16.view(), .y = got.view()}, kCpu).is_ok());
    if (cpu::small_batch_gemm_available()) {
      EXPECT_EQ(to_double(got.view()), to_double(want.view())) << m << " rows";
    } else {
      EXPECT_LT(rel_error(to_double(got.view()), to_double(want.view())), 1e-5) << m << " rows";
    }
    for (auto isa : {cpu::SmallBatchIsa::kAvx2, cpu::SmallBatchIsa::kAvx512}) {
      if (!cpu::small_batch_gemm_supports(isa)) continue;
      std::vector<float> on_isa(static_cast<size_t>(m * n), -1.0f);
      cpu::small_batch_gemm_on(isa, m, n, k, x.view().ptr<float>(), static_cast<const uint16_t*>(w16.view().data), on_isa.data());
      std::vector<double> as_double(on_isa.begin(), on_isa.end());
      EXPECT_EQ(as_double, to_double(want.view())) << m << " rows, " << (isa == cpu::SmallBatchIsa::kAvx2 ? "AVX2" : "AVX-512");
    }
  }
  const int64_t m = 40;  // a prefill's rows
  Buffer x = random_buffer(rng, DType::kF32, {m, k});
  auto xd = to_double(x.view()), wd = to_double(w32.view());
  std::vector<double> ref(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      double acc = 0;
      for (int64_t c = 0; c < k; ++c) acc += xd[static_cast<size_t>(i * k + c)] * wd[static_cast<size_t>(j * k + c)];
      ref[static_cast<size_t>(i * n + j)] = acc;
    }
  Buffer y(Device::kCpu, DType::kF32, {m, n});
  ASSERT_TRUE(matmul({.x = x.view(), .w = w16.view(), .y = y.view()}, kCpu).is_ok());
  EXPECT_LT(rel_error(to_double(y.view()), ref), 1e-5);
}

TEST_P(OpsByDType, RmsNormWithAndWithoutResidual) {
  std::mt19937 rng(12);
  const int64_t rows = 5, hidden = 48;
  Buffer x = random_buffer(rng, GetParam(), {rows, hidden}), w = random_buffer(rng, GetParam(), {hidden});
  Buffer res = random_buffer(rng, GetParam(), {rows, hidden});
  auto xd = to_double(x.view()), wd = to_double(w.view()), rd = to_double(res.view());
  for (bool with_residual : {false, true}) {
    Buffer y(Device::kCpu, GetParam(), {rows, hidden});
    ASSERT_TRUE(rms_norm({.x = x.view(), .weight = w.view(), .residual = with_residual ? res.view() : TensorView(),
                          .y = y.view(), .eps = 1e-5f}, kCpu).is_ok());
    std::vector<double> ref(static_cast<size_t>(rows * hidden)), new_res(ref.size());
    for (int64_t r = 0; r < rows; ++r) {
      double ss = 0;
      for (int64_t i = 0; i < hidden; ++i) {
        const size_t at = static_cast<size_t>(r * hidden + i);
        new_res[at] = xd[at] + (with_residual ? rd[at] : 0.0);
        ss += new_res[at] * new_res[at];
      }
      const double inv = 1.0 / std::sqrt(ss / hidden + 1e-5);
      for (int64_t i = 0; i < hidden; ++i) {
        const size_t at = static_cast<size_t>(r * hidden + i);
        ref[at] = new_res[at] * inv * wd[static_cast<size_t>(i)];
      }
    }
    EXPECT_LT(rel_error(to_double(y.view()), ref), tolerance(GetParam()));
    if (with_residual) {
      EXPECT_LT(rel_error(to_double(res.view()), new_res), tolerance(GetParam()));
    }
  }
}

TEST_P(OpsByDType, RopeRotatesHalvesByPosition) {
  std::mt19937 rng(13);
  const int64_t tokens = 6, qh = 4, kh = 2, dim = 16;
  Buffer q = random_buffer(rng, GetParam(), {tokens, qh, dim}), k = random_buffer(rng, GetParam(), {tokens, kh, dim});
  auto q0 = to_double(q.view()), k0 = to_double(k.view());
  std::vector<int32_t> pos = {0, 1, 7, 100, 2047, 5};
  std::vector<float> inv(dim / 2);
  for (int64_t i = 0; i < dim / 2; ++i) inv[static_cast<size_t>(i)] = 1.0f / std::pow(10000.0f, 2.0f * i / dim);
  Buffer pos_b(Device::kCpu, DType::kI32, {tokens}), inv_b(Device::kCpu, DType::kF32, {dim / 2});
  pos_b.copy_from_host(pos.data(), pos_b.nbytes());
  inv_b.copy_from_host(inv.data(), inv_b.nbytes());
  ASSERT_TRUE(rope({.q = q.view(), .k = k.view(), .positions = pos_b.view(), .inv_freq = inv_b.view()}, kCpu).is_ok());
  auto expect = [&](const std::vector<double>& x0, int64_t heads, const TensorView& got) {
    std::vector<double> ref(x0.size());
    for (int64_t t = 0; t < tokens; ++t)
      for (int64_t h = 0; h < heads; ++h)
        for (int64_t i = 0; i < dim / 2; ++i) {
          const double a = static_cast<double>(pos[static_cast<size_t>(t)]) * inv[static_cast<size_t>(i)];
          const size_t b = static_cast<size_t>((t * heads + h) * dim);
          const double x1 = x0[b + i], x2 = x0[b + i + dim / 2];
          ref[b + i] = x1 * std::cos(a) - x2 * std::sin(a);
          ref[b + i + dim / 2] = x2 * std::cos(a) + x1 * std::sin(a);
        }
    EXPECT_LT(rel_error(to_double(got), ref), tolerance(GetParam()) * 2);
  };
  expect(q0, qh, q.view());
  expect(k0, kh, k.view());
}

// silu(g) * u in f32 as the AVX-512 and AVX2 row loops compute it: vector_exp(-g)'s steps with
// the multiply-adds fused (what the compiler makes of the scalar loop there), 1 + e^-g fused
// into the last multiply. Bit for bit, for gates whose e^-g is a normal float, over a row of
// whole vectors (a row's tail goes through the compiler's loop).
TEST(CpuSiluMul, VectorRowsGiveTheFusedArithmeticOfTheScalarLoop) {
  using cpu::CpuIsa;
  if (!cpu::cpu_has(CpuIsa::kAvx2)) GTEST_SKIP() << "neither AVX-512 nor AVX2 + FMA on this CPU";
  std::mt19937 rng(31);
  std::uniform_real_distribution<float> gate(-80.0f, 80.0f), up(-3.0f, 3.0f);
  const int64_t inter = 48;
  std::vector<float> gu(static_cast<size_t>(2 * inter));
  for (int64_t i = 0; i < inter; ++i) {
    gu[static_cast<size_t>(2 * i)] = i % 4 == 0 ? gate(rng) : gate(rng) / 16.0f;  // both wide and typical gates
    gu[static_cast<size_t>(2 * i + 1)] = up(rng);
  }
  Buffer in(Device::kCpu, DType::kF32, {1, 2 * inter}), out(Device::kCpu, DType::kF32, {1, inter});
  in.copy_from_host(gu.data(), in.nbytes());
  for (CpuIsa isa : {CpuIsa::kAvx512, CpuIsa::kAvx2}) {
    if (!cpu::cpu_has(isa)) continue;
    const aerie::testing::ScopedCpuIsaCap cap(isa);
    ASSERT_TRUE(silu_mul({.gate_up = in.view(), .out = out.view()}, kCpu).is_ok());
    const float* got = out.view().ptr<float>();
    for (int64_t i = 0; i < inter; ++i) {
      const float g = gu[static_cast<size_t>(2 * i)], u = gu[static_cast<size_t>(2 * i + 1)], x = -g;
      const float n = std::floor(std::fma(x, 1.44269504088896341f, 0.5f));
      float r = std::fma(-n, 0.693359375f, x);
      r = std::fma(n, 2.12194440e-4f, r);
      float p = std::fma(1.9875691500e-4f, r, 1.3981999507e-3f);
      p = std::fma(p, r, 8.3334519073e-3f);
      p = std::fma(p, r, 4.1665795894e-2f);
      p = std::fma(p, r, 1.6666665459e-1f);
      p = std::fma(p, r, 0.5f);
      const float er = std::fma(p * r, r, r) + 1.0f;
      const float scale = std::bit_cast<float>((static_cast<int32_t>(n) + 127) << 23);
      EXPECT_EQ(got[i], g / std::fma(scale, er, 1.0f) * u) << (isa == CpuIsa::kAvx2 ? "AVX2" : "AVX-512") << ", element " << i << ", gate " << g;
    }
  }
}

TEST_P(OpsByDType, SiluMulAndEmbedding) {
  std::mt19937 rng(14);
  Buffer gu = random_buffer(rng, GetParam(), {3, 20}), out(Device::kCpu, GetParam(), {3, 10});
  ASSERT_TRUE(silu_mul({.gate_up = gu.view(), .out = out.view()}, kCpu).is_ok());
  auto g = to_double(gu.view());
  std::vector<double> ref(30);
  for (int r = 0; r < 3; ++r)
    for (int i = 0; i < 10; ++i) {
      const double a = g[static_cast<size_t>(r * 20 + 2 * i)], u = g[static_cast<size_t>(r * 20 + 2 * i + 1)];  // interleaved pairs
      ref[static_cast<size_t>(r * 10 + i)] = a / (1 + std::exp(-a)) * u;
    }
  EXPECT_LT(rel_error(to_double(out.view()), ref), tolerance(GetParam()));

  Buffer table = random_buffer(rng, GetParam(), {7, 5}), emb(Device::kCpu, DType::kF32, {3, 5});
  std::vector<int32_t> ids = {6, 0, 3};
  Buffer ids_b(Device::kCpu, DType::kI32, {3});
  ids_b.copy_from_host(ids.data(), ids_b.nbytes());
  ASSERT_TRUE(embedding({.ids = ids_b.view(), .table = table.view(), .out = emb.view()}, kCpu).is_ok());
  auto t = to_double(table.view()), e = to_double(emb.view());
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 5; ++c) EXPECT_EQ(e[static_cast<size_t>(r * 5 + c)], t[static_cast<size_t>(ids[static_cast<size_t>(r)] * 5 + c)]);
}

TEST_P(OpsByDType, RmsNormPairIsTwoNormsSideBySide) {
  const DType t = GetParam();
  std::mt19937 rng(17);
  const int64_t rows = 3, hidden = 40;
  Buffer a = random_buffer(rng, t, {rows, hidden}), b = random_buffer(rng, t, {rows, hidden});
  Buffer wa = random_buffer(rng, t, {hidden}), wb = random_buffer(rng, t, {hidden});
  Buffer y(Device::kCpu, t, {rows, 2 * hidden}), copy(Device::kCpu, t, {rows, hidden}), ya(Device::kCpu, t, {rows, hidden}),
      yb(Device::kCpu, t, {rows, hidden});
  ASSERT_TRUE(rms_norm_pair({.a = a.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = y.view(), .b_copy = copy.view(),
                             .eps = 1e-5f},
                            Stream::cpu()).is_ok());
  ASSERT_TRUE(rms_norm({.x = a.view(), .weight = wa.view(), .y = ya.view(), .eps = 1e-5f}, Stream::cpu()).is_ok());
  ASSERT_TRUE(rms_norm({.x = b.view(), .weight = wb.view(), .y = yb.view(), .eps = 1e-5f}, Stream::cpu()).is_ok());
  const size_t es = dtype_size(t), row = static_cast<size_t>(hidden) * es;
  for (int64_t r = 0; r < rows; ++r) {
    EXPECT_EQ(std::memcmp(static_cast<char*>(y.data()) + 2 * r * row, static_cast<char*>(ya.data()) + r * row, row), 0) << "row " << r;
    EXPECT_EQ(std::memcmp(static_cast<char*>(y.data()) + (2 * r + 1) * row, static_cast<char*>(yb.data()) + r * row, row), 0) << "row " << r;
  }
  EXPECT_EQ(std::memcmp(copy.data(), b.data(), static_cast<size_t>(b.nbytes())), 0);
  Buffer narrow(Device::kCpu, t, {rows, hidden});
  EXPECT_THROW((void)rms_norm_pair({.a = a.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = narrow.view()}, Stream::cpu()),
               Error);
}

// a_ids: the table's rows gathered by the norm itself equal embedding() then the pair; an id
// outside the table is an error.
TEST_P(OpsByDType, RmsNormPairWithIdsNormalisesTheTablesRows) {
  const DType t = GetParam();
  std::mt19937 rng(18);
  const int64_t rows = 3, hidden = 40, table_rows = 9;
  Buffer table = random_buffer(rng, t, {table_rows, hidden}), b = random_buffer(rng, t, {rows, hidden});
  Buffer wa = random_buffer(rng, t, {hidden}), wb = random_buffer(rng, t, {hidden});
  const std::vector<int32_t> id_list = {4, 8, 4};
  Buffer ids(Device::kCpu, DType::kI32, {rows});
  std::memcpy(ids.data(), id_list.data(), id_list.size() * 4);
  Buffer gathered(Device::kCpu, t, {rows, hidden}), y(Device::kCpu, t, {rows, 2 * hidden}), want(Device::kCpu, t, {rows, 2 * hidden});
  ASSERT_TRUE(embedding({.ids = ids.view(), .table = table.view(), .out = gathered.view()}, Stream::cpu()).is_ok());
  ASSERT_TRUE(rms_norm_pair({.a = gathered.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = want.view(), .eps = 1e-5f},
                            Stream::cpu()).is_ok());
  ASSERT_TRUE(rms_norm_pair({.a = table.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = y.view(),
                             .a_ids = ids.view(), .eps = 1e-5f},
                            Stream::cpu()).is_ok());
  EXPECT_EQ(std::memcmp(y.data(), want.data(), static_cast<size_t>(y.nbytes())), 0);
  ids.view().ptr<int32_t>()[1] = static_cast<int32_t>(table_rows);
  const Status s = rms_norm_pair({.a = table.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = y.view(),
                                  .a_ids = ids.view(), .eps = 1e-5f},
                                 Stream::cpu());
  EXPECT_FALSE(s.is_ok());
  Buffer short_ids(Device::kCpu, DType::kI32, {rows - 1});
  EXPECT_THROW((void)rms_norm_pair({.a = table.view(), .weight_a = wa.view(), .b = b.view(), .weight_b = wb.view(), .y = y.view(),
                                    .a_ids = short_ids.view()},
                                   Stream::cpu()),
               Error);
}

TEST(Ops, EmbeddingRejectsIdsOutsideTheVocabulary) {
  Buffer table(Device::kCpu, DType::kF32, {4, 2}), out(Device::kCpu, DType::kF32, {1, 2});
  table.zero();
  int32_t bad = 4;
  Buffer ids(Device::kCpu, DType::kI32, {1});
  ids.copy_from_host(&bad, 4);
  Status s = embedding({.ids = ids.view(), .table = table.view(), .out = out.view()}, Stream::cpu());
  EXPECT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("outside the vocabulary"), std::string::npos);
}

// Overlap scheduling's future tokens: a batch records its sampled tokens at its slots, the
// next batch's ids that name a slot (-(slot + 1)) become those tokens; plain ids stay.
TEST(Ops, FutureTokensAreRecordedAtTheirSlotsAndResolvedFromThem) {
  const Stream cpu = Stream::cpu();
  Buffer table(Device::kCpu, DType::kI32, {8});
  table.zero();
  auto ints = [](std::vector<int32_t> v) {
    Buffer b(Device::kCpu, DType::kI32, {static_cast<int64_t>(v.size())});
    b.copy_from_host(v.data(), b.nbytes());
    return b;
  };
  Buffer tokens = ints({11, 22, 33}), slots = ints({5, -1, 0});  // the middle row keeps nothing
  ASSERT_TRUE(record_future_tokens({.tokens = tokens.view(), .slots = slots.view(), .table = table.view()}, cpu).is_ok());
  const int32_t* t = table.view().ptr<int32_t>();
  EXPECT_EQ(t[5], 11);
  EXPECT_EQ(t[0], 33);
  EXPECT_EQ(t[1] + t[2] + t[3] + t[4] + t[6] + t[7], 0);
  Buffer ids = ints({7, -6, 9, -1});  // slot 5, a token, slot 0
  ASSERT_TRUE(resolve_future_ids({.ids = ids.view(), .table = table.view()}, cpu).is_ok());
  const int32_t* r = ids.view().ptr<int32_t>();
  EXPECT_EQ(std::vector<int32_t>(r, r + 4), (std::vector<int32_t>{7, 11, 9, 33}));
  // A slot outside the table is an error, not a read past it.
  Buffer far = ints({-9});
  EXPECT_FALSE(resolve_future_ids({.ids = far.view(), .table = table.view()}, cpu).is_ok());
  Buffer far_slot = ints({8});
  Buffer one = ints({1});
  EXPECT_FALSE(record_future_tokens({.tokens = one.view(), .slots = far_slot.view(), .table = table.view()}, cpu).is_ok());
  Buffer two_slots = ints({1, 2});
  EXPECT_THROW((void)record_future_tokens({.tokens = one.view(), .slots = two_slots.view(), .table = table.view()}, cpu), Error);
}

TEST(CpuMatmul, AnFp8CopyServesUpTo16RowsAsItsCodesTimesTheRowScale) {
  std::mt19937 rng(5);
  const int64_t k = 40, n = 7;
  // The weight as loaded is all zeros, so which of the two a product read shows in y.
  Buffer w(Device::kCpu, DType::kF32, {n, k}), w8 = random_buffer(rng, DType::kF8E4M3, {n, k}, 100.0f);
  w.zero();
  Buffer bias = random_buffer(rng, DType::kF32, {n}), scale(Device::kCpu, DType::kF32, {n});
  for (int64_t j = 0; j < n; ++j) scale.view().ptr<float>()[j] = 0.001f * static_cast<float>(j + 1);
  const auto* codes = static_cast<const uint8_t*>(w8.data());
  for (int64_t m : {int64_t{1}, int64_t{3}, kFp8MaxRows, kFp8MaxRows + 1}) {
    Buffer x = random_buffer(rng, DType::kF32, {m, k}), y(Device::kCpu, DType::kF32, {m, n});
    ASSERT_TRUE(matmul({.x = x.view(), .w = w.view(), .bias = bias.view(), .w_fp8 = w8.view(), .w_scale = scale.view(), .y = y.view()},
                       Stream::cpu()).is_ok());
    for (int64_t i = 0; i < m; ++i)
      for (int64_t j = 0; j < n; ++j) {
        double sum = 0;
        for (int64_t c = 0; c < k; ++c) sum += static_cast<double>(x.view().ptr<float>()[i * k + c]) * f8e4m3_to_float(codes[j * k + c]);
        const double expected = (m <= kFp8MaxRows ? sum * scale.view().ptr<float>()[j] : 0.0) + bias.view().ptr<float>()[j];
        EXPECT_NEAR(y.view().ptr<float>()[i * n + j], expected, 1e-4 * (1 + std::fabs(expected))) << "m " << m << " " << i << "," << j;
      }
  }
}

TEST(Ops, AnFp8CopyComesWithItsRowScalesAndTheWeightsShape) {
  Buffer x(Device::kCpu, DType::kF32, {2, 16}), y(Device::kCpu, DType::kF32, {2, 4});
  Buffer w8(Device::kCpu, DType::kF8E4M3, {4, 16}), w32(Device::kCpu, DType::kF32, {4, 16});
  Buffer scale(Device::kCpu, DType::kF32, {4}), short_scale(Device::kCpu, DType::kF32, {3});
  w8.zero();
  w32.zero();
  scale.zero();
  auto message = [&](const MatmulParams& p) {
    try {
      (void)matmul(p, Stream::cpu());
    } catch (const Error& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  EXPECT_NE(message({.x = x.view(), .w = w32.view(), .w_fp8 = w8.view(), .y = y.view()}).find("come together"), std::string::npos);
  EXPECT_NE(message({.x = x.view(), .w = w32.view(), .w_scale = scale.view(), .y = y.view()}).find("come together"), std::string::npos);
  EXPECT_NE(message({.x = x.view(), .w = w32.view(), .w_fp8 = w8.view(), .w_scale = short_scale.view(), .y = y.view()}).find("w_scale"),
            std::string::npos);
  EXPECT_NE(message({.x = x.view(), .w = w32.view(), .w_fp8 = w32.view(), .w_scale = scale.view(), .y = y.view()}).find("w_fp8"),
            std::string::npos);
  EXPECT_EQ(message({.x = x.view(), .w = w32.view(), .w_fp8 = w8.view(), .w_scale = scale.view(), .y = y.view()}), "accepted");
  // fp8 is a copy's format only: as the weight or the activations it is refused.
  Buffer x8(Device::kCpu, DType::kF8E4M3, {2, 16});
  EXPECT_NE(message({.x = x8.view(), .w = w32.view(), .y = y.view()}), "accepted");
  EXPECT_NE(message({.x = x.view(), .w = w8.view(), .y = y.view()}), "accepted");
}

TEST(Ops, ValidateNamesTheWrongField) {
  Buffer x(Device::kCpu, DType::kF32, {2, 3}), w(Device::kCpu, DType::kF32, {4, 5}), y(Device::kCpu, DType::kF32, {2, 4});
  try {
    (void)matmul({.x = x.view(), .w = w.view(), .y = y.view()}, Stream::cpu());
    FAIL() << "mismatched k accepted";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("disagree on k"), std::string::npos) << e.what();
  }
  EXPECT_THROW((void)matmul({.x = x.view(), .w = w.view(), .y = {}}, Stream::cpu()), Error);
}
