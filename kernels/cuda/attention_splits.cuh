#pragma once
// Which keys a split of a decode-attention block takes, shared by the attention kernels
// (ops_attention.cu, ops_attention_decode.cu) and the merge of their splits, which must agree
// on it. CUDA-only header.
#include <cstdint>

namespace aerie::kernels::cuda {

// The keys of one (query block, KV head): a block serves `tokens_per_block` consecutive query
// tokens of sequence b, starting at its token i0; its keys are those its last token may see.
struct BlockKeys {
  int visible;  // keys [0, visible) are the block's to split
  int chunk;    // keys per split: the last used split may hold fewer; splits past the keys none

  // The number of splits that hold keys (0 when the block sees none).
  __device__ int used_splits() const { return (visible + chunk - 1) / chunk; }
  __device__ int begin(int split) const { return min(visible, split * chunk); }
  __device__ int end(int split) const { return min(visible, begin(split) + chunk); }
};

// The keys query i (of a sequence's q_len new tokens over kv_len slots) may see: [0, result).
// With a custom mask every key (the mask then says which); else causally.
__device__ __forceinline__ int visible_keys(int q_len, int kv_len, int i, bool masked) {
  return masked ? kv_len : min(kv_len, max(0, kv_len - q_len + i + 1));
}

// A block's keys are its last token's. At least min_split_keys keys a split
// (kernels/attention.hpp): a graph captured for the longest context keeps a shorter sequence in
// fewer, fuller splits.
__device__ __forceinline__ BlockKeys block_keys(int q_len, int kv_len, int i0, int tokens_per_block, bool masked, int num_splits,
                                                int min_split_keys) {
  const int visible = visible_keys(q_len, kv_len, i0 + tokens_per_block - 1, masked);
  return {visible, max(max(min_split_keys, 1), (visible + num_splits - 1) / num_splits)};
}

}  // namespace aerie::kernels::cuda
