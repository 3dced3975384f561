#pragma once
// Sampler: turns a batch of logits into one token per row on the model's device. Per-row
// parameters travel in one staged upload; the tokens come back in one copy.
#include <cstdint>
#include <memory>
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
  // The same, without waiting: the [rows.size()] i32 ids on the device, in stream order (valid
  // until the next call's kernel overwrites them, so copy them out before).
  TensorView sample_on_device(const TensorView& logits, std::span<const SamplingRow> rows, const Stream& stream);
  // The last call's first `rows` ids, on the device (where every call writes them).
  TensorView last_ids_on_device(int64_t rows) const;

 private:
  int64_t max_batch_;
  Buffer device_;        // packed per-row parameters + output ids
  Buffer workspace_;     // kernels::sample scratch
  StagingRing staging_;  // same layout on the host, in turn (calls may be enqueued ahead)
  HostStaging ids_host_;  // sample()'s ids
};

// The argmax of every logits row (greedy sampling) for batches of any size: the Sampler
// under it grows (to at least twice its rows) when a batch has more rows than it holds.
class ArgmaxSampler {
 public:
  explicit ArgmaxSampler(Device device) : device_(device) {}
  // logits: [rows, vocab] f32 on the device. Returns each row's argmax (synchronises).
  std::vector<int32_t> argmax(const TensorView& logits, const Stream& stream);

 private:
  Device device_;
  std::unique_ptr<Sampler> sampler_;
  int64_t rows_ = 0;
};

}  // namespace aerie::model
