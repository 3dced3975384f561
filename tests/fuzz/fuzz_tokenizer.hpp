#pragma once
// A small byte-level BPE tokenizer built in code (all 256 bytes, a few merges, Llama-3-style
// special tokens, SmolLM2's digit split + GPT-2 regex, BOS from the post-processor).
#include <string>

#include "model/bpe_tokenizer.hpp"

inline aerie::model::BpeSpec fuzz_tokenizer_spec() {
  aerie::model::BpeSpec spec;
  auto utf8 = [](uint32_t cp) {
    std::string s;
    if (cp < 0x80) s += static_cast<char>(cp);
    else s += static_cast<char>(0xC0 | (cp >> 6)), s += static_cast<char>(0x80 | (cp & 0x3F));
    return s;
  };
  uint32_t extra = 0;
  std::string byte_char[256];
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
    byte_char[b] = utf8(printable ? b : 256 + extra++);
    spec.vocab.emplace_back(byte_char[b], static_cast<int32_t>(b));
  }
  const std::string sp = byte_char[static_cast<unsigned char>(' ')];
  spec.merges = {{sp, "t"}, {"h", "e"}, {sp + "t", "he"}, {"a", "b"}, {"ab", "ab"}};
  int32_t id = 256;
  for (const auto& m : spec.merges) spec.vocab.emplace_back(m.first + m.second, id++);
  spec.added = {{"<|begin_of_text|>", id, true}, {"<|eot_id|>", id + 1, true}, {"<tool>", id + 2, false}};
  spec.split_patterns = {R"(\p{N})", R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)"};
  spec.prefix_ids = {id};
  return spec;
}
