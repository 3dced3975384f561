#pragma once
// Text <-> token ids for checkpoints that ship a sentencepiece tokenizer.model (Llama 1/2
// style). BOS/EOS come from the model's own ids, added when the caller asks.
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace aerie::model {

class Tokenizer {
 public:
  // Loads dir/tokenizer.model; throws naming the file when it is missing or unreadable.
  explicit Tokenizer(const std::filesystem::path& model_dir);
  // From a serialized ModelProto (a GGUF file's vocabulary); `where` names it in errors.
  Tokenizer(const std::string& serialized_model, const std::string& where);
  ~Tokenizer();
  static bool available(const std::filesystem::path& model_dir);

  std::vector<int32_t> encode(const std::string& text, bool add_bos, bool add_eos = false) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  int64_t vocab_size() const;
  // The id of a piece (e.g. "</s>"), or -1 when the model lacks it.
  int32_t piece_id(const std::string& piece) const;
  // The piece of an id, or "" outside the vocabulary.
  std::string piece(int32_t id) const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
};

}  // namespace aerie::model
