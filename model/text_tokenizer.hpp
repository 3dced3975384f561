#pragma once
// Text <-> ids for a model, whichever tokenizer it ships: a GGUF file's own (byte-level BPE or
// sentencepiece-style),
// a folder's tokenizer.json (byte-level BPE: Llama 3, SmolLM2, GPT-2 style) or, when that is
// missing or not byte-level (Llama 2's), its tokenizer.model (sentencepiece). BOS/EOS are
// added as the tokenizer itself says (tokenizer.json's post-processor, tokenizer_config.json's
// add_bos_token, GGUF's add_bos_token), never from config.json.
#include <filesystem>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace aerie::model {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  // With add_special, the tokenizer's BOS/EOS around the text (Hugging Face's
  // add_special_tokens=True); rendered chat templates carry their own, so they pass false.
  virtual std::vector<int32_t> encode(const std::string& text, bool add_special = true) const = 0;
  // Byte ranges [first, second) of a text, sorted and apart, in which special-token text
  // ("<|im_end|>") is plain text (Hugging Face's split_special_tokens=True), e.g. what a chat
  // client typed, so that it cannot open a turn of its own.
  using LiteralRanges = std::vector<std::pair<size_t, size_t>>;
  // encode() with special tokens matched only outside `literal`. A tokenizer that never
  // matches special tokens in text (sentencepiece's control pieces) ignores the ranges.
  virtual std::vector<int32_t> encode_with_literals(const std::string& text, bool add_special, const LiteralRanges& literal) const {
    (void)literal;
    return encode(text, add_special);
  }
  // The texts of the special tokens encode() matches in text (none for sentencepiece).
  virtual std::vector<std::string> special_token_texts() const { return {}; }
  // The text of ids, special tokens included (may end inside a UTF-8 character).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The text a client sees: special tokens (BOS, EOS, chat headers) left out, as
  // Hugging Face's skip_special_tokens=True and sglang's default.
  virtual std::string decode_output(const std::vector<int32_t>& ids) const = 0;
  // The id of a token given by its text (a special token such as "<|eot_id|>"), or -1.
  virtual int32_t token_id(const std::string& token) const = 0;
  // The text of one id ("<|im_end|>"), or "" when the tokenizer lacks it.
  virtual std::string token_text(int32_t id) const = 0;
};

// Nothing when the model has no tokenizer; throws naming the file when it has one Aerie
// cannot read.
std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::filesystem::path& model_path);

}  // namespace aerie::model
