#include "model/llama_model.hpp"

#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope.hpp"
#include "kernels/silu_mul.hpp"

namespace aerie::model {

namespace ops = aerie::kernels;

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights, Stream stream, DType act_dtype)
    : config_(std::move(config)), weights_(std::move(weights)), stream_(stream), act_dtype_(act_dtype) {
  AERIE_CHECK(is_floating(act_dtype), "activation dtype must be f32, bf16 or f16");
  RopeFrequencies rope = rope_frequencies(config_);
  inv_freq_ = Buffer(stream_.device(), DType::kF32, {static_cast<int64_t>(rope.inv_freq.size())});
  inv_freq_.copy_from_host(rope.inv_freq.data(), inv_freq_.nbytes());
  attention_scaling_ = rope.attention_scaling;
}

Buffer LlamaModel::upload(const std::vector<int32_t>& v) const {
  Buffer b(stream_.device(), DType::kI32, {static_cast<int64_t>(v.size())});
  if (!v.empty()) b.copy_from_host(v.data(), b.nbytes());
  return b;
}

Buffer LlamaModel::forward(const ForwardBatch& batch, KvCache& kv) {
  batch.validate();
  const Device dev = stream_.device();
  const auto& c = config_;
  const int64_t T = batch.num_tokens(), H = c.hidden_size, Q = c.q_size(), KV = c.kv_size();
  const int64_t I = c.intermediate_size, R = static_cast<int64_t>(batch.logit_rows.size());

  Buffer ids = upload(batch.input_ids), positions = upload(batch.positions), slots = upload(batch.out_cache_loc);
  Buffer qo_indptr = upload(batch.qo_indptr), kv_indptr = upload(batch.kv_indptr), kv_indices = upload(batch.kv_indices);
  Buffer mask_indptr, mask;
  if (!batch.custom_mask.empty()) {
    mask_indptr = upload(batch.mask_indptr);
    mask = Buffer(dev, DType::kU8, {static_cast<int64_t>(batch.custom_mask.size())});
    mask.copy_from_host(batch.custom_mask.data(), mask.nbytes());
  }

  Buffer hidden(dev, act_dtype_, {T, H}), residual(dev, act_dtype_, {T, H}), normed(dev, act_dtype_, {T, H});
  Buffer q(dev, act_dtype_, {T, Q}), k(dev, act_dtype_, {T, KV}), v(dev, act_dtype_, {T, KV});
  Buffer attn(dev, act_dtype_, {T, Q}), gate_up(dev, act_dtype_, {T, 2 * I}), act(dev, act_dtype_, {T, I});
  residual.zero();

  AERIE_CHECK_STATUS(ops::embedding({.ids = ids.view(), .table = weights_.embed.view(), .out = hidden.view()}, stream_));
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto& L = weights_.layers[static_cast<size_t>(l)];
    // residual += hidden; normed = rmsnorm(residual)
    AERIE_CHECK_STATUS(ops::rms_norm({.x = hidden.view(), .weight = L.input_norm.view(), .residual = residual.view(),
                                      .y = normed.view(), .eps = c.rms_norm_eps}, stream_));
    // q, k, v from row slices of the merged projection.
    auto bias_slice = [&](int64_t b, int64_t e) { return L.qkv_bias.data() ? L.qkv_bias.view().slice_rows(b, e) : TensorView(); };
    AERIE_CHECK_STATUS(ops::matmul({.x = normed.view(), .w = L.qkv.view().slice_rows(0, Q), .bias = bias_slice(0, Q), .y = q.view()}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = normed.view(), .w = L.qkv.view().slice_rows(Q, Q + KV), .bias = bias_slice(Q, Q + KV), .y = k.view()}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = normed.view(), .w = L.qkv.view().slice_rows(Q + KV, Q + 2 * KV),
                                    .bias = bias_slice(Q + KV, Q + 2 * KV), .y = v.view()}, stream_));
    const TensorView q3 = q.view().reshape({T, c.num_heads, c.head_dim});
    const TensorView k3 = k.view().reshape({T, c.num_kv_heads, c.head_dim});
    const TensorView v3 = v.view().reshape({T, c.num_kv_heads, c.head_dim});
    AERIE_CHECK_STATUS(ops::rope({.q = q3, .k = k3, .positions = positions.view(), .inv_freq = inv_freq_.view(),
                                  .attention_scaling = attention_scaling_}, stream_));
    AERIE_CHECK_STATUS(ops::kv_write({.k = k3, .v = v3, .slots = slots.view(), .k_cache = kv.k(l), .v_cache = kv.v(l)}, stream_));
    AERIE_CHECK_STATUS(ops::attention({.q = q3, .k_cache = kv.k(l), .v_cache = kv.v(l),
                                       .out = attn.view().reshape({T, c.num_heads, c.head_dim}),
                                       .qo_indptr = qo_indptr.view(), .kv_indptr = kv_indptr.view(),
                                       .kv_indices = kv_indices.view(), .custom_mask = mask.view(),
                                       .mask_indptr = mask_indptr.view(), .scale = scale}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = attn.view(), .w = L.o_proj.view(), .bias = L.o_bias.view(), .y = hidden.view()}, stream_));
    AERIE_CHECK_STATUS(ops::rms_norm({.x = hidden.view(), .weight = L.post_norm.view(), .residual = residual.view(),
                                      .y = normed.view(), .eps = c.rms_norm_eps}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = normed.view(), .w = L.gate_up.view(), .bias = L.gate_up_bias.view(), .y = gate_up.view()}, stream_));
    AERIE_CHECK_STATUS(ops::silu_mul({.gate_up = gate_up.view(), .out = act.view()}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = act.view(), .w = L.down.view(), .bias = L.down_bias.view(), .y = hidden.view()}, stream_));
  }
  AERIE_CHECK_STATUS(ops::rms_norm({.x = hidden.view(), .weight = weights_.final_norm.view(), .residual = residual.view(),
                                    .y = normed.view(), .eps = c.rms_norm_eps}, stream_));
  Buffer logits(dev, DType::kF32, {R, c.vocab_size});
  if (R == 0) return logits;
  // Gather the rows that need logits (an embedding lookup into `normed`), then the LM head.
  Buffer rows = upload(batch.logit_rows);
  Buffer selected(dev, act_dtype_, {R, H});
  AERIE_CHECK_STATUS(ops::embedding({.ids = rows.view(), .table = normed.view(), .out = selected.view()}, stream_));
  AERIE_CHECK_STATUS(ops::matmul({.x = selected.view(), .w = weights_.lm_head_view(), .y = logits.view()}, stream_));
  return logits;
}

}  // namespace aerie::model
