#pragma once
// What a caller asks of the engine for one prompt, and what it gets back.
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "transport/messages.hpp"

namespace aerie::core {

// sglang's sampling parameters (defaults as sglang's SamplingParams).
struct SamplingOptions {
  float temperature = 1.0f;  // 0 = greedy
  float top_p = 1.0f;        // (0, 1]
  int32_t top_k = -1;        // <= 0: no limit
  float min_p = 0.0f;        // [0, 1]
  int64_t seed = 0;
  // Penalties (sglang's and OpenAI's meaning; applied to the logits before sampling,
  // actors/core/logit_adjustments.hpp): frequency and presence over the output so far,
  // repetition over prompt and output (transformers' rule), logit_bias added as given, and
  // EOS / stop ids banned until min_new_tokens tokens are out.
  float frequency_penalty = 0.0f;   // [-2, 2]
  float presence_penalty = 0.0f;    // [-2, 2]
  float repetition_penalty = 1.0f;  // (0, 2]
  int64_t min_new_tokens = 0;
  std::vector<std::pair<int32_t, float>> logit_bias;  // token -> bias in [-100, 100]
  bool adjusts_logits() const {
    return frequency_penalty != 0.0f || presence_penalty != 0.0f || repetition_penalty != 1.0f || min_new_tokens > 0 || !logit_bias.empty();
  }
  // Throws aerie::Error naming the first bad field.
  void validate() const;
};

constexpr int32_t kMaxTopLogprobs = 20;  // as OpenAI's top_logprobs

struct GenerationRequest {
  std::vector<int32_t> prompt;          // token ids, not empty
  SamplingOptions sampling;
  int64_t max_new_tokens = 128;
  std::vector<int32_t> stop_token_ids;  // besides the model's EOS ids
  bool ignore_eos = false;
  int32_t logprobs = -1;  // -1: none; 0: each output token's log-probability; k > 0: also the top k
};

struct GenerationResult {
  std::vector<int32_t> output_ids;  // generated ids; a stop/EOS id that ended it is included
  std::string finish_reason;        // "stop" (EOS or stop id) | "length" (max_new_tokens) | "abort"
  int64_t prompt_tokens = 0;
  std::vector<transport::TokenLogprobs> output_logprobs;  // one per output id, when asked
  int64_t spec_verify_ct = 0;  // target verify forwards of speculative decoding (0 without it)
  double queue_seconds = 0;    // from submission to the first batch that ran it (sglang's queue time)
  int64_t cached_tokens = 0;   // prompt tokens whose K/V it shared with another request (n > 1 samples, equal prompts)
};

}  // namespace aerie::core
