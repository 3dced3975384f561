#pragma once
// Values of the Jinja subset (launch/jinja/template.hpp) and their Python semantics: what is
// true, how a value prints, equality and ordering, and json.dumps as transformers' tojson
// writes it. A value is an insertion-ordered JSON value; "undefined" is the discarded value.
#include <nlohmann/json.hpp>
#include <string>

namespace aerie::jinja {

using Value = nlohmann::ordered_json;

Value undefined();
bool is_undefined(const Value& v);
// Python truthiness: None, undefined, False, 0, "", [] and {} are false.
bool truthy(const Value& v);
// str(v) as Python prints it: None, True, 1.5, ['a', 1], {'k': 'v'}; undefined prints "".
std::string to_str(const Value& v);
// repr(v): strings quoted, as inside a printed list.
std::string repr(const Value& v);
// json.dumps(v, ensure_ascii=False, indent=indent) (indent < 0: none), keys in insertion order.
std::string to_json(const Value& v, int indent = -1);
// Python ==, with 1 == 1.0 and undefined equal to nothing.
bool equals(const Value& a, const Value& b);
// Python a < b for numbers, strings and lists of them; throws for other pairs.
bool less(const Value& a, const Value& b);
// The type name used in error messages ("string", "list", ...).
std::string type_name(const Value& v);

}  // namespace aerie::jinja
