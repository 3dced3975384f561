#include "spec/cuda_graph_buckets.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::spec {

std::vector<int64_t> cuda_graph_bucket_sizes(int64_t max_bs) {
  AERIE_CHECK(max_bs >= 1, "cuda graph max batch size must be >= 1, got " << max_bs);
  std::vector<int64_t> s;
  for (int64_t b = 1; b <= 8; ++b) s.push_back(b);
  for (int64_t b = 10; b <= 32; b += 2) s.push_back(b);
  for (int64_t b = 40; b <= 64; b += 4) s.push_back(b);
  for (int64_t b = 72; b <= 256; b += 8) s.push_back(b);
  s.erase(std::remove_if(s.begin(), s.end(), [&](int64_t b) { return b > max_bs; }), s.end());
  return s;
}

std::optional<int64_t> BucketSchedule::bucket_for(int64_t batch_size) const {
  if (batch_size < 1) return std::nullopt;
  auto it = std::lower_bound(sizes_.begin(), sizes_.end(), batch_size);
  if (it == sizes_.end()) return std::nullopt;
  return *it;
}

}  // namespace aerie::spec
