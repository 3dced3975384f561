#pragma once
// A Jinja template rendered the way transformers' apply_chat_template renders chat templates
// (trim_blocks, lstrip_blocks, loop controls, raise_exception, strftime_now, tojson keeping
// non-ASCII text): the subset real chat templates use — output, if/elif/else, for (loop.*,
// unpacking, else, inline if), set (names, namespace attributes, blocks), macros, filters,
// tests, string and dict methods, slices, and Python's operators and printing rules.
#include <memory>
#include <string>

#include "launch/jinja/value.hpp"

namespace aerie::jinja {

struct Node;

class Template {
 public:
  // Throws aerie::Error naming the line for syntax the subset lacks or gets wrong.
  explicit Template(const std::string& source);
  ~Template();
  Template(Template&&) noexcept;
  // Renders with `context`'s keys as variables. Throws aerie::Error for raise_exception
  // (with the template's message), type errors and output past `max_output_bytes`.
  std::string render(const Value& context, size_t max_output_bytes = size_t{64} << 20) const;

 private:
  std::unique_ptr<std::vector<std::unique_ptr<Node>>> body_;
};

}  // namespace aerie::jinja
