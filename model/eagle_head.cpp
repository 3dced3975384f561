#include "model/eagle_head.hpp"

#include <cmath>
#include <cstring>
#include <sstream>
#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/attention.hpp"
#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/embedding.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"
#include "kernels/matmul.hpp"
#include "kernels/rms_norm.hpp"
#include "kernels/rope_kv_write.hpp"
#include "kernels/staging.hpp"
#include "model/decoder_layer.hpp"
#include "model/fp8_weights.hpp"
#include "model/forward_workspace.hpp"
#include "model/vocab_parallel.hpp"
#include "model/safetensors.hpp"
#include "model/weight_layout.hpp"

namespace aerie::model {

namespace ops = aerie::kernels;

namespace {

std::vector<int64_t> default_aux_layers(int64_t L) { return {std::min<int64_t>(2, L - 1), L / 2, std::max<int64_t>(0, L - 3)}; }

void check_layer_matches(const LlamaConfig& layer, const LlamaConfig& target, const std::string& source) {
  AERIE_CHECK(layer.hidden_size == target.hidden_size,
              source << ": hidden_size " << layer.hidden_size << " differs from the target's " << target.hidden_size);
  AERIE_CHECK(layer.vocab_size == target.vocab_size,
              source << ": vocab_size " << layer.vocab_size << " differs from the target's " << target.vocab_size);
}

}  // namespace

EagleHeadConfig EagleHeadConfig::for_target(EagleKind kind, const LlamaConfig& target, int64_t draft_vocab) {
  EagleHeadConfig c;
  c.kind = kind;
  c.layer = target;
  c.layer.num_layers = 1;
  c.layer.architecture = kind == EagleKind::kEagle3 ? "LlamaForCausalLMEagle3" : "LlamaForCausalLMEagle";
  c.draft_vocab = kind == EagleKind::kEagle3 ? (draft_vocab > 0 ? draft_vocab : target.vocab_size) : target.vocab_size;
  AERIE_CHECK(c.draft_vocab <= target.vocab_size, "a draft vocabulary of " << c.draft_vocab << " exceeds the target's " << target.vocab_size);
  if (kind == EagleKind::kEagle3) c.aux_layers = default_aux_layers(target.num_layers);
  return c;
}

EagleHeadConfig EagleHeadConfig::load(const std::filesystem::path& dir, const LlamaConfig& target) {
  const auto path = dir / "config.json";
  std::ifstream in(path);
  AERIE_CHECK(in.good(), path.string() << ": cannot open (is --speculative-draft-model-path an EAGLE head folder?)");
  std::stringstream ss;
  ss << in.rdbuf();
  EagleHeadConfig c;
  c.layer = LlamaConfig::from_json_text(ss.str(), path.string());
  const auto j = nlohmann::json::parse(ss.str());
  AERIE_CHECK(c.layer.architecture == "LlamaForCausalLMEagle" || c.layer.architecture == "LlamaForCausalLMEagle3",
              path.string() << ": architecture " << c.layer.architecture << " is not an EAGLE head");
  c.kind = c.layer.architecture == "LlamaForCausalLMEagle3" ? EagleKind::kEagle3 : EagleKind::kEagle1;
  check_layer_matches(c.layer, target, path.string());
  c.draft_vocab = c.layer.vocab_size;
  if (c.kind == EagleKind::kEagle3) {
    if (j.contains("draft_vocab_size") && j["draft_vocab_size"].is_number_integer()) c.draft_vocab = j["draft_vocab_size"].get<int64_t>();
    AERIE_CHECK(c.draft_vocab > 0 && c.draft_vocab <= target.vocab_size, path.string() << ": draft_vocab_size " << c.draft_vocab << " is not in (0, "
                                                                                      << target.vocab_size << "]");
    c.aux_layers = default_aux_layers(target.num_layers);
    // sglang: eagle_config.eagle_aux_hidden_state_layer_ids name layers whose *output* is
    // used, i.e. the input of the next layer.
    if (j.contains("eagle_config") && j["eagle_config"].is_object() && j["eagle_config"].contains("eagle_aux_hidden_state_layer_ids")) {
      c.aux_layers.clear();
      for (const auto& x : j["eagle_config"]["eagle_aux_hidden_state_layer_ids"]) {
        AERIE_CHECK(x.is_number_integer(), path.string() << ": eagle_aux_hidden_state_layer_ids must hold integers");
        c.aux_layers.push_back(x.get<int64_t>() + 1);
      }
      AERIE_CHECK(c.aux_layers.size() == 3, path.string() << ": EAGLE3 needs three aux hidden-state layers");
    }
    for (int64_t l : c.aux_layers)
      AERIE_CHECK(l >= 0 && l < target.num_layers, path.string() << ": aux hidden-state layer " << l << " is outside the target's "
                                                                 << target.num_layers << " layers");
  }
  c.layer.num_layers = 1;
  return c;
}

EagleHeadWeights load_eagle_head(const std::filesystem::path& dir, const EagleHeadConfig& c, Device device, DType dtype,
                                 const TpShard& shard) {
  CheckpointReader ckpt(dir);
  const bool e3 = c.kind == EagleKind::kEagle3;
  // Heads are published with and without a "model." prefix on their layer tensors.
  auto name_of = [&](const std::string& n) {
    if (ckpt.has(n)) return n;
    if (ckpt.has("model." + n)) return "model." + n;
    AERIE_FAIL(dir.string() << ": EAGLE head has no tensor '" << n << "'");
  };
  auto get = [&](const std::string& n, std::initializer_list<int64_t> shape) {
    const std::string name = name_of(n);
    TensorView t = ckpt.get(name, shape);
    check_float_tensor(ckpt, name, t);
    return t;
  };
  const auto& L = c.layer;
  const int64_t h = L.hidden_size, in = e3 ? 2 * h : h;
  const std::string p = e3 ? "midlayer." : "layers.0.";
  EagleHeadWeights w;
  w.fc = copy_of(get("fc.weight", {h, e3 ? 3 * h : 2 * h}), device, dtype);
  if (e3) {
    w.input_norm = copy_of(get(p + "input_layernorm.weight", {h}), device, dtype);
    w.hidden_norm = copy_of(get(p + "hidden_norm.weight", {h}), device, dtype);
  }
  LayerProjections P = load_layer_projections(get, p, L, in, device, dtype, shard);
  w.qkv = std::move(P.qkv);
  w.o_proj = std::move(P.o_proj);
  w.post_norm = std::move(P.post_norm);
  w.gate_up = std::move(P.gate_up);
  w.down = std::move(P.down);
  if (e3) {
    w.norm = copy_of(get("norm.weight", {h}), device, dtype);
    w.lm_head = vocab_shard_of(get("lm_head.weight", {c.draft_vocab, h}), shard, device, dtype);
    if (ckpt.has("d2t")) {
      const TensorInfo& info = ckpt.info("d2t");
      AERIE_CHECK(info.dtype_name == "I64" && info.shape == std::vector<int64_t>{c.draft_vocab},
                  ckpt.file_of("d2t") << ": d2t must be I64 [" << c.draft_vocab << "]");
      w.d2t.resize(static_cast<size_t>(c.draft_vocab));
      for (int64_t i = 0; i < c.draft_vocab; ++i) {
        int64_t off = 0;
        std::memcpy(&off, static_cast<const char*>(info.data) + i * 8, 8);
        AERIE_CHECK(i + off >= 0 && i + off < L.vocab_size, ckpt.file_of("d2t") << ": d2t maps draft id " << i << " outside the vocabulary");
        w.d2t[static_cast<size_t>(i)] = static_cast<int32_t>(off);
      }
    } else {
      AERIE_CHECK(c.draft_vocab == L.vocab_size, dir.string() << ": a reduced draft vocabulary needs the d2t tensor");
    }
  }
  return w;
}

EagleHeadWeights random_eagle_head(const EagleHeadConfig& c, uint64_t seed, Device device, DType dtype, const TpShard& s) {
  uint64_t tensor = 0;
  auto next = [&] { return seed * 0x9E3779B97F4A7C15ull + 0x5151 + (++tensor); };
  const bool e3 = c.kind == EagleKind::kEagle3;
  const auto& L = c.layer;
  const int64_t h = L.hidden_size, q = L.q_size(), kv = L.kv_size(), inter = L.intermediate_size, in = e3 ? 2 * h : h;
  constexpr float kStd = 0.02f;
  EagleHeadWeights w;
  w.fc = random_buffer(next(), {h, e3 ? 3 * h : 2 * h}, kStd, device, dtype);
  if (e3) {
    w.input_norm = random_buffer(next(), {h}, 0.0f, device, dtype, 1.0f);
    w.hidden_norm = random_buffer(next(), {h}, 0.0f, device, dtype, 1.0f);
  }
  // Drawn whole, then cut to the shard (the same head at every TP size).
  w.qkv = cut_block(random_buffer(next(), {q + 2 * kv, in}, kStd, device, dtype), qkv_rows_of(L, s));
  w.o_proj = cut_block(random_buffer(next(), {h, q}, kStd, device, dtype), {{0, h}}, s.first_head(L) * L.head_dim, s.heads(L) * L.head_dim);
  w.post_norm = random_buffer(next(), {h}, 0.0f, device, dtype, 1.0f);
  w.gate_up = cut_block(random_buffer(next(), {2 * inter, h}, kStd, device, dtype), {{2 * s.first_intermediate(L), 2 * s.intermediate(L)}});
  w.down = cut_block(random_buffer(next(), {h, inter}, kStd, device, dtype), {{0, h}}, s.first_intermediate(L), s.intermediate(L));
  if (e3) {
    w.norm = random_buffer(next(), {h}, 0.0f, device, dtype, 1.0f);
    w.lm_head = vocab_shard_of(random_buffer(next(), {c.draft_vocab, h}, kStd, device, dtype), s);
    if (c.draft_vocab < L.vocab_size) {  // a reduced vocabulary: every k-th target id
      const int64_t stride = L.vocab_size / c.draft_vocab;
      for (int64_t i = 0; i < c.draft_vocab; ++i) w.d2t.push_back(static_cast<int32_t>(i * stride - i));
    }
  }
  return w;
}

EagleHead::EagleHead(EagleHeadConfig config, EagleHeadWeights weights, const LlamaModel& target)
    : config_(std::move(config)),
      w_(std::move(weights)),
      target_(target),
      stream_(target.stream()),
      act_(target.act_dtype()),
      solo_(parallel::make_single_communicator()) {
  AERIE_CHECK(config_.layer.hidden_size == target.config().hidden_size, "the EAGLE head's hidden size differs from the target's");
  const TpShard shard = config_.replicated ? TpShard{} : target.shard().attention_only();  // in the attention-TP group
  TpShard::check_divisible(config_.layer, shard.size, "the EAGLE head");
  local_ = shard.local(config_.layer);
  AERIE_CHECK(w_.qkv.view().dim(0) == local_.q_size() + 2 * local_.kv_size(),
              "the EAGLE head's weights are not TP rank " << shard.rank << " of " << shard.size << "'s shard");
  if (!config_.hot_tokens.empty()) {
    AERIE_CHECK(config_.kind == EagleKind::kEagle1, "a hot-token map is for EAGLE heads; an EAGLE3 head carries its own d2t");
    // The LM head: the hot rows of the target's, gathered once (whole, on every TP rank).
    const auto n = static_cast<int64_t>(config_.hot_tokens.size());
    const TensorView table = target.weights().lm_head_view();
    Buffer ids(stream_.device(), DType::kI32, {n});
    ids.copy_from_host(config_.hot_tokens.data(), ids.nbytes());
    w_.lm_head = Buffer(stream_.device(), table.dtype, {n, table.dim(1)});
    vocab_parallel_embedding(ids.view(), table, target.shard().first_vocab(target.config().vocab_size), w_.lm_head.view(), target.tp(), stream_);
    synchronize(stream_);
    w_.d2t.resize(static_cast<size_t>(n));
    for (int64_t i = 0; i < n; ++i) w_.d2t[static_cast<size_t>(i)] = config_.hot_tokens[static_cast<size_t>(i)] - static_cast<int32_t>(i);
    config_.draft_vocab = n;
  }
  const bool int8_blocks = config_.quantization == DraftQuantization::kW8A8Int8;
  if (int8_blocks) {
    // Asked for speed alone (the draft's numbers only move acceptance), so refused where it
    // would not give it: the scalar reference loop is many times slower than the bf16 products.
    AERIE_CHECK(stream_.device() == Device::kCpu && act_ == DType::kF32,
                "--speculative-draft-model-quantization w8a8_int8 is for the CPU with f32 activations (on a GPU: fp8)");
    AERIE_CHECK(kernels::cpu::amx_int8_available(),
                "--speculative-draft-model-quantization w8a8_int8 needs AMX-INT8, which this CPU (or its kernel) does not offer");
  }
  if (config_.quantization == DraftQuantization::kFp8) quantize_to_fp8();
  else if (stream_.device() == Device::kCpu && act_ == DType::kF32 && (int8_blocks || int8_activations_asked())) quantize_to_int8_blocks();
}

namespace {

// A CPU [n, k] float weight as Q8_0 blocks in tile order; none where the shape does not tile.
BlockBuffer int8_tile_blocks(const Buffer& w) {
  constexpr auto f = kernels::BlockFormat::kQ8_0;
  if (!w.data()) return {};
  const int64_t n = w.view().dim(0), k = w.view().dim(1);
  if (n % kernels::kTileGroupRows != 0 || k % kernels::kBlockElements != 0) return {};
  std::vector<float> values(static_cast<size_t>(n * k));
  convert_to_float(w.data(), w.view().dtype, n * k, values.data());
  std::vector<unsigned char> rows(static_cast<size_t>(n * kernels::block_row_bytes(f, k)));
  kernels::quantize_q8_0_blocks(values.data(), n, k, rows.data());
  return tile_order_blocks(f, rows.data(), n, k);
}

// The head's products: each weight with its fp8 copy and its int8 blocks. Its own LM head
// (EAGLE3's, or the hot rows of the target's) only where it has one; a plain EAGLE head reads
// the target's, which gets no copy.
struct HeadProduct {
  Buffer EagleHeadWeights::*weight;
  Fp8Rows EagleHeadWeights::*fp8;
  BlockBuffer EagleHeadWeights::*blocks;
};
constexpr HeadProduct kHeadProducts[] = {
    {&EagleHeadWeights::fc, &EagleHeadWeights::fc_fp8, &EagleHeadWeights::fc_blocks},
    {&EagleHeadWeights::qkv, &EagleHeadWeights::qkv_fp8, &EagleHeadWeights::qkv_blocks},
    {&EagleHeadWeights::o_proj, &EagleHeadWeights::o_proj_fp8, &EagleHeadWeights::o_proj_blocks},
    {&EagleHeadWeights::gate_up, &EagleHeadWeights::gate_up_fp8, &EagleHeadWeights::gate_up_blocks},
    {&EagleHeadWeights::down, &EagleHeadWeights::down_fp8, &EagleHeadWeights::down_blocks},
    {&EagleHeadWeights::lm_head, &EagleHeadWeights::lm_head_fp8, &EagleHeadWeights::lm_head_blocks},
};

}  // namespace

void EagleHead::quantize_to_int8_blocks() {
  // Q8_0: the head's weights lose ~0.4% of a block's largest; 4-bit blocks (Q4_0, tried) cost
  // more acceptance (2.51 -> 2.24 at chain 3) than their bytes saved (docs/performance.md).
  for (const auto& p : kHeadProducts)
    if ((w_.*p.weight).data()) w_.*p.blocks = int8_tile_blocks(w_.*p.weight);
}

void EagleHead::quantize_to_fp8() {
  for (const auto& p : kHeadProducts)
    if ((w_.*p.weight).data()) w_.*p.fp8 = quantize_fp8_rows(w_.*p.weight);
}

parallel::Communicator& EagleHead::layer_group() const { return config_.replicated ? *solo_ : target_.tp(); }

parallel::Communicator& EagleHead::lm_head_group() const {
  if (!config_.hot_tokens.empty()) return *solo_;  // gathered whole
  if (config_.kind == EagleKind::kEagle1) return target_.tp();  // the target's own LM head
  return config_.replicated ? *solo_ : target_.tp();
}

int64_t EagleHead::vocab() const {
  return (config_.kind == EagleKind::kEagle3 || !config_.hot_tokens.empty()) ? config_.draft_vocab : config_.layer.vocab_size;
}

int32_t EagleHead::to_target(int32_t id) const {
  return w_.d2t.empty() ? id : id + w_.d2t[static_cast<size_t>(id)];
}

EagleHead::Scratch& EagleHead::scratch_for(const ForwardWorkspace& ws) {
  // One set per workspace, sized by it once: a graph captured over a workspace keeps using
  // its scratch, which the eager path (a workspace of its own) never reallocates.
  Scratch& sc = scratch_[&ws];
  const int64_t h = config_.layer.hidden_size, tokens = ws.capacity().max_tokens;
  if (!sc.fc_in.data() || sc.fc_in.view().dim(0) < tokens) {
    sc.fc_in = Buffer(stream_.device(), act_, {tokens, 3 * h});
    sc.attn_in = Buffer(stream_.device(), act_, {tokens, 2 * h});
  }
  return sc;
}

std::unique_ptr<ForwardWorkspace> EagleHead::make_workspace(const ForwardCapacity& capacity) const {
  LlamaConfig shape = local_;
  shape.vocab_size = vocab();
  return std::make_unique<ForwardWorkspace>(shape, capacity, stream_.device(), act_, lm_head_group().size());
}

TensorView EagleHead::forward(const ForwardBatch& batch, const TensorView& in_hidden, KvCache& kv) {
  batch.validate();
  // The head's attention has the target's geometry: the target's plan for the batch.
  const auto [tpb, splits] = target_.attention_plan(batch);
  if (!ws_ || !ws_->fits(batch, splits)) {
    const ForwardCapacity cap = (ws_ ? ws_->capacity() : ForwardCapacity{}).grown_for(batch, splits);
    synchronize(stream_);
    if (ws_) scratch_.erase(ws_.get());
    ws_ = make_workspace(cap);
  }
  ws_->upload(batch, stream_);
  return run(*ws_, in_hidden, kv,
             {.tokens = batch.num_tokens(), .seqs = batch.batch_size(), .logit_rows = static_cast<int64_t>(batch.logit_rows.size()),
              .custom_mask = !batch.custom_mask.empty(), .num_splits = splits, .logits_all_rows = batch.logits_for_every_row(),
              .attention_tokens_per_block = tpb});
}

TensorView EagleHead::run(ForwardWorkspace& ws, const TensorView& in_hidden, KvCache& kv, const ForwardDims& dims) {
  const auto& c = local_;
  const bool e3 = config_.kind == EagleKind::kEagle3;
  const int64_t T = dims.tokens, R = dims.logit_rows, h = c.hidden_size;
  AERIE_CHECK(in_hidden.dim(0) == T, "EAGLE head: " << in_hidden.dim(0) << " hidden rows for " << T << " tokens");
  const int64_t width = in_hidden.dim(1);
  AERIE_CHECK(width == h || width == config_.input_width(), "EAGLE head: hidden rows of width " << width);
  parallel::Communicator& tp = target_.tp();
  const int tpb = dims.attention_tokens_per_block, splits = dims.num_splits;
  Scratch& sc = scratch_for(ws);
  auto rows = [&](const Buffer& b, int64_t n) { return b.view().slice_rows(0, n); };
  const LayerActivations a{.hidden = rows(ws.hidden, T), .residual = rows(ws.residual, T), .normed = rows(ws.normed, T),
                           .qkv = rows(ws.qkv, T), .q = rows(ws.q, T), .attn = rows(ws.attn, T), .gate_up = rows(ws.gate_up, T),
                           .act = rows(ws.act, T)};
  const size_t es = dtype_size(act_);
  // Writes `from` ([T, H]) into column block `col` of a [T, cols * H] buffer.
  auto put = [&](const Buffer& into, int64_t cols, int64_t col, const TensorView& from) {
    copy_rows_async(static_cast<char*>(into.data()) + static_cast<size_t>(col * h) * es, static_cast<size_t>(cols * h) * es, from.data,
                    static_cast<size_t>(from.dim(1)) * es, static_cast<size_t>(h) * es, static_cast<size_t>(T), stream_);
  };
  const auto& tw = target_.weights();
  const int64_t target_vocab = target_.config().vocab_size;
  // EAGLE-3 on one rank: the norm pair gathers the token embedding itself (one launch fewer
  // a draft step); a vocab-parallel table needs its all-reduce first, another dtype a convert.
  // AERIE_HEAD_NORM_GATHER=0 gathers it apart (for measuring).
  static const bool norm_gathers = !kernels::env_turned_off("AERIE_HEAD_NORM_GATHER");
  const TensorView embed = tw.embed.view();
  const bool gather_in_norm = norm_gathers && e3 && tp.size() == 1 && embed.dtype == act_;
  if (!gather_in_norm) vocab_parallel_embedding(ws.ids(T), embed, target_.shard().first_vocab(target_vocab), a.hidden, tp, stream_);
  TensorView attn_input;
  if (!e3) {
    // EAGLE: fc(concat(embedding, hidden)) is both the residual and the attention input.
    put(sc.fc_in, 2, 0, a.hidden);
    put(sc.fc_in, 2, 1, in_hidden);
    const TensorView fc_in(sc.fc_in.data(), act_, {T, 2 * h}, stream_.device());  // the first 2TH elements, rows of 2H
    AERIE_CHECK_STATUS(ops::matmul({.x = fc_in, .w = w_.fc.view(), .w_fp8 = w_.fc_fp8.values.view(), .w_scale = w_.fc_fp8.scales.view(), .w_blocks = w_.fc_blocks.view(),
                                     .y = a.residual},
                                    stream_));
    attn_input = a.residual;
  } else {
    // The residual stream starts as the head's own hidden state (draft steps: copied by the
    // norm kernel) or fc over the target's three (extend); the attention input is
    // [norm(embedding), norm(hidden)], both halves in one launch.
    const bool own_state = width == h;
    if (!own_state) {
      AERIE_CHECK_STATUS(ops::matmul({.x = in_hidden, .w = w_.fc.view(), .w_fp8 = w_.fc_fp8.values.view(), .w_scale = w_.fc_fp8.scales.view(), .w_blocks = w_.fc_blocks.view(),
                                      .y = a.residual},
                                     stream_));
    }
    attn_input = sc.attn_in.view().slice_rows(0, T);
    AERIE_CHECK_STATUS(ops::rms_norm_pair({.a = gather_in_norm ? embed : a.hidden, .weight_a = w_.input_norm.view(),
                                           .b = own_state ? in_hidden : a.residual, .weight_b = w_.hidden_norm.view(), .y = attn_input,
                                           .b_copy = own_state ? a.residual : TensorView(),
                                           .a_ids = gather_in_norm ? ws.ids(T) : TensorView(), .eps = c.rms_norm_eps},
                                          stream_));
  }
  const bool masked = dims.custom_mask;
  const LayerAttention at{.positions = ws.positions(T), .slots = ws.slots(T), .inv_freq = target_.inv_freq().view(),
                          .attention_scaling = target_.attention_scaling(), .qo_indptr = ws.qo_indptr(dims.seqs),
                          .kv_indptr = ws.kv_indptr(dims.seqs), .kv_indices = ws.kv_indices(),
                          .custom_mask = masked ? ws.mask() : TensorView(), .mask_indptr = masked ? ws.mask_indptr(dims.seqs) : TensorView(),
                          .workspace = ws.attn_partial.view(), .num_splits = splits, .tokens_per_block = tpb};
  run_decoder_layer(c,
                    {.qkv = w_.qkv.view(), .o_proj = w_.o_proj.view(), .post_norm = w_.post_norm.view(), .gate_up = w_.gate_up.view(),
                     .down = w_.down.view(), .qkv_fp8 = w_.qkv_fp8.values.view(), .qkv_scale = w_.qkv_fp8.scales.view(),
                     .o_proj_fp8 = w_.o_proj_fp8.values.view(), .o_proj_scale = w_.o_proj_fp8.scales.view(),
                     .gate_up_fp8 = w_.gate_up_fp8.values.view(), .gate_up_scale = w_.gate_up_fp8.scales.view(),
                     .down_fp8 = w_.down_fp8.values.view(), .down_scale = w_.down_fp8.scales.view(),
                     .qkv_blocks = w_.qkv_blocks.view(), .o_proj_blocks = w_.o_proj_blocks.view(), .gate_up_blocks = w_.gate_up_blocks.view(),
                     .down_blocks = w_.down_blocks.view()},
                    attn_input, a, at, kv.k(0), kv.v(0), layer_group(), stream_,
                    // residual += mlp out: the head's output hidden state (EAGLE3 also norms it for
                    // logits; EAGLE's logits read it as is, the norm output is discarded).
                    e3 ? w_.norm.view() : w_.post_norm.view());
  // The output hidden state is the residual stream where the layer left it: read in place by
  // whoever needs it before the next forward over this workspace (state rows, the next draft step).
  out_hidden_ = a.residual;
  const TensorView logits = rows(ws.logits, R);
  if (R == 0) return logits;
  // The rows that want logits: every row in order (draft steps) needs no gather.
  TensorView selected = (e3 ? a.normed : a.residual).slice_rows(0, R);
  if (!dims.logits_all_rows) {
    selected = rows(ws.selected, R);
    AERIE_CHECK_STATUS(ops::embedding({.ids = ws.logit_rows(R), .table = e3 ? a.normed : a.residual, .out = selected}, stream_));
  }
  const bool own_head = e3 || !config_.hot_tokens.empty();
  vocab_parallel_logits(selected, own_head ? w_.lm_head.view() : tw.lm_head_view(), vocab(), logits,
                        {.shard_logits = ws.shard_logits.view(), .gathered = ws.gathered_logits.view()},
                        lm_head_group(), stream_, own_head ? w_.lm_head_fp8.values.view() : TensorView(),
                        own_head ? w_.lm_head_fp8.scales.view() : TensorView(), own_head ? w_.lm_head_blocks.view() : kernels::WeightBlocks());
  return logits;
}

}  // namespace aerie::model
