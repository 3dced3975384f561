#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

#include "kernels/error.hpp"
#include "model/bpe_tokenizer.hpp"

using namespace aerie;
namespace fs = std::filesystem;

namespace {
fs::path write(const std::string& name, const std::string& text) {
  const fs::path p = fs::temp_directory_path() / ("aerie_bpe_" + std::to_string(::getpid()) + "_" + name);
  std::ofstream(p) << text;
  return p;
}
std::string error_of(const fs::path& p) {
  try {
    model::BpeTokenizer t(p);
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}
}  // namespace

TEST(BpeTokenizer, MalformedFilesGiveClearErrors) {
  EXPECT_NE(error_of("/nonexistent/tokenizer.json").find("cannot open"), std::string::npos);
  EXPECT_NE(error_of(write("a.json", "{oops")).find("not valid JSON"), std::string::npos);
  EXPECT_NE(error_of(write("b.json", R"({"model": {"type": "Unigram"}})")).find("is not BPE"), std::string::npos);
  EXPECT_NE(error_of(write("c.json", R"({"model": {"type": "BPE", "vocab": {"a": "x"}}})")).find("no integer id"), std::string::npos);
  EXPECT_NE(error_of(write("d.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}, "merges": ["ab"]}})")).find("not two tokens"),
            std::string::npos);
}

TEST(BpeTokenizer, MergesByRankAndStreamsWholeCharacters) {
  // Byte-level alphabet for 'a', 'b', and the two UTF-8 bytes of 'é' (0xC3 0xA9 map to Ã and ©).
  const auto p = write("e.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ã": 3, "©": 4, "Ã©": 5},
      "merges": [["a", "b"], ["Ã", "©"]]}, "added_tokens": [{"id": 6, "content": "<s>", "special": true}],
      "decoder": {"type": "ByteLevel"}})");
  model::BpeTokenizer t(p);
  EXPECT_EQ(t.encode("abab"), (std::vector<int32_t>{2, 2}));
  EXPECT_EQ(t.encode("a<s>b"), (std::vector<int32_t>{0, 6, 1}));
  EXPECT_EQ(t.encode("é"), std::vector<int32_t>{5});
  EXPECT_EQ(t.decode({2, 6, 5}), "ab<s>é");
  model::IncrementalDetokenizer inc(t);
  EXPECT_EQ(inc.push({3}), "");    // first byte of é: held back
  EXPECT_EQ(inc.push({4}), "é");   // completed
  EXPECT_EQ(inc.push({3}), "");
  EXPECT_EQ(inc.finish(), "\xEF\xBF\xBD");  // an unfinished character ends as U+FFFD
  EXPECT_THROW(t.encode(std::string("\xff\xfe")), Error);  // invalid UTF-8
}

TEST(BpeTokenizer, FollowsThePreTokenizerAndPostProcessor) {
  // Digits alone, then GPT-2's regex (SmolLM2's pre-tokenizer); BOS from TemplateProcessing.
  const auto p = write("f.json", R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "1": 2, "2": 3, "Ġ": 4, "12": 5, "Ġa": 6},
      "merges": [["1", "2"], ["Ġ", "a"]]}, "added_tokens": [{"id": 7, "content": "<s>", "special": true}],
      "pre_tokenizer": {"type": "Sequence", "pretokenizers": [{"type": "Digits", "individual_digits": true},
                                                              {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}]},
      "post_processor": {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}}],
                         "special_tokens": {"<s>": {"id": "<s>", "ids": [7], "tokens": ["<s>"]}}}})");
  model::BpeTokenizer t(p);
  EXPECT_EQ(t.encode("12 a"), (std::vector<int32_t>{7, 2, 3, 6}));  // "12" is never merged: digits are cut apart first
  EXPECT_EQ(t.encode("12 a", /*add_special=*/false), (std::vector<int32_t>{2, 3, 6}));
  const auto q = write("g.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "normalizer": {"type": "NFC"}, "decoder": {"type": "ByteLevel"}})");
  EXPECT_NE(error_of(q).find("normalizer 'NFC' is not supported"), std::string::npos) << error_of(q);
  const auto r = write("h.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}, "pre_tokenizer": {"type": "Metaspace"}})");
  EXPECT_NE(error_of(r).find("pre-tokenizer 'Metaspace' is not supported"), std::string::npos) << error_of(r);
  const auto s = write("i.json", R"({"model": {"type": "BPE", "vocab": {"a": 0}}})");
  EXPECT_NE(error_of(s).find("not a byte-level"), std::string::npos) << error_of(s);
}
