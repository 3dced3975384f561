#pragma once
// Text <-> ids for a model folder, whichever tokenizer it ships: tokenizer.json (byte-level
// BPE, Llama 3) is preferred, else tokenizer.model (sentencepiece, Llama 1/2). Encoding adds
// the model's BOS id when it has one, as both tokenizers do for Llama.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace aerie::model {

class TextTokenizer {
 public:
  virtual ~TextTokenizer() = default;
  virtual std::vector<int32_t> encode(const std::string& text) const = 0;
  // The text of ids, special tokens included (may end inside a UTF-8 character).
  virtual std::string decode(const std::vector<int32_t>& ids) const = 0;
  // The text a client sees: special tokens (BOS, EOS, chat headers) left out, as
  // Hugging Face's skip_special_tokens=True and sglang's default.
  virtual std::string decode_output(const std::vector<int32_t>& ids) const = 0;
  // The id of a token given by its text (a special token such as "<|eot_id|>"), or -1.
  virtual int32_t token_id(const std::string& token) const = 0;
};

// Nothing when the folder has neither file.
std::unique_ptr<TextTokenizer> load_text_tokenizer(const std::filesystem::path& model_dir, int32_t bos_token_id);

}  // namespace aerie::model
