#include "spec/speculative_sampling.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "kernels/error.hpp"
#include "kernels/sampling.hpp"

namespace aerie::spec {

namespace {
// Separate Philox streams for the accept test and for drawing a token.
constexpr uint64_t kAcceptStream = 0xA5A5A5A5DEADBEEFull;
constexpr uint64_t kSiblingStride = 0x9E3779B97F4A7C15ull;

int32_t draw(const std::vector<double>& probs, double u) {
  double total = std::accumulate(probs.begin(), probs.end(), 0.0), run = 0.0;
  const double target = u * total;
  int32_t last = 0;
  for (size_t v = 0; v < probs.size(); ++v) {
    if (probs[v] <= 0.0) continue;
    last = static_cast<int32_t>(v);
    run += probs[v];
    if (target < run) return last;
  }
  return last;  // rounding at the top end
}
}  // namespace

std::vector<double> processed_distribution(std::span<const float> logits, const SamplingParams& p) {
  AERIE_CHECK(p.temperature > 0.0f, "processed_distribution needs a positive temperature");
  const int64_t vocab = static_cast<int64_t>(logits.size());
  const float mx = *std::max_element(logits.begin(), logits.end());
  std::vector<double> probs(static_cast<size_t>(vocab));
  double total = 0.0;
  for (int64_t v = 0; v < vocab; ++v) total += probs[static_cast<size_t>(v)] = std::exp((logits[static_cast<size_t>(v)] - mx) / p.temperature);
  for (auto& x : probs) x /= total;
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int32_t a, int32_t b) { return probs[static_cast<size_t>(a)] > probs[static_cast<size_t>(b)]; });
  int64_t keep = (p.top_k > 0 && p.top_k < vocab) ? p.top_k : vocab;
  double cum = 0.0;
  for (int64_t i = 0; i < keep; ++i) {
    cum += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
    if (cum >= p.top_p) {
      keep = i + 1;
      break;
    }
  }
  const double floor = p.min_p * probs[static_cast<size_t>(order[0])];
  while (keep > 1 && probs[static_cast<size_t>(order[static_cast<size_t>(keep - 1)])] < floor) --keep;
  std::vector<double> out(static_cast<size_t>(vocab), 0.0);
  double kept = 0.0;
  for (int64_t i = 0; i < keep; ++i) kept += probs[static_cast<size_t>(order[static_cast<size_t>(i)])];
  for (int64_t i = 0; i < keep; ++i) {
    const auto v = static_cast<size_t>(order[static_cast<size_t>(i)]);
    out[v] = probs[v] / kept;
  }
  return out;
}

TreeAcceptance accept_tree_sampled(std::span<const float> logits, int64_t vocab, const DraftTree& tree, const SamplingParams& p,
                                   int64_t first_step) {
  AERIE_CHECK(static_cast<int64_t>(logits.size()) == tree.size() * vocab,
              "verify logits hold " << logits.size() << " values for " << tree.size() << " rows of " << vocab);
  const auto seed = static_cast<uint64_t>(p.seed);
  TreeAcceptance r;
  int32_t node = 0;
  for (int64_t depth = 0;; ++depth) {
    auto probs = processed_distribution(logits.subspan(static_cast<size_t>(node * vocab), static_cast<size_t>(vocab)), p);
    const auto step = static_cast<uint64_t>(first_step + depth);
    double left = 1.0;  // mass of probs not yet removed
    int32_t next = -1;
    uint64_t sibling = 0;
    for (int32_t c : tree.children(node)) {
      const int32_t d = tree.tokens[static_cast<size_t>(c)];
      AERIE_CHECK(d >= 0 && d < vocab, "draft token " << d << " is outside the vocabulary");
      const double pd = probs[static_cast<size_t>(d)];
      // Sibling j draws from its own stream; the first child's is the chain's.
      const double u = kernels::philox_uniform(seed ^ kAcceptStream ^ (sibling++ * kSiblingStride), step);
      if (left > 0.0 && u * left < pd) {
        next = c;
        break;
      }
      probs[static_cast<size_t>(d)] = 0.0;  // rejected: the next try and the bonus see the rest
      left -= pd;
    }
    if (next < 0) {
      r.bonus = draw(probs, static_cast<double>(kernels::philox_uniform(seed, step)));
      return r;
    }
    r.path.push_back(next);
    node = next;
  }
}

}  // namespace aerie::spec
