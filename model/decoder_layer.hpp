#pragma once
// One decoder layer's attention and MLP, written once for the Llama target and the EAGLE
// heads (whose layers differ only in what feeds q/k/v and what happens to the output).
// Under tensor parallelism every weight is this rank's shard (model/tp_shard.hpp): qkv
// and gate/up produce this rank's heads and MLP rows, o_proj and down produce partial sums
// that are all-reduced over the TP group, so `hidden` and `residual` are whole on every rank.
#include "kernels/stream.hpp"
#include "kernels/tensor.hpp"
#include "kernels/weight_blocks.hpp"
#include "model/config.hpp"
#include "parallel/communicator.hpp"

namespace aerie::model {

// Views of one layer's (shard of the) weights.
struct DecoderLayerWeights {
  TensorView qkv;               // [(q + 2 kv) local, in], q/k rows pair-adjacent
  TensorView qkv_bias;          // optional
  TensorView o_proj;            // [hidden, q local]
  TensorView o_bias;            // [hidden], optional (TP rank 0 only)
  TensorView post_norm;         // [hidden]
  TensorView gate_up;           // [2 * intermediate local, hidden], interleaved
  TensorView gate_up_bias;      // optional
  TensorView down;              // [hidden, intermediate local]
  TensorView down_bias;         // [hidden], optional (TP rank 0 only)
  // Optional fp8 copies with row scales (an fp8 draft head; kernels/matmul.hpp).
  TensorView qkv_fp8, qkv_scale, o_proj_fp8, o_proj_scale, gate_up_fp8, gate_up_scale, down_fp8, down_scale;
  // Optional GGUF blocks of the projections (a GGUF model on the CPU; kernels/weight_blocks.hpp).
  kernels::WeightBlocks qkv_blocks, o_proj_blocks, gate_up_blocks, down_blocks;
};

// Activation views of this forward, [tokens, ...].
struct LayerActivations {
  TensorView hidden, residual, normed, qkv, q, attn, gate_up, act;
};

// What attention reads for this forward (the workspace's inputs and plan).
struct LayerAttention {
  TensorView positions, slots, inv_freq;
  float attention_scaling = 1.0f;
  TensorView qo_indptr, kv_indptr, kv_indices, custom_mask, mask_indptr, workspace;
  int num_splits = 1;
  int tokens_per_block = 1;
};

// attn_input [tokens, in]: the normed input of q/k/v. Writes this layer's K/V into the
// caches, then: residual += attention output (all-reduced), hidden = MLP output
// (all-reduced) of norm(residual). `local` is the layer's per-rank shape.
// next_norm [hidden]: the norm that reads this layer's output (the next layer's input norm,
// a final norm), optional; when given it is applied here, fused with the MLP's all-reduce
// (Communicator::all_reduce_residual_rms_norm): residual += hidden, normed =
// next_norm(residual), as the caller would have done.
void run_decoder_layer(const LlamaConfig& local, const DecoderLayerWeights& w, const TensorView& attn_input, const LayerActivations& a,
                       const LayerAttention& at, const TensorView& k_cache, const TensorView& v_cache, parallel::Communicator& tp,
                       const Stream& stream, const TensorView& next_norm = {});

// The two halves of run_decoder_layer, for DP attention (model/dp_attention.hpp), where the
// MLP runs on other rows than attention. Attention: K/V into the caches, residual +=
// attention output (all-reduced over `attn_tp`), normed = post_norm(residual).
void run_attention_block(const LlamaConfig& local, const DecoderLayerWeights& w, const TensorView& attn_input, const LayerActivations& a,
                         const LayerAttention& at, const TensorView& k_cache, const TensorView& v_cache, parallel::Communicator& attn_tp,
                         const Stream& stream);
// out [rows, hidden] = this rank's partial down(silu(gate) * up) of x [rows, hidden];
// gate_up [rows, 2 * intermediate local] and act [rows, intermediate local] are scratch.
void run_mlp_block(const DecoderLayerWeights& w, const TensorView& x, const TensorView& gate_up, const TensorView& act, const TensorView& out,
                   const Stream& stream);

}  // namespace aerie::model
