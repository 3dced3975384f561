#include "model/llama_weights.hpp"

#include "model/weight_layout.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/cpu/int8_block_gemm.hpp"
#include "kernels/env_knob.hpp"
#include "kernels/error.hpp"
#include "kernels/log.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_llama.hpp"
#include "model/safetensors.hpp"

namespace aerie::model {

int64_t LlamaWeights::total_bytes() const {
  int64_t n = embed.nbytes() + final_norm.nbytes() + lm_head.nbytes();
  for (const auto& L : layers)
    for (const Buffer* b : {&L.input_norm, &L.qkv, &L.qkv_bias, &L.o_proj, &L.o_bias, &L.post_norm, &L.gate_up,
                            &L.gate_up_bias, &L.down, &L.down_bias})
      n += b->data() ? b->nbytes() : 0;
  return n;
}

int64_t LlamaWeights::decode_bytes() const {
  auto either = [](const BlockBuffer& blocks, const Buffer& b) { return blocks.bytes.data() ? blocks.nbytes() : (b.data() ? b.nbytes() : 0); };
  int64_t n = final_norm.nbytes() + (lm_head.data() ? embed.nbytes() : 0) + either(lm_head_blocks, lm_head.data() ? lm_head : embed);
  for (const auto& L : layers) {
    n += either(L.qkv_blocks, L.qkv) + either(L.o_proj_blocks, L.o_proj) + either(L.gate_up_blocks, L.gate_up) + either(L.down_blocks, L.down);
    for (const Buffer* b : {&L.input_norm, &L.qkv_bias, &L.o_bias, &L.post_norm, &L.gate_up_bias, &L.down_bias})
      n += b->data() ? b->nbytes() : 0;
  }
  return n;
}

BlockBuffer tile_order_blocks(kernels::BlockFormat f, const unsigned char* rows, int64_t n, int64_t k) {
  BlockBuffer b{Buffer(Device::kCpu, DType::kU8, {n, kernels::block_row_bytes(f, k)}), f, kernels::BlockLayout::kTiles16};
  kernels::blocks_to_tile_order(f, rows, n, k, static_cast<unsigned char*>(b.bytes.data()));
  return b;
}

bool int8_activations_asked() { return kernels::env_knob("AERIE_CPU_INT8_ACTIVATIONS") == 1; }

bool gguf_blocks_kept(Device device, DType dtype, const TpShard& shard) {
  // Only the CPU backend reads blocks, into f32 activations; a shard would cut the blocks of
  // row-parallel weights across their columns.
  return device == Device::kCpu && dtype == DType::kF32 && !shard.sharded() && !kernels::env_turned_off("AERIE_CPU_GGUF_BLOCKS");
}

namespace {

// All parts given, in one block format.
bool same_blocks(std::initializer_list<kernels::WeightBlocks> parts) {
  for (const auto& b : parts)
    if (!b.defined() || b.format != parts.begin()->format) return false;
  return true;
}

// A layer's projections as GGUF blocks in the f32 copies' layouts (weight_layout.hpp: q/k/v
// merged with rotation pairs adjacent, gate/up interleaved), each where its parts have blocks
// of one format.
void load_layer_blocks(GgufTensorSource& g, const std::string& p, const LlamaConfig& c, LlamaLayerWeights& L) {
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size, d = c.head_dim;
  const auto qb = g.get_blocks(p + "self_attn.q_proj.weight", q, h), kb = g.get_blocks(p + "self_attn.k_proj.weight", kv, h),
             vb = g.get_blocks(p + "self_attn.v_proj.weight", kv, h);
  if (same_blocks({qb, kb, vb})) {
    std::vector<unsigned char> qs, ks;
    L.qkv_blocks = {concat_rows({pair_adjacent_rows(qb.bytes, d, qs), pair_adjacent_rows(kb.bytes, d, ks), vb.bytes}, Device::kCpu, DType::kU8),
                    qb.format};
  }
  if (const auto ob = g.get_blocks(p + "self_attn.o_proj.weight", h, q); ob.defined()) L.o_proj_blocks = {copy_of(ob.bytes, Device::kCpu, DType::kU8), ob.format};
  const auto gb = g.get_blocks(p + "mlp.gate_proj.weight", inter, h), ub = g.get_blocks(p + "mlp.up_proj.weight", inter, h);
  if (same_blocks({gb, ub})) L.gate_up_blocks = {interleave_rows(gb.bytes, ub.bytes, Device::kCpu, DType::kU8), gb.format};
  if (const auto db = g.get_blocks(p + "mlp.down_proj.weight", h, inter); db.defined()) L.down_blocks = {copy_of(db.bytes, Device::kCpu, DType::kU8), db.format};
}

// A layer's blocks into tile order where the rows come in whole groups of 16.
void to_tile_order(BlockBuffer& b, int64_t cols) {
  if (!b.bytes.data() || b.bytes.view().dim(0) % kernels::kTileGroupRows != 0) return;
  b = tile_order_blocks(b.format, static_cast<const unsigned char*>(b.bytes.data()), b.bytes.view().dim(0), cols);
}

BlockBuffer blocks_of(GgufTensorSource& g, const std::string& name, int64_t rows, int64_t cols) {
  const auto b = g.get_blocks(name, rows, cols);
  return b.defined() ? BlockBuffer{copy_of(b.bytes, Device::kCpu, DType::kU8), b.format} : BlockBuffer{};
}

}  // namespace

LlamaWeights load_llama_weights(const std::filesystem::path& dir, const LlamaConfig& c, Device device, DType dtype,
                                const LoadProgress& progress, const TpShard& shard) {
  // A GGUF file hands out dequantized float32 copies, freed after each layer; a folder of
  // safetensors hands out views of its mapping.
  std::unique_ptr<GgufFile> gguf_file;
  std::unique_ptr<GgufTensorSource> gguf;
  std::unique_ptr<CheckpointReader> ckpt;
  TensorGetter get;
  if (GgufFile::is_gguf(dir)) {
    gguf_file = std::make_unique<GgufFile>(dir);
    gguf = std::make_unique<GgufTensorSource>(*gguf_file, c);
    get = [&](const std::string& name, std::initializer_list<int64_t> shape) { return gguf->get(name, shape); };
  } else {
    ckpt = std::make_unique<CheckpointReader>(dir);
    get = [&](const std::string& name, std::initializer_list<int64_t> shape) {
      AERIE_CHECK(ckpt->has(name), dir.string() << ": checkpoint has no tensor '" << name << "'");
      TensorView t = ckpt->get(name, shape);
      check_float_tensor(*ckpt, name, t);
      return t;
    };
  }
  auto layer_done = [&] {
    if (gguf) gguf->release();
  };
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size, d = c.head_dim;
  const bool blocks = gguf && gguf_blocks_kept(device, dtype, shard);
  LlamaWeights w;
  w.embed = vocab_shard_of(get("model.embed_tokens.weight", {c.vocab_size, h}), shard, device, dtype);
  if (blocks && c.tie_word_embeddings) w.lm_head_blocks = blocks_of(*gguf, "model.embed_tokens.weight", c.vocab_size, h);
  layer_done();
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaLayerWeights L;
    L.input_norm = copy_of(get(p + "input_layernorm.weight", {h}), device, dtype);
    LayerProjections P = load_layer_projections(get, p, c, h, device, dtype, shard);
    L.qkv = std::move(P.qkv);
    L.o_proj = std::move(P.o_proj);
    L.post_norm = std::move(P.post_norm);
    L.gate_up = std::move(P.gate_up);
    L.down = std::move(P.down);
    if (blocks) load_layer_blocks(*gguf, p, c, L);
    if (c.attention_bias) {
      std::vector<unsigned char> qs, ks;
      const auto rows = qkv_rows_of(c, shard);
      L.qkv_bias = concat_rows({pair_adjacent_rows(row_range(get(p + "self_attn.q_proj.bias", {q}), rows[0].begin, rows[0].count), d, qs),
                                pair_adjacent_rows(row_range(get(p + "self_attn.k_proj.bias", {kv}), rows[1].begin - q, rows[1].count), d, ks),
                                row_range(get(p + "self_attn.v_proj.bias", {kv}), rows[1].begin - q, rows[1].count)},
                               device, dtype);
      if (shard.adds_row_parallel_bias()) L.o_bias = copy_of(get(p + "self_attn.o_proj.bias", {h}), device, dtype);
    }
    if (c.mlp_bias) {
      const int64_t i0 = shard.first_intermediate(c), il = shard.intermediate(c);
      L.gate_up_bias = interleave_rows(row_range(get(p + "mlp.gate_proj.bias", {inter}), i0, il), row_range(get(p + "mlp.up_proj.bias", {inter}), i0, il),
                                       device, dtype);
      if (shard.adds_mlp_bias()) L.down_bias = copy_of(get(p + "mlp.down_proj.bias", {h}), device, dtype);
    }
    w.layers.push_back(std::move(L));
    layer_done();
    if (progress) progress(l + 1, c.num_layers);
  }
  w.final_norm = copy_of(get("model.norm.weight", {h}), device, dtype);
  if (!c.tie_word_embeddings) {
    w.lm_head = vocab_shard_of(get("lm_head.weight", {c.vocab_size, h}), shard, device, dtype);
    if (blocks) w.lm_head_blocks = blocks_of(*gguf, "lm_head.weight", c.vocab_size, h);
  }
  if (blocks && int8_activations_asked()) {
    to_tile_order(w.lm_head_blocks, h);
    for (auto& L : w.layers) {
      to_tile_order(L.qkv_blocks, h);
      to_tile_order(L.o_proj_blocks, q);
      to_tile_order(L.gate_up_blocks, h);
      to_tile_order(L.down_blocks, inter);
    }
  }
  if (blocks) {
    int64_t kept = w.lm_head_blocks.bytes.data() ? 1 : 0, bytes = w.lm_head_blocks.nbytes();
    for (const auto& L : w.layers)
      for (const BlockBuffer* b : {&L.qkv_blocks, &L.o_proj_blocks, &L.gate_up_blocks, &L.down_blocks})
        if (b->bytes.data()) {
          ++kept;
          bytes += b->nbytes();
        }
    AERIE_LOG_INFO("GGUF blocks kept for " << kept << " of " << 4 * c.num_layers + 1 << " products (" << bytes / 1e6
                                            << " MB): decode and verify read them"
                                            << (!int8_activations_asked() ? " (AERIE_CPU_GGUF_BLOCKS=0: the f32 copies)"
                                                : kernels::cpu::amx_int8_available()
                                                    ? ", in tile order, over int8 activations on AMX (AERIE_CPU_INT8_ACTIVATIONS=1)"
                                                    : ", in tile order, over int8 activations (AERIE_CPU_INT8_ACTIVATIONS=1); this CPU has no "
                                                      "AMX-INT8, so the scalar reference loop runs them, several times slower"));
  }
  return w;
}


