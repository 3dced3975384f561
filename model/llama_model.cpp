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
#include "model/decoder_layer.hpp"
#include "model/vocab_parallel.hpp"

namespace aerie::model {

namespace ops = aerie::kernels;

namespace {
// A DP plan serves one forward, whether it ran or threw.
struct PlanUsedUp {
  std::optional<parallel::DpPaddingPlan>& plan;
  ~PlanUsedUp() { plan.reset(); }
};
}  // namespace

LlamaModel::LlamaModel(LlamaConfig config, LlamaWeights weights, Stream stream, DType act_dtype,
                       std::shared_ptr<parallel::Communicator> tp, std::shared_ptr<DpAttentionGroups> dp)
    : config_(std::move(config)),
      tp_(tp ? std::move(tp) : std::shared_ptr<parallel::Communicator>(parallel::make_single_communicator())),
      dp_(std::move(dp)),
      shard_{.rank = tp_->rank(), .size = tp_->size(), .mlp_rank = dp_ ? dp_->mlp->rank() : 0, .mlp_size = dp_ ? dp_->mlp->size() : 0},
      weights_(std::move(weights)),
      stream_(stream),
      act_dtype_(act_dtype) {
  AERIE_CHECK(is_floating(act_dtype), "activation dtype must be f32, bf16 or f16");
  if (dp_) {
    AERIE_CHECK(dp_->attn && dp_->attn->size() == tp_->size() && dp_->mlp && dp_->peers &&
                    dp_->mlp->size() == dp_->attn->size() * dp_->peers->size(),
                "DP attention: the attention-TP group times the DP groups must be the MLP's ranks");
    TpShard::check_divisible(config_, shard_.size, shard_.mlp_ranks(), "the model");
  } else {
    TpShard::check_divisible(config_, shard_.size, "the model");
  }
  local_ = shard_.local(config_);
  AERIE_CHECK(weights_.layers.size() == static_cast<size_t>(config_.num_layers) &&
                  (config_.num_layers == 0 || weights_.layers[0].qkv.view().dim(0) == local_.q_size() + 2 * local_.kv_size()) &&
                  weights_.embed.view().dim(0) == shard_.vocab_rows(config_.vocab_size),
              "the weights are not TP rank " << shard_.rank << " of " << shard_.size << "'s shard of this model");
  RopeFrequencies rope = rope_frequencies(config_);
  inv_freq_ = Buffer(stream_.device(), DType::kF32, {static_cast<int64_t>(rope.inv_freq.size())});
  inv_freq_.copy_from_host(rope.inv_freq.data(), inv_freq_.nbytes());
  attention_scaling_ = rope.attention_scaling;
  weight_bytes_ = weights_.total_bytes();
  num_sms_ = stream_.device() == Device::kCuda ? cuda_runtime::sm_count() : 1;
}

int64_t LlamaModel::weight_bytes_per_step(int64_t tokens) const {
  // Up to kBlocksMaxRows rows, a CPU product reads a weight's GGUF blocks where it has them.
  const int64_t all = tokens <= kernels::kBlocksMaxRows ? weights_.decode_bytes() : weight_bytes_;
  if (config_.tie_word_embeddings) return all;
  const int64_t row = config_.hidden_size * static_cast<int64_t>(dtype_size(weights_.embed.view().dtype));
  return all - weights_.embed.nbytes() + tokens * row;
}

std::unique_ptr<ForwardWorkspace> LlamaModel::make_workspace(const ForwardCapacity& capacity) const {
  return std::make_unique<ForwardWorkspace>(local_, capacity, stream_.device(), act_dtype_, shard_.size);
}

int LlamaModel::attention_tokens_per_block(const ForwardBatch& batch) const {
  // Verify-sized extends share K/V tiles among a sequence's tokens on CUDA (the CPU reference
  // has no blocks).
  if (stream_.device() != Device::kCuda) return 1;
  std::vector<int64_t> q_lens(static_cast<size_t>(std::max<int64_t>(batch.batch_size(), 0)));
  for (size_t b = 0; b < q_lens.size(); ++b) q_lens[b] = batch.qo_indptr[b + 1] - batch.qo_indptr[b];
  return ops::attention_tokens_per_block_for(q_lens, local_.num_heads / local_.num_kv_heads, local_.num_kv_heads, num_sms_);
}

int LlamaModel::attention_splits(int64_t query_blocks, int64_t max_kv_len) const {
  if (stream_.device() == Device::kCpu) return 1;
  return ops::attention_splits_for(query_blocks, local_.num_kv_heads, max_kv_len, num_sms_);
}

LlamaModel::AttentionPlan LlamaModel::attention_plan(const ForwardBatch& batch) const {
  int64_t max_kv = 1;
  for (int64_t b = 0; b < batch.batch_size(); ++b)
    max_kv = std::max<int64_t>(max_kv, batch.kv_indptr[static_cast<size_t>(b + 1)] - batch.kv_indptr[static_cast<size_t>(b)]);
  const int tpb = attention_tokens_per_block(batch);
  return {.tokens_per_block = tpb, .num_splits = attention_splits(batch.num_tokens() / tpb, max_kv)};
}

void LlamaModel::set_dp_plan(parallel::DpPaddingPlan plan) {
  AERIE_CHECK(dp_, "a DP padding plan was given to a model without DP attention");
  AERIE_CHECK(static_cast<int>(plan.global_num_tokens.size()) == dp_->dp_size(),
              "the step's plan counts " << plan.global_num_tokens.size() << " DP groups, the launch has " << dp_->dp_size());
  dp_plan_ = std::move(plan);
}

DecoderLayerWeights LlamaModel::layer_views(int64_t l) const {
  const auto& L = weights_.layers[static_cast<size_t>(l)];
  return {.qkv = L.qkv.view(), .qkv_bias = L.qkv_bias.view(), .o_proj = L.o_proj.view(), .o_bias = L.o_bias.view(),
          .post_norm = L.post_norm.view(), .gate_up = L.gate_up.view(), .gate_up_bias = L.gate_up_bias.view(),
          .down = L.down.view(), .down_bias = L.down_bias.view(), .qkv_blocks = L.qkv_blocks.view(), .o_proj_blocks = L.o_proj_blocks.view(),
          .gate_up_blocks = L.gate_up_blocks.view(), .down_blocks = L.down_blocks.view()};
}

void LlamaModel::dp_mlp(int64_t l, const TensorView& normed_local, const TensorView& out_local) {
  const parallel::DpPaddingPlan& plan = *dp_plan_;
  const int64_t G = plan.gathered_rows;
  auto rows = [&](const Buffer& b) { return b.view().slice_rows(0, G); };
  const TensorView global_normed = rows(dp_buf_.normed), global_hidden = rows(dp_buf_.hidden);
  dp_gather(plan, normed_local, global_normed, dp_buf_.block.view(), *dp_, stream_);
  run_mlp_block(layer_views(l), global_normed, rows(dp_buf_.gate_up), rows(dp_buf_.act), global_hidden, stream_);
  dp_scatter(plan, global_hidden, out_local, dp_buf_.block.view(), *dp_, stream_);
}

void LlamaModel::forward_idle(KvCache& kv) {
  AERIE_CHECK(dp_ && dp_plan_, "an idle forward is for DP attention, with the step's plan");
  if (dp_plan_->bucket) {  // every rank runs the bucket, padded requests only here
    forward(ForwardBatch{}, kv);
    return;
  }
  const PlanUsedUp used{dp_plan_};
  const parallel::DpPaddingPlan& plan = *dp_plan_;
  AERIE_CHECK(plan.global_num_tokens.at(static_cast<size_t>(dp_->dp_rank())) == 0, "an idle forward, but the plan gives this group tokens");
  dp_buf_.reserve(plan.gathered_rows, plan.tokens_per_rank, config_.hidden_size, 2 * local_.intermediate_size, stream_.device(), act_dtype_);
  for (int64_t l = 0; l < config_.num_layers; ++l) dp_mlp(l, TensorView(), TensorView());
}

TensorView LlamaModel::forward(const ForwardBatch& batch_in, KvCache& kv) {
  // DP attention with a bucket: this group's batch padded to it, as every other group's is.
  std::optional<ForwardBatch> padded;
  const PlanUsedUp used{dp_plan_};
  if (dp_) {
    AERIE_CHECK(dp_plan_, "a DP-attention forward needs the step's padding plan (global token counts)");
    if (dp_plan_->bucket) padded = pad_to_bucket(batch_in, *dp_plan_->bucket, dp_plan_->tokens_per_request);
    const int64_t tokens = padded ? padded->num_tokens() : batch_in.num_tokens();
    dp_buf_.reserve(dp_plan_->gathered_rows, dp_plan_->tokens_per_rank, config_.hidden_size, 2 * local_.intermediate_size, stream_.device(),
                    act_dtype_);
    AERIE_CHECK(tokens == (dp_plan_->bucket ? dp_plan_->tokens_per_rank : dp_plan_->global_num_tokens.at(static_cast<size_t>(dp_->dp_rank()))),
                "this group's batch of " << batch_in.num_tokens() << " tokens is not what the step's plan says");
  }
  const ForwardBatch& batch = padded ? *padded : batch_in;
  batch.validate();
  const auto [tpb, splits] = attention_plan(batch);
  if (!eager_ws_ || !eager_ws_->fits(batch, splits)) {
    const ForwardCapacity cap = (eager_ws_ ? eager_ws_->capacity() : ForwardCapacity{}).grown_for(batch, splits);
    synchronize(stream_);  // the old workspace may still be in use
    eager_ws_ = make_workspace(cap);
  }
  eager_ws_->upload(batch, stream_);
  const TensorView logits =
      run(*eager_ws_, kv,
          {.tokens = batch.num_tokens(), .seqs = batch.batch_size(), .logit_rows = static_cast<int64_t>(batch.logit_rows.size()),
           .custom_mask = !batch.custom_mask.empty(), .num_splits = splits, .logits_all_rows = batch.logits_for_every_row(),
           .attention_tokens_per_block = tpb});
  if (!padded) return logits;
  // The real rows come first in a padded batch: slice the padding away.
  if (captured_.data) captured_ = captured_.slice_rows(0, batch_in.num_tokens());
  return logits.slice_rows(0, static_cast<int64_t>(batch_in.logit_rows.size()));
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
  const auto& c = local_;
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
  const LayerActivations a{.hidden = rows(ws.hidden, T), .residual = rows(ws.residual, T), .normed = rows(ws.normed, T),
                           .qkv = rows(ws.qkv, T), .q = rows(ws.q, T), .attn = rows(ws.attn, T), .gate_up = rows(ws.gate_up, T),
                           .act = rows(ws.act, T)};
  const LayerAttention at{.positions = ws.positions(T), .slots = ws.slots(T), .inv_freq = inv_freq_.view(),
                          .attention_scaling = attention_scaling_, .qo_indptr = ws.qo_indptr(d.seqs), .kv_indptr = ws.kv_indptr(d.seqs),
                          .kv_indices = ws.kv_indices(), .custom_mask = d.custom_mask ? ws.mask() : TensorView(),
                          .mask_indptr = d.custom_mask ? ws.mask_indptr(d.seqs) : TensorView(), .workspace = ws.attn_partial.view(),
                          .num_splits = d.num_splits, .tokens_per_block = d.attention_tokens_per_block};

  // The embeddings are the residual stream entering layer 0.
  vocab_parallel_embedding(ws.ids(T), weights_.embed.view(), shard_.first_vocab(config_.vocab_size), a.residual, *tp_, stream_);
  // Layer 0's input norm reads the embeddings; every later norm (the next layer's input
  // norm, the final norm) is applied by the layer before it, fused with its all-reduce.
  AERIE_CHECK_STATUS(ops::rms_norm({.x = a.residual, .weight = weights_.layers[0].input_norm.view(), .y = a.normed, .eps = c.rms_norm_eps},
                                   stream_));
  AERIE_CHECK(!dp_ || dp_plan_, "a DP-attention forward needs the step's padding plan; a captured graph cannot hold one");
  for (int64_t l = 0; l < c.num_layers; ++l) {
    // `residual` now holds the stream entering layer l.
    for (size_t k = 0; k < capture_.aux_layers.size(); ++k)
      if (capture_.aux_layers[k] == l) capture_into((capture_.final_normed ? 1 : 0) + static_cast<int64_t>(k), a.residual);
    const TensorView next_norm =
        l + 1 < c.num_layers ? weights_.layers[static_cast<size_t>(l + 1)].input_norm.view() : weights_.final_norm.view();
    if (!dp_) {
      run_decoder_layer(c, layer_views(l), a.normed, a, at, kv.k(l), kv.v(l), *tp_, stream_, next_norm);
      continue;
    }
    // DP attention: attention on this group's rows, the MLP on every group's, then the
    // residual add and the next norm here (the MLP's sum was the scatter's).
    run_attention_block(c, layer_views(l), a.normed, a, at, kv.k(l), kv.v(l), *tp_, stream_);
    dp_mlp(l, a.normed, a.hidden);
    AERIE_CHECK_STATUS(ops::rms_norm({.x = a.hidden, .weight = next_norm, .residual = a.residual, .y = a.normed, .eps = c.rms_norm_eps}, stream_));
  }
  if (capture_.final_normed) capture_into(0, a.normed);
  const TensorView logits = rows(ws.logits, R);
  if (R == 0) return logits;
  // Gather the rows that need logits (an embedding lookup into `normed`), then the LM head;
  // a decode step wants every row, in order, and skips the gather.
  TensorView selected = rows(ws.normed, R);
  if (!d.logits_all_rows) {
    selected = rows(ws.selected, R);
    AERIE_CHECK_STATUS(ops::embedding({.ids = ws.logit_rows(R), .table = a.normed, .out = selected}, stream_));
  }
  vocab_parallel_logits(selected, weights_.lm_head_view(), config_.vocab_size, logits,
                        {.shard_logits = ws.shard_logits.view(), .gathered = ws.gathered_logits.view()}, *tp_, stream_, {}, {},
                        weights_.lm_head_blocks.view());
  return logits;
}

}  // namespace aerie::model
