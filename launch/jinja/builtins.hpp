#pragma once
// The filters, tests, methods and global functions of the Jinja subset that chat templates
// use (transformers' environment: Jinja's built-ins plus raise_exception, strftime_now and a
// tojson that keeps non-ASCII text and key order).
#include <string>
#include <utility>
#include <vector>

#include "launch/jinja/value.hpp"

namespace aerie::jinja {

using Args = std::vector<Value>;
using Kwargs = std::vector<std::pair<std::string, Value>>;

// Each throws aerie::Error naming the filter/test/method and what was wrong with its input.
Value apply_filter(const std::string& name, const Value& v, const Args& args, const Kwargs& kwargs);
bool apply_test(const std::string& name, const Value& v, const Args& args);
Value call_method(const Value& obj, const std::string& name, const Args& args, const Kwargs& kwargs);
// raise_exception, strftime_now, namespace, range, dict; false when `name` is none of them.
bool call_function(const std::string& name, const Args& args, const Kwargs& kwargs, Value& result);
// Items a for loop walks: list elements, dict keys, string characters; none for undefined.
std::vector<Value> iterate(const Value& v);
// Python's str.strip() whitespace (ASCII and Unicode spaces) or the given characters.
std::string strip(const std::string& s, bool left, bool right, const std::string* chars = nullptr);
// The dict marker namespace() objects carry.
constexpr const char* kNamespaceKey = "__namespace__";

}  // namespace aerie::jinja
