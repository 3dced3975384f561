#pragma once
// ChainStop: where a chain proposal stops drafting under --speculative-chain-stop-probability.
// A chain drafts another token only while the product of the draft's own probabilities of its
// tokens so far (its estimate that all of them are accepted) is at least the threshold on
// average over the batch's requests. Past that point the next token would most likely be
// rejected and still cost a draft step and a verify row: on the 2-core CPU about a tenth and a
// fifth of a plain step (docs/performance.md), so a chain as long as the draft is sure of beats
// every fixed length. One length for the whole batch (a verify takes as many tokens from every
// request), so the average: one more step costs a row for every request and pays off by the
// tokens the requests together expect from it. A token already drafted is always verified.
#include <cstdint>
#include <span>
#include <vector>

namespace aerie::spec {

class ChainStop {
 public:
  // threshold in (0, 1]; first: each request's probability of its first draft token (the
  // extend's), which the chain holds already.
  ChainStop(double threshold, std::span<const float> first);
  // Whether to draft another token: the requests' products are at least the threshold on average.
  bool goes_on() const;
  // The draft step just run: each request's probability of its token (kept, as every drafted one).
  void add_step(std::span<const float> step);
  int64_t tokens() const { return tokens_; }  // draft tokens so far, the first included

 private:
  double threshold_;
  std::vector<double> product_;
  int64_t tokens_ = 1;
};

// The probability a softmax gives its top entry, 1 / sum_j exp(l_j - max_j l), for each of
// `rows` rows of `vocab` f32 logits (host memory); 0 for a row with a NaN or no finite entry.
std::vector<float> top_token_probabilities(const float* logits, int64_t rows, int64_t vocab);

}  // namespace aerie::spec
