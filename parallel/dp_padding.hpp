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
  std::vector<int64_t> global_num_tokens;  // [ranks] the real tokens of every rank
  int64_t max_tokens = 0;              // max over ranks
  int64_t total_tokens = 0;            // sum over ranks
  int64_t tokens_per_rank = 0;         // rows each rank runs (MAX_LEN: bucket * tokens_per_request, or the max)
  std::optional<int64_t> bucket;       // requests of the bucket every rank replays (or pads to); empty: eager
  int64_t tokens_per_request = 1;      // of the bucket: 1 for a decode, num_draft_tokens for a verify, topk for a draft step
  std::vector<int64_t> offsets;        // [ranks] first global row of each rank
  int64_t gathered_rows = 0;           // rows of the gathered buffer
  bool all_idle = false;
};

// global_num_tokens: one entry per rank. bucket_sizes: the captured buckets (in requests),
// ascending (empty when graphs are off). tokens_per_request: what every request of a
// bucketed step brings (the bucket is the smallest >= ceil(max tokens / it)). for_capture
// forces MAX_LEN, as capture does.
DpPaddingPlan plan_dp_padding(std::span<const int64_t> global_num_tokens, bool is_extend_in_batch,
                              std::span<const int64_t> bucket_sizes, bool for_capture = false, int64_t tokens_per_request = 1);

// The plan of a mode and bucket already chosen (by plan_dp_padding on one rank, carried to
// the others in the step's message): offsets, rows per rank and gathered rows. Throws
// aerie::Error when they do not fit the token counts (a bucket smaller than a rank's batch).
DpPaddingPlan make_dp_padding_plan(std::span<const int64_t> global_num_tokens, DpPaddingMode mode, std::optional<int64_t> bucket,
                                   int64_t tokens_per_request = 1);

}  // namespace aerie::parallel
