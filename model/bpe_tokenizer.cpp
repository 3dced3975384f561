#include "model/bpe_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <fstream>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <sstream>

#include "kernels/error.hpp"

namespace aerie::model {

namespace {

using nlohmann::json;

std::string utf8(uint32_t cp) {
  std::string s;
  if (cp < 0x80) {
    s += static_cast<char>(cp);
  } else if (cp < 0x800) {
    s += static_cast<char>(0xC0 | (cp >> 6));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  } else {
    s += static_cast<char>(0xE0 | (cp >> 12));
    s += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
    s += static_cast<char>(0x80 | (cp & 0x3F));
  }
  return s;
}

// Length of the UTF-8 sequence that starts with byte c (0 for a continuation byte).
size_t utf8_len(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return 2;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return 4;
  return 0;
}

}  // namespace

struct BpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

BpeTokenizer::~BpeTokenizer() = default;

bool BpeTokenizer::available(const std::filesystem::path& dir) { return std::filesystem::exists(dir / "tokenizer.json"); }

BpeTokenizer::BpeTokenizer(const std::filesystem::path& path) : split_(std::make_unique<Regex>()) {
  const std::string where = path.string();
  std::ifstream in(path);
  AERIE_CHECK(in.good(), where << ": cannot open");
  json j;
  try {
    j = json::parse(in);
  } catch (const json::exception& e) {
    AERIE_FAIL(where << ": not valid JSON (" << e.what() << ")");
  }
  AERIE_CHECK(j.is_object() && j.contains("model") && j["model"].is_object(), where << ": no 'model' object");
  const json& m = j["model"];
  AERIE_CHECK(m.value("type", "") == "BPE", where << ": model type '" << m.value("type", "") << "' is not BPE");
  AERIE_CHECK(m.contains("vocab") && m["vocab"].is_object(), where << ": BPE model without a 'vocab' object");
  ignore_merges_ = m.value("ignore_merges", false);
  // GPT-2's byte <-> printable character table.
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_char_[b] = utf8(printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++));
    char_byte_[byte_char_[b]] = static_cast<uint8_t>(b);
  }
  int64_t max_id = -1;
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    AERIE_CHECK(it.value().is_number_integer(), where << ": vocab entry '" << it.key() << "' has no integer id");
    const int64_t id = it.value().get<int64_t>();
    AERIE_CHECK(id >= 0 && id < (int64_t{1} << 24), where << ": vocab id " << id << " out of range");
    vocab_[it.key()] = static_cast<int32_t>(id);
    max_id = std::max(max_id, id);
  }
  std::vector<int32_t> special_ids;
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& a : j["added_tokens"]) {
      AERIE_CHECK(a.contains("content") && a["content"].is_string() && a.contains("id") && a["id"].is_number_integer(),
                  where << ": added token without content or id");
      const int64_t id = a["id"].get<int64_t>();
      AERIE_CHECK(id >= 0 && id < (int64_t{1} << 24), where << ": added token id " << id << " out of range");
      added_.emplace_back(a["content"].get<std::string>(), static_cast<int32_t>(id));
      if (a.value("special", false)) special_ids.push_back(static_cast<int32_t>(id));
      max_id = std::max(max_id, id);
    }
  std::sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  id_to_token_.assign(static_cast<size_t>(max_id + 1), "");
  is_added_.assign(static_cast<size_t>(max_id + 1), false);
  is_special_.assign(static_cast<size_t>(max_id + 1), false);
  for (int32_t id : special_ids) is_special_[static_cast<size_t>(id)] = true;
  for (const auto& [text, id] : vocab_) id_to_token_[static_cast<size_t>(id)] = text;
  for (const auto& [text, id] : added_) {
    id_to_token_[static_cast<size_t>(id)] = text;
    is_added_[static_cast<size_t>(id)] = true;
  }
  if (m.contains("merges") && m["merges"].is_array()) {
    int rank = 0;
    for (const auto& mg : m["merges"]) {
      std::string left, right;
      if (mg.is_string()) {  // "left right"
        const std::string s = mg.get<std::string>();
        const auto sp = s.find(' ');
        AERIE_CHECK(sp != std::string::npos, where << ": merge '" << s << "' is not two tokens");
        left = s.substr(0, sp);
        right = s.substr(sp + 1);
      } else {
        AERIE_CHECK(mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string(), where << ": malformed merge " << mg.dump());
        left = mg[0].get<std::string>();
        right = mg[1].get<std::string>();
      }
      merge_rank_.emplace(left + '\x01' + right, rank++);
    }
  }
  // The pre-tokenizer: a Split with a regex (Llama-3), inside a Sequence with ByteLevel.
  std::string pattern;
  std::function<void(const json&)> find_split = [&](const json& p) {
    if (!p.is_object()) return;
    if (p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].contains("Regex")) pattern = p["pattern"]["Regex"].get<std::string>();
    if (p.contains("pretokenizers"))
      for (const auto& q : p["pretokenizers"]) find_split(q);
  };
  if (j.contains("pre_tokenizer")) find_split(j["pre_tokenizer"]);
  if (pattern.empty())  // GPT-2's ByteLevel(use_regex=true) pattern
    pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
  int err = 0;
  PCRE2_SIZE off = 0;
  split_->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
  if (!split_->code) {
    PCRE2_UCHAR msg[256];
    pcre2_get_error_message(err, msg, sizeof msg);
    AERIE_FAIL(where << ": pre-tokenizer regex does not compile at " << off << ": " << reinterpret_cast<char*>(msg));
  }
}

