#include "parallel/dp_padding.hpp"

#include <algorithm>
#include <numeric>

#include "kernels/error.hpp"

namespace aerie::parallel {

DpPaddingPlan make_dp_padding_plan(std::span<const int64_t> tokens, DpPaddingMode mode, std::optional<int64_t> bucket,
                                   int64_t tokens_per_request) {
  AERIE_CHECK(!tokens.empty(), "global_num_tokens needs one entry per rank");
  AERIE_CHECK(tokens.size() <= 65536, "global_num_tokens has " << tokens.size() << " entries");
  AERIE_CHECK(tokens_per_request >= 1 && tokens_per_request <= (int64_t{1} << 20), "tokens per request must be positive, not " << tokens_per_request);
  for (int64_t t : tokens) AERIE_CHECK(t >= 0 && t <= (int64_t{1} << 40), "a rank reported a token count of " << t);
  DpPaddingPlan plan;
  plan.mode = mode;
  plan.global_num_tokens.assign(tokens.begin(), tokens.end());
  plan.tokens_per_request = tokens_per_request;
  const auto ranks = static_cast<int64_t>(tokens.size());
  plan.max_tokens = *std::max_element(tokens.begin(), tokens.end());
  plan.total_tokens = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  plan.all_idle = plan.max_tokens == 0;
  if (mode == DpPaddingMode::kMaxLen) {
    plan.tokens_per_rank = plan.max_tokens;
    if (bucket) {
      AERIE_CHECK(*bucket >= 1 && *bucket <= (int64_t{1} << 20) && *bucket * tokens_per_request >= plan.max_tokens,
                  "bucket " << *bucket << " x " << tokens_per_request << " tokens does not hold a batch of " << plan.max_tokens);
      plan.bucket = bucket;
      plan.tokens_per_rank = *bucket * tokens_per_request;
    }
    for (int64_t r = 0; r < ranks; ++r) plan.offsets.push_back(r * plan.tokens_per_rank);
    plan.gathered_rows = plan.tokens_per_rank * ranks;
  } else {
    AERIE_CHECK(!bucket, "SUM_LEN steps run eagerly, without a bucket");
    int64_t at = 0;
    for (int64_t t : tokens) {
      plan.offsets.push_back(at);
      at += t;
    }
    plan.tokens_per_rank = plan.max_tokens;
    plan.gathered_rows = plan.total_tokens;
  }
  return plan;
}

DpPaddingPlan plan_dp_padding(std::span<const int64_t> tokens, bool is_extend_in_batch, std::span<const int64_t> bucket_sizes,
                              bool for_capture, int64_t tokens_per_request) {
  AERIE_CHECK(!tokens.empty(), "global_num_tokens needs one entry per rank");
  AERIE_CHECK(tokens_per_request >= 1, "tokens per request must be positive, not " << tokens_per_request);
  for (int64_t t : tokens) AERIE_CHECK(t >= 0, "a rank reported a negative token count " << t);
  const auto ranks = static_cast<int64_t>(tokens.size());
  const int64_t max_tokens = *std::max_element(tokens.begin(), tokens.end());
  const int64_t total = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  DpPaddingMode mode = DpPaddingMode::kMaxLen;
  if (for_capture) mode = DpPaddingMode::kMaxLen;
  else if (is_extend_in_batch && ranks > 1) mode = DpPaddingMode::kSumLen;
  else mode = total * 2 > max_tokens * ranks ? DpPaddingMode::kMaxLen : DpPaddingMode::kSumLen;
  std::optional<int64_t> bucket;
  if (mode == DpPaddingMode::kMaxLen && !is_extend_in_batch && max_tokens > 0) {
    const int64_t requests = (max_tokens + tokens_per_request - 1) / tokens_per_request;
    auto it = std::lower_bound(bucket_sizes.begin(), bucket_sizes.end(), requests);
    if (it != bucket_sizes.end()) bucket = *it;
  }
  return make_dp_padding_plan(tokens, mode, bucket, tokens_per_request);
}

}  // namespace aerie::parallel
