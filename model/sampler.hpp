#pragma once
// Sampler: turns a batch of logits into one token per row on the model's device. Per-row
// parameters travel in one staged upload; the tokens come back in one copy.
#include <cstdint>
#include <span>
#include <vector>

#include "kernels/buffer.hpp"
#include "kernels/staging.hpp"

namespace aerie::model {

struct SamplingRow {
  float temperature = 0.0f;
  float top_p = 1.0f;
  float min_p = 0.0f;
  int32_t top_k = -1;
  int64_t seed = 0;
  int64_t step = 0;  // tokens the request has sampled so far
};

class Sampler {
 public:
  Sampler(Device device, int64_t max_batch);
  // logits: [rows.size(), vocab] f32 on the device. Returns the sampled ids (synchronises).
  std::vector<int32_t> sample(const TensorView& logits, std::span<const SamplingRow> rows, const Stream& stream);

 private:
  int64_t max_batch_;
  Buffer device_;        // packed per-row parameters + output ids
  Buffer workspace_;     // kernels::sample scratch
  HostStaging staging_;  // same layout on the host
};

}  // namespace aerie::model
