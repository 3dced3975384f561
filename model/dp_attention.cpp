#include "model/dp_attention.hpp"

#include "kernels/error.hpp"
#include "kernels/staging.hpp"

namespace aerie::model {

void DpAttentionBuffers::reserve(int64_t gathered_rows, int64_t block_rows, int64_t hidden_size, int64_t gate_up_cols, Device device,
                                 DType dtype) {
  if (!normed.data() || normed.view().dim(0) < gathered_rows) {
    // Twice what is asked, so that a stream of growing steps reallocates rarely.
    const int64_t rows = std::max<int64_t>(gathered_rows * 2, 16);
    normed = Buffer(device, dtype, {rows, hidden_size});
    hidden = Buffer(device, dtype, {rows, hidden_size});
    gate_up = Buffer(device, dtype, {rows, gate_up_cols});
    act = Buffer(device, dtype, {rows, gate_up_cols / 2});
  }
  if (!block.data() || block.view().dim(0) < block_rows) block = Buffer(device, dtype, {std::max<int64_t>(block_rows * 2, 16), hidden_size});
}

namespace {

void copy_rows(const TensorView& from, const TensorView& to, const Stream& s) {
  AERIE_CHECK(from.dim(0) == to.dim(0) && from.nbytes() == to.nbytes(), "DP attention: row copy of mismatched shapes");
  if (from.dim(0) > 0) copy_async(to.data, from.data, from.nbytes(), s);
}

int64_t local_rows(const parallel::DpPaddingPlan& plan, const TensorView& local, int dp_rank) {
  const int64_t n = local.defined() ? local.dim(0) : 0;
  const int64_t real = plan.global_num_tokens.at(static_cast<size_t>(dp_rank));
  AERIE_CHECK(n == real || (plan.bucket && n == plan.tokens_per_rank),
              "DP attention: this group runs " << n << " rows, but the step's plan gives it " << real);
  return n;
}

}  // namespace

void dp_gather(const parallel::DpPaddingPlan& plan, const TensorView& local, const TensorView& global, const TensorView& block,
               const DpAttentionGroups& g, const Stream& s) {
  AERIE_CHECK(static_cast<int>(plan.global_num_tokens.size()) == g.dp_size(), "DP attention: the plan has "
                                                                                  << plan.global_num_tokens.size() << " groups, the launch "
                                                                                  << g.dp_size());
  AERIE_CHECK(global.dim(0) == plan.gathered_rows, "DP attention: the gathered buffer has the wrong row count");
  const int64_t n = local_rows(plan, local, g.dp_rank());
  if (plan.mode == parallel::DpPaddingMode::kMaxLen) {
    const int64_t per = plan.tokens_per_rank;
    const TensorView mine = block.slice_rows(0, per);
    if (n < per) zero_async(mine.slice_rows(n, per), s);
    if (n > 0) copy_rows(local, mine.slice_rows(0, n), s);
    g.peers->all_gather(mine, global, s);
    return;
  }
  zero_async(global, s);
  const int64_t at = plan.offsets.at(static_cast<size_t>(g.dp_rank()));
  if (n > 0) copy_rows(local, global.slice_rows(at, at + n), s);
  g.peers->all_reduce_sum(global, s);
}

void dp_scatter(const parallel::DpPaddingPlan& plan, const TensorView& global, const TensorView& local, const TensorView& block,
                const DpAttentionGroups& g, const Stream& s) {
  AERIE_CHECK(global.dim(0) == plan.gathered_rows, "DP attention: the gathered buffer has the wrong row count");
  const int64_t n = local_rows(plan, local, g.dp_rank());
  if (plan.mode == parallel::DpPaddingMode::kMaxLen) {
    const TensorView mine = block.slice_rows(0, plan.tokens_per_rank);
    g.peers->reduce_scatter_sum(global, mine, s);
    if (g.attn->size() > 1) g.attn->all_reduce_sum(mine, s);
    if (n > 0) copy_rows(mine.slice_rows(0, n), local, s);
    return;
  }
  g.mlp->all_reduce_sum(global, s);
  const int64_t at = plan.offsets.at(static_cast<size_t>(g.dp_rank()));
  if (n > 0) copy_rows(global.slice_rows(at, at + n), local, s);
}

}  // namespace aerie::model
