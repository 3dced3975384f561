#pragma once
// DP-attention padding: every rank runs the same shape, so before a forward the ranks
// exchange their token counts (global_num_tokens) and whether any of them extends, then
// all compute the same plan from the same inputs:
//  - SUM_LEN: each rank's tokens sit at cumulative offsets in a zeroed buffer of the
//    total, gathered with one all-reduce. Used whenever a batch extends (prefill lengths
//    are uneven) and when the total is small next to max * ranks.
//  - MAX_LEN: every rank pads to the max and the ranks all-gather. Capture always uses it,
//    and a decode under MAX_LEN replays the captured bucket of the max over ranks.
// A rank with no tokens runs an IDLE batch; when no rank has tokens the step is skipped.
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

namespace aerie::parallel {

enum class DpPaddingMode { kMaxLen, kSumLen };

struct DpPaddingPlan {
  DpPaddingMode mode = DpPaddingMode::kMaxLen;
  int64_t max_tokens = 0;              // max over ranks
  int64_t total_tokens = 0;            // sum over ranks
  int64_t tokens_per_rank = 0;         // rows each rank runs (MAX_LEN: the bucket or the max)
  std::optional<int64_t> bucket;       // captured bucket every rank replays; empty: eager
  std::vector<int64_t> offsets;        // [ranks] first global row of each rank
  int64_t gathered_rows = 0;           // rows of the gathered buffer
  bool all_idle = false;
};

// global_num_tokens: one entry per rank. bucket_sizes: the captured buckets, ascending
// (empty when graphs are off). for_capture forces MAX_LEN, as capture does.
DpPaddingPlan plan_dp_padding(std::span<const int64_t> global_num_tokens, bool is_extend_in_batch,
                              std::span<const int64_t> bucket_sizes, bool for_capture = false);

}  // namespace aerie::parallel
