#include "launch/serving/json_request.hpp"

#include <cstdlib>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <mutex>

#include "kernels/error.hpp"
#include "launch/serving/chat_template.hpp"

namespace aerie::launch {

namespace {

using nlohmann::json;

bool present(const json& obj, const char* key) { return obj.contains(key) && !obj[key].is_null(); }

template <class T>
T field(const json& obj, const char* key, T fallback) {
  if (!present(obj, key)) return fallback;
  const json& v = obj[key];
  if constexpr (std::is_same_v<T, bool>) {
    AERIE_CHECK(v.is_boolean(), "'" << key << "' must be true or false");
  } else if constexpr (std::is_integral_v<T>) {
    AERIE_CHECK(v.is_number_integer(), "'" << key << "' must be an integer");
    // Out of the field's range is an error, never a silent truncation (2^32 + 1 is not 1).
    const bool fits = v.is_number_unsigned() ? v.get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<T>::max())
                                             : v.get<int64_t>() >= static_cast<int64_t>(std::numeric_limits<T>::min()) &&
                                                   v.get<int64_t>() <= static_cast<int64_t>(std::numeric_limits<T>::max());
    AERIE_CHECK(fits, "'" << key << "' is out of range [" << +std::numeric_limits<T>::min() << ", " << +std::numeric_limits<T>::max() << "]");
  } else {
    AERIE_CHECK(v.is_number(), "'" << key << "' must be a number");
    AERIE_CHECK(std::isfinite(v.get<double>()), "'" << key << "' must be a finite number");
  }
  return v.get<T>();
}

std::vector<int32_t> token_list(const json& v, const char* key, int64_t vocab) {
  AERIE_CHECK(v.is_array(), "'" << key << "' must be a list of token ids");
  std::vector<int32_t> ids;
  for (const auto& x : v) {
    AERIE_CHECK(x.is_number_integer(), "'" << key << "' must hold integers");
    const int64_t id = x.get<int64_t>();
    AERIE_CHECK(id >= 0 && id < vocab, "token id " << id << " in '" << key << "' is outside the vocabulary [0, " << vocab << ")");
    ids.push_back(static_cast<int32_t>(id));
  }
  return ids;
}

std::vector<std::string> stop_strings(const json& obj) {
  if (!present(obj, "stop")) return {};
  const json& v = obj["stop"];
  if (v.is_string()) return {v.get<std::string>()};
  AERIE_CHECK(v.is_array(), "'stop' must be a string or a list of strings");
  std::vector<std::string> out;
  for (const auto& s : v) {
    AERIE_CHECK(s.is_string(), "'stop' must be a string or a list of strings");
    AERIE_CHECK(!s.get<std::string>().empty(), "'stop' strings must not be empty");
    out.push_back(s.get<std::string>());
  }
  AERIE_CHECK(out.size() <= 16, "at most 16 'stop' strings, got " << out.size());
  return out;
}

std::string rid_of(const json& body, const char* key) {
  if (!present(body, key)) return {};
  AERIE_CHECK(body[key].is_string() || body[key].is_number_integer(), "'" << key << "' must be a string or an integer");
  return body[key].is_string() ? body[key].get<std::string>() : std::to_string(body[key].get<int64_t>());
}

std::vector<int32_t> encode_text(const std::string& text, const char* key, const RequestLimits& limits) {
  AERIE_CHECK(limits.tokenizer, "'" << key << "' text needs a tokenizer; this model folder has none, send token ids");
  AERIE_CHECK(!text.empty(), "'" << key << "' is empty");
  return limits.tokenizer->encode(text);  // throws on invalid UTF-8
}

void check_lengths(const core::GenerationRequest& r, const RequestLimits& limits, const char* max_key, int64_t min_new = 1) {
  AERIE_CHECK(!r.prompt.empty(), "the prompt is empty");
  AERIE_CHECK(r.max_new_tokens >= min_new, "'" << max_key << "' must be " << (min_new > 0 ? "positive" : "at least 0") << ", got "
                                               << r.max_new_tokens);
  const int64_t prompt = static_cast<int64_t>(r.prompt.size());
  AERIE_CHECK(prompt < limits.max_total_tokens,
              "the prompt has " << prompt << " tokens; this server takes at most " << limits.max_total_tokens - 1);
  // prompt < max_total_tokens: the difference cannot overflow, a sum with a huge count could.
  AERIE_CHECK(r.max_new_tokens <= limits.max_total_tokens - prompt, "'" << max_key << "' (" << r.max_new_tokens << ") + the prompt ("
                                                                        << prompt << " tokens) exceeds " << limits.max_total_tokens
                                                                        << " tokens");
}

int64_t fresh_seed() {
  static std::mutex mu;
  static std::mt19937_64 rng{std::random_device{}()};
  std::lock_guard<std::mutex> lock(mu);
  return static_cast<int64_t>(rng() >> 1);  // non-negative
}

// Options Aerie cannot honour yet, wherever they appear (sglang's sampling_params, OpenAI's
// body): refused with a 400 saying which, rather than silently ignored. Their neutral values
// (n 1, a "text" response format, no tools) pass.
void refuse_unsupported(const json& obj) {
  AERIE_CHECK(field<int64_t>(obj, "best_of", 1) == 1, "'best_of' other than 1 is not supported");
  for (const char* key : {"json_schema", "regex", "ebnf", "structural_tag"})
    AERIE_CHECK(!present(obj, key), "'" << key << "': structured output is not supported");
  if (present(obj, "response_format")) {
    const json& f = obj["response_format"];
    AERIE_CHECK(f.is_object() && f.value("type", std::string("text")) == "text",
                "'response_format' other than {\"type\": \"text\"}: structured output is not supported");
  }
  if (present(obj, "tools")) AERIE_CHECK(obj["tools"].is_array() && obj["tools"].empty(), "'tools': tool calls are not supported");
  if (present(obj, "tool_choice"))
    AERIE_CHECK(obj["tool_choice"].is_string() && obj["tool_choice"].get<std::string>() == "none", "'tool_choice': tool calls are not supported");
}

// Penalties, logit_bias and the minimum output length (sglang's names, OpenAI's
// frequency/presence penalties and logit_bias, vLLM's min_tokens / repetition_penalty).
void penalty_fields(const json& obj, core::SamplingOptions& s, int64_t vocab_size) {
  s.frequency_penalty = field<float>(obj, "frequency_penalty", 0.0f);
  s.presence_penalty = field<float>(obj, "presence_penalty", 0.0f);
  s.repetition_penalty = field<float>(obj, "repetition_penalty", 1.0f);
  s.min_new_tokens = present(obj, "min_tokens") ? field<int64_t>(obj, "min_tokens", 0) : field<int64_t>(obj, "min_new_tokens", 0);
  if (present(obj, "logit_bias")) {
    const json& lb = obj["logit_bias"];
    AERIE_CHECK(lb.is_object(), "'logit_bias' must be an object of token id -> bias");
    AERIE_CHECK(lb.size() <= 1024, "'logit_bias' may name at most 1024 tokens");
    for (const auto& [key, value] : lb.items()) {
      char* end = nullptr;
      const long long id = std::strtoll(key.c_str(), &end, 10);
      AERIE_CHECK(!key.empty() && end && *end == '\0' && id >= 0 && id < vocab_size,
                  "'logit_bias' keys must be token ids in [0, " << vocab_size << "), got '" << key << "'");
      AERIE_CHECK(value.is_number(), "'logit_bias' values must be numbers");
      s.logit_bias.emplace_back(static_cast<int32_t>(id), value.get<float>());
    }
  }
}

// The sampling fields sglang keeps in "sampling_params" and OpenAI at the top level.
void sampling_fields(const json& obj, ParsedRequest& p, const RequestLimits& limits) {
  refuse_unsupported(obj);
  const int64_t n = field<int64_t>(obj, "n", 1);
  AERIE_CHECK(n >= 1 && n <= kMaxParallelSamples, "'n' must be between 1 and " << kMaxParallelSamples << ", got " << n);
  p.n = static_cast<int>(n);
  auto& r = p.request;
  penalty_fields(obj, r.sampling, limits.vocab_size);
  r.sampling.temperature = field<float>(obj, "temperature", limits.sampling.temperature);
  r.sampling.top_p = field<float>(obj, "top_p", limits.sampling.top_p);
  r.sampling.top_k = field<int32_t>(obj, "top_k", limits.sampling.top_k);
  AERIE_CHECK(r.sampling.top_k == -1 || r.sampling.top_k >= 1, "'top_k' must be -1 (all tokens) or at least 1, got " << r.sampling.top_k);
  r.sampling.min_p = field<float>(obj, "min_p", limits.sampling.min_p);
  // Unseeded requests sample differently each time, as sglang and OpenAI do; a given seed
  // reproduces (counter-based sampling: the same seed and step give the same token in any batch).
  r.sampling.seed = present(obj, "seed") ? field<int64_t>(obj, "seed", 0) : fresh_seed();
  r.ignore_eos = field<bool>(obj, "ignore_eos", false);
  if (present(obj, "stop_token_ids")) r.stop_token_ids = token_list(obj["stop_token_ids"], "stop_token_ids", limits.vocab_size);
  p.stop = stop_strings(obj);
  r.sampling.validate();
}

// The OpenAI fields shared by completions and chat.
void openai_common(const json& body, ParsedRequest& p, const RequestLimits& limits) {
  AERIE_CHECK(!present(body, "model") || body["model"].is_string(), "'model' must be a string");
  sampling_fields(body, p, limits);
  p.stream = field<bool>(body, "stream", false);
  if (present(body, "stream_options")) {
    const json& so = body["stream_options"];
    AERIE_CHECK(so.is_object(), "'stream_options' must be an object");
    p.include_usage = field<bool>(so, "include_usage", false);
  }
  p.rid = rid_of(body, "rid");
}

}  // namespace

