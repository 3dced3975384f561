#include "model/gguf_llama.hpp"

#include <nlohmann/json.hpp>
#include <regex>
#include <sstream>

#include "kernels/error.hpp"

namespace aerie::model {

LlamaConfig llama_config_from_gguf(const GgufFile& f) {
  const std::string where = f.path().string();
  const std::string arch = f.has("general.architecture") ? f.get_string("general.architecture") : "";
  AERIE_CHECK(arch == "llama", where << ": general.architecture '" << arch << "' is not supported (llama)");
  auto key = [](const char* k) { return std::string("llama.") + k; };
  LlamaConfig c;
  c.architecture = "LlamaForCausalLM";
  c.num_layers = f.get_int(key("block_count"));
  c.hidden_size = f.get_int(key("embedding_length"));
  c.intermediate_size = f.get_int(key("feed_forward_length"));
  c.num_heads = f.get_int(key("attention.head_count"));
  AERIE_CHECK(c.num_heads > 0, where << ": llama.attention.head_count must be positive");
  c.num_kv_heads = f.has(key("attention.head_count_kv")) ? f.get_int(key("attention.head_count_kv")) : c.num_heads;
  c.head_dim = f.has(key("attention.key_length")) ? f.get_int(key("attention.key_length")) : c.hidden_size / c.num_heads;
  if (f.has(key("rope.dimension_count")))
    AERIE_CHECK(f.get_int(key("rope.dimension_count")) == c.head_dim,
                where << ": llama.rope.dimension_count " << f.get_int(key("rope.dimension_count")) << " differs from the head size " << c.head_dim
                      << " (partial rotary embeddings are not supported)");
  c.max_position_embeddings = f.has(key("context_length")) ? f.get_int(key("context_length")) : 2048;
  c.rms_norm_eps = static_cast<float>(f.has(key("attention.layer_norm_rms_epsilon")) ? f.get_float(key("attention.layer_norm_rms_epsilon")) : 1e-5);
  c.rope_theta = f.has(key("rope.freq_base")) ? f.get_float(key("rope.freq_base")) : 10000.0;
  const std::string scaling = f.has(key("rope.scaling.type")) ? f.get_string(key("rope.scaling.type")) : "none";
  if (scaling == "linear") {
    c.rope_scaling.type = "linear";
    c.rope_scaling.factor = f.get_float(key("rope.scaling.factor"));
  } else {
    AERIE_CHECK(scaling == "none", where << ": rope scaling '" << scaling << "' is not supported (none, linear)");
  }
  // Llama-3.1-style scaling is stored as a per-frequency factor tensor, not as parameters.
  AERIE_CHECK(!f.find("rope_freqs.weight"), where << ": rope_freqs.weight (Llama-3.1 rope scaling as factors) is not supported yet; "
                                                       "use the Hugging Face checkpoint");
  const GgufTensor* embed = f.find("token_embd.weight");
  AERIE_CHECK(embed && embed->dims.size() == 2, where << ": no 2-D token_embd.weight tensor");
  c.vocab_size = f.has(key("vocab_size")) ? f.get_int(key("vocab_size")) : embed->dims[1];
  c.tie_word_embeddings = f.find("output.weight") == nullptr;
  c.attention_bias = f.find("blk.0.attn_q.bias") != nullptr;
  c.mlp_bias = f.find("blk.0.ffn_up.bias") != nullptr;
  c.bos_token_id = f.has("tokenizer.ggml.bos_token_id") ? static_cast<int32_t>(f.get_int("tokenizer.ggml.bos_token_id")) : -1;
  c.eos_token_ids.clear();
  // Generation stops at EOS and at the end-of-turn / end-of-message tokens llama.cpp records.
  for (const char* k : {"tokenizer.ggml.eos_token_id", "tokenizer.ggml.eot_token_id", "tokenizer.ggml.eom_token_id"})
    if (f.has(k)) {
      const auto id = static_cast<int32_t>(f.get_int(k));
      if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) c.eos_token_ids.push_back(id);
    }
  c.dtype = DType::kF32;
  c.validate(where);
  return c;
}

namespace {

// llama.cpp stores each q/k head's rows as (pair index, half) instead of (half, pair index);
// put them back in the Hugging Face order. Rows of `row_bytes` bytes (floats or blocks).
template <class E>
std::vector<E> undo_rope_row_order(const std::vector<E>& data, int64_t heads, int64_t d, int64_t row_bytes, const std::string& what) {
  const int64_t half = d / 2, row = row_bytes / static_cast<int64_t>(sizeof(E));
  AERIE_CHECK(static_cast<int64_t>(data.size()) == heads * d * row, what << " has " << static_cast<int64_t>(data.size()) / row << " rows, expected "
                                                                        << heads * d);
  std::vector<E> hf_order(data.size());
  for (int64_t h = 0; h < heads; ++h)
    for (int64_t j = 0; j < half; ++j)
      for (int64_t s = 0; s < 2; ++s) {
        const int64_t src = h * d + 2 * j + s, dst = h * d + s * half + j;
        std::copy_n(data.begin() + src * row, row, hf_order.begin() + dst * row);
      }
  return hf_order;
}

}  // namespace

