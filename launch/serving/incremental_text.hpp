#pragma once
// IncrementalText: the client-visible text of a growing list of output ids, released piece
// by piece for streaming. Each step decodes only a window that starts a few tokens back
// (the vLLM/sglang "prefix offset" scheme), so tokenizers whose text depends on the
// neighbour (sentencepiece's leading space) come out exactly as decoding the whole list,
// and a piece never ends inside a UTF-8 character.
#include <string>
#include <vector>

#include "model/text_tokenizer.hpp"

namespace aerie::launch {

class IncrementalText {
 public:
  explicit IncrementalText(const model::TextTokenizer& tokenizer) : tok_(tokenizer) {}
  // Text the new ids complete (possibly empty while a character is unfinished).
  std::string push(const std::vector<int32_t>& ids);
  // What is left at the end (an unfinished character becomes U+FFFD).
  std::string finish();
  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  std::string window(size_t begin, size_t end) const;
  const model::TextTokenizer& tok_;
  std::vector<int32_t> ids_;
  size_t prefix_ = 0;  // the window's first id
  size_t read_ = 0;    // ids before this are released
};

// True when `s` ends in the middle of a UTF-8 character.
bool ends_inside_utf8(const std::string& s);
// `s` with every invalid or unfinished UTF-8 sequence replaced by U+FFFD.
std::string valid_utf8(const std::string& s);

}  // namespace aerie::launch