json parse_client_json(const std::string& text) {
  // The parser keeps its own stack, but copies and walks of a parsed value recurse: a value
  // deeper than the cap is refused while it is being read.
  const json::parser_callback_t cap = [](int depth, json::parse_event_t, json&) {
    AERIE_CHECK(depth <= kMaxJsonDepth, "JSON nested deeper than " << kMaxJsonDepth << " levels");
    return true;
  };
  try {
    return json::parse(text, cap);
  } catch (const json::exception& e) {
    AERIE_FAIL("malformed JSON: " << e.what());
  }
}

ParsedRequest parse_generate_request(const json& body, const RequestLimits& limits) {
  AERIE_CHECK(body.is_object(), "the request must be a JSON object");
  ParsedRequest p;
  p.kind = ApiKind::kGenerate;
  auto& r = p.request;
  if (present(body, "text")) {
    AERIE_CHECK(!present(body, "input_ids"), "give 'text' or 'input_ids', not both");
    AERIE_CHECK(body["text"].is_string(), "'text' must be a string");
    r.prompt = encode_text(body["text"].get<std::string>(), "text", limits);
  } else {
    AERIE_CHECK(present(body, "input_ids"), "'text' or 'input_ids' is required");
    r.prompt = token_list(body["input_ids"], "input_ids", limits.vocab_size);
    AERIE_CHECK(!r.prompt.empty(), "'input_ids' is empty");
  }
  p.rid = rid_of(body, "rid");
  p.stream = field<bool>(body, "stream", false);
  p.return_logprob = field<bool>(body, "return_logprob", false);
  p.return_text_in_logprobs = field<bool>(body, "return_text_in_logprobs", false);
  const int32_t top = field<int32_t>(body, "top_logprobs_num", 0);
  AERIE_CHECK(top >= 0 && top <= core::kMaxTopLogprobs, "'top_logprobs_num' must be between 0 and " << core::kMaxTopLogprobs);
  if (p.return_logprob) r.logprobs = top;
  const json sp = present(body, "sampling_params") ? body["sampling_params"] : json::object();
  AERIE_CHECK(sp.is_object(), "'sampling_params' must be an object");
  // sglang's default of 128, shortened to what the context leaves when not given.
  r.max_new_tokens = field<int64_t>(sp, "max_new_tokens",
                                    std::clamp<int64_t>(limits.max_total_tokens - static_cast<int64_t>(r.prompt.size()), 1, 128));
  sampling_fields(sp, p, limits);
  // sglang takes max_new_tokens 0 (nothing to generate; its bench_serving sends it).
  check_lengths(r, limits, "max_new_tokens", 0);
  return p;
}

