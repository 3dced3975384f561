#include "model/tokenizer.hpp"

#include <sentencepiece_processor.h>

#include "kernels/error.hpp"

namespace aerie::model {

bool Tokenizer::available(const std::filesystem::path& dir) { return std::filesystem::exists(dir / "tokenizer.model"); }

Tokenizer::Tokenizer(const std::filesystem::path& dir) : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto path = dir / "tokenizer.model";
  AERIE_CHECK(std::filesystem::exists(path), path.string() << ": missing (text prompts need a sentencepiece tokenizer)");
  const auto status = sp_->Load(path.string());
  AERIE_CHECK(status.ok(), path.string() << ": cannot load sentencepiece model (" << status.ToString() << ")");
}

Tokenizer::Tokenizer(const std::string& serialized, const std::string& where) : sp_(std::make_unique<sentencepiece::SentencePieceProcessor>()) {
  const auto status = sp_->LoadFromSerializedProto(serialized);
  AERIE_CHECK(status.ok(), where << ": cannot build a sentencepiece model from its vocabulary (" << status.ToString() << ")");
}

Tokenizer::~Tokenizer() = default;

std::vector<int32_t> Tokenizer::encode(const std::string& text, bool add_bos, bool add_eos) const {
  std::vector<int> ids;
  const auto status = sp_->Encode(text, &ids);
  AERIE_CHECK(status.ok(), "tokenizer: cannot encode text (" << status.ToString() << ")");
  std::vector<int32_t> out;
  if (add_bos && sp_->bos_id() >= 0) out.push_back(sp_->bos_id());
  out.insert(out.end(), ids.begin(), ids.end());
  if (add_eos && sp_->eos_id() >= 0) out.push_back(sp_->eos_id());
  return out;
}

std::string Tokenizer::decode(const std::vector<int32_t>& ids) const {
  std::vector<int> in;
  for (int32_t id : ids)
    if (id >= 0 && id < sp_->GetPieceSize()) in.push_back(id);  // ids the tokenizer lacks decode to nothing
  std::string text;
  const auto status = sp_->Decode(in, &text);
  AERIE_CHECK(status.ok(), "tokenizer: cannot decode (" << status.ToString() << ")");
  return text;
}

std::string Tokenizer::piece(int32_t id) const { return id >= 0 && id < sp_->GetPieceSize() ? sp_->IdToPiece(id) : ""; }

int64_t Tokenizer::vocab_size() const { return sp_->GetPieceSize(); }

int32_t Tokenizer::piece_id(const std::string& piece) const {
  const int id = sp_->PieceToId(piece);
  // PieceToId answers the unknown id for pieces it lacks.
  return id == sp_->unk_id() && piece != sp_->IdToPiece(sp_->unk_id()) ? -1 : id;
}

}  // namespace aerie::model
