#include "spec/chain_stop.hpp"

#include <cmath>

#include "kernels/cpu/cpu_clones.hpp"
#include "kernels/cpu/row_filter.hpp"
#include "kernels/cpu/vector_exp.hpp"
#include "kernels/error.hpp"

namespace aerie::spec {

ChainStop::ChainStop(double threshold, std::span<const float> first) : threshold_(threshold), product_(first.begin(), first.end()) {
  AERIE_CHECK(threshold > 0.0 && threshold <= 1.0, "a chain stop probability must be in (0, 1], got " << threshold);
  AERIE_CHECK(!first.empty(), "a chain stop needs the batch's first draft probabilities");
}

bool ChainStop::goes_on() const {
  double sum = 0.0;
  for (double p : product_) sum += p;
  return sum >= threshold_ * static_cast<double>(product_.size());
}

void ChainStop::add_step(std::span<const float> step) {
  AERIE_CHECK(step.size() == product_.size(), "a chain stop step brings " << step.size() << " probabilities for " << product_.size() << " requests");
  for (size_t i = 0; i < step.size(); ++i) product_[i] *= static_cast<double>(step[i]);
  ++tokens_;
}

namespace {

// sum_j exp(l_j - max) of one row: sixteen partial sums, so each clone vectorises the loop (the
// order does not matter: the result steers how long a chain is, never a token).
AERIE_CPU_CLONES float exp_sum(const float* row, int64_t vocab, float mx) {
  float part[16] = {};
  int64_t j = 0;
  for (; j + 16 <= vocab; j += 16)
    for (int u = 0; u < 16; ++u) part[u] += kernels::cpu::vector_exp(row[j + u] - mx);
  float sum = 0.0f;
  for (; j < vocab; ++j) sum += kernels::cpu::vector_exp(row[j] - mx);
  for (float p : part) sum += p;
  return sum;
}

}  // namespace

std::vector<float> top_token_probabilities(const float* logits, int64_t rows, int64_t vocab) {
  AERIE_CHECK(rows >= 0 && vocab >= 1, "top_token_probabilities: " << rows << " rows of " << vocab << " logits");
  std::vector<float> out(static_cast<size_t>(rows));
  for (int64_t r = 0; r < rows; ++r) {
    const float* row = logits + r * vocab;
    const float mx = row[kernels::cpu::row_argmax(row, vocab)];  // NaN only where a NaN leads the row
    const float sum = std::isfinite(mx) ? exp_sum(row, vocab, mx) : NAN;
    // The top entry adds exp(0) = 1, so a usable sum is >= 1 (a NaN anywhere fails the test).
    out[static_cast<size_t>(r)] = sum >= 1.0f ? 1.0f / sum : 0.0f;
  }
  return out;
}

}  // namespace aerie::spec
