// Sampling: greedy, determinism, and distribution tests (chi-square, fixed seeds) for
// temperature, top-k, top-p and min-p.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/cpu/cpu_isa.hpp"
#include "kernels/cpu/row_filter.hpp"
#include "kernels/sampling.hpp"
#include "tests/test_util.hpp"

using namespace aerie;
using namespace aerie::kernels;

namespace {

struct Knobs {
  float temperature = 1.0f, top_p = 1.0f, min_p = 0.0f;
  int32_t top_k = -1;
};

// Draws `n` samples from one row of logits, one per (seed, step) pair.
std::vector<int64_t> histogram(const std::vector<float>& logits, Knobs k, int n) {
  const int64_t vocab = static_cast<int64_t>(logits.size());
  std::vector<int64_t> counts(static_cast<size_t>(vocab), 0);
  const int batch = 250;  // many rows per call, like a real batch
  Buffer lg(Device::kCpu, DType::kF32, {batch, vocab}), t(Device::kCpu, DType::kF32, {batch}), p(Device::kCpu, DType::kF32, {batch});
  Buffer tk(Device::kCpu, DType::kI32, {batch}), mp(Device::kCpu, DType::kF32, {batch}), sd(Device::kCpu, DType::kI64, {batch});
  Buffer st(Device::kCpu, DType::kI64, {batch}), out(Device::kCpu, DType::kI32, {batch});
  for (int b = 0; b < batch; ++b) {
    std::copy(logits.begin(), logits.end(), lg.view().ptr<float>() + b * vocab);
    t.view().ptr<float>()[b] = k.temperature;
    p.view().ptr<float>()[b] = k.top_p;
    tk.view().ptr<int32_t>()[b] = k.top_k;
    mp.view().ptr<float>()[b] = k.min_p;
  }
  for (int done = 0; done < n; done += batch) {
    for (int b = 0; b < batch; ++b) {
      sd.view().ptr<int64_t>()[b] = 1000 + b;        // a request's seed
      st.view().ptr<int64_t>()[b] = done / batch;    // its step
    }
    EXPECT_TRUE(sample({.logits = lg.view(), .temperature = t.view(), .top_p = p.view(), .top_k = tk.view(), .min_p = mp.view(),
                        .seed = sd.view(), .step = st.view(), .out = out.view()}, Stream::cpu()).is_ok());
    for (int b = 0; b < batch; ++b) ++counts[static_cast<size_t>(out.view().ptr<int32_t>()[b])];
  }
  return counts;
}

std::vector<double> softmax(const std::vector<float>& logits, float temperature) {
  std::vector<double> p(logits.size());
  double mx = *std::max_element(logits.begin(), logits.end()), s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += (p[i] = std::exp((logits[i] - mx) / temperature));
  for (auto& x : p) x /= s;
  return p;
}

// Pearson chi-square of counts against expected probabilities (zero-probability tokens
// must not appear at all).
double chi_square(const std::vector<int64_t>& counts, const std::vector<double>& probs, int n, int* dof) {
  double chi = 0;
  *dof = -1;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (probs[i] == 0) {
      EXPECT_EQ(counts[i], 0) << "token " << i << " must never be drawn";
      continue;
    }
    const double e = probs[i] * n;
    chi += (counts[i] - e) * (counts[i] - e) / e;
    ++*dof;
  }
  return chi;
}

std::vector<double> keep_and_renormalise(std::vector<double> p, const std::vector<bool>& keep) {
  double s = 0;
  for (size_t i = 0; i < p.size(); ++i) s += keep[i] ? p[i] : 0.0;
  for (size_t i = 0; i < p.size(); ++i) p[i] = keep[i] ? p[i] / s : 0.0;
  return p;
}

const std::vector<float> kLogits = {2.0f, 1.0f, 0.5f, 0.0f, -0.5f, -1.0f, 1.5f, 0.2f};
// 99.9% quantiles of chi-square for 1..7 degrees of freedom.
const double kChi999[] = {0, 10.83, 13.82, 16.27, 18.47, 20.52, 22.46, 24.32};

}  // namespace

TEST(Sampling, GreedyTakesTheFirstMaximum) {
  auto c = histogram({0.1f, 3.0f, 3.0f, -1.0f}, {.temperature = 0.0f}, 250);
  EXPECT_EQ(c[1], 250);
}