int32_t BpeTokenizer::added_token_id(const std::string& content) const {
  for (const auto& [text, id] : added_)
    if (text == content) return id;
  return -1;
}

void BpeTokenizer::encode_piece(const std::string& piece, std::vector<int32_t>& out) const {
  std::vector<std::string> sym;
  for (unsigned char b : piece) sym.push_back(byte_char_[b]);
  if (ignore_merges_) {
    std::string whole;
    for (const auto& s : sym) whole += s;
    if (auto it = vocab_.find(whole); it != vocab_.end()) {
      out.push_back(it->second);
      return;
    }
  }
  // Merge the adjacent pair of lowest rank (leftmost on ties) until none is left.
  for (;;) {
    int best = std::numeric_limits<int>::max();
    size_t at = 0;
    for (size_t i = 0; i + 1 < sym.size(); ++i) {
      auto it = merge_rank_.find(sym[i] + '\x01' + sym[i + 1]);
      if (it != merge_rank_.end() && it->second < best) {
        best = it->second;
        at = i;
      }
    }
    if (best == std::numeric_limits<int>::max()) break;
    sym[at] += sym[at + 1];
    sym.erase(sym.begin() + static_cast<std::ptrdiff_t>(at) + 1);
  }
  for (const auto& s : sym) {
    auto it = vocab_.find(s);
    AERIE_CHECK(it != vocab_.end(), "tokenizer: no vocabulary entry for a merged piece (is the byte alphabet in the vocab?)");
    out.push_back(it->second);
  }
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text) const {
  std::vector<int32_t> out;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(split_->code, nullptr);
  auto split_text = [&](const std::string& seg) {
    PCRE2_SIZE at = 0;
    while (at < seg.size()) {
      const int rc = pcre2_match(split_->code, reinterpret_cast<PCRE2_SPTR>(seg.data()), seg.size(), at, 0, md, nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {
        encode_piece(seg.substr(at), out);
        return;
      }
      if (rc < 0) {
        pcre2_match_data_free(md);
        AERIE_FAIL("tokenizer: the text is not valid UTF-8");
      }
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md);
      if (ov[0] > at) encode_piece(seg.substr(at, ov[0] - at), out);  // an unmatched gap is a piece of its own
      if (ov[1] == ov[0]) {  // empty match: step one character
        size_t n = std::max<size_t>(1, utf8_len(static_cast<unsigned char>(seg[ov[0]])));
        encode_piece(seg.substr(ov[0], n), out);
        at = ov[0] + n;
        continue;
      }
      encode_piece(seg.substr(ov[0], ov[1] - ov[0]), out);
      at = ov[1];
    }
  };
  // Added tokens are cut out first, leftmost (and longest) occurrence at a time.
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t best = std::string::npos;
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (const auto& a : added_) {
      if (a.first.empty()) continue;
      const size_t f = text.find(a.first, pos);
      if (f < best) {
        best = f;
        hit = &a;
      }
    }
    if (!hit) {
      if (pos < text.size()) split_text(text.substr(pos));
      break;
    }
    if (best > pos) split_text(text.substr(pos, best - pos));
    out.push_back(hit->second);
    pos = best + hit->first.size();
  }
  pcre2_match_data_free(md);
  return out;
}

std::string BpeTokenizer::decode(const std::vector<int32_t>& ids, bool skip_special) const {
  std::string bytes;
  for (int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) continue;  // ids the tokenizer lacks decode to nothing
    if (skip_special && is_special_[static_cast<size_t>(id)]) continue;
    const std::string& t = id_to_token_[static_cast<size_t>(id)];
    if (is_added_[static_cast<size_t>(id)]) {
      bytes += t;
      continue;
    }
    for (size_t i = 0; i < t.size();) {
      const size_t n = std::max<size_t>(1, utf8_len(static_cast<unsigned char>(t[i])));
      auto it = char_byte_.find(t.substr(i, n));
      if (it != char_byte_.end()) bytes += static_cast<char>(it->second);
      i += n;
    }
  }
  return bytes;
}

std::string take_complete_utf8(std::string& pending) {
  size_t cut = pending.size();
  for (size_t back = 1; back <= std::min<size_t>(4, pending.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(pending[pending.size() - back]);
    const size_t n = utf8_len(c);
    if (n == 0) continue;                       // a continuation byte: look further back
    if (n > back) cut = pending.size() - back;  // its sequence is not complete yet
    break;
  }
  std::string out = pending.substr(0, cut);
  pending.erase(0, cut);
  return out;
}

std::string IncrementalDetokenizer::push(const std::vector<int32_t>& ids) {
  pending_ += tok_.decode(ids);
  return take_complete_utf8(pending_);
}

std::string IncrementalDetokenizer::finish() {
  std::string out = pending_.empty() ? "" : "\xEF\xBF\xBD";
  pending_.clear();
  return out;
}

}  // namespace aerie::model
