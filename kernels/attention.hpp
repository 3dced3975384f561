#pragma once
#include <span>
#include <vector>

#include "kernels/status.hpp"
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"

namespace aerie::kernels {

/// Attention over a paged KV cache for a ragged batch: every sequence b contributes
/// q rows [qo_indptr[b], qo_indptr[b+1]) (its new tokens: a whole prompt, an extend
/// chunk, one decode token, or draft tokens) and attends over its KV slots
/// kv_indices[kv_indptr[b] .. kv_indptr[b+1]) in position order (the new tokens' K/V are
/// already written there). Prefill/extend and decode sequences mix freely in one batch.
///
/// Without custom_mask the mask is causal: query i of a sequence with q_len new tokens
/// and kv_len slots sits at position kv_len - q_len + i and sees slots 0..that position.
/// With custom_mask (tree verification), sequence b's mask is a row-major
/// [q_len, kv_len] u8 block starting at mask_indptr[b]; 1 means "may attend".
/// A query row that may attend to nothing produces zeros.
struct AttentionParams {
  TensorView q;                 // [tokens, q_heads, head_dim]
  TensorView k_cache;           // [slots, kv_heads, head_dim]
  TensorView v_cache;           // [slots, kv_heads, head_dim]
  TensorView out;               // [tokens, q_heads, head_dim]
  TensorView qo_indptr;         // [batch + 1] i32
  TensorView kv_indptr;         // [batch + 1] i32
  TensorView kv_indices;        // [kv_indptr[batch]] i32 slot ids
  TensorView custom_mask = {};  // [mask_indptr[batch]] u8, optional
  TensorView mask_indptr = {};  // [batch + 1] i32, with custom_mask
  float scale = 1.0f;           // usually 1/sqrt(head_dim)
  // Flash-decoding: each query's visible KV is cut into num_splits parts processed in
  // parallel and combined; needs a workspace of attention_workspace_floats() f32 (CUDA;
  // the CPU reference ignores both). The grid depends only on tokens and num_splits, so
  // a captured graph stays valid as sequences grow. CUDA: a split holds at least
  // attention_min_split_keys() keys, so a sequence shorter than the count was chosen for
  // (a graph is captured for the longest context) uses fewer splits and leaves the rest empty.
  int num_splits = 1;
  TensorView workspace = {};    // [>= attention_workspace_floats(...)] f32
  // CUDA: one block serves this many consecutive query tokens of a sequence (for each KV
  // head), reading each K/V tile once for all of them: every sequence's query count must be
  // a multiple, the GQA group at most kAttentionMaxGroup (when > 1) and group x
  // tokens_per_block <= kAttentionMaxRows. The CPU reference ignores it.
  int tokens_per_block = 1;
  // CUDA: take the tensor-core decode kernel whenever the batch fits it, whatever its size
  // (tests of that kernel at small batches, which the policy below leaves to the other).
  bool tensor_cores_if_fit = false;
  void validate() const;
};
constexpr int kMaxAttentionSplits = 64;
// CUDA blocks hold up to kAttentionMaxGroup query heads of one KV head (a larger GQA group is
// split over several blocks, and then a block serves one token) and up to
// kAttentionMaxRows rows of heads x tokens.
constexpr int kAttentionMaxGroup = 8;
constexpr int kAttentionMaxRows = 32;
// Whether `tokens_per_block` fits every sequence's query count (q_lens) and a GQA group.
bool attention_tokens_per_block_fits(int tokens_per_block, int64_t group, std::span<const int64_t> q_lens);
// AERIE_ATTN_TOKENS_PER_BLOCK (for measuring; 0 when unset): the default of `forced` below.
int attention_forced_tokens_per_block();
// The query tokens per block for a CUDA batch (kernels/cuda/ops_attention.cu), from an H200
// sweep (docs/performance.md: 8B, 512-token contexts): one token per block for up to 4
// tokens in all, for prefill-sized sequences (over 64 tokens) and while one-token blocks number
// at most kAttentionOneTokenBlocks (tokens x KV heads), 4 when 4-token blocks alone fill the GPU
// twice, else 2, each where it fits. forced > 0: that count where it fits.
int attention_tokens_per_block_for(std::span<const int64_t> q_lens, int64_t group, int64_t kv_heads, int num_sms,
                                   int forced = attention_forced_tokens_per_block());
int64_t attention_workspace_floats(int64_t tokens, int64_t q_heads, int64_t head_dim, int num_splits);
// The fewest keys a split takes (a tile of the CUDA-core kernel). The graphs aerie-serve captures
// for the model's whole context split batch 1 in 64; with 32 keys a split a 544-token sequence
// uses 17 of them, the others exit at once and the merge reads only those 17: its step then costs
// what a graph captured for 544 tokens costs (H200: SmolLM2 -7%, 1B -4.7%, 8B -1.6% a step,
// docs/performance.md).
constexpr int kAttentionMinSplitKeys = 32;
// kAttentionMinSplitKeys, or AERIE_ATTN_MIN_SPLIT_KEYS when set (for measuring; 1: a sequence
// is cut into all num_splits parts however short it is).
int attention_min_split_keys();
// A split count that fills the GPU for `query_blocks` blocks of query tokens (tokens /
// tokens_per_block) over up to `max_kv_len` keys: about blocks_per_sm blocks per SM, at least
// kAttentionMinSplitKeys keys per split. blocks_per_sm = 0: the measured policy (H200, 8B, 544-token contexts,
// docs/performance.md): kAttentionBlocksPerSm while the query blocks (x KV heads) are fewer
// than the SMs (all resident at once: a block's tiles are a chain of memory round trips, so
// more, shorter blocks finish sooner), kAttentionBlocksPerSmFull once they fill them: then
// one split, since the blocks (tensor-core kernel) read the cache fastest unsplit and no
// combine kernel follows (batch 32: 5.40-5.48 ms a step in 1 split against 5.61-5.64 in 3;
// batch 64 6.31 against 6.41-6.43 in 2; batch 128 unsplit either way).
constexpr int kAttentionBlocksPerSm = 8;
constexpr int kAttentionBlocksPerSmFull = 1;
// AERIE_ATTN_BLOCKS_PER_SM (for measuring; 0 when unset): the default of `blocks_per_sm`.
int attention_forced_blocks_per_sm();
int attention_splits_for(int64_t query_blocks, int64_t kv_heads, int64_t max_kv_len, int num_sms,
                         int blocks_per_sm = attention_forced_blocks_per_sm());
Status attention(const AttentionParams& p, const Stream& stream);
/// CUDA: whether attention() takes this batch to the tensor-core prefill kernel
/// (kernels/cuda/ops_attention_prefill.cu): q, cache and out all bf16 or all f16, head dim a
/// multiple of 16 up to kAttentionPrefillMaxDim, no custom mask, one split, and on average
/// at least kAttentionPrefillMinTokensPerSequence new tokens per sequence (prefill and
/// chunked prefill; decode and verify keep the kernel above). AERIE_ATTN_PREFILL_TC=-1 turns
/// it off (for measuring).
constexpr int64_t kAttentionPrefillMaxDim = 128;
constexpr int64_t kAttentionPrefillMinTokensPerSequence = 16;
bool attention_prefill_on_tensor_cores(const AttentionParams& p);
/// CUDA: whether attention() takes this batch (one the prefill kernel does not) to the
/// tensor-core decode kernel (kernels/cuda/ops_attention_decode.cu): q, cache and out all bf16
/// or all f16, head dim 64 or 128, the GQA group at most kAttentionMaxGroup and group x
/// tokens_per_block at most kAttentionDecodeTcMaxRows (one mma tile of rows). Masks and
/// splits as the other kernel. AERIE_ATTN_DECODE_TC: -1 never (for measuring), 1 for every
/// such batch; unset, for those whose blocks (tokens / tokens_per_block x KV heads) fill the
/// `num_sms` multiprocessors, and for those of at most kAttentionDecodeTcSmallBlocks blocks,
/// as measured on the H200 (docs/performance.md): a batch of one (8B decode 83.3% -> 84-85% of
/// the floor, SmolLM2's step 0.70 -> 0.64 ms and its chain-5 verify graph 0.742 -> 0.663 ms),
/// not 8B's batch 4 (32 blocks: 83% -> 73.5%), and for sequences of several tokens in one-token
/// blocks of at most kAttentionOneTokenBlocksOnTensorCores. AERIE_ATTN_DECODE_TC_SMALL_BLOCKS=N sets another
/// bound for the first rule (0: none), for measuring.
constexpr int kAttentionDecodeTcMaxRows = 16;
constexpr int kAttentionDecodeTcSmallBlocks = 16;
// A batch of sequences of several tokens (a verify, a draft extend) whose one-token blocks are
// this few takes one token per block, on tensor cores: SmolLM2's chain-5 verify at batch 1 (6
// tokens x 3 KV heads = 18 blocks, against 9 blocks of 2 tokens) took 0.636 against 0.651 ms a
// graph on the H200, the real model's answers unchanged (docs/performance.md).
constexpr int kAttentionOneTokenBlocks = 18;
// Sequences of several tokens that no larger block fits (an odd count past four tokens) run in
// one-token blocks however many there are; up to this many they take the tensor cores too, the
// kernel their one-token decode steps take, so that a verify computes each row as a plain step
// does: SmolLM2's chain-6 verify at batch 1 (7 tokens x 3 KV heads = 21 blocks) on the CUDA-core
// kernel equalled plain decoding's greedy answers in 65 of 200 held-out prompts on an H100, where
// chains of 3-5 and 7 steps equalled them in 200 (docs/performance.md, thirty-sixth session).
constexpr int kAttentionOneTokenBlocksOnTensorCores = 24;
bool attention_decode_on_tensor_cores(const AttentionParams& p, int num_sms);

/// Writes this step's K and V rows into their cache slots: cache[slots[t]] = k[t].
struct KvWriteParams {
  TensorView k;         // [tokens, kv_heads, head_dim]
  TensorView v;         // [tokens, kv_heads, head_dim]
  TensorView slots;     // [tokens] i32 (out_cache_loc)
  TensorView k_cache;   // [num_slots, kv_heads, head_dim]
  TensorView v_cache;   // [num_slots, kv_heads, head_dim]
  void validate() const;
};
Status kv_write(const KvWriteParams& p, const Stream& stream);

/// Moves cache rows in order: for i = 0, 1, ...: cache[dst[i]] = cache[src[i]] (K and V of
/// every layer given). In order, so a row may be read by one move after an earlier move wrote
/// it; compacts the accepted path of a verified draft tree into consecutive positions. All the
/// layers in one launch on CUDA: a launch a layer cost a tree round at batch 1 ~0.1 ms of host
/// time on a 30-layer model (docs/performance.md).
struct KvMoveParams {
  TensorView src_slots;  // [moves] i32
  TensorView dst_slots;  // [moves] i32
  std::vector<TensorView> k_caches;  // one per layer, each [num_slots, kv_heads, head_dim]
  std::vector<TensorView> v_caches;  // the same shapes
  void validate() const;
};
Status kv_move(const KvMoveParams& p, const Stream& stream);

}  // namespace aerie::kernels