int64_t GgufTensorSource::rope_heads(const std::string& hf) const {
  if (hf.find("self_attn.q_proj.") != std::string::npos) return config_.num_heads;
  if (hf.find("self_attn.k_proj.") != std::string::npos) return config_.num_kv_heads;
  return 0;
}

std::string GgufTensorSource::gguf_name(const std::string& hf) {
  static const std::map<std::string, std::string> kTop = {
      {"model.embed_tokens.weight", "token_embd.weight"}, {"model.norm.weight", "output_norm.weight"}, {"lm_head.weight", "output.weight"}};
  if (auto it = kTop.find(hf); it != kTop.end()) return it->second;
  static const std::map<std::string, std::string> kLayer = {
      {"input_layernorm", "attn_norm"},   {"self_attn.q_proj", "attn_q"}, {"self_attn.k_proj", "attn_k"},
      {"self_attn.v_proj", "attn_v"},     {"self_attn.o_proj", "attn_output"}, {"post_attention_layernorm", "ffn_norm"},
      {"mlp.gate_proj", "ffn_gate"},      {"mlp.up_proj", "ffn_up"},      {"mlp.down_proj", "ffn_down"}};
  static const std::regex kRe(R"(model\.layers\.(\d+)\.(.+)\.(weight|bias))");
  std::smatch m;
  if (!std::regex_match(hf, m, kRe)) return "";
  auto it = kLayer.find(m[2].str());
  if (it == kLayer.end()) return "";
  return "blk." + m[1].str() + "." + it->second + "." + m[3].str();
}

bool GgufTensorSource::has(const std::string& hf) const {
  const std::string g = gguf_name(hf);
  return !g.empty() && file_.find(g);
}

TensorView GgufTensorSource::get(const std::string& hf, std::initializer_list<int64_t> expected) {
  const std::string where = file_.path().string();
  const std::string g = gguf_name(hf);
  const GgufTensor* t = g.empty() ? nullptr : file_.find(g);
  AERIE_CHECK(t, where << ": no tensor '" << (g.empty() ? hf : g) << "' (for " << hf << ")");
  const std::vector<int64_t> shape = t->shape();
  AERIE_CHECK(std::vector<int64_t>(expected) == shape, [&] {
    std::ostringstream s;
    s << where << ": tensor '" << g << "' has shape [";
    for (size_t i = 0; i < shape.size(); ++i) s << (i ? ", " : "") << shape[i];
    s << "], expected [";
    size_t i = 0;
    for (int64_t d : expected) s << (i++ ? ", " : "") << d;
    return s.str() + "]";
  }());
  AERIE_CHECK(t->nbytes > 0 || t->numel() == 0,
              where << ": tensor '" << g << "' is " << gguf_type_name(t->type) << ", not supported (F32, F16, BF16, Q8_0, Q4_0, Q4_1)");
  std::vector<float> data(static_cast<size_t>(t->numel()));
  gguf_dequantize(t->type, t->data, t->numel(), data.data());
  if (const int64_t heads = rope_heads(hf))
    data = undo_rope_row_order(data, heads, config_.head_dim, (shape.size() == 2 ? shape[1] : 1) * static_cast<int64_t>(sizeof(float)),
                               where + ": tensor '" + g + "'");
  auto& slot = owned_[hf];
  slot = std::move(data);
  TensorView v;
  v.data = slot.data();
  v.dtype = DType::kF32;
  v.device = Device::kCpu;
  v.ndim = static_cast<int>(shape.size());
  for (size_t i = 0; i < shape.size(); ++i) v.shape[i] = shape[i];
  return v;
}

kernels::WeightBlocks GgufTensorSource::get_blocks(const std::string& hf, int64_t rows, int64_t cols) {
  const std::string g = gguf_name(hf);
  const GgufTensor* t = g.empty() ? nullptr : file_.find(g);
  if (!t || t->shape() != std::vector<int64_t>{rows, cols}) return {};  // get() names what is wrong
  const std::optional<kernels::BlockFormat> f = gguf_block_format(t->type);
  if (!f) return {};
  const kernels::BlockFormat format = *f;
  const int64_t row_bytes = kernels::block_row_bytes(format, cols);
  if (cols % kernels::kBlockElements != 0 || static_cast<int64_t>(t->nbytes) != rows * row_bytes) return {};
  std::vector<unsigned char> bytes(t->data, t->data + t->nbytes);
  if (const int64_t heads = rope_heads(hf))
    bytes = undo_rope_row_order(bytes, heads, config_.head_dim, row_bytes, file_.path().string() + ": tensor '" + g + "'");
  auto& slot = owned_blocks_[hf];
  slot = std::move(bytes);
  return {.bytes = TensorView(slot.data(), DType::kU8, {rows, row_bytes}), .format = format};
}

}  // namespace aerie::model
