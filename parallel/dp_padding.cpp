#include "parallel/dp_padding.hpp"

#include <algorithm>
#include <numeric>

#include "kernels/error.hpp"

namespace aerie::parallel {

DpPaddingPlan plan_dp_padding(std::span<const int64_t> tokens, bool is_extend_in_batch,
                              std::span<const int64_t> bucket_sizes, bool for_capture) {
  AERIE_CHECK(!tokens.empty(), "global_num_tokens needs one entry per rank");
  for (int64_t t : tokens) AERIE_CHECK(t >= 0, "a rank reported a negative token count " << t);
  DpPaddingPlan plan;
  const auto ranks = static_cast<int64_t>(tokens.size());
  plan.max_tokens = *std::max_element(tokens.begin(), tokens.end());
  plan.total_tokens = std::accumulate(tokens.begin(), tokens.end(), int64_t{0});
  plan.all_idle = plan.max_tokens == 0;
  if (for_capture) plan.mode = DpPaddingMode::kMaxLen;
  else if (is_extend_in_batch && ranks > 1) plan.mode = DpPaddingMode::kSumLen;
  else plan.mode = plan.total_tokens * 2 > plan.max_tokens * ranks ? DpPaddingMode::kMaxLen : DpPaddingMode::kSumLen;

  if (plan.mode == DpPaddingMode::kMaxLen) {
    plan.tokens_per_rank = plan.max_tokens;
    if (!is_extend_in_batch && plan.max_tokens > 0) {
      auto it = std::lower_bound(bucket_sizes.begin(), bucket_sizes.end(), plan.max_tokens);
      if (it != bucket_sizes.end()) {
        plan.bucket = *it;
        plan.tokens_per_rank = *it;
      }
    }
    for (int64_t r = 0; r < ranks; ++r) plan.offsets.push_back(r * plan.tokens_per_rank);
    plan.gathered_rows = plan.tokens_per_rank * ranks;
  } else {
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

}  // namespace aerie::parallel
