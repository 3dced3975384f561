#pragma once
// TpShard: which part of a Llama-family layer one tensor-parallel rank holds (sglang's and
// Megatron's layout).
//  - Attention heads are split: rank r holds query heads [r * H/T, (r + 1) * H/T). KV heads
//    are split the same way when there are at least T of them; with fewer, each is
//    replicated over T / KV ranks (rank r holds KV head r / (T / KV)), so a rank's query
//    heads always read its own KV heads.
//  - qkv and gate/up are column-parallel (their output rows split); o_proj and down are
//    row-parallel (their input columns split) and followed by an all-reduce; their biases
//    are added once, by TP rank 0.
//  - The embedding and LM head are vocab-parallel: rank r holds rows [r * Vr, (r + 1) * Vr)
//    of ceil(V / T) = Vr each (the last rank's tail padded with zero rows).
// A rank's KV pool holds its own KV heads only.
//  - Under DP attention the MLP is split over more ranks than attention (every rank of the
//    launch against the attention-TP group): mlp_rank / mlp_size say where this rank's MLP
//    rows sit; rank / size keep meaning the attention heads, embedding and LM head.
#include <cstdint>

#include "model/config.hpp"

namespace aerie::model {

struct TpShard {
  int rank = 0;
  int size = 1;
  int mlp_rank = 0;
  int mlp_size = 0;  // 0: the MLP is split as attention is (rank, size)

  bool sharded() const { return size > 1 || mlp_ranks() > 1; }
  int mlp_ranks() const { return mlp_size > 0 ? mlp_size : size; }
  int mlp_index() const { return mlp_size > 0 ? mlp_rank : rank; }
  // This shard with the MLP split as attention is: what a draft running in the attention-TP
  // group takes.
  TpShard attention_only() const { return {.rank = rank, .size = size}; }
  // Query heads, KV heads and MLP rows of this rank, for a layer of shape `c` (global).
  int64_t heads(const LlamaConfig& c) const { return c.num_heads / size; }
  int64_t first_head(const LlamaConfig& c) const { return rank * heads(c); }
  int64_t kv_heads(const LlamaConfig& c) const { return c.num_kv_heads >= size ? c.num_kv_heads / size : 1; }
  int64_t first_kv_head(const LlamaConfig& c) const {
    return c.num_kv_heads >= size ? rank * kv_heads(c) : rank / (size / c.num_kv_heads);
  }
  int64_t intermediate(const LlamaConfig& c) const { return c.intermediate_size / mlp_ranks(); }
  int64_t first_intermediate(const LlamaConfig& c) const { return mlp_index() * intermediate(c); }
  // Vocabulary rows: every rank holds vocab_rows (its table's rows, padding included), of
  // which the real ones are [first_vocab, first_vocab + real_vocab_rows).
  int64_t vocab_rows(int64_t vocab) const { return (vocab + size - 1) / size; }
  int64_t first_vocab(int64_t vocab) const { return rank * vocab_rows(vocab); }
  int64_t real_vocab_rows(int64_t vocab) const;
  // The row-parallel biases are added by one rank only (of the attention group for o_proj,
  // of the MLP's ranks for down).
  bool adds_row_parallel_bias() const { return rank == 0; }
  bool adds_mlp_bias() const { return mlp_index() == 0; }

  // The per-rank shape of a layer: heads, KV heads and intermediate size divided as above;
  // the vocabulary and hidden size stay global (logits are gathered to the full vocabulary).
  LlamaConfig local(const LlamaConfig& c) const;
  // Throws aerie::Error naming what does not divide when `c` cannot be split over `size`
  // ranks. `what` names the model in the message ("the target", "the draft").
  static void check_divisible(const LlamaConfig& c, int size, const std::string& what);
  // The same for DP attention: heads and vocabulary over attn_size ranks, the MLP over mlp_size.
  static void check_divisible(const LlamaConfig& c, int attn_size, int mlp_size, const std::string& what);
};

}  // namespace aerie::model