// The vector argmax against the scalar loop it replaces (`if (row[v] > row[best]) best = v`), on
// every instruction set the CPU has: rows of every length around the vector widths, the maximum
// at the first, last and tail positions, ties, signed zeros, infinities and NaNs anywhere
// (index 0 included: nothing compares greater, so it wins there).
TEST(Sampling, VectorArgmaxIsTheScalarLoopsFirstMaximum) {
  auto scalar = [](const std::vector<float>& r) {
    int32_t best = 0;
    for (size_t v = 1; v < r.size(); ++v)
      if (r[v] > r[static_cast<size_t>(best)]) best = static_cast<int32_t>(v);
    return best;
  };
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::mt19937 rng(7);
  std::uniform_int_distribution<int> small(-3, 3), pick(0, 9);
  std::vector<std::vector<float>> rows;
  for (const size_t n : {1, 2, 7, 8, 9, 15, 16, 17, 31, 33, 100, 49152, 49155})
    for (int trial = 0; trial < 12; ++trial) {
      std::vector<float> r(n);
      for (auto& x : r) {  // few distinct values: ties everywhere
        const int c = pick(rng);
        x = c == 0 ? nan : c == 1 ? -inf : c == 2 ? -0.0f : c == 3 ? 0.0f : static_cast<float>(small(rng));
      }
      if (trial == 1) r.assign(n, nan);
      if (trial == 2) r.assign(n, -inf);
      if (trial == 3) r.back() = inf;
      if (trial == 4) r.front() = inf;
      if (trial == 5) r[n / 2] = 1e30f;
      if (trial == 6) r.front() = nan;
      if (trial == 7) r.assign(n, 0.0f), r[n - 1] = -0.0f;
      rows.push_back(std::move(r));
    }
  for (auto isa : {kernels::cpu::CpuIsa::kAvx512, kernels::cpu::CpuIsa::kAvx2, kernels::cpu::CpuIsa::kNone}) {
    if (!kernels::cpu::cpu_has(isa)) continue;
    aerie::testing::ScopedCpuIsaCap cap(isa);
    for (const auto& r : rows)
      ASSERT_EQ(kernels::cpu::row_argmax(r.data(), static_cast<int64_t>(r.size())), scalar(r))
          << r.size() << " values, isa " << static_cast<int>(isa);
  }
}

TEST(Sampling, SameSeedAndStepGiveTheSameToken) {
  EXPECT_EQ(philox_uniform(42, 7), philox_uniform(42, 7));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(42, 8));
  EXPECT_NE(philox_uniform(42, 7), philox_uniform(43, 7));
  auto a = histogram(kLogits, {}, 500), b = histogram(kLogits, {}, 500);
  EXPECT_EQ(a, b);
}

TEST(Sampling, PhiloxUniformIsUniform) {
  std::vector<int64_t> bins(10, 0);
  const int n = 100000;
  for (int i = 0; i < n; ++i) {
    const float u = philox_uniform(5, static_cast<uint64_t>(i));
    ASSERT_GE(u, 0.0f);
    ASSERT_LT(u, 1.0f);
    ++bins[static_cast<size_t>(u * 10)];
  }
  int dof = 0;
  EXPECT_LT(chi_square(bins, std::vector<double>(10, 0.1), n, &dof), 27.88);  // 99.9%, 9 dof
}

TEST(Sampling, TemperatureFollowsSoftmax) {
  for (float temp : {1.0f, 0.7f, 2.0f}) {
    const int n = 40000;
    auto c = histogram(kLogits, {.temperature = temp}, n);
    int dof = 0;
    const double chi = chi_square(c, softmax(kLogits, temp), n, &dof);
    EXPECT_LT(chi, kChi999[dof]) << "temperature " << temp;
  }
}

TEST(Sampling, TopKKeepsTheKMostLikely) {
  const int n = 30000;
  auto c = histogram(kLogits, {.top_k = 3}, n);
  std::vector<bool> keep = {true, false, false, false, false, false, true, false};
  keep[1] = true;  // logits 2.0, 1.5, 1.0
  int dof = 0;
  const double chi = chi_square(c, keep_and_renormalise(softmax(kLogits, 1.0f), keep), n, &dof);
  EXPECT_LT(chi, kChi999[dof]);
}

TEST(Sampling, TopPKeepsTheSmallestPrefixReachingP) {
  const auto p = softmax(kLogits, 1.0f);  // sorted: 0 (.33), 6 (.20), 1 (.12), 2 (.07), ...
  const float top_p = static_cast<float>(p[0] + p[6] + 0.01);
  const int n = 30000;
  auto c = histogram(kLogits, {.top_p = top_p}, n);
  std::vector<bool> keep(8, false);
  keep[0] = keep[6] = keep[1] = true;  // the first two fall short of top_p; the third crosses it
  int dof = 0;
  const double chi = chi_square(c, keep_and_renormalise(p, keep), n, &dof);
  EXPECT_LT(chi, kChi999[dof]);
}

TEST(Sampling, MinPDropsUnlikelyTokens) {
  const auto p = softmax(kLogits, 1.0f);
  const int n = 30000;
  auto c = histogram(kLogits, {.min_p = 0.3f}, n);
  std::vector<bool> keep(8);
  for (size_t i = 0; i < 8; ++i) keep[i] = p[i] >= 0.3 * p[0];
  int dof = 0;
  const double chi = chi_square(c, keep_and_renormalise(p, keep), n, &dof);
  EXPECT_LT(chi, kChi999[dof]);
}

