#include "actors/core/logit_adjustments.hpp"

#include <algorithm>
#include <limits>
#include <vector>

#include "kernels/error.hpp"
#include "kernels/logit_adjust.hpp"
#include "kernels/staging.hpp"
#include <map>

namespace aerie::core {

void append_logit_adjustments(transport::BatchMessage& b, int32_t row, std::span<const int32_t> prompt, std::span<const int32_t> output,
                              const SamplingOptions& s, std::span<const int32_t> banned) {
  struct Entry {
    float bias = 0.0f;
    float rep = 1.0f;
    float add = 0.0f;
  };
  std::map<int32_t, Entry> entries;
  if (s.repetition_penalty != 1.0f) {
    for (int32_t t : prompt) entries[t].rep = s.repetition_penalty;
    for (int32_t t : output) entries[t].rep = s.repetition_penalty;
  }
  if (s.frequency_penalty != 0.0f || s.presence_penalty != 0.0f) {
    std::map<int32_t, int64_t> counts;
    for (int32_t t : output) ++counts[t];
    for (const auto& [t, c] : counts) entries[t].add -= s.frequency_penalty * static_cast<float>(c) + s.presence_penalty;
  }
  for (const auto& [t, bias] : s.logit_bias) entries[t].bias += bias;
  if (static_cast<int64_t>(output.size()) < s.min_new_tokens)
    for (int32_t t : banned) entries[t].add = -std::numeric_limits<float>::infinity();
  for (const auto& [t, e] : entries) {
    if (e.bias == 0.0f && e.rep == 1.0f && e.add == 0.0f) continue;
    b.adjust_rows.push_back(row);
    b.adjust_ids.push_back(t);
    b.adjust_bias.push_back(e.bias);
    b.adjust_rep.push_back(e.rep);
    b.adjust_add.push_back(e.add);
  }
}

TensorView LogitAdjuster::apply(const TensorView& logits, const transport::BatchMessage& m, const Stream& stream) {
  const size_t n = m.adjust_ids.size();
  AERIE_CHECK(m.adjust_rows.size() == n && m.adjust_bias.size() == n && m.adjust_rep.size() == n && m.adjust_add.size() == n, "batch " << m.step_id
                                                                                                      << ": logit adjustments disagree in length");
  for (size_t e = 0; e < n; ++e)
    AERIE_CHECK(m.adjust_rows[e] >= 0 && m.adjust_rows[e] < logits.dim(0) && m.adjust_ids[e] >= 0 && m.adjust_ids[e] < logits.dim(1),
                "batch " << m.step_id << ": logit adjustment " << e << " is outside the logits");
  const Device d = logits.device;
  if (!adjusted_.data() || adjusted_.view().numel() < logits.numel()) adjusted_ = Buffer(d, DType::kF32, {logits.numel()});
  const auto entries = static_cast<int64_t>(std::max<size_t>(n, 1));
  if (!ints_.data() || ints_.view().numel() < 2 * entries) {
    ints_ = Buffer(d, DType::kI32, {2 * entries});
    floats_ = Buffer(d, DType::kF32, {3 * entries});
  }
  const TensorView out(adjusted_.data(), DType::kF32, {logits.dim(0), logits.dim(1)}, d);
  copy_async(out.data, logits.data, static_cast<size_t>(logits.nbytes()), stream);
  std::vector<int32_t> ints(m.adjust_rows);
  ints.insert(ints.end(), m.adjust_ids.begin(), m.adjust_ids.end());
  std::vector<float> floats(m.adjust_bias);
  floats.insert(floats.end(), m.adjust_rep.begin(), m.adjust_rep.end());
  floats.insert(floats.end(), m.adjust_add.begin(), m.adjust_add.end());
  synchronize(stream);  // the staging buffers are written from the host below
  ints_.copy_from_host(ints.data(), static_cast<int64_t>(ints.size() * sizeof(int32_t)));
  floats_.copy_from_host(floats.data(), static_cast<int64_t>(floats.size() * sizeof(float)));
  const auto ne = static_cast<int64_t>(n);
  AERIE_CHECK_STATUS(kernels::logit_adjust({.logits = out, .rows = ints_.view().slice_rows(0, ne), .ids = ints_.view().slice_rows(ne, 2 * ne),
                                            .bias = floats_.view().slice_rows(0, ne), .rep = floats_.view().slice_rows(ne, 2 * ne),
                                            .add = floats_.view().slice_rows(2 * ne, 3 * ne)},
                                           stream));
  return out;
}

}  // namespace aerie::core