ParsedRequest parse_completion_request(const json& body, const RequestLimits& limits) {
  AERIE_CHECK(body.is_object(), "the request must be a JSON object");
  ParsedRequest p;
  p.kind = ApiKind::kCompletion;
  AERIE_CHECK(present(body, "prompt"), "'prompt' is required");
  json prompt = body["prompt"];
  // A one-element batch is one prompt; larger batches are not supported.
  if (prompt.is_array() && prompt.size() == 1 && (prompt[0].is_string() || prompt[0].is_array())) prompt = prompt[0];
  if (prompt.is_string()) {
    p.request.prompt = encode_text(prompt.get<std::string>(), "prompt", limits);
  } else {
    AERIE_CHECK(prompt.is_array() && (prompt.empty() || prompt[0].is_number_integer()),
                "'prompt' must be a string or a list of token ids (one prompt per request)");
    p.request.prompt = token_list(prompt, "prompt", limits.vocab_size);
    AERIE_CHECK(!p.request.prompt.empty(), "'prompt' is empty");
  }
  AERIE_CHECK(!field<bool>(body, "echo", false), "'echo' is not supported");
  AERIE_CHECK(!present(body, "suffix"), "'suffix' is not supported");
  openai_common(body, p, limits);
  p.request.max_new_tokens = field<int64_t>(body, "max_tokens", 16);
  if (present(body, "logprobs")) {
    const int32_t k = field<int32_t>(body, "logprobs", 0);
    AERIE_CHECK(k >= 0 && k <= 5, "'logprobs' must be between 0 and 5");
    p.return_logprob = true;
    p.request.logprobs = k;
  }
  check_lengths(p.request, limits, "max_tokens", 0);  // 0: an empty completion, as sglang (bench_serving's sglang-oai sends it)
  return p;
}

