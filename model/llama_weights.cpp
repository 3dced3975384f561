#include "model/llama_weights.hpp"

#include "model/weight_layout.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
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

LlamaWeights load_llama_weights(const std::filesystem::path& dir, const LlamaConfig& c, Device device, DType dtype,
                                const LoadProgress& progress) {
  CheckpointReader ckpt(dir);
  auto get = [&](const std::string& name, std::initializer_list<int64_t> shape) {
    AERIE_CHECK(ckpt.has(name), dir.string() << ": checkpoint has no tensor '" << name << "'");
    TensorView t = ckpt.get(name, shape);
    check_float_tensor(ckpt, name, t);
    return t;
  };
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  LlamaWeights w;
  w.embed = copy_of(get("model.embed_tokens.weight", {c.vocab_size, h}), device, dtype);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    LlamaLayerWeights L;
    L.input_norm = copy_of(get(p + "input_layernorm.weight", {h}), device, dtype);
    LayerProjections P = load_layer_projections(get, p, c, h, device, dtype);
    L.qkv = std::move(P.qkv);
    L.o_proj = std::move(P.o_proj);
    L.post_norm = std::move(P.post_norm);
    L.gate_up = std::move(P.gate_up);
    L.down = std::move(P.down);
    if (c.attention_bias) {
      std::vector<unsigned char> qs, ks;
      L.qkv_bias = concat_rows({pair_adjacent_rows(get(p + "self_attn.q_proj.bias", {q}), c.head_dim, qs),
                                pair_adjacent_rows(get(p + "self_attn.k_proj.bias", {kv}), c.head_dim, ks),
                                get(p + "self_attn.v_proj.bias", {kv})},
                               device, dtype);
      L.o_bias = copy_of(get(p + "self_attn.o_proj.bias", {h}), device, dtype);
    }
    if (c.mlp_bias) {
      L.gate_up_bias = interleave_rows(get(p + "mlp.gate_proj.bias", {inter}), get(p + "mlp.up_proj.bias", {inter}), device, dtype);
      L.down_bias = copy_of(get(p + "mlp.down_proj.bias", {h}), device, dtype);
    }
    w.layers.push_back(std::move(L));
    if (progress) progress(l + 1, c.num_layers);
  }
  w.final_norm = copy_of(get("model.norm.weight", {h}), device, dtype);
  if (!c.tie_word_embeddings) w.lm_head = copy_of(get("lm_head.weight", {c.vocab_size, h}), device, dtype);
  return w;
}


LlamaWeights random_llama_weights(const LlamaConfig& c, uint64_t seed, Device device, DType dtype, float init_std,
                                  const LoadProgress& progress) {
  uint64_t tensor = 0;  // each tensor gets its own Philox key
  auto next_seed = [&] { return seed * 0x9E3779B97F4A7C15ull + (++tensor); };
  const int64_t h = c.hidden_size, q = c.q_size(), kv = c.kv_size(), inter = c.intermediate_size;
  const float kStd = init_std;
  LlamaWeights w;
  w.embed = random_buffer(next_seed(), {c.vocab_size, h}, kStd, device, dtype);
  for (int64_t l = 0; l < c.num_layers; ++l) {
    LlamaLayerWeights L;
    L.input_norm = random_buffer(next_seed(), {h}, 0.0f, device, dtype, 1.0f);
    L.qkv = random_buffer(next_seed(), {q + 2 * kv, h}, kStd, device, dtype);
    L.o_proj = random_buffer(next_seed(), {h, q}, kStd, device, dtype);
    if (c.attention_bias) {
      L.qkv_bias = random_buffer(next_seed(), {q + 2 * kv}, kStd, device, dtype);
      L.o_bias = random_buffer(next_seed(), {h}, kStd, device, dtype);
    }
    L.post_norm = random_buffer(next_seed(), {h}, 0.0f, device, dtype, 1.0f);
    L.gate_up = random_buffer(next_seed(), {2 * inter, h}, kStd, device, dtype);
    L.down = random_buffer(next_seed(), {h, inter}, kStd, device, dtype);
    if (c.mlp_bias) {
      L.gate_up_bias = random_buffer(next_seed(), {2 * inter}, kStd, device, dtype);
      L.down_bias = random_buffer(next_seed(), {h}, kStd, device, dtype);
    }
    w.layers.push_back(std::move(L));
    if (progress) progress(l + 1, c.num_layers);
  }
  w.final_norm = random_buffer(next_seed(), {h}, 0.0f, device, dtype, 1.0f);
  if (!c.tie_word_embeddings) w.lm_head = random_buffer(next_seed(), {c.vocab_size, h}, kStd, device, dtype);
  return w;
}

}  // namespace aerie::model
