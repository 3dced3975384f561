#include "model/llama_model.hpp"

#include <algorithm>
#include <cmath>

#include "kernels/attention.hpp"
#include "kernels/device_runtime.hpp"
#include "kernels/embedding.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope_kv_write.hpp"
#include "kernels/staging.hpp"

namespace aerie::model {

namespace ops = aerie::kernels;

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights, Stream stream, DType act_dtype)
    : config_(std::move(config)), weights_(std::move(weights)), stream_(stream), act_dtype_(act_dtype) {
  AERIE_CHECK(is_floating(act_dtype), "activation dtype must be f32, bf16 or f16");
  RopeFrequencies rope = rope_frequencies(config_);
  inv_freq_ = Buffer(stream_.device(), DType::kF32, {static_cast<int64_t>(rope.inv_freq.size())});
  inv_freq_.copy_from_host(rope.inv_freq.data(), inv_freq_.nbytes());
  attention_scaling_ = rope.attention_scaling;
  weight_bytes_ = weights_.total_bytes();
  num_sms_ = stream_.device() == Device::kCuda ? cuda_runtime::sm_count() : 1;
}

int64_t LlamaModel::weight_bytes_per_step(int64_t tokens) const {
  if (config_.tie_word_embeddings) return weight_bytes_;
  const int64_t row = config_.hidden_size * static_cast<int64_t>(dtype_size(weights_.embed.view().dtype));
  return weight_bytes_ - weights_.embed.nbytes() + tokens * row;
}

int LlamaModel::attention_tokens_per_block(const ForwardBatch& batch) const {
  // Verify-sized extends share K/V tiles among a sequence's tokens on CUDA (the CPU reference
  // has no blocks).
  if (stream_.device() != Device::kCuda) return 1;
  std::vector<int64_t> q_lens(static_cast<size_t>(std::max<int64_t>(batch.batch_size(), 0)));
  for (size_t b = 0; b < q_lens.size(); ++b) q_lens[b] = batch.qo_indptr[b + 1] - batch.qo_indptr[b];
  return ops::attention_tokens_per_block_for(q_lens, config_.num_heads / config_.num_kv_heads, config_.num_kv_heads, num_sms_);
}

int LlamaModel::attention_splits(int64_t query_blocks, int64_t max_kv_len) const {
  if (stream_.device() == Device::kCpu) return 1;
  return ops::attention_splits_for(query_blocks, config_.num_kv_heads, max_kv_len, num_sms_);
}

LlamaModel::AttentionPlan LlamaModel::attention_plan(const ForwardBatch& batch) const {
  int64_t max_kv = 1;
  for (int64_t b = 0; b < batch.batch_size(); ++b)
    max_kv = std::max<int64_t>(max_kv, batch.kv_indptr[static_cast<size_t>(b + 1)] - batch.kv_indptr[static_cast<size_t>(b)]);
  const int tpb = attention_tokens_per_block(batch);
  return {.tokens_per_block = tpb, .num_splits = attention_splits(batch.num_tokens() / tpb, max_kv)};
}

TensorView LlamaModel::forward(const ForwardBatch& batch, KvCache& kv) {
  batch.validate();
  const auto [tpb, splits] = attention_plan(batch);
  if (!eager_ws_ || !eager_ws_->fits(batch, splits)) {
    const ForwardCapacity cap = (eager_ws_ ? eager_ws_->capacity() : ForwardCapacity{}).grown_for(batch, splits);
    synchronize(stream_);  // the old workspace may still be in use
    eager_ws_ = std::make_unique<ForwardWorkspace>(config_, cap, stream_.device(), act_dtype_);
  }
  eager_ws_->upload(batch, stream_);
  return run(*eager_ws_, kv,
             {.tokens = batch.num_tokens(), .seqs = batch.batch_size(), .logit_rows = static_cast<int64_t>(batch.logit_rows.size()),
              .custom_mask = !batch.custom_mask.empty(), .num_splits = splits, .logits_all_rows = batch.logits_for_every_row(),
              .attention_tokens_per_block = tpb});
}

void LlamaModel::set_hidden_capture(HiddenCapture capture) {
  for (int64_t l : capture.aux_layers)
    AERIE_CHECK(l >= 0 && l < config_.num_layers, "cannot capture the hidden state entering layer " << l << " of " << config_.num_layers);
  capture_ = std::move(capture);
  captured_ = TensorView();
}

TensorView LlamaModel::captured_hidden() const {
  AERIE_CHECK(capture_.count() > 0 && captured_.data, "no hidden states were captured");
  return captured_;
}

void LlamaModel::captured_by_replay(const ForwardWorkspace& ws, int64_t tokens) {
  const int64_t width = capture_.count() * config_.hidden_size;
  captured_ = width > 0 && ws.captured.data() && ws.captured.view().dim(1) == width ? ws.captured.view().slice_rows(0, tokens) : TensorView();
}

