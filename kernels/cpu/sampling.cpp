#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/philox.hpp"

namespace aerie::kernels {

float philox_uniform(uint64_t seed, uint64_t step) { return philox_uniform_inline(seed, step); }

namespace cpu {

namespace {
int32_t argmax(const float* row, int64_t vocab) {
  int64_t best = 0;
  for (int64_t v = 1; v < vocab; ++v)
    if (row[v] > row[best]) best = v;
  return static_cast<int32_t>(best);
}
}  // namespace

Status sample(const SampleParams& p) {
  const int64_t batch = p.logits.dim(0), vocab = p.logits.dim(1);
  std::vector<float> probs(static_cast<size_t>(vocab));
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int64_t b = 0; b < batch; ++b) {
    const float* row = p.logits.ptr<float>() + b * vocab;
    const float temp = p.temperature.ptr<float>()[b];
    const float top_p = p.top_p.ptr<float>()[b];
    const float min_p = p.min_p.ptr<float>()[b];
    const int32_t top_k = p.top_k.ptr<int32_t>()[b];
    if (!(temp >= 0.0f) || !std::isfinite(temp)) return Status::error("temperature must be a finite number >= 0");
    if (!(top_p > 0.0f && top_p <= 1.0f)) return Status::error("top_p must be in (0, 1]");
    if (!(min_p >= 0.0f && min_p <= 1.0f)) return Status::error("min_p must be in [0, 1]");
    int32_t& out = p.out.ptr<int32_t>()[b];
    if (temp == 0.0f) {
      out = argmax(row, vocab);
      continue;
    }
    // Softmax in fp32 with the max subtracted.
    const float mx = row[argmax(row, vocab)];
    double total = 0.0;
    for (int64_t v = 0; v < vocab; ++v) {
      probs[static_cast<size_t>(v)] = std::exp((row[v] - mx) / temp);
      total += probs[static_cast<size_t>(v)];
    }
    for (auto& x : probs) x = static_cast<float>(x / total);
    // Most likely first; equal probabilities keep id order, so the result is deterministic.
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t c) { return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(c)]; });
    int64_t keep = (top_k > 0 && top_k < vocab) ? top_k : vocab;
    double cum = 0.0;
    for (int64_t i = 0; i < keep; ++i) {  // smallest prefix whose mass reaches top_p
      cum += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
      if (cum >= top_p) { keep = i + 1; break; }
    }
    const float floor = min_p * probs[static_cast<size_t>(order[0])];
    while (keep > 1 && probs[static_cast<size_t>(order[static_cast<size_t>(keep - 1)])] < floor) --keep;
    double kept = 0.0;
    for (int64_t i = 0; i < keep; ++i) kept += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
    const double u = static_cast<double>(kernels::philox_uniform(static_cast<uint64_t>(p.seed.ptr<int64_t>()[b]),
                                                                 static_cast<uint64_t>(p.step.ptr<int64_t>()[b]))) * kept;
    double run = 0.0;
    out = order[static_cast<size_t>(keep - 1)];  // guards against rounding at the top end
    for (int64_t i = 0; i < keep; ++i) {
      run += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
      if (u < run) { out = order[static_cast<size_t>(i)]; break; }
    }
  }
  return Status::ok();
}

Status log_softmax(const LogSoftmaxParams& p) {
  const int64_t batch = p.logits.dim(0), vocab = p.logits.dim(1);
  for (int64_t b = 0; b < batch; ++b) {
    const float* row = p.logits.ptr<float>() + b * vocab;
    const float mx = *std::max_element(row, row + vocab);
    double sum = 0.0;
    for (int64_t v = 0; v < vocab; ++v) sum += std::exp(static_cast<double>(row[v] - mx));
    const float lse = mx + static_cast<float>(std::log(sum));
    for (int64_t v = 0; v < vocab; ++v) p.out.ptr<float>()[b * vocab + v] = row[v] - lse;
  }
  return Status::ok();
}

}  // namespace cpu
}  // namespace aerie::kernels
