#include "launch/jinja/template.hpp"

#include <cmath>
#include <map>

#include "kernels/error.hpp"
#include "launch/jinja/ast.hpp"
#include "launch/jinja/builtins.hpp"
#include "launch/jinja/lexer.hpp"
#include "launch/jinja/parser.hpp"

namespace aerie::jinja {

namespace {

constexpr int kMaxCallDepth = 64;  // macro recursion

class Renderer {
 public:
  Renderer(const Value& context, size_t max_bytes) : max_bytes_(max_bytes) {
    scopes_.emplace_back();
    for (auto it = context.begin(); it != context.end(); ++it) scopes_.back()[it.key()] = it.value();
  }

  std::string run(const Body& body) {
    std::string out;
    exec(body, out);
    return out;
  }

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Value* find(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it)
      if (auto f = it->find(name); f != it->end()) return &f->second;
    return nullptr;
  }

  void emit(std::string& out, const std::string& s) {
    out += s;
    AERIE_CHECK(out.size() <= max_bytes_, "chat template: the rendered prompt exceeds " << max_bytes_ << " bytes");
  }

  Flow exec(const Body& body, std::string& out) {
    for (const auto& n : body) {
      const Flow f = exec(*n, out);
      if (f != Flow::kNormal) return f;
    }
    return Flow::kNormal;
  }

  Flow exec(const Node& n, std::string& out) {
    switch (n.kind) {
      case Node::kText: emit(out, n.text); return Flow::kNormal;
      case Node::kOutput: emit(out, to_str(eval(*n.expr))); return Flow::kNormal;
      case Node::kIf:
        for (const auto& [cond, body] : n.branches)
          if (!cond || truthy(eval(*cond))) return exec(body, out);
        return Flow::kNormal;
      case Node::kFor: return exec_for(n, out);
      case Node::kSet: {
        Value v = eval(*n.expr);
        if (n.attr.empty()) {
          scopes_.back()[n.targets[0]] = std::move(v);
        } else {
          Value* ns = find(n.targets[0]);
          AERIE_CHECK(ns && ns->is_object() && ns->contains(kNamespaceKey),
                      "chat template line " << n.line << ": '" << n.targets[0] << "' is not a namespace");
          (*ns)[n.attr] = std::move(v);
        }
        return Flow::kNormal;
      }
      case Node::kSetBlock: {
        std::string s;
        exec(n.body, s);
        scopes_.back()[n.targets[0]] = s;
        return Flow::kNormal;
      }
      case Node::kMacro: macros_[n.targets[0]] = &n; return Flow::kNormal;
      case Node::kBreak: return Flow::kBreak;
      case Node::kContinue: return Flow::kContinue;
    }
    return Flow::kNormal;
  }

  Flow exec_for(const Node& n, std::string& out) {
    std::vector<Value> items = iterate(eval(*n.expr));
    auto bind = [&](std::map<std::string, Value>& scope, const Value& item) {
      if (n.targets.size() == 1) {
        scope[n.targets[0]] = item;
        return;
      }
      const auto parts = iterate(item);
      AERIE_CHECK(parts.size() == n.targets.size(),
                  "chat template line " << n.line << ": cannot unpack " << parts.size() << " values into " << n.targets.size() << " names");
      for (size_t i = 0; i < parts.size(); ++i) scope[n.targets[i]] = parts[i];
    };
    if (n.filter) {  // "for x in xs if cond": the loop sees only the items that pass
      std::vector<Value> kept;
      for (const auto& item : items) {
        scopes_.emplace_back();
        bind(scopes_.back(), item);
        const bool keep = truthy(eval(*n.filter));
        scopes_.pop_back();
        if (keep) kept.push_back(item);
      }
      items.swap(kept);
    }
    // Jinja runs the else block unless some pass through the body ended normally: a loop whose
    // every pass ends in continue (or that breaks on its first) runs it too.
    bool run_else = true;
    const auto len = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < len; ++i) {
      scopes_.emplace_back();
      auto& scope = scopes_.back();
      bind(scope, items[static_cast<size_t>(i)]);
      Value loop = Value::object();
      loop["index"] = i + 1;
      loop["index0"] = i;
      loop["revindex"] = len - i;
      loop["revindex0"] = len - i - 1;
      loop["first"] = i == 0;
      loop["last"] = i == len - 1;
      loop["length"] = len;
      loop["previtem"] = i > 0 ? items[static_cast<size_t>(i - 1)] : undefined();
      loop["nextitem"] = i + 1 < len ? items[static_cast<size_t>(i + 1)] : undefined();
      scope["loop"] = std::move(loop);
      const Flow f = exec(n.body, out);
      scopes_.pop_back();
      if (f == Flow::kBreak) break;
      if (f == Flow::kNormal) run_else = false;
    }
    if (run_else) exec(n.else_body, out);
    return Flow::kNormal;
  }