TensorView LlamaModel::run(ForwardWorkspace& ws, KvCache& kv, const ForwardDims& d) {
  const auto& c = config_;
  const int64_t T = d.tokens, R = d.logit_rows;
  const int64_t H = c.hidden_size, width = capture_.count() * H;
  const size_t esize = dtype_size(act_dtype_);
  if (width > 0 && (!ws.captured.data() || ws.captured.view().dim(1) != width))
    ws.captured = Buffer(stream_.device(), act_dtype_, {ws.capacity().max_tokens, width});
  captured_ = width > 0 ? ws.captured.view().slice_rows(0, T) : TensorView();
  // Copies `from` ([T, H]) into column block `slot` of the capture buffer.
  auto capture_into = [&](int64_t slot, const TensorView& from) {
    copy_rows_async(static_cast<char*>(ws.captured.data()) + static_cast<size_t>(slot * H) * esize, static_cast<size_t>(width) * esize,
                    from.data, static_cast<size_t>(H) * esize, static_cast<size_t>(H) * esize, static_cast<size_t>(T), stream_);
  };
  AERIE_CHECK(T > 0 && T <= ws.capacity().max_tokens && d.seqs <= ws.capacity().max_seqs && R <= ws.capacity().max_logit_rows &&
                  d.num_splits <= ws.capacity().max_splits,
              "forward dims exceed the workspace");
  auto rows = [&](const Buffer& b, int64_t n) { return b.view().slice_rows(0, n); };
  const TensorView hidden = rows(ws.hidden, T), residual = rows(ws.residual, T), normed = rows(ws.normed, T);
  const TensorView qkv = rows(ws.qkv, T), q = rows(ws.q, T), attn = rows(ws.attn, T);
  const TensorView gate_up = rows(ws.gate_up, T), act = rows(ws.act, T);
  const float scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));

  // The embeddings are the residual stream entering layer 0.
  AERIE_CHECK_STATUS(ops::embedding({.ids = ws.ids(T), .table = weights_.embed.view(), .out = residual}, stream_));
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const auto& L = weights_.layers[static_cast<size_t>(l)];
    if (l == 0) {
      AERIE_CHECK_STATUS(ops::rms_norm({.x = residual, .weight = L.input_norm.view(), .y = normed, .eps = c.rms_norm_eps}, stream_));
    } else {
      AERIE_CHECK_STATUS(ops::rms_norm({.x = hidden, .weight = L.input_norm.view(), .residual = residual, .y = normed, .eps = c.rms_norm_eps}, stream_));
    }
    // `residual` now holds the stream entering layer l.
    for (size_t k = 0; k < capture_.aux_layers.size(); ++k)
      if (capture_.aux_layers[k] == l) capture_into((capture_.final_normed ? 1 : 0) + static_cast<int64_t>(k), residual);
    AERIE_CHECK_STATUS(ops::qkv_rope({.x = normed, .w = L.qkv.view(), .bias = L.qkv_bias.view(), .qkv = qkv, .positions = ws.positions(T),
                                      .inv_freq = inv_freq_.view(), .slots = ws.slots(T), .q_out = q, .k_cache = kv.k(l),
                                      .v_cache = kv.v(l), .attention_scaling = attention_scaling_}, stream_));
    AERIE_CHECK_STATUS(ops::attention({.q = q, .k_cache = kv.k(l), .v_cache = kv.v(l), .out = attn, .qo_indptr = ws.qo_indptr(d.seqs),
                                       .kv_indptr = ws.kv_indptr(d.seqs), .kv_indices = ws.kv_indices(),
                                       .custom_mask = d.custom_mask ? ws.mask() : TensorView(),
                                       .mask_indptr = d.custom_mask ? ws.mask_indptr(d.seqs) : TensorView(), .scale = scale,
                                       .num_splits = d.num_splits, .workspace = ws.attn_partial.view(),
                                       .tokens_per_block = d.attention_tokens_per_block}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = attn.reshape({T, c.q_size()}), .w = L.o_proj.view(), .bias = L.o_bias.view(), .y = hidden}, stream_));
    AERIE_CHECK_STATUS(ops::rms_norm({.x = hidden, .weight = L.post_norm.view(), .residual = residual, .y = normed, .eps = c.rms_norm_eps}, stream_));
    AERIE_CHECK_STATUS(ops::gate_up_silu({.x = normed, .w = L.gate_up.view(), .bias = L.gate_up_bias.view(), .gate_up = gate_up, .out = act}, stream_));
    AERIE_CHECK_STATUS(ops::matmul({.x = act, .w = L.down.view(), .bias = L.down_bias.view(), .y = hidden}, stream_));
  }
  AERIE_CHECK_STATUS(ops::rms_norm({.x = hidden, .weight = weights_.final_norm.view(), .residual = residual, .y = normed, .eps = c.rms_norm_eps}, stream_));
  if (capture_.final_normed) capture_into(0, normed);
  const TensorView logits = rows(ws.logits, R);
  if (R == 0) return logits;
  // Gather the rows that need logits (an embedding lookup into `normed`), then the LM head;
  // a decode step wants every row, in order, and skips the gather.
  TensorView selected = rows(ws.normed, R);
  if (!d.logits_all_rows) {
    selected = rows(ws.selected, R);
    AERIE_CHECK_STATUS(ops::embedding({.ids = ws.logit_rows(R), .table = normed, .out = selected}, stream_));
  }
  AERIE_CHECK_STATUS(ops::matmul({.x = selected, .w = weights_.lm_head_view(), .y = logits}, stream_));
  return logits;
}

}  // namespace aerie::model
