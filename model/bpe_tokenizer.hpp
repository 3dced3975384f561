#pragma once
// Hugging Face tokenizer.json with a byte-level BPE model (Llama-3 and GPT-2 style): added
// tokens are split out first, the rest is cut by the pre-tokenizer's regex (PCRE2, with
// Unicode properties and lookahead), each piece is mapped byte -> printable character and
// merged by rank. Decoding maps characters back to bytes; IncrementalDetokenizer releases
// text only once its UTF-8 is complete, for streaming.
#include <cstdint>
#include <filesystem>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

namespace aerie::model {

class BpeTokenizer {
 public:
  // Throws aerie::Error naming the file when it is missing, malformed, or not byte-level BPE.
  explicit BpeTokenizer(const std::filesystem::path& tokenizer_json);
  ~BpeTokenizer();
  static bool available(const std::filesystem::path& model_dir);

  // Token ids of `text` (no BOS; callers add it). Throws on invalid UTF-8.
  std::vector<int32_t> encode(const std::string& text) const;
  // The bytes the ids stand for (may end inside a UTF-8 sequence). With skip_special, added
  // tokens marked "special" (BOS, EOS, chat headers) decode to nothing, as Hugging Face's
  // skip_special_tokens=True.
  std::string decode(const std::vector<int32_t>& ids, bool skip_special = false) const;
  int64_t vocab_size() const { return static_cast<int64_t>(id_to_token_.size()); }
  // The id of an added token's text, or -1.
  int32_t added_token_id(const std::string& content) const;

 private:
  void encode_piece(const std::string& piece, std::vector<int32_t>& out) const;
  std::unordered_map<std::string, int32_t> vocab_;  // byte-mapped token text -> id
  std::vector<std::string> id_to_token_;
  std::vector<bool> is_added_;                      // added tokens decode to their text as is
  std::vector<bool> is_special_;                    // added tokens marked "special"
  std::unordered_map<std::string, int32_t> merge_rank_;  // "left\x01right" -> rank
  std::vector<std::pair<std::string, int32_t>> added_;   // content, id (longest first)
  bool ignore_merges_ = false;
  struct Regex;
  std::unique_ptr<Regex> split_;                    // the pre-tokenizer's pattern, or none
  std::string byte_char_[256];                      // byte -> UTF-8 of its printable stand-in
  std::unordered_map<std::string, uint8_t> char_byte_;
};

// Removes and returns the longest prefix of `pending` that ends on a whole UTF-8 character;
// an unfinished character stays in `pending` for the next piece.
std::string take_complete_utf8(std::string& pending);

// Turns a growing list of ids into text pieces that never split a UTF-8 character.
class IncrementalDetokenizer {
 public:
  explicit IncrementalDetokenizer(const BpeTokenizer& tok) : tok_(tok) {}
  // The text that the new ids complete (possibly empty while a character is unfinished).
  std::string push(const std::vector<int32_t>& ids);
  // Whatever is left at the end (incomplete bytes become U+FFFD).
  std::string finish();

 private:
  const BpeTokenizer& tok_;
  std::string pending_;  // bytes of an unfinished UTF-8 character
};

}  // namespace aerie::model
