#include "launch/jinja/value.hpp"

#include <charconv>
#include <cmath>
#include <cstdio>

#include "kernels/error.hpp"

namespace aerie::jinja {

Value undefined() { return Value(Value::value_t::discarded); }
bool is_undefined(const Value& v) { return v.is_discarded(); }

bool truthy(const Value& v) {
  switch (v.type()) {
    case Value::value_t::null: case Value::value_t::discarded: return false;
    case Value::value_t::boolean: return v.get<bool>();
    case Value::value_t::number_integer: return v.get<int64_t>() != 0;
    case Value::value_t::number_unsigned: return v.get<uint64_t>() != 0;
    case Value::value_t::number_float: return v.get<double>() != 0.0;
    case Value::value_t::string: return !v.get_ref<const std::string&>().empty();
    case Value::value_t::array: case Value::value_t::object: return !v.empty();
    default: return true;
  }
}

namespace {

// Python's repr of a float: shortest round-trip digits, ".0" for whole numbers.
std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d > 0 ? "inf" : "-inf";
  char buf[64];
  auto r = std::to_chars(buf, buf + sizeof buf, d);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".en") == std::string::npos) s += ".0";
  return s;
}

// Code points Python's repr escapes besides ASCII controls: separators, format and private-use
// characters (str.isprintable() is false), the common ones.
bool py_unprintable(uint32_t c) {
  return (c >= 0x7F && c <= 0xA0) || c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F) ||
         (c >= 0x205F && c <= 0x206F) || c == 0x3000 || (c >= 0xD800 && c <= 0xF8FF) || c == 0xFEFF || (c >= 0xFFF9 && c <= 0xFFFB);
}

std::string quote(const std::string& s) {
  // Python picks single quotes unless the text has one and no double quote.
  const char q = (s.find('\'') != std::string::npos && s.find('"') == std::string::npos) ? '"' : '\'';
  std::string out(1, q);
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    n = std::min(n, s.size() - i);
    uint32_t cp = n == 1 ? c : n == 2 ? (c & 0x1Fu) : n == 3 ? (c & 0x0Fu) : (c & 0x07u);
    for (size_t k = 1; k < n; ++k) cp = (cp << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3Fu);
    if (c == static_cast<unsigned char>(q) || c == '\\') out += '\\', out += static_cast<char>(c);
    else if (c == '\n') out += "\\n";
    else if (c == '\t') out += "\\t";
    else if (c == '\r') out += "\\r";
    else if (cp < 0x20 || py_unprintable(cp)) {
      char buf[16];
      std::snprintf(buf, sizeof buf, cp < 0x100 ? "\\x%02x" : cp < 0x10000 ? "\\u%04x" : "\\U%08x", cp);
      out += buf;
    } else {
      out += s.substr(i, n);
    }
    i += n;
  }
  return out + q;
}

void json_string(const std::string& s, std::string& out) {
  out += '"';
  for (unsigned char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      default:
        if (c < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out += static_cast<char>(c);  // ensure_ascii=False: UTF-8 as is
        }
    }
  }
  out += '"';
}

void dump(const Value& v, int indent, int depth, std::string& out) {
  const bool pretty = indent >= 0;
  auto newline = [&](int d) {
    out += '\n';
    out.append(static_cast<size_t>(indent * d), ' ');
  };
  switch (v.type()) {
    case Value::value_t::array: {
      if (v.empty()) {
        out += "[]";
        return;
      }
      out += '[';
      bool first = true;
      for (const auto& e : v) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(depth + 1);
        dump(e, indent, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += ']';
      return;
    }
    case Value::value_t::object: {
      if (v.empty()) {
        out += "{}";
        return;
      }
      out += '{';
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        if (!first) out += pretty ? "," : ", ";
        first = false;
        if (pretty) newline(depth + 1);
        json_string(it.key(), out);
        out += ": ";
        dump(it.value(), indent, depth + 1, out);
      }
      if (pretty) newline(depth);
      out += '}';
      return;
    }
    case Value::value_t::string: json_string(v.get_ref<const std::string&>(), out); return;
    case Value::value_t::number_float: {
      const double d = v.get<double>();
      out += std::isnan(d) ? "NaN" : std::isinf(d) ? (d > 0 ? "Infinity" : "-Infinity") : float_repr(d);
      return;
    }
    case Value::value_t::discarded: out += "null"; return;  // as Jinja's Undefined serializes
    default: out += v.dump(); return;  // null, booleans, integers read the same in JSON
  }
}

}  // namespace

std::string to_json(const Value& v, int indent) {
  std::string out;
  dump(v, indent, 0, out);
  return out;
}

std::string repr(const Value& v) { return v.is_string() ? quote(v.get_ref<const std::string&>()) : to_str(v); }

std::string to_str(const Value& v) {
  switch (v.type()) {
    case Value::value_t::discarded: return "";
    case Value::value_t::null: return "None";
    case Value::value_t::boolean: return v.get<bool>() ? "True" : "False";
    case Value::value_t::number_float: return float_repr(v.get<double>());
    case Value::value_t::string: return v.get<std::string>();
    case Value::value_t::array: {
      std::string s = "[";
      for (size_t i = 0; i < v.size(); ++i) s += (i ? ", " : "") + repr(v[i]);
      return s + "]";
    }
    case Value::value_t::object: {
      std::string s = "{";
      bool first = true;
      for (auto it = v.begin(); it != v.end(); ++it) {
        s += (first ? "" : ", ") + quote(it.key()) + ": " + repr(it.value());
        first = false;
      }
      return s + "}";
    }
    default: return v.dump();
  }
}

bool equals(const Value& a, const Value& b) {
  if (a.is_discarded() || b.is_discarded()) return a.is_discarded() && b.is_discarded();
  if (a.is_number() && b.is_number()) {
    if (a.is_number_float() || b.is_number_float()) return a.get<double>() == b.get<double>();
    return a.get<int64_t>() == b.get<int64_t>();
  }
  if (a.is_boolean() && b.is_number()) return (a.get<bool>() ? 1 : 0) == b.get<double>();
  if (a.is_number() && b.is_boolean()) return equals(b, a);
  if (a.is_array() && b.is_array()) {
    if (a.size() != b.size()) return false;
    for (size_t i = 0; i < a.size(); ++i)
      if (!equals(a[i], b[i])) return false;
    return true;
  }
  return a == b;
}

bool less(const Value& a, const Value& b) {
  if (a.is_number() && b.is_number()) return a.get<double>() < b.get<double>();
  if (a.is_string() && b.is_string()) return a.get_ref<const std::string&>() < b.get_ref<const std::string&>();
  if (a.is_array() && b.is_array()) {
    for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
      if (less(a[i], b[i])) return true;
      if (less(b[i], a[i])) return false;
    }
    return a.size() < b.size();
  }
  AERIE_FAIL("'<' is not supported between " << type_name(a) << " and " << type_name(b));
}

std::string type_name(const Value& v) {
  switch (v.type()) {
    case Value::value_t::discarded: return "undefined";
    case Value::value_t::null: return "none";
    case Value::value_t::boolean: return "bool";
    case Value::value_t::number_float: return "float";
    case Value::value_t::string: return "string";
    case Value::value_t::array: return "list";
    case Value::value_t::object: return "dict";
    default: return "int";
  }
}

}  // namespace aerie::jinja
