#pragma once
// Batch-size buckets for CUDA-graph capture (sglang's schedule): 1..8, then steps of 2 to
// 32, of 4 to 64, of 8 to 256, capped at max_bs. A live batch replays the smallest
// captured bucket that holds it; larger batches run eagerly.
#include <cstdint>
#include <optional>
#include <vector>

namespace aerie::spec {

std::vector<int64_t> cuda_graph_bucket_sizes(int64_t max_bs);

class BucketSchedule {
 public:
  explicit BucketSchedule(int64_t max_bs) : sizes_(cuda_graph_bucket_sizes(max_bs)) {}
  const std::vector<int64_t>& sizes() const { return sizes_; }
  // The smallest bucket >= batch_size, or nothing (run eagerly).
  std::optional<int64_t> bucket_for(int64_t batch_size) const;

 private:
  std::vector<int64_t> sizes_;
};

}  // namespace aerie::spec
