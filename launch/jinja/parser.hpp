#pragma once
// Parses the segments of a Jinja template (launch/jinja/lexer.hpp) into statements.
#include "launch/jinja/ast.hpp"
#include "launch/jinja/lexer.hpp"

namespace aerie::jinja {

// Throws aerie::Error naming the line for a syntax error or a statement Aerie does not
// implement (extends, include, import, call blocks).
Body parse_template(const std::vector<Segment>& segments);

}  // namespace aerie::jinja
