#pragma once
// Request bodies of the serving API as Aerie's GenerationRequest, with what the HTTP layer
// handles itself (stop strings, streaming, the reply's shape). Every wrong field gives an
// aerie::Error naming it; unknown fields are ignored, as sglang and vLLM do.
//   sglang /generate: {"text" | "input_ids", "sampling_params": {"max_new_tokens",
//     "temperature", "top_p", "top_k", "min_p", "seed", "stop", "stop_token_ids",
//     "ignore_eos"}, "stream", "return_logprob", "top_logprobs_num", "return_text_in_logprobs", "rid"}
//   OpenAI /v1/completions and /v1/chat/completions: see parse_completion_request below.
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "actors/core/generation_request.hpp"
#include "model/generation_config.hpp"
#include "model/text_tokenizer.hpp"

namespace aerie::launch {

class ChatTemplate;
class Deployment;

enum class ApiKind { kGenerate, kCompletion, kChat };

struct ParsedRequest {
  ApiKind kind = ApiKind::kGenerate;
  std::string rid;  // the client's id (echoed back), or empty
  core::GenerationRequest request;
  std::vector<std::string> stop;  // stop strings (the text ends before the first one found)
  bool stream = false;
  bool include_usage = false;  // OpenAI stream_options.include_usage
  bool return_logprob = false;
  bool return_text_in_logprobs = false;  // sglang: each logprob entry carries its token's text
  // Parallel samples of the prompt (sglang's sampling_params.n, OpenAI's n): sample i runs as
  // its own request with seed + i (the prompt is prefilled for each; not shared yet).
  int n = 1;
};

// What the parsers need to know about the model.
struct RequestLimits {
  int64_t vocab_size = 0;
  int64_t max_total_tokens = 0;  // prompt + output at most (context length, KV pool)
  const model::TextTokenizer* tokenizer = nullptr;  // for text prompts; may be null
  model::SamplingDefaults sampling;                  // for fields a request leaves out (generation_config.json)
};

// Client JSON nested deeper than this is refused while it is parsed (before any copy or walk
// of it could recurse that deep).
constexpr int kMaxJsonDepth = 64;
// 'n' at most.
constexpr int kMaxParallelSamples = 16;
// Parses a client's body. Throws aerie::Error "malformed JSON: ..." (invalid JSON, invalid
// UTF-8, NaN) or naming the depth cap.
nlohmann::json parse_client_json(const std::string& text);

// The limits of a running deployment (rank 0's model and KV pool).
RequestLimits request_limits(const Deployment& deployment, const model::TextTokenizer* tokenizer);

// sglang's /generate body. Throws aerie::Error naming the field that is wrong.
ParsedRequest parse_generate_request(const nlohmann::json& body, const RequestLimits& limits);
// OpenAI /v1/completions: "prompt" (string, list of ids, or a one-element list of either),
// "max_tokens" (16), "temperature", "top_p", "n" (1), "stream", "stream_options",
// "stop" (string or list), "logprobs" (top count, 0-5 as OpenAI), "seed", "echo" (false),
// "presence_penalty"/"frequency_penalty" (0), and sglang's extras "top_k", "min_p",
// "ignore_eos", "stop_token_ids".
ParsedRequest parse_completion_request(const nlohmann::json& body, const RequestLimits& limits);
// OpenAI /v1/chat/completions: "messages" ({"role", "content": string or text parts}),
// "max_tokens" / "max_completion_tokens" (default: the rest of the context), "logprobs",
// "top_logprobs", and the rest as completions.
ParsedRequest parse_chat_request(const nlohmann::json& body, const RequestLimits& limits, const ChatTemplate* chat);

}  // namespace aerie::launch
