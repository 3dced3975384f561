#include "spec/cuda_graph_buckets.hpp"

#include <algorithm>

#include "kernels/error.hpp"

namespace aerie::spec {

namespace {
GraphBucketPolicy& policy() {
  static GraphBucketPolicy p;
  return p;
}
}  // namespace

void set_graph_bucket_policy(GraphBucketPolicy p) {
  for (int64_t b : p.sizes) AERIE_CHECK(b >= 1, "--cuda-graph-bs needs batch sizes >= 1, got " << b);
  std::sort(p.sizes.begin(), p.sizes.end());
  p.sizes.erase(std::unique(p.sizes.begin(), p.sizes.end()), p.sizes.end());
  policy() = std::move(p);
}

const GraphBucketPolicy& graph_bucket_policy() { return policy(); }

std::vector<int64_t> cuda_graph_bucket_sizes(int64_t max_bs) {
  AERIE_CHECK(max_bs >= 1, "cuda graph max batch size must be >= 1, got " << max_bs);
  std::vector<int64_t> s;
  for (int64_t b : policy().sizes)
    if (b <= max_bs) s.push_back(b);
  if (!s.empty()) return s;
  for (int64_t b = 1; b <= 8; ++b) s.push_back(b);
  for (int64_t b = 10; b <= 32; b += 2) s.push_back(b);
  for (int64_t b = 40; b <= 64; b += 4) s.push_back(b);
  for (int64_t b = 72; b <= 256; b += 8) s.push_back(b);
  s.erase(std::remove_if(s.begin(), s.end(), [&](int64_t b) { return b > max_bs; }), s.end());
  return s;
}

std::vector<int64_t> prefill_graph_token_buckets(int64_t max_tokens) {
  AERIE_CHECK(max_tokens <= kPrefillGraphMaxTokens,
              "prefill graphs take at most " << kPrefillGraphMaxTokens << " tokens, not " << max_tokens);
  std::vector<int64_t> sizes;
  for (int64_t t = 16; t <= max_tokens; t *= 2) sizes.push_back(t);
  if (max_tokens >= 1 && (sizes.empty() || sizes.back() != max_tokens)) sizes.push_back(max_tokens);
  return sizes;
}

BucketSchedule::BucketSchedule(std::vector<int64_t> sizes, bool padding) : sizes_(std::move(sizes)), padding_(padding) {
  AERIE_CHECK(!sizes_.empty() && sizes_.front() >= 1 && std::is_sorted(sizes_.begin(), sizes_.end()) &&
                  std::adjacent_find(sizes_.begin(), sizes_.end()) == sizes_.end(),
              "a graph schedule needs ascending sizes >= 1");
}

std::optional<int64_t> BucketSchedule::bucket_for(int64_t batch_size) const {
  if (batch_size < 1) return std::nullopt;
  auto it = std::lower_bound(sizes_.begin(), sizes_.end(), batch_size);
  if (it == sizes_.end() || (!padding_ && *it != batch_size)) return std::nullopt;
  return *it;
}

}  // namespace aerie::spec
