// The tokenizers of a GGUF file: byte-level BPE ("gpt2") and sentencepiece-style ("llama").
#include <cstring>
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

// Protocol-buffer wire format, enough to write a sentencepiece ModelProto.
void varint(std::string& out, uint64_t v) {
  while (v >= 0x80) {
    out += static_cast<char>((v & 0x7F) | 0x80);
    v >>= 7;
  }
  out += static_cast<char>(v);
}
void varint_field(std::string& out, int field, uint64_t v) {
  varint(out, static_cast<uint64_t>(field) << 3);
  varint(out, v);
}
void int_field(std::string& out, int field, int64_t v) { varint_field(out, field, static_cast<uint64_t>(v)); }  // negatives: 10 bytes
void bytes_field(std::string& out, int field, const std::string& s) {
  varint(out, (static_cast<uint64_t>(field) << 3) | 2);
  varint(out, s.size());
  out += s;
}
void float_field(std::string& out, int field, float f) {
  varint(out, (static_cast<uint64_t>(field) << 3) | 5);
  uint32_t b;
  std::memcpy(&b, &f, 4);
  for (int i = 0; i < 4; ++i) out += static_cast<char>((b >> (8 * i)) & 0xFF);
}

}  // namespace

std::string sentencepiece_model_from_gguf(const GgufFile& f) {
  const std::string where = f.path().string();
  const std::string model = f.has("tokenizer.ggml.model") ? f.get_string("tokenizer.ggml.model") : "";
  AERIE_CHECK(model == "llama", where << ": tokenizer.ggml.model '" << model << "' is not a sentencepiece vocabulary (llama)");
  const auto& tokens = f.get_array("tokenizer.ggml.tokens");
  AERIE_CHECK(tokens.size() < (size_t{1} << 24), where << ": " << tokens.size() << " tokens is too many");
  const nlohmann::json empty = nlohmann::json::array();
  const auto& scores = f.has("tokenizer.ggml.scores") ? f.get_array("tokenizer.ggml.scores") : empty;
  const auto& types = f.has("tokenizer.ggml.token_type") ? f.get_array("tokenizer.ggml.token_type") : empty;
  AERIE_CHECK(scores.empty() || scores.size() == tokens.size(), where << ": tokenizer.ggml.scores has " << scores.size() << " entries for " << tokens.size() << " tokens");
  AERIE_CHECK(types.empty() || types.size() == tokens.size(), where << ": tokenizer.ggml.token_type has " << types.size() << " entries for " << tokens.size() << " tokens");
  auto id_of = [&](const char* key, int64_t dflt) {
    const int64_t id = f.has(key) ? f.get_int(key) : dflt;
    AERIE_CHECK(id >= -1 && id < static_cast<int64_t>(tokens.size()), where << ": " << key << " " << id << " is outside the vocabulary");
    return id;
  };
  const int64_t unk = id_of("tokenizer.ggml.unknown_token_id", 0), bos = id_of("tokenizer.ggml.bos_token_id", 1),
                eos = id_of("tokenizer.ggml.eos_token_id", 2), pad = id_of("tokenizer.ggml.padding_token_id", -1);
  // ModelProto: pieces (1) {piece 1, score 2, type 3}, trainer_spec (2), normalizer_spec (3).
  std::string proto;
  bool has_bytes = false;
  for (size_t i = 0; i < tokens.size(); ++i) {
    AERIE_CHECK(tokens[i].is_string(), where << ": token " << i << " is not a string");
    const int64_t type = types.empty() ? 1 : (types[i].is_number_integer() ? types[i].get<int64_t>() : -1);
    AERIE_CHECK(type >= 1 && type <= 6, where << ": token " << i << " has unknown type " << (types.empty() ? "" : types[i].dump()));
    AERIE_CHECK(scores.empty() || scores[i].is_number(), where << ": score " << i << " is not a number");
    has_bytes = has_bytes || type == 6;
    std::string piece;
    bytes_field(piece, 1, tokens[i].get<std::string>());
    float_field(piece, 2, scores.empty() ? 0.0f : scores[i].get<float>());
    varint_field(piece, 3, static_cast<uint64_t>(type));
    bytes_field(proto, 1, piece);
  }
  std::string trainer;
  varint_field(trainer, 3, 2);  // model_type BPE, as Llama's tokenizer.model
  varint_field(trainer, 4, tokens.size());
  varint_field(trainer, 35, has_bytes ? 1 : 0);  // byte_fallback
  int_field(trainer, 40, unk);
  int_field(trainer, 41, bos);
  int_field(trainer, 42, eos);
  int_field(trainer, 43, pad);
  bytes_field(proto, 2, trainer);
  std::string normalizer;
  bytes_field(normalizer, 1, "identity");
  const bool prefix = f.has("tokenizer.ggml.add_space_prefix") ? f.get_bool("tokenizer.ggml.add_space_prefix") : true;
  varint_field(normalizer, 3, prefix ? 1 : 0);  // add_dummy_prefix
  varint_field(normalizer, 4, 0);               // remove_extra_whitespaces: Llama keeps them
  varint_field(normalizer, 5, 1);               // escape_whitespaces
  bytes_field(proto, 3, normalizer);
  return proto;
}

BpeSpec bpe_spec_from_gguf(const GgufFile& f) {
  const std::string where = f.path().string();
  const std::string model = f.has("tokenizer.ggml.model") ? f.get_string("tokenizer.ggml.model") : "";
  AERIE_CHECK(model == "gpt2", where << ": tokenizer.ggml.model '" << model
                                     << "' is not byte-level BPE (gpt2)");
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
      spec.merges.push_back(split_merge(m.get<std::string>(), where));
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
