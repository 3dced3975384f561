#include "kernels/cpu/row_filter.hpp"

#include <algorithm>
#include <cmath>
#include <functional>

namespace aerie::kernels::cpu {

namespace {

// The largest value t among `probs` such that the values >= t sum to at least top_p: the
// top-p set's smallest probability. Most of the mass sits in a few tokens, so the largest
// 1024 are sorted first and the whole row only when they fall short.
float top_p_threshold(std::vector<float> probs, float top_p) {
  auto walk = [&](size_t n) -> float {
    double cum = 0.0;
    for (size_t i = 0; i < n; ++i)
      if ((cum += probs[i]) >= top_p) return probs[i];
    return -1.0f;
  };
  const size_t head = std::min<size_t>(1024, probs.size());
  std::partial_sort(probs.begin(), probs.begin() + static_cast<std::ptrdiff_t>(head), probs.end(), std::greater<float>());
  const float t = walk(head);
  if (t >= 0.0f) return t;
  std::sort(probs.begin(), probs.end(), std::greater<float>());
  const float all = walk(probs.size());
  return all >= 0.0f ? all : probs.back();  // rounding short of top_p: keep everything
}

}  // namespace

RowFilter row_filter(const float* row, int64_t vocab, float temperature, float top_p, int32_t top_k, float min_p, std::vector<float>& probs) {
  RowFilter f;
  for (int64_t v = 1; v < vocab; ++v)
    if (row[v] > row[f.argmax]) f.argmax = static_cast<int32_t>(v);
  f.mx = row[f.argmax];
  if (!(temperature > 0.0f)) return f;
  const float inv_t = 1.0f / temperature;
  probs.resize(static_cast<size_t>(vocab));
  double z = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const float e = std::exp((row[v] - f.mx) * inv_t);
    probs[static_cast<size_t>(v)] = e;
    z += e;
  }
  const float inv_z = static_cast<float>(1.0 / z);
  for (auto& p : probs) p *= inv_z;
  const float p_max = inv_z;  // the argmax's e is 1
  f.tau = min_p * p_max;
  if (top_k > 0 && top_k < vocab) {
    std::vector<float> copy(probs);
    std::nth_element(copy.begin(), copy.begin() + (top_k - 1), copy.end(), std::greater<float>());
    f.tau = std::max(f.tau, copy[static_cast<size_t>(top_k - 1)]);
  }
  if (top_p < 1.0f) f.tau = std::max(f.tau, top_p_threshold(probs, top_p));
  f.tau = std::min(f.tau, p_max);  // the most likely token always survives
  double kept = 0.0;
  for (const float p : probs)
    if (p >= f.tau) kept += p;
  f.kept = static_cast<float>(kept);
  return f;
}

int32_t draw_in_id_order(const std::vector<float>& probs, const RowFilter& f, const std::vector<int32_t>& removed, float u, float left) {
  const float target = u * left;
  double run = 0.0;
  int32_t last = -1;
  for (size_t v = 0; v < probs.size(); ++v) {
    const float p = probs[v];
    if (p < f.tau || std::find(removed.begin(), removed.end(), static_cast<int32_t>(v)) != removed.end()) continue;
    last = static_cast<int32_t>(v);
    run += p;
    if (target < run) return last;
  }
  return last >= 0 ? last : f.argmax;
}

}  // namespace aerie::kernels::cpu
