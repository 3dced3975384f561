#pragma once
// The vocab-parallel embedding and LM head (sglang's VocabParallelEmbedding and
// ParallelLMHead): each TP rank holds ceil(V / T) rows of the table (model/tp_shard.hpp).
// Lookups are masked to the rank's rows and all-reduced; logits are computed for the rank's
// rows and all-gathered, so every rank ends with the same full [rows, V] logits and draws the
// same token from them (also when sampling with a seed). With a group of one both are the
// plain embedding and matmul.
#include <cstdint>

#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"
#include "kernels/weight_blocks.hpp"
#include "parallel/communicator.hpp"

namespace aerie::model {

// out [tokens, hidden] = the rows of `ids` [tokens] i32 from the whole table, of which this
// rank holds `table` [rows, hidden] starting at id first_id.
void vocab_parallel_embedding(const TensorView& ids, const TensorView& table, int64_t first_id, const TensorView& out,
                              parallel::Communicator& tp, const Stream& stream);

// Scratch of vocab_parallel_logits for `rows` logit rows under TP (unused with one rank).
struct VocabParallelScratch {
  TensorView shard_logits;  // [>= rows * table rows] f32
  TensorView gathered;      // [>= ranks * rows * table rows] f32
};

// logits [rows, vocab] f32 = x [rows, hidden] times the whole LM head, of which every rank
// holds `table` [ceil(vocab / ranks), hidden] (the same row count on every rank, zero-padded).
// `table_fp8` / `table_scale`: an fp8 copy of the table with row scales (an fp8 draft head's;
// kernels/matmul.hpp), optional. `table_blocks`: the whole table's GGUF blocks (one rank, on the
// CPU; kernels/weight_blocks.hpp), optional.
void vocab_parallel_logits(const TensorView& x, const TensorView& table, int64_t vocab, const TensorView& logits,
                           const VocabParallelScratch& scratch, parallel::Communicator& tp, const Stream& stream,
                           const TensorView& table_fp8 = {}, const TensorView& table_scale = {},
                           const kernels::WeightBlocks& table_blocks = {});

}  // namespace aerie::model
