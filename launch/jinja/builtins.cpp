#include "launch/jinja/builtins.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <ctime>

#include "kernels/error.hpp"

namespace aerie::jinja {

namespace {

constexpr int64_t kMaxRange = 1 << 20;  // range() in a chat template never needs more

// UTF-8 code points of s, each as its bytes.
std::vector<std::string> chars_of(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    size_t n = c < 0x80 ? 1 : (c & 0xE0) == 0xC0 ? 2 : (c & 0xF0) == 0xE0 ? 3 : (c & 0xF8) == 0xF0 ? 4 : 1;
    n = std::min(n, s.size() - i);
    out.push_back(s.substr(i, n));
    i += n;
  }
  return out;
}

uint32_t code_point(const std::string& ch) {
  const auto* p = reinterpret_cast<const unsigned char*>(ch.data());
  switch (ch.size()) {
    case 1: return p[0];
    case 2: return ((p[0] & 0x1Fu) << 6) | (p[1] & 0x3Fu);
    case 3: return ((p[0] & 0x0Fu) << 12) | ((p[1] & 0x3Fu) << 6) | (p[2] & 0x3Fu);
    default: return ((p[0] & 0x07u) << 18) | ((p[1] & 0x3Fu) << 12) | ((p[2] & 0x3Fu) << 6) | (p[3] & 0x3Fu);
  }
}

bool py_space(uint32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
         c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

const std::string& str_arg(const Value& v, const std::string& what) {
  AERIE_CHECK(v.is_string(), "chat template: " << what << " needs a string, got " << type_name(v));
  return v.get_ref<const std::string&>();
}

int64_t int_arg(const Value& v, const std::string& what) {
  AERIE_CHECK(v.is_number_integer() || v.is_boolean(), "chat template: " << what << " needs an integer, got " << type_name(v));
  return v.is_boolean() ? v.get<bool>() : v.get<int64_t>();
}

const Value* kwarg(const Kwargs& kw, const char* name) {
  for (const auto& [k, v] : kw)
    if (k == name) return &v;
  return nullptr;
}

// Positional argument i, else keyword `name`, else nullptr.
const Value* arg(const Args& a, const Kwargs& kw, size_t i, const char* name) { return i < a.size() ? &a[i] : kwarg(kw, name); }

std::string ascii_case(std::string s, bool upper) {
  for (auto& c : s) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return s;
}

std::string title_case(const std::string& s) {
  std::string out;
  bool start = true;
  for (unsigned char c : s) {
    const bool alpha = std::isalpha(c) != 0;
    out += static_cast<char>(alpha ? (start ? std::toupper(c) : std::tolower(c)) : c);
    start = !alpha && !(c & 0x80);
  }
  return out;
}

std::string capitalize(const std::string& s) {
  std::string out = ascii_case(s, false);
  if (!out.empty()) out[0] = static_cast<char>(std::toupper(static_cast<unsigned char>(out[0])));
  return out;
}

std::string replace_all(const std::string& s, const std::string& from, const std::string& to, int64_t count) {
  if (from.empty()) return s;
  std::string out;
  size_t at = 0;
  for (int64_t n = 0; count < 0 || n < count; ++n) {
    const size_t f = s.find(from, at);
    if (f == std::string::npos) break;
    out += s.substr(at, f - at) + to;
    at = f + from.size();
  }
  return out + s.substr(at);
}

Value split(const std::string& s, const Value* sep, int64_t maxsplit) {
  Value out = Value::array();
  if (!sep || sep->is_null()) {  // runs of whitespace, none at the ends
    std::string cur;
    bool in_word = false;
    int64_t splits = 0;
    const auto chars = chars_of(s);
    for (size_t i = 0; i < chars.size(); ++i) {
      if (py_space(code_point(chars[i])) && !(maxsplit >= 0 && splits >= maxsplit && in_word)) {
        if (in_word) out.push_back(cur), cur.clear(), in_word = false, ++splits;
      } else {
        cur += chars[i];
        in_word = true;
      }
    }
    if (in_word) out.push_back(maxsplit >= 0 && splits >= maxsplit ? strip(cur, false, true) : cur);
    return out;
  }
  const std::string& d = str_arg(*sep, "split");
  AERIE_CHECK(!d.empty(), "chat template: split with an empty separator");
  size_t at = 0;
  for (int64_t n = 0; maxsplit < 0 || n < maxsplit; ++n) {
    const size_t f = s.find(d, at);
    if (f == std::string::npos) break;
    out.push_back(s.substr(at, f - at));
    at = f + d.size();
  }
  out.push_back(s.substr(at));
  return out;
}

Value attribute_of(const Value& v, const std::string& path) {
  Value cur = v;
  size_t at = 0;
  while (at <= path.size()) {
    const size_t dot = path.find('.', at);
    const std::string key = path.substr(at, dot == std::string::npos ? std::string::npos : dot - at);
    if (cur.is_object() && cur.contains(key)) cur = cur[key];
    else if (cur.is_array() && !key.empty() && std::all_of(key.begin(), key.end(), ::isdigit) && std::stoul(key) < cur.size()) cur = cur[std::stoul(key)];
    else return undefined();
    if (dot == std::string::npos) break;
    at = dot + 1;
  }
  return cur;
}

std::string html_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return out;
}

Value number(double d, bool as_int) { return as_int ? Value(static_cast<int64_t>(d)) : Value(d); }

}  // namespace

