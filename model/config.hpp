#pragma once
// LlamaConfig: the parts of a Hugging Face config.json that a Llama-family forward needs.
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

#include "kernels/dtype.hpp"

namespace aerie::model {

struct RopeScaling {
  std::string type = "default";  // default | linear | llama3
  double factor = 1.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int64_t original_max_position_embeddings = 8192;
};

struct LlamaConfig {
  std::string architecture = "LlamaForCausalLM";
  int64_t vocab_size = 0;
  int64_t hidden_size = 0;
  int64_t intermediate_size = 0;
  int64_t num_layers = 0;
  int64_t num_heads = 0;
  int64_t num_kv_heads = 0;
  int64_t head_dim = 0;
  int64_t max_position_embeddings = 2048;
  float rms_norm_eps = 1e-5f;
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  bool tie_word_embeddings = false;
  bool attention_bias = false;
  bool mlp_bias = false;
  int32_t bos_token_id = -1;          // -1: none
  std::vector<int32_t> eos_token_ids;  // generation stops at any of them
  DType dtype = DType::kBF16;          // the checkpoint's dtype

  int64_t q_size() const { return num_heads * head_dim; }
  int64_t kv_size() const { return num_kv_heads * head_dim; }
  // Parameters of the model, for memory and bandwidth estimates.
  int64_t num_parameters() const;
  // Throws aerie::Error naming the first field that is missing or inconsistent.
  void validate(const std::string& source) const;

  // Parses config.json text; `source` names the file in error messages. Accepts both the
  // rope_theta + rope_scaling form and transformers 5's rope_parameters form.
  static LlamaConfig from_json_text(const std::string& text, const std::string& source);
  // model_dir/config.json (with generation_config.json's EOS ids added), or the metadata of a
  // GGUF file when model_dir names one.
  static LlamaConfig load(const std::filesystem::path& model_dir);
  // Built-in shapes for --load-format dummy: tiny (the embedded default), llama-3.2-1b,
  // llama-3.1-8b.
  static LlamaConfig named_shape(const std::string& name);
  static std::vector<std::string> named_shapes();
};

}  // namespace aerie::model
