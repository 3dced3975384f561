#include "actors/core/logprob_reader.hpp"

#include <algorithm>
#include <numeric>

#include "kernels/error.hpp"
#include "kernels/sampling.hpp"
#include "kernels/staging.hpp"

namespace aerie::core {

std::vector<transport::TokenLogprobs> LogprobReader::read(const TensorView& logits, std::span<const transport::SamplingRowMsg> rows,
                                                          std::span<const int32_t> tokens, const Stream& stream) {
  const bool any = std::any_of(rows.begin(), rows.end(), [](const auto& r) { return r.logprobs >= 0; });
  if (!any) return {};
  const int64_t B = logits.dim(0), V = logits.dim(1);
  AERIE_CHECK(static_cast<int64_t>(rows.size()) == B && static_cast<int64_t>(tokens.size()) == B,
              "logprobs for " << B << " logit rows with " << rows.size() << " sampling rows and " << tokens.size() << " tokens");
  if (scratch_.nbytes() < B * V * 4) scratch_ = Buffer(logits.device, DType::kF32, {B, V});
  const TensorView out(scratch_.data(), DType::kF32, {B, V}, logits.device);
  AERIE_CHECK_STATUS(kernels::log_softmax({.logits = logits, .out = out}, stream));
  synchronize(stream);
  std::vector<transport::TokenLogprobs> result(static_cast<size_t>(B));
  std::vector<float> row(static_cast<size_t>(V));
  std::vector<int32_t> order(static_cast<size_t>(V));
  for (int64_t i = 0; i < B; ++i) {
    const auto& want = rows[static_cast<size_t>(i)];
    if (want.logprobs < 0) continue;
    scratch_.copy_to_host(row.data(), V * 4, i * V * 4);
    const int32_t tok = tokens[static_cast<size_t>(i)];
    AERIE_CHECK(tok >= 0 && tok < V, "sampled token " << tok << " is outside the vocabulary");
    auto& r = result[static_cast<size_t>(i)];
    r.logprob = row[static_cast<size_t>(tok)];
    const int64_t k = std::min<int64_t>(want.logprobs, V);
    if (k == 0) continue;
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
      return row[static_cast<size_t>(a)] > row[static_cast<size_t>(b)] || (row[static_cast<size_t>(a)] == row[static_cast<size_t>(b)] && a < b);
    });
    for (int64_t j = 0; j < k; ++j) {
      r.top_ids.push_back(order[static_cast<size_t>(j)]);
      r.top_logprobs.push_back(row[static_cast<size_t>(order[static_cast<size_t>(j)])]);
    }
  }
  return result;
}

}  // namespace aerie::core
