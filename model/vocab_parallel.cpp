#include "model/vocab_parallel.hpp"

#include <algorithm>

#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/staging.hpp"

namespace aerie::model {

namespace ops = aerie::kernels;

void vocab_parallel_embedding(const TensorView& ids, const TensorView& table, int64_t first_id, const TensorView& out,
                              parallel::Communicator& tp, const Stream& s) {
  const bool sharded = tp.size() > 1;
  AERIE_CHECK_STATUS(ops::embedding({.ids = ids, .table = table, .out = out, .first_id = first_id, .zero_outside = sharded}, s));
  if (sharded) tp.all_reduce_sum(out, s);
}

void vocab_parallel_logits(const TensorView& x, const TensorView& table, int64_t vocab, const TensorView& logits,
                           const VocabParallelScratch& scratch, parallel::Communicator& tp, const Stream& s,
                           const TensorView& table_fp8, const TensorView& table_scale, const kernels::WeightBlocks& table_blocks) {
  const int ranks = tp.size();
  if (ranks == 1) {
    AERIE_CHECK_STATUS(ops::matmul({.x = x, .w = table, .w_fp8 = table_fp8, .w_scale = table_scale, .w_blocks = table_blocks, .y = logits}, s));
    return;
  }
  AERIE_CHECK(!table_blocks.defined(), "GGUF blocks of a vocab-parallel LM head: only a whole table keeps them");
  const int64_t rows = x.dim(0), per_rank = table.dim(0);
  AERIE_CHECK(per_rank == (vocab + ranks - 1) / ranks,
              "LM head shard of " << per_rank << " rows over " << ranks << " ranks for a vocabulary of " << vocab);
  AERIE_CHECK(logits.dim(0) == rows && logits.dim(1) == vocab && logits.dtype == DType::kF32, "logits " << logits.describe());
  AERIE_CHECK(scratch.shard_logits.numel() >= rows * per_rank && scratch.gathered.numel() >= ranks * rows * per_rank,
              "vocab-parallel scratch too small for " << rows << " rows");
  const TensorView mine(scratch.shard_logits.data, DType::kF32, {rows, per_rank}, logits.device);
  const TensorView all(scratch.gathered.data, DType::kF32, {ranks * rows, per_rank}, logits.device);
  AERIE_CHECK_STATUS(ops::matmul({.x = x, .w = table, .w_fp8 = table_fp8, .w_scale = table_scale, .y = mine}, s));
  tp.all_gather(mine, all, s);
  // [ranks, rows, per_rank] -> [rows, vocab]: rank r's columns start at r * per_rank; the
  // padding rows of the last shard are dropped.
  for (int r = 0; r < ranks; ++r) {
    const int64_t first = r * per_rank, real = std::clamp<int64_t>(vocab - first, 0, per_rank);
    if (real == 0) continue;
    copy_rows_async(logits.ptr<float>() + first, static_cast<size_t>(vocab) * 4, all.ptr<float>() + r * rows * per_rank,
                    static_cast<size_t>(per_rank) * 4, static_cast<size_t>(real) * 4, static_cast<size_t>(rows), s);
  }
}

}  // namespace aerie::model
