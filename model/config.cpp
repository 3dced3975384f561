#include "model/config.hpp"

#include <algorithm>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/error.hpp"
#include "model/generation_config.hpp"
#include "model/gguf_file.hpp"
#include "model/gguf_llama.hpp"

namespace aerie::model {

namespace {

using nlohmann::json;

template <class T>
T get_or(const json& j, const char* key, T fallback, const std::string& source) {
  if (!j.contains(key) || j[key].is_null()) return fallback;
  try {
    return j[key].get<T>();
  } catch (const json::exception&) {
    AERIE_FAIL(source << ": field '" << key << "' has the wrong type (" << j[key].dump() << ")");
  }
}

int64_t require_int(const json& j, const char* key, const std::string& source) {
  AERIE_CHECK(j.contains(key) && !j[key].is_null(), source << ": missing field '" << key << "'");
  AERIE_CHECK(j[key].is_number_integer(), source << ": field '" << key << "' must be an integer, got " << j[key].dump());
  return j[key].get<int64_t>();
}

void parse_rope(const json& j, LlamaConfig& c, const std::string& source) {
  // transformers >= 5 writes rope_parameters {rope_theta, rope_type, ...}; older versions
  // write rope_theta and an optional rope_scaling {rope_type|type, ...}.
  const json* scaling = nullptr;
  if (j.contains("rope_parameters") && j["rope_parameters"].is_object()) {
    scaling = &j["rope_parameters"];
    c.rope_theta = get_or<double>(*scaling, "rope_theta", get_or<double>(j, "rope_theta", 10000.0, source), source);
  } else {
    c.rope_theta = get_or<double>(j, "rope_theta", 10000.0, source);
    if (j.contains("rope_scaling") && j["rope_scaling"].is_object()) scaling = &j["rope_scaling"];
  }
  if (!scaling) return;
  std::string type = get_or<std::string>(*scaling, "rope_type", get_or<std::string>(*scaling, "type", "default", source), source);
  AERIE_CHECK(type == "default" || type == "linear" || type == "llama3",
              source << ": rope type '" << type << "' is not supported (supported: default, linear, llama3)");
  c.rope_scaling.type = type;
  c.rope_scaling.factor = get_or<double>(*scaling, "factor", 1.0, source);
  c.rope_scaling.low_freq_factor = get_or<double>(*scaling, "low_freq_factor", 1.0, source);
  c.rope_scaling.high_freq_factor = get_or<double>(*scaling, "high_freq_factor", 4.0, source);
  c.rope_scaling.original_max_position_embeddings =
      get_or<int64_t>(*scaling, "original_max_position_embeddings", 8192, source);
}

std::vector<int32_t> token_ids(const json& j, const char* key, const std::string& source) {
  std::vector<int32_t> ids;
  if (!j.contains(key) || j[key].is_null()) return ids;
  const json& v = j[key];
  if (v.is_number_integer()) {
    ids.push_back(v.get<int32_t>());
  } else if (v.is_array()) {
    for (const auto& x : v) {
      AERIE_CHECK(x.is_number_integer(), source << ": '" << key << "' must hold integers");
      ids.push_back(x.get<int32_t>());
    }
  } else {
    AERIE_FAIL(source << ": '" << key << "' must be an integer or a list of integers");
  }
  return ids;
}

}  // namespace

int64_t LlamaConfig::num_parameters() const {
  const int64_t attn = hidden_size * (q_size() + 2 * kv_size()) + q_size() * hidden_size;
  const int64_t mlp = 3 * hidden_size * intermediate_size;
  const int64_t per_layer = attn + mlp + 2 * hidden_size;
  const int64_t embed = vocab_size * hidden_size;
  return num_layers * per_layer + embed * (tie_word_embeddings ? 1 : 2) + hidden_size;
}

void LlamaConfig::validate(const std::string& source) const {
  auto positive = [&](int64_t v, const char* name) { AERIE_CHECK(v > 0, source << ": '" << name << "' must be positive, got " << v); };
  positive(vocab_size, "vocab_size");
  positive(hidden_size, "hidden_size");
  positive(intermediate_size, "intermediate_size");
  positive(num_layers, "num_hidden_layers");
  positive(num_heads, "num_attention_heads");
  positive(num_kv_heads, "num_key_value_heads");
  positive(head_dim, "head_dim");
  positive(max_position_embeddings, "max_position_embeddings");
  AERIE_CHECK(num_heads % num_kv_heads == 0, source << ": num_attention_heads (" << num_heads
                                                    << ") must be a multiple of num_key_value_heads (" << num_kv_heads << ")");
  AERIE_CHECK(head_dim % 2 == 0, source << ": head_dim must be even for rotary embeddings, got " << head_dim);
  AERIE_CHECK(rms_norm_eps > 0, source << ": rms_norm_eps must be positive");
  AERIE_CHECK(rope_theta > 0, source << ": rope_theta must be positive");
  AERIE_CHECK(rope_scaling.factor > 0, source << ": rope scaling factor must be positive");
  if (rope_scaling.type == "llama3")
    AERIE_CHECK(rope_scaling.high_freq_factor > rope_scaling.low_freq_factor,
                source << ": llama3 rope needs high_freq_factor > low_freq_factor");
  AERIE_CHECK(bos_token_id < vocab_size, source << ": bos_token_id " << bos_token_id << " is outside the vocabulary");
}

LlamaConfig LlamaConfig::from_json_text(const std::string& text, const std::string& source) {
  json j;
  try {
    j = json::parse(text);
  } catch (const json::exception& e) {
    AERIE_FAIL(source << ": not valid JSON (" << e.what() << ")");
  }
  AERIE_CHECK(j.is_object(), source << ": expected a JSON object");
  LlamaConfig c;
  std::vector<std::string> archs = get_or<std::vector<std::string>>(j, "architectures", {}, source);
  std::string model_type = get_or<std::string>(j, "model_type", "", source);
  if (!archs.empty()) {
    c.architecture = archs.front();
    // The EAGLE heads' configs describe their one Llama decoder layer in the same fields.
    AERIE_CHECK(c.architecture == "LlamaForCausalLM" || c.architecture == "LlamaForCausalLMEagle" ||
                    c.architecture == "LlamaForCausalLMEagle3",
                source << ": architecture '" << c.architecture
                       << "' is not supported (supported: LlamaForCausalLM; draft heads LlamaForCausalLMEagle, LlamaForCausalLMEagle3)");
  } else {
    AERIE_CHECK(model_type == "llama", source << ": no 'architectures' and model_type '" << model_type << "' is not llama");
  }
  std::string act = get_or<std::string>(j, "hidden_act", "silu", source);
  AERIE_CHECK(act == "silu", source << ": hidden_act '" << act << "' is not supported (Llama uses silu)");
  c.vocab_size = require_int(j, "vocab_size", source);
  c.hidden_size = require_int(j, "hidden_size", source);
  c.intermediate_size = require_int(j, "intermediate_size", source);
  c.num_layers = require_int(j, "num_hidden_layers", source);
  c.num_heads = require_int(j, "num_attention_heads", source);
  c.num_kv_heads = get_or<int64_t>(j, "num_key_value_heads", c.num_heads, source);
  AERIE_CHECK(c.num_heads > 0, source << ": 'num_attention_heads' must be positive");
  c.head_dim = get_or<int64_t>(j, "head_dim", c.hidden_size / c.num_heads, source);
  c.max_position_embeddings = get_or<int64_t>(j, "max_position_embeddings", 2048, source);
  c.rms_norm_eps = static_cast<float>(get_or<double>(j, "rms_norm_eps", 1e-6, source));
  parse_rope(j, c, source);
  c.tie_word_embeddings = get_or<bool>(j, "tie_word_embeddings", false, source);
  c.attention_bias = get_or<bool>(j, "attention_bias", false, source);
  c.mlp_bias = get_or<bool>(j, "mlp_bias", false, source);
  std::vector<int32_t> bos = token_ids(j, "bos_token_id", source);
  c.bos_token_id = bos.empty() ? -1 : bos.front();
  c.eos_token_ids = token_ids(j, "eos_token_id", source);
  std::string dtype = get_or<std::string>(j, "torch_dtype", get_or<std::string>(j, "dtype", "bfloat16", source), source);
  c.dtype = parse_dtype(dtype);
  c.validate(source);
  return c;
}

LlamaConfig LlamaConfig::load(const std::filesystem::path& dir) {
  if (GgufFile::is_gguf(dir)) return llama_config_from_gguf(GgufFile(dir));
  const auto path = dir / "config.json";
  std::ifstream in(path);
  AERIE_CHECK(in.good(), path.string() << ": cannot open (is --model-path a Hugging Face model folder or a GGUF file?)");
  std::stringstream ss;
  ss << in.rdbuf();
  LlamaConfig c = from_json_text(ss.str(), path.string());
  // generation_config.json's EOS ids stop generation too (Llama 3 Instruct lists <|eot_id|> there).
  for (int32_t id : load_generation_config(dir).eos_token_ids)
    if (std::find(c.eos_token_ids.begin(), c.eos_token_ids.end(), id) == c.eos_token_ids.end()) {
      AERIE_CHECK(id < c.vocab_size, (dir / "generation_config.json").string() << ": eos_token_id " << id << " is outside the vocabulary");
      c.eos_token_ids.push_back(id);
    }
  return c;
}

std::vector<std::string> LlamaConfig::named_shapes() { return {"tiny", "smollm2-135m", "llama-3.2-1b", "llama-3.1-8b"}; }

LlamaConfig LlamaConfig::named_shape(const std::string& name) {
  LlamaConfig c;
  c.eos_token_ids = {2};
  c.bos_token_id = 1;
  if (name == "tiny") {  // small enough to run instantly on a CPU
    c.vocab_size = 512; c.hidden_size = 128; c.intermediate_size = 256; c.num_layers = 2;
    c.num_heads = 4; c.num_kv_heads = 2; c.head_dim = 32; c.max_position_embeddings = 4096;
    c.rope_theta = 10000.0; c.dtype = DType::kF32;
  } else if (name == "smollm2-135m") {  // the embedded default's shape (SmolLM2-135M-Instruct), for benchmarks
    c.vocab_size = 49152; c.hidden_size = 576; c.intermediate_size = 1536; c.num_layers = 30;
    c.num_heads = 9; c.num_kv_heads = 3; c.head_dim = 64; c.max_position_embeddings = 8192;
    c.rope_theta = 100000.0; c.tie_word_embeddings = true; c.rms_norm_eps = 1e-5f;
  } else if (name == "llama-3.2-1b") {
    c.vocab_size = 128256; c.hidden_size = 2048; c.intermediate_size = 8192; c.num_layers = 16;
    c.num_heads = 32; c.num_kv_heads = 8; c.head_dim = 64; c.max_position_embeddings = 131072;
    c.rope_theta = 500000.0; c.tie_word_embeddings = true; c.rms_norm_eps = 1e-5f;
    c.rope_scaling = {.type = "llama3", .factor = 32.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                      .original_max_position_embeddings = 8192};
    c.bos_token_id = 128000; c.eos_token_ids = {128001, 128008, 128009};
  } else if (name == "llama-3.1-8b") {
    c.vocab_size = 128256; c.hidden_size = 4096; c.intermediate_size = 14336; c.num_layers = 32;
    c.num_heads = 32; c.num_kv_heads = 8; c.head_dim = 128; c.max_position_embeddings = 131072;
    c.rope_theta = 500000.0; c.rms_norm_eps = 1e-5f;
    c.rope_scaling = {.type = "llama3", .factor = 8.0, .low_freq_factor = 1.0, .high_freq_factor = 4.0,
                      .original_max_position_embeddings = 8192};
    c.bos_token_id = 128000; c.eos_token_ids = {128001, 128008, 128009};
  } else {
    std::string known;
    for (const auto& n : named_shapes()) known += (known.empty() ? "" : ", ") + n;
    AERIE_FAIL("unknown model shape '" << name << "' (known: " << known << ")");
  }
  c.validate("shape " + name);
  return c;
}

}  // namespace aerie::model
