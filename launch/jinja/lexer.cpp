#include "launch/jinja/lexer.hpp"

#include <cctype>
#include <cstring>

#include "kernels/error.hpp"

namespace aerie::jinja {

namespace {

bool is_space(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; }

std::vector<Token> lex_tag(const std::string& s, int line) {
  std::vector<Token> out;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (is_space(c)) {
      ++i;
      continue;
    }
    if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      out.push_back({Token::kName, s.substr(i, j - i), {}});
      i = j;
      continue;
    }
    if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      if (j + 1 < s.size() && s[j] == '.' && std::isdigit(static_cast<unsigned char>(s[j + 1]))) {
        is_float = true;
        ++j;
        while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
      }
      if (j < s.size() && (s[j] == 'e' || s[j] == 'E')) {
        size_t k = j + 1;
        if (k < s.size() && (s[k] == '+' || s[k] == '-')) ++k;
        if (k < s.size() && std::isdigit(static_cast<unsigned char>(s[k]))) {
          is_float = true;
          j = k;
          while (j < s.size() && std::isdigit(static_cast<unsigned char>(s[j]))) ++j;
        }
      }
      std::string num;
      for (size_t k = i; k < j; ++k)
        if (s[k] != '_') num += s[k];
      Token t{is_float ? Token::kFloat : Token::kInt, num, {}};
      try {
        t.value = is_float ? Value(std::stod(num)) : Value(std::stoll(num));
      } catch (const std::exception&) {
        AERIE_FAIL("chat template line " << line << ": number '" << num << "' is out of range");
      }
      out.push_back(std::move(t));
      i = j;
      continue;
    }
    if (c == '\'' || c == '"') {
      std::string text;
      size_t j = i + 1;
      for (;; ++j) {
        AERIE_CHECK(j < s.size(), "chat template line " << line << ": unclosed string");
        if (s[j] == c) break;
        if (s[j] == '\\' && j + 1 < s.size()) {
          const char e = s[++j];
          switch (e) {
            case 'n': text += '\n'; break;
            case 't': text += '\t'; break;
            case 'r': text += '\r'; break;
            case '\\': case '\'': case '"': text += e; break;
            default: text += '\\', text += e;  // Python keeps unknown escapes as written
          }
          continue;
        }
        text += s[j];
      }
      out.push_back({Token::kString, text, Value(text)});
      i = j + 1;
      continue;
    }
    static const char* const kOps[] = {"**", "//", "==", "!=", "<=", ">=", "+", "-", "*", "/", "%", "~", "<", ">", "(", ")",
                                       "[",  "]",  "{",  "}",  ",",  ".",  ":", "|", "="};
    bool found = false;
    for (const char* op : kOps)
      if (s.compare(i, std::strlen(op), op) == 0) {
        out.push_back({Token::kOp, op, {}});
        i += std::strlen(op);
        found = true;
        break;
      }
    AERIE_CHECK(found, "chat template line " << line << ": unexpected character '" << c << "'");
  }
  out.push_back({Token::kEnd, "", {}});
  return out;
}

// The end of a tag that opened at `from`: the first `close` outside string literals and
// brackets (as Jinja balances them: "{{ {'a': {'b': 1}} }}" closes at the last "}}").
size_t find_close(const std::string& s, size_t from, const char* close, int line) {
  char quote = 0;
  int depth = 0;
  for (size_t i = from; i < s.size(); ++i) {
    const char c = s[i];
    if (quote) {
      if (c == '\\') ++i;
      else if (c == quote) quote = 0;
      continue;
    }
    if (depth == 0 && i + 1 < s.size() && c == close[0] && s[i + 1] == close[1]) return i;
    if (c == '\'' || c == '"') quote = c;
    else if (c == '(' || c == '[' || c == '{') ++depth;
    else if ((c == ')' || c == ']' || c == '}') && depth > 0) --depth;
  }
  AERIE_FAIL("chat template line " << line << ": tag is not closed with '" << close << "'");
}

}  // namespace

