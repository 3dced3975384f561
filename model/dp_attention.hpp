#pragma once
// DP attention inside the forward (sglang's dp_attention): attention runs on this DP
// group's own tokens, sharded over its attention-TP group, while the MLP is split over
// every rank of the launch and runs on the tokens of all DP groups at once. Before each
// MLP the groups' normed hidden rows are gathered into one buffer; after it the partial
// sums are reduced over the MLP's ranks and each group takes its own rows back. Where the
// rows sit follows the step's padding plan (parallel/dp_padding.hpp), which every rank
// computes from the same global token counts:
//  - MAX_LEN: each group's rows are padded to tokens_per_rank; the gather is an all-gather
//    over the peer group (one rank per DP group), the scatter a reduce-scatter over it
//    followed by an all-reduce over the attention-TP group (the two sum over every rank).
//  - SUM_LEN: each group's rows sit at its cumulative offset in a zeroed buffer summed over
//    the peer group; the scatter is an all-reduce over every rank and a copy of its rows.
// A rank with no tokens (an IDLE batch) still joins every collective, with zero rows.
#include <memory>

#include "kernels/buffer.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"
#include "parallel/communicator.hpp"
#include "parallel/dp_padding.hpp"

namespace aerie::model {

struct DpAttentionGroups {
  std::shared_ptr<parallel::Communicator> mlp;    // every rank the MLP is split over
  std::shared_ptr<parallel::Communicator> peers;  // one rank per DP group: this rank's attention-TP rank in each
  std::shared_ptr<parallel::Communicator> attn;   // this rank's attention-TP group
  int dp_rank() const { return peers->rank(); }
  int dp_size() const { return peers->size(); }
};

// Scratch of the gathered rows, grown on demand (eager forwards).
struct DpAttentionBuffers {
  Buffer normed, hidden, gate_up, act, block;  // [rows, ...]; block: one group's padded rows
  void reserve(int64_t gathered_rows, int64_t block_rows, int64_t hidden_size, int64_t gate_up_cols, Device device, DType dtype);
};

// local [n, hidden]: this group's normed rows (n = its entry of plan.global_num_tokens, or
// plan.tokens_per_rank when the batch was padded to the bucket). Writes every group's rows
// into global [plan.gathered_rows, hidden] on every rank. block [>= tokens_per_rank, hidden]: scratch.
void dp_gather(const parallel::DpPaddingPlan& plan, const TensorView& local, const TensorView& global, const TensorView& block,
               const DpAttentionGroups& g, const Stream& stream);
// global [plan.gathered_rows, hidden]: this rank's partial MLP output of every group's rows
// (overwritten). Writes the sum over every rank of this group's rows into local [n, hidden].
void dp_scatter(const parallel::DpPaddingPlan& plan, const TensorView& global, const TensorView& local, const TensorView& block,
                const DpAttentionGroups& g, const Stream& stream);

}  // namespace aerie::model
