#pragma once
// Verification of draft trees with sampling, exact in distribution: the draft proposes
// deterministically (its top tokens), so each draft token d is accepted with probability
// p(d) under the target's processed distribution p (temperature, top-k, top-p, min-p, as
// the sampler applies them); on rejection d is removed from p and p renormalised before
// the next sibling is tried or the bonus token drawn, and after the last accepted draft
// the bonus is drawn from p itself. Whatever the draft
// proposes, every committed token is distributed exactly as plain sampling from the
// target would draw it (sglang's "target only" tree speculative sampling).
// Random numbers are Philox(seed, index of the output token) streams, so a request draws
// the same numbers in any batch.
#include <cstdint>
#include <span>
#include <vector>

#include "spec/greedy_accept.hpp"

namespace aerie::spec {

struct SamplingParams {
  float temperature = 1.0f;  // > 0
  float top_p = 1.0f;
  int32_t top_k = -1;
  float min_p = 0.0f;
  int64_t seed = 0;
};

// The processed target distribution of one logits row: probabilities over the vocabulary,
// zero outside the kept set, summing to 1.
std::vector<double> processed_distribution(std::span<const float> logits, const SamplingParams& p);

// logits: [tree.size(), vocab] row-major, row i = the target after the committed tokens
// and node i's path. first_step: how many tokens the request has output so far. At a node
// with processed target distribution p, its children x_1, x_2, ... are tried in order:
// x_j is accepted with probability p_j(x_j), where p_j is p with x_1..x_{j-1} removed and
// renormalised; when all are rejected the bonus is drawn from what is left. Each committed
// token is therefore distributed exactly as p.
TreeAcceptance accept_tree_sampled(std::span<const float> logits, int64_t vocab, const DraftTree& tree, const SamplingParams& p,
                                   int64_t first_step);

}  // namespace aerie::spec
