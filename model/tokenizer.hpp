#pragma once
// Text <-> token ids for checkpoints that ship a sentencepiece tokenizer.model (Llama 1/2
// style). Encoding prepends the BOS id when the model has one, as Llama's tokenizer does.
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
  Tokenizer(const std::filesystem::path& model_dir, int32_t bos_token_id);
  ~Tokenizer();
  static bool available(const std::filesystem::path& model_dir);

  std::vector<int32_t> encode(const std::string& text) const;
  std::string decode(const std::vector<int32_t>& ids) const;
  int64_t vocab_size() const;
  // The id of a piece (e.g. "</s>"), or -1 when the model lacks it.
  int32_t piece_id(const std::string& piece) const;

 private:
  std::unique_ptr<sentencepiece::SentencePieceProcessor> sp_;
  int32_t bos_token_id_;
};

}  // namespace aerie::model
