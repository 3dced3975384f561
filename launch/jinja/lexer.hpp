#pragma once
// Cuts a Jinja template into text, {{ output }} and {% statement %} segments, applying the
// whitespace rules transformers renders chat templates with (trim_blocks, lstrip_blocks,
// and the '-' markers), and cuts each tag into tokens.
#include <string>
#include <vector>

#include "launch/jinja/value.hpp"

namespace aerie::jinja {

struct Token {
  enum Kind { kName, kString, kInt, kFloat, kOp, kEnd } kind = kEnd;
  std::string text;  // the name or operator; a string literal's decoded text
  Value value;       // numbers and strings
};

struct Segment {
  enum Kind { kText, kOutput, kStatement } kind = kText;
  std::string text;           // kText
  std::vector<Token> tokens;  // kOutput, kStatement; ends with a kEnd token
  int line = 1;
};

// Throws aerie::Error naming the line for an unclosed tag, string or bracket and for
// characters that are no token.
std::vector<Segment> lex_template(const std::string& source);

}  // namespace aerie::jinja
