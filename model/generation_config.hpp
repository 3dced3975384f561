#pragma once
// generation_config.json, merged as sglang does: its eos_token_id (one or a list) adds stop ids
// to config.json's, and its sampling values (temperature, top_p, top_k, min_p) become the
// defaults of requests that do not set them. A missing file changes nothing.
#include <cstdint>
#include <filesystem>
#include <vector>

namespace aerie::model {

struct SamplingDefaults {
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = -1;
  float min_p = 0.0f;
};

struct GenerationConfig {
  std::vector<int32_t> eos_token_ids;
  SamplingDefaults sampling;
};

// model_dir/generation_config.json (nothing for a GGUF file or a folder without one). Throws
// aerie::Error naming the file and field when it is malformed.
GenerationConfig load_generation_config(const std::filesystem::path& model_dir);

}  // namespace aerie::model