  [[noreturn]] void fail(const Expr& e, const std::string& what) { AERIE_FAIL("chat template line " << e.line << ": " << what); }

  Value eval(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral: return e.value;
      case Expr::kName: {
        const Value* v = find(e.name);
        return v ? *v : undefined();
      }
      case Expr::kList: {
        Value out = Value::array();
        for (const auto& a : e.args) out.push_back(eval(*a));
        return out;
      }
      case Expr::kDict: {
        Value out = Value::object();
        for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
          const Value k = eval(*e.args[i]);
          if (!k.is_string()) fail(e, "dict keys must be strings");
          out[k.get<std::string>()] = eval(*e.args[i + 1]);
        }
        return out;
      }
      case Expr::kAttr: return member(e, eval(*e.args[0]), Value(e.name));
      case Expr::kIndex: return member(e, eval(*e.args[0]), eval(*e.args[1]));
      case Expr::kSlice: return slice(e);
      case Expr::kCall: return call(e);
      case Expr::kFilter: {
        Value v = eval(*e.args[0]);
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
        Kwargs kw;
        for (const auto& [k, x] : e.kwargs) kw.emplace_back(k, eval(*x));
        return apply_filter(e.name, v, args, kw);
      }
      case Expr::kTest: {
        Value v = eval(*e.args[0]);
        Args args;
        for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
        return apply_test(e.name, v, args) != e.negate;
      }
      case Expr::kUnary: {
        Value v = eval(*e.args[0]);
        if (e.name == "not") return !truthy(v);
        if (!v.is_number()) fail(e, "unary " + e.name + " of a " + type_name(v));
        if (e.name == "+") return v;
        return v.is_number_float() ? Value(-v.get<double>()) : Value(-v.get<int64_t>());
      }
      case Expr::kBinary: return binary(e);
      case Expr::kCond: {
        if (truthy(eval(*e.args[0]))) return eval(*e.args[1]);
        return e.args[2] ? eval(*e.args[2]) : undefined();
      }
    }
    fail(e, "unknown expression");
  }

  Value member(const Expr& e, const Value& obj, const Value& key) {
    if (obj.is_discarded()) fail(e, "cannot read '" + to_str(key) + "' of an undefined value");
    if (obj.is_object()) {
      if (key.is_string() && obj.contains(key.get<std::string>())) return obj[key.get<std::string>()];
      return undefined();
    }
    if ((obj.is_array() || obj.is_string()) && key.is_number_integer()) {
      if (obj.is_string()) {
        const auto cs = iterate(obj);
        int64_t i = key.get<int64_t>();
        if (i < 0) i += static_cast<int64_t>(cs.size());
        return i >= 0 && i < static_cast<int64_t>(cs.size()) ? cs[static_cast<size_t>(i)] : undefined();
      }
      int64_t i = key.get<int64_t>();
      if (i < 0) i += static_cast<int64_t>(obj.size());
      return i >= 0 && i < static_cast<int64_t>(obj.size()) ? obj[static_cast<size_t>(i)] : undefined();
    }
    return undefined();
  }

  Value slice(const Expr& e) {
    const Value obj = eval(*e.args[0]);
    const bool is_str = obj.is_string();
    if (!is_str && !obj.is_array()) fail(e, "cannot slice a " + type_name(obj));
    const std::vector<Value> items = iterate(obj);
    const auto n = static_cast<int64_t>(items.size());
    // A slice bound: empty when left out or none.
    auto part = [&](size_t i) -> std::optional<int64_t> {
      if (!e.args[i]) return std::nullopt;
      const Value v = eval(*e.args[i]);
      if (v.is_null()) return std::nullopt;
      if (!v.is_number_integer()) fail(e, "slice indices must be integers");
      return v.get<int64_t>();
    };
    const int64_t step = part(3).value_or(1);
    if (step == 0) fail(e, "slice step cannot be zero");
    auto clamp = [&](std::optional<int64_t> v, int64_t dflt) {
      if (!v) return dflt;
      int64_t x = *v < 0 ? *v + n : *v;
      if (step > 0) return std::clamp<int64_t>(x, 0, n);
      return std::clamp<int64_t>(x, -1, n - 1);
    };
    const int64_t start = clamp(part(1), step > 0 ? 0 : n - 1), stop = clamp(part(2), step > 0 ? n : -1);
    Value out = Value::array();
    std::string s;
    for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
      if (is_str) s += items[static_cast<size_t>(i)].get<std::string>();
      else out.push_back(items[static_cast<size_t>(i)]);
    }
    return is_str ? Value(s) : out;
  }

  Value call(const Expr& e) {
    Args args;
    for (size_t i = 1; i < e.args.size(); ++i) args.push_back(eval(*e.args[i]));
    Kwargs kw;
    for (const auto& [k, x] : e.kwargs) kw.emplace_back(k, eval(*x));
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::kAttr) {
      const Value obj = eval(*callee.args[0]);
      if (obj.is_discarded()) fail(e, "cannot call '" + callee.name + "' of an undefined value");
      return call_method(obj, callee.name, args, kw);
    }
    if (callee.kind == Expr::kName) {
      if (auto m = macros_.find(callee.name); m != macros_.end() && !find(callee.name)) return call_macro(e, *m->second, args, kw);
      Value result;
      if (!find(callee.name) && call_function(callee.name, args, kw, result)) return result;
      fail(e, "'" + callee.name + "' is not a function");
    }
    fail(e, "this expression cannot be called");
  }

  Value call_macro(const Expr& e, const Node& m, const Args& args, const Kwargs& kw) {
    if (++call_depth_ > kMaxCallDepth) fail(e, "macros call each other too deeply");
    const size_t n_params = m.targets.size() - 1;
    if (args.size() > n_params) fail(e, "macro '" + m.targets[0] + "' takes " + std::to_string(n_params) + " arguments");
    // Macros see the template's top-level names and their parameters, not the caller's loop.
    std::vector<std::map<std::string, Value>> saved(scopes_.begin() + 1, scopes_.end());
    scopes_.resize(1);
    scopes_.emplace_back();
    for (size_t i = 0; i < n_params; ++i) {
      const std::string& p = m.targets[i + 1];
      Value v = undefined();
      if (i < args.size()) v = args[i];
      else if (const Value* k = [&]() -> const Value* {
                 for (const auto& [name, x] : kw)
                   if (name == p) return &x;
                 return nullptr;
               }())
        v = *k;
      else if (m.defaults[i]) v = eval(*m.defaults[i]);
      scopes_.back()[p] = v;
    }
    std::string out;
    exec(m.body, out);
    scopes_.resize(1);
    scopes_.insert(scopes_.end(), saved.begin(), saved.end());
    --call_depth_;
    return out;
  }

  Value binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value l = eval(*e.args[0]);
      return truthy(l) ? eval(*e.args[1]) : l;
    }
    if (op == "or") {
      Value l = eval(*e.args[0]);
      return truthy(l) ? l : eval(*e.args[1]);
    }
    const Value l = eval(*e.args[0]), r = eval(*e.args[1]);
    if (op == "~") return to_str(l) + to_str(r);
    if (op == "==") return equals(l, r);
    if (op == "!=") return !equals(l, r);
    if (op == "in" || op == "not in") return apply_test("in", l, {r}) == (op == "in");
    if (op == "<") return less(l, r);
    if (op == ">") return less(r, l);
    if (op == "<=") return !less(r, l);
    if (op == ">=") return !less(l, r);
    if (op == "+") {
      if (l.is_string() && r.is_string()) return l.get<std::string>() + r.get<std::string>();
      if (l.is_array() && r.is_array()) {
        Value out = l;
        for (const auto& x : r) out.push_back(x);
        return out;
      }
    }
    if (op == "*" && ((l.is_string() && r.is_number_integer()) || (l.is_number_integer() && r.is_string()))) {
      const std::string& s = l.is_string() ? l.get_ref<const std::string&>() : r.get_ref<const std::string&>();
      const int64_t n = l.is_string() ? r.get<int64_t>() : l.get<int64_t>();
      if (n > 0 && s.size() * static_cast<size_t>(n) > max_bytes_) fail(e, "string repetition too large");
      std::string out;
      for (int64_t i = 0; i < n; ++i) out += s;
      return out;
    }
    const bool numeric = (l.is_number() || l.is_boolean()) && (r.is_number() || r.is_boolean());
    if (!numeric) fail(e, "'" + op + "' is not supported between " + type_name(l) + " and " + type_name(r));
    const bool ints = !l.is_number_float() && !r.is_number_float();
    // Booleans count as 0 and 1 (Python's arithmetic); json's get<double> refuses them.
    auto as_double = [](const Value& v) { return v.is_boolean() ? (v.get<bool>() ? 1.0 : 0.0) : v.get<double>(); };
    const double a = as_double(l), b = as_double(r);
    const int64_t ia = l.is_boolean() ? l.get<bool>() : ints ? l.get<int64_t>() : 0, ib = r.is_boolean() ? r.get<bool>() : ints ? r.get<int64_t>() : 0;
    if (op == "+") return ints ? Value(ia + ib) : Value(a + b);
    if (op == "-") return ints ? Value(ia - ib) : Value(a - b);
    if (op == "*") return ints ? Value(ia * ib) : Value(a * b);
    if (op == "/") {
      if (b == 0) fail(e, "division by zero");
      return a / b;
    }
    if (op == "//" || op == "%") {
      if (b == 0) fail(e, "division by zero");
      if (ints) {
        int64_t q = ia / ib, m = ia % ib;
        if (m != 0 && ((m < 0) != (ib < 0))) --q, m += ib;  // Python floors
        return op == "//" ? Value(q) : Value(m);
      }
      const double q = std::floor(a / b);
      return op == "//" ? Value(q) : Value(a - q * b);
    }
    if (op == "**") return ints && ib >= 0 ? Value(static_cast<int64_t>(std::pow(a, b))) : Value(std::pow(a, b));
    fail(e, "unknown operator " + op);
  }

  std::vector<std::map<std::string, Value>> scopes_;
  std::map<std::string, const Node*> macros_;
  size_t max_bytes_;
  int call_depth_ = 0;
};

}  // namespace

Template::Template(const std::string& source) : body_(std::make_unique<Body>(parse_template(lex_template(source)))) {}
Template::~Template() = default;
Template::Template(Template&&) noexcept = default;

std::string Template::render(const Value& context, size_t max_output_bytes) const {
  AERIE_CHECK(context.is_object(), "chat template: the context must be a dict");
  return Renderer(context, max_output_bytes).run(*body_);
}

}  // namespace aerie::jinja
