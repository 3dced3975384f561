// CPU backend of kernels::tree_accept: the same walk as the CUDA kernel, with the row
// statistics (maximum, normaliser, kept threshold and mass) computed only for the rows the
// walk visits.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/backends.hpp"
#include "kernels/philox.hpp"

namespace aerie::kernels::cpu {

namespace {

// What the walk needs of one logits row: probabilities are expf((x - mx) * inv_t) * inv_z,
// the kept set is {p >= tau}, with mass `kept`.
struct RowStats {
  float mx = 0.0f;
  int32_t argmax = 0;
  float inv_t = 0.0f, inv_z = 0.0f, tau = 0.0f, kept = 0.0f;
  float prob(float x) const { return std::exp((x - mx) * inv_t) * inv_z; }
};

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

RowStats row_stats(const float* row, int64_t vocab, float temperature, float top_p, int32_t top_k, float min_p) {
  RowStats s;
  for (int64_t v = 1; v < vocab; ++v)
    if (row[v] > row[s.argmax]) s.argmax = static_cast<int32_t>(v);
  s.mx = row[s.argmax];
  if (!(temperature > 0.0f)) return s;
  s.inv_t = 1.0f / temperature;
  double z = 0.0;
  for (int64_t v = 0; v < vocab; ++v) z += std::exp((row[v] - s.mx) * s.inv_t);
  s.inv_z = static_cast<float>(1.0 / z);
  const float p_max = s.inv_z;
  s.tau = min_p * p_max;
  if ((top_k > 0 && top_k < vocab) || top_p < 1.0f) {
    std::vector<float> probs(static_cast<size_t>(vocab));
    for (int64_t v = 0; v < vocab; ++v) probs[static_cast<size_t>(v)] = s.prob(row[v]);
    if (top_k > 0 && top_k < vocab) {
      std::vector<float> copy(probs);
      std::nth_element(copy.begin(), copy.begin() + (top_k - 1), copy.end(), std::greater<float>());
      s.tau = std::max(s.tau, copy[static_cast<size_t>(top_k - 1)]);
    }
    if (top_p < 1.0f) s.tau = std::max(s.tau, top_p_threshold(std::move(probs), top_p));
  }
  s.tau = std::min(s.tau, p_max);  // the most likely token always survives
  double kept = 0.0;
  for (int64_t v = 0; v < vocab; ++v) {
    const float p = s.prob(row[v]);
    if (p >= s.tau) kept += p;
  }
  s.kept = static_cast<float>(kept);
  return s;
}

// The bonus: a draw in id order from the kept tokens not removed, u in [0, 1) scaled by
// the mass left.
int32_t draw(const float* row, int64_t vocab, const RowStats& s, const std::vector<int32_t>& removed, float u, float left) {
  const float target = u * left;
  double run = 0.0;
  int32_t last = -1;
  for (int64_t v = 0; v < vocab; ++v) {
    const float p = s.prob(row[v]);
    if (p < s.tau || std::find(removed.begin(), removed.end(), static_cast<int32_t>(v)) != removed.end()) continue;
    last = static_cast<int32_t>(v);
    run += p;
    if (target < run) return last;
  }
  return last >= 0 ? last : s.argmax;  // rounding at the top end; nothing left: the argmax
}

}  // namespace

Status tree_accept(const TreeAcceptParams& p) {
  const int64_t batch = p.tokens.dim(0), nodes = p.tokens.dim(1), vocab = p.logits.dim(1);
  for (int64_t b = 0; b < batch; ++b) {
    const int32_t* tokens = p.tokens.ptr<int32_t>() + b * nodes;
    const int32_t* parents = p.parents.ptr<int32_t>() + b * nodes;
    int32_t* path = p.path.ptr<int32_t>() + b * nodes;
    std::fill(path, path + nodes, -1);
    const float temperature = p.temperature.ptr<float>()[b];
    const auto seed = static_cast<uint64_t>(p.seed.ptr<int64_t>()[b]);
    const auto first_step = static_cast<uint64_t>(p.step.ptr<int64_t>()[b]);
    int32_t node = 0, accepted = 0;
    for (uint64_t depth = 0;; ++depth) {
      const float* row = p.logits.ptr<float>() + (b * nodes + node) * vocab;
      const RowStats s = row_stats(row, vocab, temperature, p.top_p.ptr<float>()[b], p.top_k.ptr<int32_t>()[b], p.min_p.ptr<float>()[b]);
      int32_t next = -1;
      std::vector<int32_t> removed;
      float left = s.kept;
      uint64_t sibling = 0;
      for (int32_t c = node + 1; c < nodes && next < 0; ++c) {
        if (parents[c] != node) continue;
        const int32_t d = tokens[c];
        if (!(temperature > 0.0f)) {
          if (d == s.argmax) next = c;
          continue;
        }
        const float pd = (d >= 0 && d < vocab && s.prob(row[d]) >= s.tau) ? s.prob(row[d]) : 0.0f;
        const float u = philox_uniform_inline(seed ^ kTreeAcceptStream ^ (sibling++ * kTreeSiblingStride), first_step + depth);
        if (left > 0.0f && u * left < pd) {
          next = c;
        } else if (pd > 0.0f) {  // rejected: the next sibling and the bonus see the rest
          removed.push_back(d);
          left -= pd;
        }
      }
      if (next < 0) {
        p.bonus.ptr<int32_t>()[b] = temperature > 0.0f ? draw(row, vocab, s, removed, philox_uniform_inline(seed, first_step + depth), left) : s.argmax;
        break;
      }
      path[accepted++] = next;
      node = next;
    }
  }
  return Status::ok();
}

}  // namespace aerie::kernels::cpu