std::string strip(const std::string& s, bool left, bool right, const std::string* chars) {
  const auto cs = chars_of(s);
  auto drop = [&](const std::string& ch) { return chars ? chars->find(ch) != std::string::npos : py_space(code_point(ch)); };
  size_t b = 0, e = cs.size();
  if (left)
    while (b < e && drop(cs[b])) ++b;
  if (right)
    while (e > b && drop(cs[e - 1])) --e;
  std::string out;
  for (size_t i = b; i < e; ++i) out += cs[i];
  return out;
}

std::vector<Value> iterate(const Value& v) {
  std::vector<Value> out;
  if (v.is_discarded()) return out;
  if (v.is_array()) return {v.begin(), v.end()};
  if (v.is_object()) {
    for (auto it = v.begin(); it != v.end(); ++it) out.emplace_back(it.key());
    return out;
  }
  if (v.is_string()) {
    for (auto& c : chars_of(v.get_ref<const std::string&>())) out.emplace_back(c);
    return out;
  }
  AERIE_FAIL("chat template: " << type_name(v) << " is not iterable");
}

bool apply_test(const std::string& name, const Value& v, const Args& a) {
  auto need = [&](size_t n) { AERIE_CHECK(a.size() >= n, "chat template: test '" << name << "' needs " << n << " argument(s)"); };
  if (name == "defined") return !v.is_discarded();
  if (name == "undefined") return v.is_discarded();
  if (name == "none") return v.is_null();
  if (name == "boolean") return v.is_boolean();
  if (name == "true") return v.is_boolean() && v.get<bool>();
  if (name == "false") return v.is_boolean() && !v.get<bool>();
  if (name == "integer") return v.is_number_integer();
  if (name == "float") return v.is_number_float();
  if (name == "number") return v.is_number();
  if (name == "string") return v.is_string();
  if (name == "mapping") return v.is_object();
  if (name == "iterable") return v.is_array() || v.is_object() || v.is_string();
  if (name == "sequence") return v.is_array() || v.is_object() || v.is_string();
  if (name == "callable") return false;
  if (name == "odd" || name == "even") return (int_arg(v, name) % 2 != 0) == (name == "odd");
  if (name == "divisibleby") {
    need(1);
    const int64_t d = int_arg(a[0], name);
    AERIE_CHECK(d != 0, "chat template: divisibleby 0");
    return int_arg(v, name) % d == 0;
  }
  if (name == "eq" || name == "equalto" || name == "==") return need(1), equals(v, a[0]);
  if (name == "ne" || name == "!=") return need(1), !equals(v, a[0]);
  if (name == "lt" || name == "<" || name == "lessthan") return need(1), less(v, a[0]);
  if (name == "gt" || name == ">" || name == "greaterthan") return need(1), less(a[0], v);
  if (name == "le" || name == "<=") return need(1), !less(a[0], v);
  if (name == "ge" || name == ">=") return need(1), !less(v, a[0]);
  if (name == "in") {
    need(1);
    if (a[0].is_string()) return v.is_string() && a[0].get_ref<const std::string&>().find(v.get_ref<const std::string&>()) != std::string::npos;
    for (const auto& e : iterate(a[0]))
      if (equals(e, v)) return true;
    return false;
  }
  if (name == "sameas") return need(1), (v.type() == a[0].type() && (v.is_null() || v.is_boolean()) && v == a[0]);
  if (name == "lower") return v.is_string() && ascii_case(v.get<std::string>(), false) == v.get<std::string>();
  if (name == "upper") return v.is_string() && ascii_case(v.get<std::string>(), true) == v.get<std::string>();
  if (name == "escaped") return false;
  AERIE_FAIL("chat template: test '" << name << "' is not supported");
}