LlamaWeights random_llama_weights(const LlamaConfig& c, uint64_t seed, Device device, DType dtype, float init_std,
                                  const LoadProgress& progress, const TpShard& s) {
  uint64_t tensor = 0;  // each tensor gets its own Philox key
  auto next_seed = [&] { return seed * 0x9E3779B97F4A7C15ull + (++tensor); };
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const float kStd = init_std;
  // Drawn whole, then cut to the shard: every TP size gets the same model.
  const auto qkv_rows = qkv_rows_of(c, s);
  const RowRange gate_up_rows{2 * s.first_intermediate(c), 2 * s.intermediate(c)};
  const int64_t d = c.head_dim;
  LlamaWeights w;
  w.embed = vocab_shard_of(random_buffer(next_seed(), {c.vocab_size, h}, kStd, device, dtype), s);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LlamaLayerWeights L;
    L.input_norm = random_buffer(next_seed(), {h}, 0.0f, device, dtype, 1.0f);
    L.qkv = cut_block(random_buffer(next_seed(), {q + 2 * kv, h}, kStd, device, dtype), qkv_rows);
    L.o_proj = cut_block(random_buffer(next_seed(), {h, q}, kStd, device, dtype), {{0, h}}, s.first_head(c) * d, s.heads(c) * d);
    if (c.attention_bias) {
      L.qkv_bias = cut_block(random_buffer(next_seed(), {q + 2 * kv}, kStd, device, dtype), qkv_rows);
      Buffer o_bias = random_buffer(next_seed(), {h}, kStd, device, dtype);
      if (s.adds_row_parallel_bias()) L.o_bias = std::move(o_bias);
    }
    L.post_norm = random_buffer(next_seed(), {h}, 0.0f, device, dtype, 1.0f);
    L.gate_up = cut_block(random_buffer(next_seed(), {2 * inter, h}, kStd, device, dtype), {gate_up_rows});
    L.down = cut_block(random_buffer(next_seed(), {h, inter}, kStd, device, dtype), {{0, h}}, s.first_intermediate(c), s.intermediate(c));
    if (c.mlp_bias) {
      L.gate_up_bias = cut_block(random_buffer(next_seed(), {2 * inter}, kStd, device, dtype), {gate_up_rows});
      Buffer down_bias = random_buffer(next_seed(), {h}, kStd, device, dtype);
      if (s.adds_mlp_bias()) L.down_bias = std::move(down_bias);
    }
    w.layers.push_back(std::move(L));
    if (progress) progress(l + 1, c.num_layers);
  }
  w.final_norm = random_buffer(next_seed(), {h}, 0.0f, device, dtype, 1.0f);
  if (!c.tie_word_embeddings) w.lm_head = vocab_shard_of(random_buffer(next_seed(), {c.vocab_size, h}, kStd, device, dtype), s);
  return w;
}

}  // namespace aerie::model
