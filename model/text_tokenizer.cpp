#include "model/text_tokenizer.hpp"

#include "model/bpe_tokenizer.hpp"
#include "model/tokenizer.hpp"

namespace aerie::model {

namespace {

class Bpe final : public TextTokenizer {
 public:
  Bpe(const std::filesystem::path& dir, int32_t bos) : tok_(dir / "tokenizer.json"), bos_(bos) {}
  std::vector<int32_t> encode(const std::string& text) const override {
    std::vector<int32_t> ids;
    if (bos_ >= 0) ids.push_back(bos_);
    const auto body = tok_.encode(text);
    ids.insert(ids.end(), body.begin(), body.end());
    return ids;
  }
  std::string decode(const std::vector<int32_t>& ids) const override { return tok_.decode(ids); }
  std::string decode_output(const std::vector<int32_t>& ids) const override { return tok_.decode(ids, true); }
  int32_t token_id(const std::string& token) const override { return tok_.added_token_id(token); }

 private:
  BpeTokenizer tok_;
  int32_t bos_;
};

class SentencePiece final : public TextTokenizer {
 public:
  SentencePiece(const std::filesystem::path& dir, int32_t bos) : tok_(dir, bos) {}
  std::vector<int32_t> encode(const std::string& text) const override { return tok_.encode(text); }
  std::string decode(const std::vector<int32_t>& ids) const override { return tok_.decode(ids); }
  // sentencepiece leaves control pieces (BOS, EOS) out of its text already.
  std::string decode_output(const std::vector<int32_t>& ids) const override { return tok_.decode(ids); }
  int32_t token_id(const std::string& token) const override { return tok_.piece_id(token); }

 private:
  Tokenizer tok_;
};

}  // namespace

std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::filesystem::path& dir, int32_t bos) {
  if (BpeTokenizer::available(dir)) return std::make_unique<Bpe>(dir, bos);
  if (Tokenizer::available(dir)) return std::make_unique<SentencePiece>(dir, bos);
  return nullptr;
}

}  // namespace aerie::model
