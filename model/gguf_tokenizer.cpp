// The byte-level BPE tokenizer of a GGUF file (tokenizer.ggml.model = "gpt2").
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/gguf_file.hpp"

namespace aerie::model {

namespace {

// llama.cpp's pre-tokenizer names (tokenizer.ggml.pre) as the regex stages of the
// tokenizer.json they were converted from.
std::vector<std::string> pre_tokenizer_patterns(const std::string& pre, const std::string& where) {
  const std::string gpt2 = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  const std::string llama3 =
      R"((?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
  if (pre.empty() || pre == "default" || pre == "gpt-2" || pre == "gpt2" || pre == "phi-2" || pre == "olmo" || pre == "jina-es") return {gpt2};
  if (pre == "llama3" || pre == "llama-bpe" || pre == "llama-v3" || pre == "smaug-bpe") return {llama3};
  // SmolLM, StarCoder and relatives: every digit alone, then GPT-2's pattern.
  if (pre == "smollm" || pre == "starcoder" || pre == "refact" || pre == "codeshell" || pre == "minerva") return {R"(\p{N})", gpt2};
  AERIE_FAIL(where << ": tokenizer.ggml.pre '" << pre << "' is not supported (default, gpt-2, llama-bpe, smollm, starcoder, ...)");
}

}  // namespace

BpeSpec bpe_spec_from_gguf(const GgufFile& f) {
  const std::string where = f.path().string();
  const std::string model = f.has("tokenizer.ggml.model") ? f.get_string("tokenizer.ggml.model") : "";
  AERIE_CHECK(model == "gpt2", where << ": tokenizer.ggml.model '" << model
                                     << "' is not supported (gpt2: byte-level BPE); use the Hugging Face folder's tokenizer instead");
  const auto& tokens = f.get_array("tokenizer.ggml.tokens");
  const nlohmann::json empty = nlohmann::json::array();
  const auto& types = f.has("tokenizer.ggml.token_type") ? f.get_array("tokenizer.ggml.token_type") : empty;
  AERIE_CHECK(types.empty() || types.size() == tokens.size(),
              where << ": tokenizer.ggml.token_type has " << types.size() << " entries for " << tokens.size() << " tokens");
  AERIE_CHECK(tokens.size() < (size_t{1} << 24), where << ": " << tokens.size() << " tokens is too many");
  BpeSpec spec;
  spec.split_patterns = pre_tokenizer_patterns(f.has("tokenizer.ggml.pre") ? f.get_string("tokenizer.ggml.pre") : "", where);
  for (size_t i = 0; i < tokens.size(); ++i) {
    AERIE_CHECK(tokens[i].is_string(), where << ": token " << i << " is not a string");
    const auto id = static_cast<int32_t>(i);
    const int64_t type = types.empty() ? 1 : (types[i].is_number_integer() ? types[i].get<int64_t>() : -1);
    AERIE_CHECK(type >= 0 && type <= 6, where << ": token " << i << " has unknown type " << types[i].dump());
    // 3: control (BOS, EOS, chat markers), 4: user-defined: both are matched whole in text.
    if (type == 3 || type == 4) spec.added.push_back({tokens[i].get<std::string>(), id, type == 3});
    else spec.vocab.emplace_back(tokens[i].get<std::string>(), id);
  }
  if (f.has("tokenizer.ggml.merges"))
    for (const auto& m : f.get_array("tokenizer.ggml.merges")) {
      AERIE_CHECK(m.is_string(), where << ": a merge is not a string");
      const std::string s = m.get<std::string>();
      const auto sp = s.find(' ');
      AERIE_CHECK(sp != std::string::npos, where << ": merge '" << s << "' is not two tokens");
      spec.merges.emplace_back(s.substr(0, sp), s.substr(sp + 1));
    }
  auto special = [&](const char* add_key, const char* id_key, std::vector<int32_t>& out) {
    if (!f.has(add_key) || !f.get_bool(add_key)) return;  // byte-level BPE adds nothing unless told
    AERIE_CHECK(f.has(id_key), where << ": " << add_key << " is set but " << id_key << " is missing");
    const int64_t id = f.get_int(id_key);
    AERIE_CHECK(id >= 0 && id < static_cast<int64_t>(tokens.size()), where << ": " << id_key << " " << id << " is outside the vocabulary");
    out.push_back(static_cast<int32_t>(id));
  };
  special("tokenizer.ggml.add_bos_token", "tokenizer.ggml.bos_token_id", spec.prefix_ids);
  special("tokenizer.ggml.add_eos_token", "tokenizer.ggml.eos_token_id", spec.suffix_ids);
  return spec;
}

}  // namespace aerie::model
