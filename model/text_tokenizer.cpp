#include "model/text_tokenizer.hpp"

#include <fstream>
#include <nlohmann/json.hpp>

#include "kernels/error.hpp"
#include "model/bpe_tokenizer.hpp"
#include "model/gguf_file.hpp"
#include "model/tokenizer.hpp"

namespace aerie::model {

namespace {

class Bpe final : public TextTokenizer {
 public:
  explicit Bpe(std::unique_ptr<BpeTokenizer> tok) : tok_(std::move(tok)) {}
  std::vector<int32_t> encode(const std::string& text, bool add_special) const override { return tok_->encode(text, add_special); }
  std::vector<int32_t> encode_with_literals(const std::string& text, bool add_special, const LiteralRanges& literal) const override {
    return tok_->encode(text, add_special, &literal);
  }
  std::vector<std::string> special_token_texts() const override { return tok_->special_token_texts(); }
  std::string decode(const std::vector<int32_t>& ids) const override { return tok_->decode(ids); }
  std::string decode_output(const std::vector<int32_t>& ids) const override { return tok_->decode(ids, true); }
  int32_t token_id(const std::string& token) const override { return tok_->added_token_id(token); }
  std::string token_text(int32_t id) const override { return tok_->decode({id}); }

 private:
  std::unique_ptr<BpeTokenizer> tok_;
};

class SentencePiece final : public TextTokenizer {
 public:
  SentencePiece(const std::filesystem::path& dir, bool add_bos, bool add_eos) : tok_(dir), add_bos_(add_bos), add_eos_(add_eos) {}
  SentencePiece(const std::string& proto, const std::string& where, bool add_bos, bool add_eos)
      : tok_(proto, where), add_bos_(add_bos), add_eos_(add_eos) {}
  std::vector<int32_t> encode(const std::string& text, bool add_special) const override {
    return tok_.encode(text, add_special && add_bos_, add_special && add_eos_);
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return tok_.decode(ids); }
  // sentencepiece leaves control pieces (BOS, EOS) out of its text already.
  std::string decode_output(const std::vector<int32_t>& ids) const override { return tok_.decode(ids); }
  int32_t token_id(const std::string& token) const override { return tok_.piece_id(token); }
  std::string token_text(int32_t id) const override { return tok_.piece(id); }

 private:
  Tokenizer tok_;
  bool add_bos_, add_eos_;
};

// tokenizer_config.json's add_bos_token / add_eos_token (transformers' defaults for a
// sentencepiece Llama tokenizer: BOS yes, EOS no).
std::pair<bool, bool> sentencepiece_flags(const std::filesystem::path& dir) {
  bool bos = true, eos = false;
  std::ifstream in(dir / "tokenizer_config.json");
  if (!in.good()) return {bos, eos};
  const auto j = nlohmann::json::parse(in, nullptr, false);
  if (!j.is_object()) return {bos, eos};
  if (j.contains("add_bos_token") && j["add_bos_token"].is_boolean()) bos = j["add_bos_token"].get<bool>();
  if (j.contains("add_eos_token") && j["add_eos_token"].is_boolean()) eos = j["add_eos_token"].get<bool>();
  return {bos, eos};
}

}  // namespace

std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::filesystem::path& path) {
  if (GgufFile::is_gguf(path)) {
    GgufFile file(path);
    const std::string kind = file.has("tokenizer.ggml.model") ? file.get_string("tokenizer.ggml.model") : "";
    if (kind == "llama") {  // sentencepiece-style: BOS by default, as llama.cpp and Llama's tokenizer.model
      auto flag = [&](const char* key, bool dflt) { return file.has(key) ? file.get_bool(key) : dflt; };
      return std::make_unique<SentencePiece>(sentencepiece_model_from_gguf(file), path.string(), flag("tokenizer.ggml.add_bos_token", true),
                                             flag("tokenizer.ggml.add_eos_token", false));
    }
    return std::make_unique<Bpe>(std::make_unique<BpeTokenizer>(bpe_spec_from_gguf(file), path.string()));
  }
  if (BpeTokenizer::available(path)) {
    try {
      return std::make_unique<Bpe>(std::make_unique<BpeTokenizer>(path / "tokenizer.json"));
    } catch (const Error&) {
      // Llama 2 folders ship a sentencepiece-style tokenizer.json (Metaspace, byte fallback)
      // beside tokenizer.model: the latter is the one Aerie reads.
      if (!Tokenizer::available(path)) throw;
    }
  }
  if (Tokenizer::available(path)) {
    const auto [bos, eos] = sentencepiece_flags(path);
    return std::make_unique<SentencePiece>(path, bos, eos);
  }
  return nullptr;
}

}  // namespace aerie::model