ParsedRequest parse_chat_request(const json& body, const RequestLimits& limits, const ChatTemplate* chat) {
  AERIE_CHECK(body.is_object(), "the request must be a JSON object");
  ParsedRequest p;
  p.kind = ApiKind::kChat;
  AERIE_CHECK(chat, "chat completions need the model's tokenizer; this model folder has none");
  AERIE_CHECK(present(body, "messages") && body["messages"].is_array(), "'messages' (a list) is required");
  std::vector<ChatMessage> messages;
  for (const auto& m : body["messages"]) {
    AERIE_CHECK(m.is_object() && m.contains("role") && m["role"].is_string(), "each message needs a string 'role'");
    ChatMessage cm{m["role"].get<std::string>(), ""};
    if (cm.role == "developer") cm.role = "system";  // OpenAI's newer name for it
    AERIE_CHECK(cm.role == "system" || cm.role == "user" || cm.role == "assistant" || cm.role == "tool",
                "message role '" << cm.role << "' is not one of system, developer, user, assistant, tool");
    const json c = m.contains("content") ? m["content"] : json();
    if (c.is_null()) {
      AERIE_CHECK(cm.role == "assistant", "a " << cm.role << " message needs 'content'");  // OpenAI: only assistant turns may omit it
    } else if (c.is_string()) {
      cm.content = c.get<std::string>();
    } else if (c.is_array()) {  // [{"type": "text", "text": ...}, ...]
      for (const auto& part : c) {
        AERIE_CHECK(part.is_object() && part.value("type", "") == "text" && part.contains("text") && part["text"].is_string(),
                    "message content parts must be {\"type\": \"text\", \"text\": ...} (no images)");
        cm.content += part["text"].get<std::string>();
      }
    } else {
      AERIE_FAIL("message 'content' must be a string or a list of text parts");
    }
    messages.push_back(std::move(cm));
  }
  p.request.prompt = chat->render(messages);
  const auto extra_stops = chat->stop_token_ids();
  openai_common(body, p, limits);
  p.request.stop_token_ids.insert(p.request.stop_token_ids.end(), extra_stops.begin(), extra_stops.end());
  const int64_t rest = limits.max_total_tokens - static_cast<int64_t>(p.request.prompt.size());
  p.request.max_new_tokens = field<int64_t>(body, "max_completion_tokens", field<int64_t>(body, "max_tokens", rest));
  if (field<bool>(body, "logprobs", false)) {
    const int32_t k = field<int32_t>(body, "top_logprobs", 0);
    AERIE_CHECK(k >= 0 && k <= core::kMaxTopLogprobs, "'top_logprobs' must be between 0 and " << core::kMaxTopLogprobs);
    p.return_logprob = true;
    p.request.logprobs = k;
  } else {
    AERIE_CHECK(!present(body, "top_logprobs"), "'top_logprobs' needs 'logprobs': true");
  }
  check_lengths(p.request, limits, "max_tokens", 0);  // 0: an empty completion, as sglang (bench_serving's sglang-oai sends it)
  return p;
}

}  // namespace aerie::launch
