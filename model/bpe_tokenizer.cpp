#include "model/bpe_tokenizer.hpp"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <queue>
#include <sstream>
#include <string_view>

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

// Well-formed UTF-8 (no overlongs, surrogates or values past U+10FFFF), as PCRE2 requires.
bool valid_utf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = utf8_len(c);
    if (n == 0 || i + n > s.size()) return false;
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (size_t k = 1; k < n; ++k) {
      const unsigned char d = static_cast<unsigned char>(s[i + k]);
      if ((d & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

}  // namespace

struct BpeTokenizer::Regex {
  pcre2_code* code = nullptr;
  ~Regex() {
    if (code) pcre2_code_free(code);
  }
};

namespace {

// GPT-2's pattern: ByteLevel(use_regex = true).
const char* const kGpt2Pattern = R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";

std::string regex_escape(const std::string& s) {
  std::string out;
  for (char ch : s) {
    if (std::string_view("\\^$.|?*+()[]{}").find(ch) != std::string_view::npos) out += '\\';
    out += ch;
  }
  return out;
}

// The pre-tokenizer as regex stages; refuses what Aerie does not implement.
void add_pre_tokenizer(const json& p, const std::string& where, std::vector<std::string>& out, bool& byte_level) {
  if (p.is_null()) return;
  AERIE_CHECK(p.is_object(), where << ": pre_tokenizer is not an object");
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    AERIE_CHECK(p.contains("pretokenizers") && p["pretokenizers"].is_array(), where << ": Sequence pre-tokenizer without a list");
    for (const auto& q : p["pretokenizers"]) add_pre_tokenizer(q, where, out, byte_level);
  } else if (type == "Split") {
    AERIE_CHECK(p.value("behavior", "Isolated") == "Isolated" && !p.value("invert", false),
                where << ": Split pre-tokenizer with behavior '" << p.value("behavior", "") << "'" << (p.value("invert", false) ? " inverted" : "")
                      << " is not supported (Isolated)");
    const json& pat = p.value("pattern", json::object());
    if (pat.contains("Regex") && pat["Regex"].is_string()) out.push_back(pat["Regex"].get<std::string>());
    else if (pat.contains("String") && pat["String"].is_string()) out.push_back(regex_escape(pat["String"].get<std::string>()));
    else AERIE_FAIL(where << ": Split pre-tokenizer without a Regex or String pattern");
  } else if (type == "Digits") {
    out.push_back(p.value("individual_digits", false) ? R"(\p{N})" : R"(\p{N}+)");
  } else if (type == "ByteLevel") {
    AERIE_CHECK(!p.value("add_prefix_space", false), where << ": ByteLevel pre-tokenizer with add_prefix_space is not supported");
    if (p.value("use_regex", true)) out.push_back(kGpt2Pattern);
    byte_level = true;
  } else {
    AERIE_FAIL(where << ": pre-tokenizer '" << type << "' is not supported (Sequence, Split, Digits, ByteLevel)");
  }
}

// BOS/EOS the post-processor puts around a single text (TemplateProcessing; ByteLevel adds none).
void add_post_processor(const json& p, const std::string& where, std::vector<int32_t>& prefix, std::vector<int32_t>& suffix) {
  if (p.is_null()) return;
  const std::string type = p.value("type", "");
  if (type == "Sequence") {
    for (const auto& q : p.value("processors", json::array())) add_post_processor(q, where, prefix, suffix);
  } else if (type == "TemplateProcessing") {
    bool after = false;
    for (const auto& piece : p.value("single", json::array())) {
      if (piece.contains("Sequence")) {
        after = true;
        continue;
      }
      AERIE_CHECK(piece.contains("SpecialToken"), where << ": TemplateProcessing piece " << piece.dump() << " is neither Sequence nor SpecialToken");
      const std::string name = piece["SpecialToken"].value("id", "");
      const json& st = p.value("special_tokens", json::object());
      AERIE_CHECK(st.contains(name) && st[name].contains("ids") && st[name]["ids"].is_array(),
                  where << ": TemplateProcessing names special token '" << name << "' without ids");
      for (const auto& id : st[name]["ids"]) {
        AERIE_CHECK(id.is_number_integer(), where << ": special token '" << name << "' has a non-integer id");
        (after ? suffix : prefix).push_back(id.get<int32_t>());
      }
    }
  } else {
    AERIE_CHECK(type == "ByteLevel", where << ": post-processor '" << type << "' is not supported (TemplateProcessing, ByteLevel, Sequence)");
  }
}

}  // namespace

std::pair<std::string, std::string> split_merge(const std::string& s, const std::string& where) {
  const auto sp = s.find(' ');
  AERIE_CHECK(sp != std::string::npos, where << ": merge '" << s << "' is not two tokens");
  return {s.substr(0, sp), s.substr(sp + 1)};
}

BpeSpec read_tokenizer_json(const std::filesystem::path& path) {
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
  AERIE_CHECK(!j.contains("normalizer") || j["normalizer"].is_null(),
              where << ": normalizer '" << j["normalizer"].value("type", "?") << "' is not supported (byte-level BPE uses none)");
  BpeSpec spec;
  spec.ignore_merges = m.value("ignore_merges", false);
  for (auto it = m["vocab"].begin(); it != m["vocab"].end(); ++it) {
    AERIE_CHECK(it.value().is_number_integer(), where << ": vocab entry '" << it.key() << "' has no integer id");
    const int64_t id = it.value().get<int64_t>();
    AERIE_CHECK(id >= 0 && id < (int64_t{1} << 24), where << ": vocab id " << id << " out of range");
    spec.vocab.emplace_back(it.key(), static_cast<int32_t>(id));
  }
  if (j.contains("added_tokens") && j["added_tokens"].is_array())
    for (const auto& a : j["added_tokens"]) {
      AERIE_CHECK(a.contains("content") && a["content"].is_string() && a.contains("id") && a["id"].is_number_integer(),
                  where << ": added token without content or id");
      const int64_t id = a["id"].get<int64_t>();
      AERIE_CHECK(id >= 0 && id < (int64_t{1} << 24), where << ": added token id " << id << " out of range");
      spec.added.push_back({a["content"].get<std::string>(), static_cast<int32_t>(id), a.value("special", false)});
    }
  if (m.contains("merges") && m["merges"].is_array())
    for (const auto& mg : m["merges"]) {
      if (mg.is_string()) {
        spec.merges.push_back(split_merge(mg.get<std::string>(), where));
      } else {
        AERIE_CHECK(mg.is_array() && mg.size() == 2 && mg[0].is_string() && mg[1].is_string(), where << ": malformed merge " << mg.dump());
        spec.merges.emplace_back(mg[0].get<std::string>(), mg[1].get<std::string>());
      }
    }
  bool byte_level = j.contains("decoder") && j["decoder"].is_object() && j["decoder"].value("type", "") == "ByteLevel";
  if (j.contains("pre_tokenizer")) add_pre_tokenizer(j["pre_tokenizer"], where, spec.split_patterns, byte_level);
  AERIE_CHECK(byte_level, where << ": not a byte-level BPE tokenizer (no ByteLevel pre-tokenizer or decoder)");
  if (j.contains("post_processor")) add_post_processor(j["post_processor"], where, spec.prefix_ids, spec.suffix_ids);
  return spec;
}

BpeTokenizer::~BpeTokenizer() = default;

bool BpeTokenizer::available(const std::filesystem::path& dir) { return std::filesystem::exists(dir / "tokenizer.json"); }

BpeTokenizer::BpeTokenizer(const std::filesystem::path& path) : BpeTokenizer(read_tokenizer_json(path), path.string()) {}

BpeTokenizer::BpeTokenizer(const BpeSpec& spec, const std::string& where) {
  ignore_merges_ = spec.ignore_merges;
  prefix_ids_ = spec.prefix_ids;
  suffix_ids_ = spec.suffix_ids;
  // GPT-2's byte <-> printable character table.
  int extra = 0;
  for (int b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
    byte_char_[b] = utf8(printable ? static_cast<uint32_t>(b) : static_cast<uint32_t>(256 + extra++));
    char_byte_[byte_char_[b]] = static_cast<uint8_t>(b);
  }
  int64_t max_id = -1;
  for (const auto& [text, id] : spec.vocab) {
    AERIE_CHECK(id >= 0 && id < (1 << 24), where << ": vocab id " << id << " out of range");
    vocab_[text] = id;
    max_id = std::max<int64_t>(max_id, id);
  }
  for (const auto& a : spec.added) {
    AERIE_CHECK(a.id >= 0 && a.id < (1 << 24), where << ": added token id " << a.id << " out of range");
    added_.emplace_back(a.content, a.id);
    max_id = std::max<int64_t>(max_id, a.id);
  }
  std::sort(added_.begin(), added_.end(), [](const auto& a, const auto& b) { return a.first.size() > b.first.size(); });
  id_to_token_.assign(static_cast<size_t>(max_id + 1), "");
  is_added_.assign(static_cast<size_t>(max_id + 1), false);
  is_special_.assign(static_cast<size_t>(max_id + 1), false);
  for (const auto& [text, id] : vocab_) id_to_token_[static_cast<size_t>(id)] = text;
  for (const auto& a : spec.added) {
    id_to_token_[static_cast<size_t>(a.id)] = a.content;
    is_added_[static_cast<size_t>(a.id)] = true;
    is_special_[static_cast<size_t>(a.id)] = a.special;
  }
  for (int32_t id : prefix_ids_) AERIE_CHECK(id >= 0 && id <= max_id, where << ": post-processor adds id " << id << ", outside the vocabulary");
  for (int32_t id : suffix_ids_) AERIE_CHECK(id >= 0 && id <= max_id, where << ": post-processor adds id " << id << ", outside the vocabulary");
  int rank = 0;
  for (const auto& [left, right] : spec.merges) merge_rank_.emplace(left + '\x01' + right, rank++);
  for (const auto& pattern : spec.split_patterns) {
    auto re = std::make_unique<Regex>();
    int err = 0;
    PCRE2_SIZE off = 0;
    re->code = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(), PCRE2_UTF | PCRE2_UCP, &err, &off, nullptr);
    if (!re->code) {
      PCRE2_UCHAR msg[256];
      pcre2_get_error_message(err, msg, sizeof msg);
      AERIE_FAIL(where << ": pre-tokenizer regex does not compile at " << off << ": " << reinterpret_cast<char*>(msg));
    }
    splits_.push_back(std::move(re));
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
  // Merge the adjacent pair of lowest rank (leftmost on ties) until none is left: a heap of
  // candidate pairs over a linked list of symbols, O(n log n) (a rescan per merge made a long
  // piece, e.g. 20 KB of one letter, quadratic: seconds of CPU per request).
  const size_t n = sym.size();
  std::vector<size_t> prev(n), next(n);
  std::vector<uint32_t> version(n, 0);
  std::vector<bool> alive(n, true);
  for (size_t i = 0; i < n; ++i) prev[i] = i - 1, next[i] = i + 1;  // prev[0] wraps: never read while i == 0
  struct Cand {
    int rank;
    size_t left;  // the left symbol's first byte: leftmost wins ties, and merged symbols keep it
    uint32_t left_version, right_version;
    bool operator>(const Cand& o) const { return rank != o.rank ? rank > o.rank : left > o.left; }
  };
  std::priority_queue<Cand, std::vector<Cand>, std::greater<Cand>> heap;
  auto consider = [&](size_t l) {
    if (l >= n || !alive[l] || next[l] >= n) return;
    const size_t r = next[l];
    if (auto it = merge_rank_.find(sym[l] + '\x01' + sym[r]); it != merge_rank_.end()) heap.push({it->second, l, version[l], version[r]});
  };
  for (size_t i = 0; i + 1 < n; ++i) consider(i);
  while (!heap.empty()) {
    const Cand c = heap.top();
    heap.pop();
    const size_t l = c.left;
    if (!alive[l] || version[l] != c.left_version || next[l] >= n || version[next[l]] != c.right_version) continue;  // stale
    const size_t r = next[l];
    sym[l] += sym[r];
    sym[r].clear();
    alive[r] = false;
    next[l] = next[r];
    if (next[l] < n) prev[next[l]] = l;
    ++version[l];
    if (l > 0) {
      // The nearest live symbol to the left (prev links skip merged ones).
      consider(prev[l]);
    }
    consider(l);
  }
  std::vector<std::string> merged;
  for (size_t i = 0; i < n; i = next[i]) merged.push_back(std::move(sym[i]));
  sym.swap(merged);
  for (const auto& s : sym) {
    auto it = vocab_.find(s);
    AERIE_CHECK(it != vocab_.end(), "tokenizer: no vocabulary entry for a merged piece (is the byte alphabet in the vocab?)");
    out.push_back(it->second);
  }
}

namespace {

// Whether byte `at` lies in one of the sorted, disjoint ranges.
bool in_ranges(const std::vector<std::pair<size_t, size_t>>& ranges, size_t at) {
  auto it = std::upper_bound(ranges.begin(), ranges.end(), at, [](size_t v, const auto& r) { return v < r.first; });
  return it != ranges.begin() && at < std::prev(it)->second;
}

}  // namespace

std::vector<std::string> BpeTokenizer::special_token_texts() const {
  std::vector<std::string> out;
  for (const auto& [text, id] : added_)
    if (is_special_[static_cast<size_t>(id)]) out.push_back(text);
  return out;
}

std::vector<int32_t> BpeTokenizer::encode(const std::string& text, bool add_special,
                                          const std::vector<std::pair<size_t, size_t>>* literal) const {
  // Checked once here, so the regexes need not re-check the whole text at every match.
  AERIE_CHECK(valid_utf8(text), "tokenizer: the text is not valid UTF-8");
  std::vector<int32_t> out;
  if (add_special) out = prefix_ids_;
  std::vector<pcre2_match_data*> md;
  for (const auto& re : splits_) md.push_back(pcre2_match_data_create_from_pattern(re->code, nullptr));
  struct Free {
    std::vector<pcre2_match_data*>& v;
    ~Free() {
      for (auto* m : v) pcre2_match_data_free(m);
    }
  } free_md{md};
  // Stage k cuts a piece by its regex (each match and each gap a piece) and hands every
  // piece to stage k + 1; after the last stage a piece is BPE-merged.
  std::function<void(std::string_view, size_t)> split = [&](std::string_view seg, size_t k) {
    if (k == splits_.size()) {
      if (!seg.empty()) encode_piece(std::string(seg), out);
      return;
    }
    PCRE2_SIZE at = 0;
    while (at < seg.size()) {
      const int rc =
          pcre2_match(splits_[k]->code, reinterpret_cast<PCRE2_SPTR>(seg.data()), seg.size(), at, PCRE2_NO_UTF_CHECK, md[k], nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) {
        split(seg.substr(at), k + 1);
        return;
      }
      AERIE_CHECK(rc >= 0, "tokenizer: pre-tokenizer regex failed (PCRE2 error " << rc << ")");
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md[k]);
      if (ov[0] > at) split(seg.substr(at, ov[0] - at), k + 1);  // an unmatched gap is a piece of its own
      if (ov[1] == ov[0]) {  // empty match: step one character
        size_t n = std::max<size_t>(1, utf8_len(static_cast<unsigned char>(seg[ov[0]])));
        split(seg.substr(ov[0], n), k + 1);
        at = ov[0] + n;
        continue;
      }
      split(seg.substr(ov[0], ov[1] - ov[0]), k + 1);
      at = ov[1];
    }
  };
  auto split_text = [&](const std::string& seg) { split(seg, 0); };
  // Added tokens are cut out first, leftmost (and longest) occurrence at a time. Each added
  // token's next occurrence is remembered until the cursor passes it, so a text full of
  // special tokens costs one scan per added token, not one per occurrence.
  std::vector<size_t> next(added_.size(), 0);
  std::vector<bool> known(added_.size(), false);
  size_t pos = 0;
  while (pos <= text.size()) {
    size_t best = std::string::npos;
    const std::pair<std::string, int32_t>* hit = nullptr;
    for (size_t i = 0; i < added_.size(); ++i) {
      const auto& a = added_[i];
      if (a.first.empty()) continue;
      if (!known[i] || (next[i] != std::string::npos && next[i] < pos)) {
        next[i] = text.find(a.first, pos);
        known[i] = true;
        // A special token's text inside a literal range is plain text: look past it.
        while (literal && next[i] != std::string::npos && is_special_[static_cast<size_t>(a.second)] && in_ranges(*literal, next[i]))
          next[i] = text.find(a.first, next[i] + 1);
      }
      const size_t f = next[i];
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
  if (add_special) out.insert(out.end(), suffix_ids_.begin(), suffix_ids_.end());
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
