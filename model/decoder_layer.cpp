#include "model/decoder_layer.hpp"

#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rope_kv_write.hpp"

namespace aerie::model {

namespace ops = aerie::kernels;

void run_attention_block(const LlamaConfig& c, const DecoderLayerWeights& w, const TensorView& attn_input, const LayerActivations& a,
                         const LayerAttention& at, const TensorView& k_cache, const TensorView& v_cache, parallel::Communicator& tp,
                         const Stream& s) {
  const int64_t T = a.hidden.dim(0);
  AERIE_CHECK_STATUS(ops::qkv_rope({.x = attn_input, .w = w.qkv, .bias = w.qkv_bias, .w_fp8 = w.qkv_fp8, .w_scale = w.qkv_scale, .w_blocks = w.qkv_blocks, .qkv = a.qkv, .positions = at.positions,
                                    .inv_freq = at.inv_freq, .slots = at.slots, .q_out = a.q, .k_cache = k_cache, .v_cache = v_cache,
                                    .attention_scaling = at.attention_scaling},
                                   s));
  AERIE_CHECK_STATUS(ops::attention({.q = a.q, .k_cache = k_cache, .v_cache = v_cache, .out = a.attn, .qo_indptr = at.qo_indptr,
                                     .kv_indptr = at.kv_indptr, .kv_indices = at.kv_indices, .custom_mask = at.custom_mask,
                                     .mask_indptr = at.mask_indptr, .scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim)),
                                     .num_splits = at.num_splits, .workspace = at.workspace, .tokens_per_block = at.tokens_per_block},
                                    s));
  // Row-parallel: each rank's heads give a partial o_proj; the bias rides on one rank. The
  // all-reduce and the post-attention norm are one step (fused by the IPC communicator).
  AERIE_CHECK_STATUS(ops::matmul({.x = a.attn.reshape({T, c.q_size()}), .w = w.o_proj, .bias = w.o_bias, .w_fp8 = w.o_proj_fp8, .w_scale = w.o_proj_scale, .w_blocks = w.o_proj_blocks, .y = a.hidden}, s));
  tp.all_reduce_residual_rms_norm(a.hidden, a.residual, w.post_norm, a.normed, c.rms_norm_eps, s);
}

void run_mlp_block(const DecoderLayerWeights& w, const TensorView& x, const TensorView& gate_up, const TensorView& act, const TensorView& out,
                   const Stream& s) {
  AERIE_CHECK_STATUS(ops::gate_up_silu({.x = x, .w = w.gate_up, .bias = w.gate_up_bias, .w_fp8 = w.gate_up_fp8, .w_scale = w.gate_up_scale, .w_blocks = w.gate_up_blocks, .gate_up = gate_up, .out = act}, s));
  AERIE_CHECK_STATUS(ops::matmul({.x = act, .w = w.down, .bias = w.down_bias, .w_fp8 = w.down_fp8, .w_scale = w.down_scale, .w_blocks = w.down_blocks, .y = out}, s));
}

void run_decoder_layer(const LlamaConfig& c, const DecoderLayerWeights& w, const TensorView& attn_input, const LayerActivations& a,
                       const LayerAttention& at, const TensorView& k_cache, const TensorView& v_cache, parallel::Communicator& tp,
                       const Stream& s, const TensorView& next_norm) {
  run_attention_block(c, w, attn_input, a, at, k_cache, v_cache, tp, s);
  run_mlp_block(w, a.normed, a.gate_up, a.act, a.hidden, s);
  if (next_norm.defined()) {
    tp.all_reduce_residual_rms_norm(a.hidden, a.residual, next_norm, a.normed, c.rms_norm_eps, s);
  } else {
    tp.all_reduce_sum(a.hidden, s);
  }
}

}  // namespace aerie::model
