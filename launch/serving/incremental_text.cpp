#include "launch/serving/incremental_text.hpp"

namespace aerie::launch {

namespace {

// Length of the UTF-8 sequence a lead byte starts (0 for a continuation or invalid byte).
size_t sequence_length(unsigned char c) {
  if (c < 0x80) return 1;
  if ((c & 0xE0) == 0xC0) return c >= 0xC2 ? 2 : 0;
  if ((c & 0xF0) == 0xE0) return 3;
  if ((c & 0xF8) == 0xF0) return c <= 0xF4 ? 4 : 0;
  return 0;
}

}  // namespace

bool ends_inside_utf8(const std::string& s) {
  for (size_t back = 1; back <= std::min<size_t>(4, s.size()); ++back) {
    const unsigned char c = static_cast<unsigned char>(s[s.size() - back]);
    if ((c & 0xC0) == 0x80) continue;  // continuation byte: look further back
    const size_t n = sequence_length(c);
    return n > back;
  }
  return false;
}

std::string valid_utf8(const std::string& s) {
  static const std::string kReplacement = "\xEF\xBF\xBD";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    const size_t n = sequence_length(c);
    bool ok = n > 0 && i + n <= s.size();
    for (size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xC0) == 0x80;
    if (ok && n == 3) {  // no overlong forms or surrogates
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xE0 && c1 < 0xA0) && !(c == 0xED && c1 >= 0xA0);
    }
    if (ok && n == 4) {
      const unsigned char c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xF0 && c1 < 0x90) && !(c == 0xF4 && c1 >= 0x90);
    }
    if (ok) {
      out.append(s, i, n);
      i += n;
    } else {
      out += kReplacement;
      ++i;
    }
  }
  return out;
}

std::string IncrementalText::window(size_t begin, size_t end) const {
  return tok_.decode_output(std::vector<int32_t>(ids_.begin() + static_cast<std::ptrdiff_t>(begin), ids_.begin() + static_cast<std::ptrdiff_t>(end)));
}

std::string IncrementalText::push(const std::vector<int32_t>& ids) {
  ids_.insert(ids_.end(), ids.begin(), ids.end());
  const std::string before = window(prefix_, read_);
  const std::string now = window(prefix_, ids_.size());
  // Hold back while the new text ends inside a character or has not grown past the
  // released part (a byte-level token may carry only half a character).
  if (now.size() <= before.size() || ends_inside_utf8(now) || now.compare(0, before.size(), before) != 0) return "";
  prefix_ = read_;
  read_ = ids_.size();
  return now.substr(before.size());
}

std::string IncrementalText::finish() {
  const std::string before = window(prefix_, read_);
  const std::string now = window(prefix_, ids_.size());
  prefix_ = read_ = ids_.size();
  if (now.size() <= before.size() || now.compare(0, before.size(), before) != 0) return "";
  return valid_utf8(now.substr(before.size()));
}

}  // namespace aerie::launch
