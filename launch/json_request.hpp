#pragma once
// sglang's /generate request body as Aerie's GenerationRequest: {"input_ids": [...],
// "sampling_params": {"max_new_tokens", "temperature", "top_p", "top_k", "min_p", "seed",
// "stop_token_ids", "ignore_eos"}, "rid": ...}. Every wrong field gives a clear error.
#include <nlohmann/json.hpp>
#include <string>

#include "actors/core/generation_request.hpp"

namespace aerie::launch {

struct ParsedRequest {
  std::string rid;  // the client's id (echoed back), or empty
  core::GenerationRequest request;
};

// Throws aerie::Error naming the field that is wrong.
ParsedRequest parse_generate_request(const nlohmann::json& body, int64_t vocab_size);

}  // namespace aerie::launch
