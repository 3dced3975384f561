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

class GgufFile;

// What a byte-level BPE tokenizer is made of, from tokenizer.json or GGUF metadata.
struct BpeSpec {
  std::vector<std::pair<std::string, int32_t>> vocab;  // byte-mapped token text, id
  std::vector<std::pair<std::string, std::string>> merges;  // in rank order
  struct Added {
    std::string content;
    int32_t id = 0;
    bool special = false;
  };
  std::vector<Added> added;                 // cut out of the text before pre-tokenizing
  std::vector<std::string> split_patterns;  // pre-tokenizer regexes, applied in turn; matches and gaps are pieces
  bool ignore_merges = false;
  std::vector<int32_t> prefix_ids, suffix_ids;  // what encoding adds around a text (BOS, EOS)
};

// A merge written "left right" (tokenizer.json, GGUF) as its two tokens; throws naming `where`.
std::pair<std::string, std::string> split_merge(const std::string& merge, const std::string& where);

// Reads a Hugging Face tokenizer.json with a byte-level BPE model. Throws naming the file and
// the part Aerie does not implement (a normalizer, an unknown pre-tokenizer, not byte-level).
BpeSpec read_tokenizer_json(const std::filesystem::path& tokenizer_json);
// The tokenizer of a GGUF file whose tokenizer.ggml.model is "gpt2" (byte-level BPE), with the
// pre-tokenizer llama.cpp names in tokenizer.ggml.pre. Throws for other tokenizer models.
BpeSpec bpe_spec_from_gguf(const GgufFile& file);
// The sentencepiece model (a serialized ModelProto: pieces, scores, types, BPE with byte
// fallback, Llama's identity normalizer with a dummy prefix) of a GGUF file whose
// tokenizer.ggml.model is "llama". Throws for other tokenizer models.
std::string sentencepiece_model_from_gguf(const GgufFile& file);

class BpeTokenizer {
 public:
  // Throws aerie::Error naming the file when it is missing, malformed, or not byte-level BPE.
  explicit BpeTokenizer(const std::filesystem::path& tokenizer_json);
  BpeTokenizer(const BpeSpec& spec, const std::string& where);
  ~BpeTokenizer();
  static bool available(const std::filesystem::path& model_dir);

  // Token ids of `text`, with the tokenizer's own BOS/EOS around it when add_special (as
  // its post-processor says). Throws on invalid UTF-8.
  // With `literal` (sorted, disjoint byte ranges), added tokens marked special are not
  // matched where they start inside a range: there their text is BPE-encoded like any other
  // (Hugging Face's split_special_tokens=True, for those ranges only).
  std::vector<int32_t> encode(const std::string& text, bool add_special = true,
                              const std::vector<std::pair<size_t, size_t>>* literal = nullptr) const;
  // The texts of the added tokens marked special.
  std::vector<std::string> special_token_texts() const;
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
  std::vector<int32_t> prefix_ids_, suffix_ids_;
  struct Regex;
  std::vector<std::unique_ptr<Regex>> splits_;      // the pre-tokenizer's patterns, in order
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