std::vector<Segment> lex_template(const std::string& src) {
  struct Raw {
    Segment seg;
    bool is_block = false;     // {% %} or {# #}: trim_blocks / lstrip_blocks apply
    bool is_comment = false;
    bool strip_before = false, strip_after = false, keep_lstrip = false;
  };
  std::vector<Raw> raw;
  size_t i = 0;
  int line = 1;
  auto count_lines = [&](size_t from, size_t to) {
    for (size_t k = from; k < to; ++k) line += src[k] == '\n';
  };
  while (i < src.size()) {
    size_t open = src.find('{', i);
    while (open != std::string::npos && open + 1 < src.size() && src[open + 1] != '{' && src[open + 1] != '%' && src[open + 1] != '#')
      open = src.find('{', open + 1);
    if (open == std::string::npos || open + 1 >= src.size()) {
      raw.push_back({{Segment::kText, src.substr(i), {}, line}});
      break;
    }
    if (open > i) raw.push_back({{Segment::kText, src.substr(i, open - i), {}, line}});
    count_lines(i, open);
    const char kind = src[open + 1];
    const char* close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t body = open + 2;
    Raw r;
    r.seg.line = line;
    if (body < src.size() && (src[body] == '-' || src[body] == '+')) {
      r.strip_before = src[body] == '-';
      r.keep_lstrip = src[body] == '+';
      ++body;
    }
    size_t end;
    if (kind == '#') {
      end = src.find("#}", body);
      AERIE_CHECK(end != std::string::npos, "chat template line " << line << ": comment is not closed");
    } else {
      end = find_close(src, body, close, line);
    }
    size_t body_end = end;
    if (body_end > body && src[body_end - 1] == '-') {
      r.strip_after = true;
      --body_end;
    } else if (body_end > body && src[body_end - 1] == '+' && kind != '{') {
      --body_end;
    }
    r.is_block = kind != '{';
    r.is_comment = kind == '#';
    if (kind != '#') {
      r.seg.kind = kind == '{' ? Segment::kOutput : Segment::kStatement;
      r.seg.tokens = lex_tag(src.substr(body, body_end - body), line);
    }
    raw.push_back(std::move(r));
    count_lines(open, end + 2);
    i = end + 2;
  }
  // Whitespace control, applied to the text around each tag: first what a tag strips before
  // it (judged on the text as written), then what it strips after it.
  auto text_at = [&](size_t k) -> std::string* {
    return k < raw.size() && raw[k].seg.kind == Segment::kText && !raw[k].is_comment ? &raw[k].seg.text : nullptr;
  };
  for (size_t k = 1; k < raw.size(); ++k) {
    const Raw& t = raw[k];
    std::string* s = text_at(k - 1);
    if ((t.seg.kind == Segment::kText && !t.is_comment) || !s) continue;
    if (t.strip_before) {
      while (!s->empty() && is_space(s->back())) s->pop_back();
    } else if (t.is_block && !t.keep_lstrip) {  // lstrip_blocks: only blanks between line start and tag
      size_t p = s->size();
      while (p > 0 && ((*s)[p - 1] == ' ' || (*s)[p - 1] == '\t')) --p;
      if (p == 0 ? k == 1 : (*s)[p - 1] == '\n') s->erase(p);
    }
  }
  for (size_t k = 0; k + 1 < raw.size(); ++k) {
    const Raw& t = raw[k];
    std::string* s = text_at(k + 1);
    if ((t.seg.kind == Segment::kText && !t.is_comment) || !s) continue;
    if (t.strip_after) {
      size_t p = 0;
      while (p < s->size() && is_space((*s)[p])) ++p;
      s->erase(0, p);
    } else if (t.is_block) {  // trim_blocks: the newline right after a block tag
      if (s->rfind("\r\n", 0) == 0) s->erase(0, 2);
      else if (!s->empty() && (*s)[0] == '\n') s->erase(0, 1);
    }
  }
  std::vector<Segment> out;
  for (auto& r : raw) {
    if (r.is_comment) continue;
    if (r.seg.kind == Segment::kText && r.seg.text.empty()) continue;
    out.push_back(std::move(r.seg));
  }
  return out;
}

}  // namespace aerie::jinja