Value apply_filter(const std::string& name, const Value& v, const Args& a, const Kwargs& kw) {
  auto undefined_input = [&] { AERIE_FAIL("chat template: filter '" << name << "' got an undefined value"); };
  if (name == "default" || name == "d") {
    const Value* dflt = arg(a, kw, 0, "default_value");
    const Value* boolean = arg(a, kw, 1, "boolean");
    const bool use = v.is_discarded() || (boolean && truthy(*boolean) && !truthy(v));
    return use ? (dflt ? *dflt : Value("")) : v;
  }
  if (name == "length" || name == "count") {
    if (v.is_discarded()) return 0;
    if (v.is_string()) return static_cast<int64_t>(chars_of(v.get<std::string>()).size());
    AERIE_CHECK(v.is_array() || v.is_object(), "chat template: " << type_name(v) << " has no length");
    return static_cast<int64_t>(v.size());
  }
  if (name == "string") return to_str(v);
  if (name == "safe") return v;
  if (name == "e" || name == "escape") return html_escape(to_str(v));
  if (name == "tojson") {
    const Value* indent = arg(a, kw, 0, "indent");
    return to_json(v, indent && !indent->is_null() ? static_cast<int>(int_arg(*indent, "tojson indent")) : -1);
  }
  if (v.is_discarded()) undefined_input();
  if (name == "trim") {
    const Value* chars = arg(a, kw, 0, "chars");
    const std::string c = chars && !chars->is_null() ? str_arg(*chars, "trim") : "";
    return strip(to_str(v), true, true, chars && !chars->is_null() ? &c : nullptr);
  }
  if (name == "upper" || name == "lower") return ascii_case(to_str(v), name == "upper");
  if (name == "title") return title_case(to_str(v));
  if (name == "capitalize") return capitalize(to_str(v));
  if (name == "first" || name == "last") {
    const auto items = iterate(v);
    if (items.empty()) return undefined();
    return name == "first" ? items.front() : items.back();
  }
  if (name == "list") return Value(iterate(v));
  if (name == "reverse") {
    if (v.is_string()) {
      auto cs = chars_of(v.get<std::string>());
      std::string out;
      for (auto it = cs.rbegin(); it != cs.rend(); ++it) out += *it;
      return out;
    }
    auto items = iterate(v);
    std::reverse(items.begin(), items.end());
    return Value(items);
  }
  if (name == "join") {
    const Value* sep = arg(a, kw, 0, "d");
    const Value* attr = kwarg(kw, "attribute");
    std::string out;
    bool first = true;
    for (const auto& e : iterate(v)) {
      if (!first) out += sep ? to_str(*sep) : "";
      first = false;
      out += to_str(attr ? attribute_of(e, to_str(*attr)) : e);
    }
    return out;
  }
  if (name == "replace") {
    AERIE_CHECK(a.size() >= 2, "chat template: replace needs two arguments");
    const Value* count = arg(a, kw, 2, "count");
    return replace_all(to_str(v), to_str(a[0]), to_str(a[1]), count && !count->is_null() ? int_arg(*count, "replace count") : -1);
  }
  if (name == "items") {
    AERIE_CHECK(v.is_object(), "chat template: items of a " << type_name(v));
    Value out = Value::array();
    for (auto it = v.begin(); it != v.end(); ++it) out.push_back(Value::array({it.key(), it.value()}));
    return out;
  }
  if (name == "selectattr" || name == "rejectattr" || name == "select" || name == "reject") {
    const bool by_attr = name.back() == 'r', keep = name[0] == 's';
    size_t i = 0;
    std::string attr;
    if (by_attr) {
      AERIE_CHECK(!a.empty(), "chat template: " << name << " needs an attribute");
      attr = str_arg(a[i++], name);
    }
    std::string test = i < a.size() ? str_arg(a[i++], name) : "";
    const Args rest(a.begin() + static_cast<std::ptrdiff_t>(std::min(i, a.size())), a.end());
    Value out = Value::array();
    for (const auto& e : iterate(v)) {
      const Value x = by_attr ? attribute_of(e, attr) : e;
      const bool pass = test.empty() ? truthy(x) : apply_test(test, x, rest);
      if (pass == keep) out.push_back(e);
    }
    return out;
  }
  if (name == "map") {
    Value out = Value::array();
    const Value* attr = kwarg(kw, "attribute");
    const Value* dflt = kwarg(kw, "default");
    for (const auto& e : iterate(v)) {
      if (attr) {
        Value x = attribute_of(e, to_str(*attr));
        out.push_back(x.is_discarded() && dflt ? *dflt : x);
      } else {
        AERIE_CHECK(!a.empty(), "chat template: map needs a filter name or attribute=");
        out.push_back(apply_filter(str_arg(a[0], "map"), e, Args(a.begin() + 1, a.end()), {}));
      }
    }
    return out;
  }
  if (name == "unique") {
    Value out = Value::array();
    for (const auto& e : iterate(v))
      if (std::none_of(out.begin(), out.end(), [&](const Value& o) { return equals(o, e); })) out.push_back(e);
    return out;
  }
  if (name == "sort") {
    auto items = iterate(v);
    const Value* attr = kwarg(kw, "attribute");
    const Value* rev = arg(a, kw, 0, "reverse");
    std::stable_sort(items.begin(), items.end(), [&](const Value& x, const Value& y) {
      return attr ? less(attribute_of(x, to_str(*attr)), attribute_of(y, to_str(*attr))) : less(x, y);
    });
    if (rev && truthy(*rev)) std::reverse(items.begin(), items.end());
    return Value(items);
  }
  if (name == "min" || name == "max") {
    auto items = iterate(v);
    if (items.empty()) return undefined();
    return name == "min" ? *std::min_element(items.begin(), items.end(), less) : *std::max_element(items.begin(), items.end(), less);
  }
  if (name == "sum") {
    Value total = 0;
    for (const auto& e : iterate(v)) {
      AERIE_CHECK(e.is_number(), "chat template: sum of a " << type_name(e));
      total = total.is_number_float() || e.is_number_float() ? Value(total.get<double>() + e.get<double>()) : Value(total.get<int64_t>() + e.get<int64_t>());
    }
    return total;
  }
  if (name == "int") {
    if (v.is_number()) return static_cast<int64_t>(v.get<double>());
    try {
      return std::stoll(strip(to_str(v), true, true));
    } catch (const std::exception&) {
      return a.empty() ? Value(0) : a[0];
    }
  }
  if (name == "float") {
    if (v.is_number()) return v.get<double>();
    try {
      return std::stod(strip(to_str(v), true, true));
    } catch (const std::exception&) {
      return a.empty() ? Value(0.0) : a[0];
    }
  }
  if (name == "abs") {
    AERIE_CHECK(v.is_number(), "chat template: abs of a " << type_name(v));
    return number(std::fabs(v.get<double>()), v.is_number_integer());
  }
  if (name == "round") {
    AERIE_CHECK(v.is_number(), "chat template: round of a " << type_name(v));
    const Value* prec = arg(a, kw, 0, "precision");
    const double p = std::pow(10.0, prec ? static_cast<double>(int_arg(*prec, "round")) : 0.0);
    return std::round(v.get<double>() * p) / p;
  }
  if (name == "indent") {
    const Value* width = arg(a, kw, 0, "width");
    const Value* first = arg(a, kw, 1, "first");
    const Value* blank = arg(a, kw, 2, "blank");
    const std::string pad = width && width->is_string() ? width->get<std::string>() : std::string(static_cast<size_t>(width ? int_arg(*width, "indent") : 4), ' ');
    const std::string s = to_str(v);
    std::string out;
    size_t at = 0;
    bool first_line = true;
    while (at <= s.size()) {
      const size_t nl = s.find('\n', at);
      const std::string line = s.substr(at, nl == std::string::npos ? std::string::npos : nl - at);
      if ((!first_line || (first && truthy(*first))) && (!line.empty() || (blank && truthy(*blank)))) out += pad;
      out += line;
      if (nl == std::string::npos) break;
      out += '\n';
      at = nl + 1;
      first_line = false;
    }
    return out;
  }
  AERIE_FAIL("chat template: filter '" << name << "' is not supported");
}

