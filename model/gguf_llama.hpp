#pragma once
// A llama-architecture GGUF file seen as a Hugging Face Llama checkpoint: its config from
// the metadata, and its tensors under Hugging Face names, dequantized to float32 with
// llama.cpp's reordering of q/k rows (for its rotary layout) undone, so the rest of the
// loader (weight_layout.hpp) treats it like safetensors.
#include <filesystem>
#include <initializer_list>
#include <map>
#include <string>
#include <vector>

#include "kernels/tensor.hpp"
#include "kernels/weight_blocks.hpp"
#include "model/config.hpp"
#include "model/gguf_file.hpp"

namespace aerie::model {

// Throws naming the file and key when the architecture is not llama or a needed key is
// missing. The dtype is F32 (quantized weights are dequantized to float32, as transformers
// and llama.cpp do).
LlamaConfig llama_config_from_gguf(const GgufFile& file);

class GgufTensorSource {
 public:
  GgufTensorSource(const GgufFile& file, const LlamaConfig& config) : file_(file), config_(config) {}
  // The GGUF name of a Hugging Face tensor name ("model.layers.3.mlp.up_proj.weight" ->
  // "blk.3.ffn_up.weight"), or "" for names with no counterpart.
  static std::string gguf_name(const std::string& hf_name);
  bool has(const std::string& hf_name) const;
  // A float32 host view, checked against the expected shape; valid until release().
  TensorView get(const std::string& hf_name, std::initializer_list<int64_t> expected_shape);
  // The tensor's own blocks when it is Q4_0, Q4_1 or Q8_0 of shape [rows, cols] (q/k rows in
  // the Hugging Face order, as get()'s), each row decoding to get()'s row exactly; undefined
  // for other types (kernels/weight_blocks.hpp). Valid until release().
  kernels::WeightBlocks get_blocks(const std::string& hf_name, int64_t rows, int64_t cols);
  // Frees the dequantized copies and blocks handed out so far (call once a layer is on its device).
  void release() {
    owned_.clear();
    owned_blocks_.clear();
  }

 private:
  const GgufFile& file_;
  const LlamaConfig& config_;
  std::map<std::string, std::vector<float>> owned_;
  std::map<std::string, std::vector<unsigned char>> owned_blocks_;
  // Heads whose rows llama.cpp reordered for its rotary layout (q_proj, k_proj), else 0.
  int64_t rope_heads(const std::string& hf_name) const;
};

}  // namespace aerie::model