TEST(Sampling, RejectsBadKnobs) {
  std::vector<float> lg = {0.0f, 1.0f};
  Buffer l(Device::kCpu, DType::kF32, {1, 2}), t(Device::kCpu, DType::kF32, {1}), p(Device::kCpu, DType::kF32, {1});
  Buffer k(Device::kCpu, DType::kI32, {1}), m(Device::kCpu, DType::kF32, {1}), s(Device::kCpu, DType::kI64, {1});
  Buffer st(Device::kCpu, DType::kI64, {1}), o(Device::kCpu, DType::kI32, {1});
  l.copy_from_host(lg.data(), 8);
  k.zero(); m.zero(); s.zero(); st.zero();
  auto run = [&](float temp, float top_p) {
    t.view().ptr<float>()[0] = temp;
    p.view().ptr<float>()[0] = top_p;
    return sample({.logits = l.view(), .temperature = t.view(), .top_p = p.view(), .top_k = k.view(), .min_p = m.view(),
                   .seed = s.view(), .step = st.view(), .out = o.view()}, Stream::cpu());
  };
  EXPECT_TRUE(run(1.0f, 1.0f).is_ok());
  EXPECT_FALSE(run(-1.0f, 1.0f).is_ok());
  EXPECT_FALSE(run(std::nanf(""), 1.0f).is_ok());
  EXPECT_FALSE(run(1.0f, 0.0f).is_ok());
  EXPECT_FALSE(run(1.0f, 1.5f).is_ok());
}

// A draft head's reduced vocabulary: the chosen id goes through the map (greedy and sampled
// rows alike), and the optional second output gets the same ids.
TEST(Sampling, IdMapAndSecondOutput) {
  const int64_t B = 3, V = 4;
  const std::vector<float> lg = {0.0f, 5.0f, 1.0f, 2.0f,   // greedy: id 1
                                 3.0f, 0.0f, 0.0f, 9.0f,   // greedy: id 3
                                 0.0f, 0.0f, 40.0f, 0.0f}; // T = 1, all but certain: id 2
  Buffer l(Device::kCpu, DType::kF32, {B, V}), t(Device::kCpu, DType::kF32, {B}), p(Device::kCpu, DType::kF32, {B});
  Buffer k(Device::kCpu, DType::kI32, {B}), m(Device::kCpu, DType::kF32, {B}), sd(Device::kCpu, DType::kI64, {B});
  Buffer st(Device::kCpu, DType::kI64, {B}), out(Device::kCpu, DType::kI32, {B}), copy(Device::kCpu, DType::kI32, {B});
  Buffer map(Device::kCpu, DType::kI32, {V, 1});
  l.copy_from_host(lg.data(), l.nbytes());
  k.zero(); m.zero(); sd.zero(); st.zero();
  const std::vector<float> temps = {0.0f, 0.0f, 1.0f}, ones = {1.0f, 1.0f, 1.0f};
  t.copy_from_host(temps.data(), t.nbytes());
  p.copy_from_host(ones.data(), p.nbytes());
  const std::vector<int32_t> ids = {100, 205, 317, 4242};  // draft id -> target id
  map.copy_from_host(ids.data(), map.nbytes());
  ASSERT_TRUE(sample({.logits = l.view(), .temperature = t.view(), .top_p = p.view(), .top_k = k.view(), .min_p = m.view(),
                      .seed = sd.view(), .step = st.view(), .out = out.view(), .id_map = map.view(), .out_copy = copy.view()},
                     Stream::cpu()).is_ok());
  EXPECT_EQ(std::vector<int32_t>(out.view().ptr<int32_t>(), out.view().ptr<int32_t>() + B), (std::vector<int32_t>{205, 4242, 317}));
  EXPECT_EQ(std::vector<int32_t>(copy.view().ptr<int32_t>(), copy.view().ptr<int32_t>() + B), (std::vector<int32_t>{205, 4242, 317}));
  // A map that does not cover the logits' ids is refused.
  Buffer short_map(Device::kCpu, DType::kI32, {V - 1});
  EXPECT_ANY_THROW((void)sample({.logits = l.view(), .temperature = t.view(), .top_p = p.view(), .top_k = k.view(), .min_p = m.view(),
                                 .seed = sd.view(), .step = st.view(), .out = out.view(), .id_map = short_map.view()},
                                Stream::cpu()));
}

TEST(LogSoftmax, RowsExponentiateToOne) {
  std::vector<float> lg = {1.0f, 2.0f, 3.0f, -4.0f, 0.0f, 4.0f};
  Buffer l(Device::kCpu, DType::kF32, {2, 3}), o(Device::kCpu, DType::kF32, {2, 3});
  l.copy_from_host(lg.data(), l.nbytes());
  ASSERT_TRUE(log_softmax({.logits = l.view(), .out = o.view()}, Stream::cpu()).is_ok());
  for (int b = 0; b < 2; ++b) {
    double s = 0;
    for (int v = 0; v < 3; ++v) s += std::exp(o.view().ptr<float>()[b * 3 + v]);
    EXPECT_NEAR(s, 1.0, 1e-6);
  }
  EXPECT_NEAR(o.view().ptr<float>()[2] - o.view().ptr<float>()[1], 1.0, 1e-6);
}