Value call_method(const Value& obj, const std::string& name, const Args& a, const Kwargs& kw) {
  if (obj.is_string()) {
    const std::string& s = obj.get_ref<const std::string&>();
    auto chars = [&](size_t i) -> std::optional<std::string> {
      if (i < a.size() && !a[i].is_null()) return str_arg(a[i], name);
      return std::nullopt;
    };
    if (name == "strip" || name == "lstrip" || name == "rstrip") {
      const auto c = chars(0);
      return strip(s, name != "rstrip", name != "lstrip", c ? &*c : nullptr);
    }
    if (name == "split") {
      const Value* mx = arg(a, kw, 1, "maxsplit");
      return split(s, arg(a, kw, 0, "sep"), mx ? int_arg(*mx, "split") : -1);
    }
    if (name == "startswith" || name == "endswith") {
      AERIE_CHECK(!a.empty(), "chat template: " << name << " needs an argument");
      std::vector<Value> options = a[0].is_array() ? iterate(a[0]) : std::vector<Value>{a[0]};
      for (const auto& o : options) {
        const std::string& p = str_arg(o, name);
        if (p.size() <= s.size() && (name == "startswith" ? s.compare(0, p.size(), p) == 0 : s.compare(s.size() - p.size(), p.size(), p) == 0))
          return true;
      }
      return false;
    }
    if (name == "upper" || name == "lower") return ascii_case(s, name == "upper");
    if (name == "title") return title_case(s);
    if (name == "capitalize") return capitalize(s);
    if (name == "replace") {
      AERIE_CHECK(a.size() >= 2, "chat template: replace needs two arguments");
      return replace_all(s, str_arg(a[0], name), str_arg(a[1], name), a.size() > 2 ? int_arg(a[2], name) : -1);
    }
    if (name == "find") {
      AERIE_CHECK(!a.empty(), "chat template: find needs an argument");
      const size_t f = s.find(str_arg(a[0], name));
      return f == std::string::npos ? int64_t{-1} : static_cast<int64_t>(chars_of(s.substr(0, f)).size());
    }
    if (name == "count") {
      AERIE_CHECK(!a.empty(), "chat template: count needs an argument");
      const std::string& p = str_arg(a[0], name);
      if (p.empty()) return static_cast<int64_t>(chars_of(s).size() + 1);
      int64_t n = 0;
      for (size_t f = s.find(p); f != std::string::npos; f = s.find(p, f + p.size())) ++n;
      return n;
    }
    if (name == "join") {
      std::string out;
      bool first = true;
      for (const auto& e : a.empty() ? std::vector<Value>{} : iterate(a[0])) {
        if (!first) out += s;
        first = false;
        out += str_arg(e, "join");
      }
      return out;
    }
    if (name == "splitlines") {
      Value out = Value::array();
      size_t at = 0;
      while (at < s.size()) {
        const size_t nl = s.find('\n', at);
        out.push_back(s.substr(at, nl == std::string::npos ? std::string::npos : nl - at));
        if (nl == std::string::npos) break;
        at = nl + 1;
      }
      return out;
    }
  }
  if (obj.is_object()) {
    if (name == "items") return apply_filter("items", obj, {}, {});
    if (name == "keys") return Value(iterate(obj));
    if (name == "values") {
      Value out = Value::array();
      for (const auto& e : obj) out.push_back(e);
      return out;
    }
    if (name == "get") {
      AERIE_CHECK(!a.empty(), "chat template: get needs a key");
      const std::string& k = str_arg(a[0], name);
      if (obj.contains(k)) return obj[k];
      return a.size() > 1 ? a[1] : Value(nullptr);
    }
  }
  AERIE_FAIL("chat template: " << type_name(obj) << " has no method '" << name << "'");
}

