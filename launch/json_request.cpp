#include "launch/json_request.hpp"

#include <cmath>

#include "kernels/error.hpp"

namespace aerie::launch {

namespace {

using nlohmann::json;

template <class T>
T field(const json& obj, const char* key, T fallback) {
  if (!obj.contains(key) || obj[key].is_null()) return fallback;
  const json& v = obj[key];
  if constexpr (std::is_same_v<T, bool>) {
    AERIE_CHECK(v.is_boolean(), "'" << key << "' must be true or false");
  } else if constexpr (std::is_integral_v<T>) {
    AERIE_CHECK(v.is_number_integer(), "'" << key << "' must be an integer");
  } else {
    AERIE_CHECK(v.is_number(), "'" << key << "' must be a number");
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

}  // namespace

ParsedRequest parse_generate_request(const json& body, int64_t vocab) {
  AERIE_CHECK(body.is_object(), "the request must be a JSON object");
  ParsedRequest p;
  AERIE_CHECK(body.contains("input_ids"), "'input_ids' is required (text prompts need the tokenizer of the serving API)");
  p.request.prompt = token_list(body["input_ids"], "input_ids", vocab);
  AERIE_CHECK(!p.request.prompt.empty(), "'input_ids' is empty");
  if (body.contains("rid") && !body["rid"].is_null()) {
    AERIE_CHECK(body["rid"].is_string() || body["rid"].is_number_integer(), "'rid' must be a string or an integer");
    p.rid = body["rid"].is_string() ? body["rid"].get<std::string>() : std::to_string(body["rid"].get<int64_t>());
  }
  const json sp = body.contains("sampling_params") ? body["sampling_params"] : json::object();
  AERIE_CHECK(sp.is_object(), "'sampling_params' must be an object");
  auto& r = p.request;
  r.max_new_tokens = field<int64_t>(sp, "max_new_tokens", 128);
  AERIE_CHECK(r.max_new_tokens > 0, "'max_new_tokens' must be positive");
  r.sampling.temperature = field<float>(sp, "temperature", 1.0f);
  r.sampling.top_p = field<float>(sp, "top_p", 1.0f);
  r.sampling.top_k = field<int32_t>(sp, "top_k", -1);
  r.sampling.min_p = field<float>(sp, "min_p", 0.0f);
  r.sampling.seed = field<int64_t>(sp, "seed", 0);
  r.ignore_eos = field<bool>(sp, "ignore_eos", false);
  if (sp.contains("stop_token_ids") && !sp["stop_token_ids"].is_null()) r.stop_token_ids = token_list(sp["stop_token_ids"], "stop_token_ids", vocab);
  r.sampling.validate();
  return p;
}

}  // namespace aerie::launch
