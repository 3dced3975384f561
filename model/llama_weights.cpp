#include "model/llama_weights.hpp"

#include <cmath>
#include <cstring>
#include <string>

#include "kernels/error.hpp"
#include "kernels/staging.hpp"
#include "kernels/topk.hpp"
#include "model/safetensors.hpp"

namespace aerie::model {

namespace {

// Copies host tensors, converted to `dtype`, into consecutive rows of one new buffer.
Buffer concat_rows(const std::vector<TensorView>& parts, Device device, DType dtype) {
  int64_t rows = 0;
  const int64_t cols = parts.front().ndim == 2 ? parts.front().dim(1) : 1;
  for (const auto& p : parts) rows += p.dim(0);
  std::vector<int64_t> shape = parts.front().ndim == 2 ? std::vector<int64_t>{rows, cols} : std::vector<int64_t>{rows};
  std::vector<unsigned char> host(static_cast<size_t>(rows * cols) * dtype_size(dtype));
  int64_t at = 0;
  for (const auto& p : parts) {
    const int64_t n = p.numel();
    if (p.dtype == dtype) {
      std::memcpy(host.data() + at * static_cast<int64_t>(dtype_size(dtype)), p.data, static_cast<size_t>(p.nbytes()));
    } else {
      for (int64_t i = 0; i < n; ++i) store_from_float(host.data(), dtype, at + i, load_as_float(p.data, p.dtype, i));
    }
    at += n;
  }
  Buffer b(device, dtype, shape);
  b.copy_from_host(host.data(), static_cast<int64_t>(host.size()));
  return b;
}

Buffer copy_of(const TensorView& t, Device device, DType dtype) { return concat_rows({t}, device, dtype); }

// The rows of a q or k projection reordered so that each head's rotation pairs are
// adjacent: new row 2i = dim i, new row 2i + 1 = dim i + head_dim/2 (rope_kv_write.hpp).
// Returns the bytes (same dtype) that `view` then describes.
TensorView pair_adjacent_rows(const TensorView& t, int64_t head_dim, std::vector<unsigned char>& storage) {
  const int64_t rows = t.dim(0), cols = t.ndim == 2 ? t.dim(1) : 1, half = head_dim / 2;
  const size_t row_bytes = static_cast<size_t>(cols) * dtype_size(t.dtype);
  storage.resize(static_cast<size_t>(rows) * row_bytes);
  const auto* src = static_cast<const unsigned char*>(t.data);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t head = r / head_dim, d = r % head_dim;
    const int64_t to = head * head_dim + (d < half ? 2 * d : 2 * (d - half) + 1);
    std::memcpy(storage.data() + static_cast<size_t>(to) * row_bytes, src + static_cast<size_t>(r) * row_bytes, row_bytes);
  }
  TensorView v = t;
  v.data = storage.data();
  return v;
}

// Rows of a and b alternating (a0, b0, a1, b1, ...): the merged gate/up projection, laid out
// so that one GEMM block owns both rows of a pair (kernels/silu_mul.hpp).
Buffer interleave_rows(const TensorView& a, const TensorView& b, Device device, DType dtype) {
  const int64_t rows = a.dim(0), cols = a.ndim == 2 ? a.dim(1) : 1;
  const size_t es = dtype_size(dtype);
  std::vector<unsigned char> host(static_cast<size_t>(2 * rows * cols) * es);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t c = 0; c < cols; ++c) {
      store_from_float(host.data(), dtype, (2 * r) * cols + c, load_as_float(a.data, a.dtype, r * cols + c));
      store_from_float(host.data(), dtype, (2 * r + 1) * cols + c, load_as_float(b.data, b.dtype, r * cols + c));
    }
  Buffer out(device, dtype, a.ndim == 2 ? std::vector<int64_t>{2 * rows, cols} : std::vector<int64_t>{2 * rows});
  out.copy_from_host(host.data(), static_cast<int64_t>(host.size()));
  return out;
}

void check_float_tensor(const CheckpointReader& ckpt, const std::string& name, const TensorView& t) {
  AERIE_CHECK(is_floating(t.dtype), ckpt.file_of(name) << ": tensor '" << name << "' has dtype " << dtype_name(t.dtype)
                                                       << ", expected F32, BF16 or F16");
}

}  // namespace

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
    std::vector<unsigned char> qs, ks;
    L.qkv = concat_rows({pair_adjacent_rows(get(p + "self_attn.q_proj.weight", {q, h}), c.head_dim, qs),
                         pair_adjacent_rows(get(p + "self_attn.k_proj.weight", {kv, h}), c.head_dim, ks),
                         get(p + "self_attn.v_proj.weight", {kv, h})},
                        device, dtype);
    L.o_proj = copy_of(get(p + "self_attn.o_proj.weight", {h, q}), device, dtype);
    if (c.attention_bias) {
      L.qkv_bias = concat_rows({pair_adjacent_rows(get(p + "self_attn.q_proj.bias", {q}), c.head_dim, qs),
                                pair_adjacent_rows(get(p + "self_attn.k_proj.bias", {kv}), c.head_dim, ks),
                                get(p + "self_attn.v_proj.bias", {kv})},
                               device, dtype);
      L.o_bias = copy_of(get(p + "self_attn.o_proj.bias", {h}), device, dtype);
    }
    L.post_norm = copy_of(get(p + "post_attention_layernorm.weight", {h}), device, dtype);
    L.gate_up = interleave_rows(get(p + "mlp.gate_proj.weight", {inter, h}), get(p + "mlp.up_proj.weight", {inter, h}), device, dtype);
    L.down = copy_of(get(p + "mlp.down_proj.weight", {h, inter}), device, dtype);
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

namespace {

// N(0, std) (or a constant) drawn on the buffer's own device by Philox: the same seed gives
// the same weights on CPU and GPU, and an 8B-shaped model fills in well under a second.
Buffer random_buffer(uint64_t seed, std::vector<int64_t> shape, float std, Device device, DType dtype, float constant = 0.0f) {
  Buffer b(device, dtype, shape);
  OwnedStream stream(device);
  AERIE_CHECK_STATUS(kernels::fill_normal({.x = b.view(), .seed = seed, .mean = std > 0 ? 0.0f : constant, .std = std}, stream.get()));
  synchronize(stream.get());
  return b;
}

}  // namespace

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
