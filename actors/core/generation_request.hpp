#pragma once
// What a caller asks of the engine for one prompt, and what it gets back.
#include <cstdint>
#include <string>
#include <vector>

namespace aerie::core {

// sglang's sampling parameters (defaults as sglang's SamplingParams).
struct SamplingOptions {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  int32_t top_k = -1;        // <= 0: no limit
  float min_p = 0.0f;        // [0, 1]
  int64_t seed = 0;
  // Throws aerie::Error naming the first bad field.
  void validate() const;
};

struct GenerationRequest {
  std::vector<int32_t> prompt;          // token ids, not empty
  SamplingOptions sampling;
  int64_t max_new_tokens = 128;
  std::vector<int32_t> stop_token_ids;  // besides the model's EOS ids
  bool ignore_eos = false;
};

struct GenerationResult {
  std::vector<int32_t> output_ids;  // generated ids; a stop/EOS id that ended it is included
  std::string finish_reason;        // "stop" (EOS or stop id) | "length" (max_new_tokens)
  int64_t prompt_tokens = 0;
};

}  // namespace aerie::core