bool call_function(const std::string& name, const Args& a, const Kwargs& kw, Value& result) {
  if (name == "raise_exception") {
    AERIE_FAIL("chat template: " << (a.empty() ? std::string("raise_exception") : to_str(a[0])));
  }
  if (name == "strftime_now") {
    AERIE_CHECK(!a.empty(), "chat template: strftime_now needs a format");
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);
    char buf[256];
    const size_t n = std::strftime(buf, sizeof buf, str_arg(a[0], name).c_str(), &tm);
    result = std::string(buf, n);
    return true;
  }
  if (name == "namespace" || name == "dict") {
    result = Value::object();
    if (!a.empty()) {
      AERIE_CHECK(a[0].is_object(), "chat template: " << name << " takes a dict or keyword arguments");
      result = a[0];
    }
    for (const auto& [k, v] : kw) result[k] = v;
    if (name == "namespace") result[kNamespaceKey] = true;
    return true;
  }
  if (name == "range") {
    AERIE_CHECK(!a.empty() && a.size() <= 3, "chat template: range takes 1 to 3 arguments");
    int64_t start = 0, stop, step = 1;
    if (a.size() == 1) {
      stop = int_arg(a[0], name);
    } else {
      start = int_arg(a[0], name);
      stop = int_arg(a[1], name);
      if (a.size() == 3) step = int_arg(a[2], name);
    }
    AERIE_CHECK(step != 0, "chat template: range step 0");
    result = Value::array();
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      AERIE_CHECK(static_cast<int64_t>(result.size()) < kMaxRange, "chat template: range longer than " << kMaxRange);
      result.push_back(i);
    }
    return true;
  }
  return false;
}

}  // namespace aerie::jinja
