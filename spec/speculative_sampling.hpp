#pragma once
// Verification of chain drafts with sampling, exact in distribution: the draft proposes
// deterministically (its argmax), so each draft token d is accepted with probability
// p(d) under the target's processed distribution p (temperature, top-k, top-p, min-p, as
// the sampler applies them); on rejection the bonus token is drawn from p with d removed
// and renormalised, and after the last accepted draft from p itself. Whatever the draft
// proposes, every committed token is distributed exactly as plain sampling from the
// target would draw it (sglang's "target only" tree speculative sampling, chain case).
// Random numbers are Philox(seed, index of the output token) streams, so a request draws
// the same numbers in any batch.
#include <cstdint>
#include <span>
#include <vector>

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

struct SampledAcceptance {
  int32_t accepted = 0;  // draft tokens accepted
  int32_t bonus = 0;     // the token after them
};

// logits: [drafts.size() + 1, vocab] row-major, row i = the target after the committed
// tokens and drafts[0..i). first_step: how many tokens the request has output so far.
SampledAcceptance accept_chain_sampled(std::span<const float> logits, int64_t vocab, std::span<const int32_t> drafts,
                                       const SamplingParams& p, int64_t first_step);

}  // namespace aerie::spec
