#include "launch/jinja/parser.hpp"

#include <set>

#include "kernels/error.hpp"

namespace aerie::jinja {

namespace {

constexpr int kMaxNesting = 200;  // expressions and blocks; a hostile template must not overflow the stack

// Parses the tokens of one tag.
class ExprParser {
 public:
  ExprParser(const std::vector<Token>& t, int line) : t_(t), line_(line) {}

  const Token& peek(size_t ahead = 0) const { return t_[std::min(pos_ + ahead, t_.size() - 1)]; }
  bool at_end() const { return peek().kind == Token::kEnd; }
  bool is_op(const char* op, size_t ahead = 0) const { return peek(ahead).kind == Token::kOp && peek(ahead).text == op; }
  bool is_name(const char* n, size_t ahead = 0) const { return peek(ahead).kind == Token::kName && peek(ahead).text == n; }
  const Token& next() {
    const Token& t = peek();
    if (pos_ < t_.size() - 1) ++pos_;
    return t;
  }
  [[noreturn]] void fail(const std::string& what) const {
    AERIE_FAIL("chat template line " << line_ << ": " << what << (at_end() ? " at the end of the tag" : " near '" + peek().text + "'"));
  }
  void expect_op(const char* op) {
    if (!is_op(op)) fail(std::string("expected '") + op + "'");
    next();
  }
  std::string expect_name() {
    if (peek().kind != Token::kName) fail("expected a name");
    return next().text;
  }
  void expect_end() {
    if (!at_end()) fail("unexpected token");
  }

  ExprPtr expression() {
    Depth d(*this);
    ExprPtr value = or_expr();
    if (is_name("if")) {
      next();
      auto e = make(Expr::kCond);
      e->args.push_back(or_expr());
      e->args.push_back(std::move(value));
      if (is_name("else")) {
        next();
        e->args.push_back(expression());
      } else {
        e->args.push_back(nullptr);
      }
      return e;
    }
    return value;
  }
  // Without a conditional: for-loop iterables, which may be followed by "if".
  ExprPtr or_expr() {
    ExprPtr l = and_expr();
    while (is_name("or")) {
      next();
      l = binary("or", std::move(l), and_expr());
    }
    return l;
  }

 private:
  struct Depth {
    ExprParser& p;
    explicit Depth(ExprParser& q) : p(q) {
      if (++p.depth_ > kMaxNesting) p.fail("expression nests too deeply");
    }
    ~Depth() { --p.depth_; }
  };
  ExprPtr make(Expr::Kind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = line_;
    return e;
  }
  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r) {
    auto e = make(Expr::kBinary);
    e->name = op;
    e->args.push_back(std::move(l));
    e->args.push_back(std::move(r));
    return e;
  }
  ExprPtr and_expr() {
    ExprPtr l = not_expr();
    while (is_name("and")) {
      next();
      l = binary("and", std::move(l), not_expr());
    }
    return l;
  }
  ExprPtr not_expr() {
    if (is_name("not")) {
      Depth d(*this);
      next();
      auto e = make(Expr::kUnary);
      e->name = "not";
      e->args.push_back(not_expr());
      return e;
    }
    return compare();
  }
  ExprPtr compare() {
    ExprPtr l = concat();
    for (;;) {
      if (peek().kind == Token::kOp && (peek().text == "==" || peek().text == "!=" || peek().text == "<" || peek().text == ">" ||
                                        peek().text == "<=" || peek().text == ">=")) {
        const std::string op = next().text;
        l = binary(op, std::move(l), concat());
      } else if (is_name("in")) {
        next();
        l = binary("in", std::move(l), concat());
      } else if (is_name("not") && is_name("in", 1)) {
        next(), next();
        l = binary("not in", std::move(l), concat());
      } else {
        return l;
      }
    }
  }
  ExprPtr concat() {
    ExprPtr l = additive();
    while (is_op("~")) {
      next();
      l = binary("~", std::move(l), additive());
    }
    return l;
  }
  ExprPtr additive() {
    ExprPtr l = multiplicative();
    while (is_op("+") || is_op("-")) {
      const std::string op = next().text;
      l = binary(op, std::move(l), multiplicative());
    }
    return l;
  }
  ExprPtr multiplicative() {
    ExprPtr l = unary();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      const std::string op = next().text;
      l = binary(op, std::move(l), unary());
    }
    return l;
  }
  ExprPtr unary() {
    if (is_op("-") || is_op("+")) {
      Depth d(*this);
      auto e = make(Expr::kUnary);
      e->name = next().text;
      e->args.push_back(unary());
      return e;
    }
    ExprPtr base = power();
    return filters_and_tests(std::move(base));
  }
  ExprPtr power() {
    ExprPtr l = postfix(primary());
    if (is_op("**")) {
      next();
      return binary("**", std::move(l), unary());
    }
    return l;
  }
  ExprPtr filters_and_tests(ExprPtr e) {
    for (;;) {
      if (is_op("|")) {
        next();
        auto f = make(Expr::kFilter);
        f->name = expect_name();
        f->args.push_back(std::move(e));
        if (is_op("(")) call_args(*f);
        e = postfix(std::move(f));
      } else if (is_name("is")) {
        next();
        auto t = make(Expr::kTest);
        if (is_name("not")) {
          next();
          t->negate = true;
        }
        t->name = expect_name();
        t->args.push_back(std::move(e));
        if (is_op("(")) {
          call_args(*t);
        } else if (!at_end() && (peek().kind == Token::kString || peek().kind == Token::kInt || peek().kind == Token::kFloat ||
                                 (peek().kind == Token::kName && !is_name("and") && !is_name("or") && !is_name("else") &&
                                  !is_name("if") && !is_name("in") && !is_name("is") && !is_name("not")))) {
          t->args.push_back(postfix(primary()));  // "is divisibleby 3", "is sameas none"
        }
        e = std::move(t);
      } else {
        return e;
      }
    }
  }
  void call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (peek().kind == Token::kName && is_op("=", 1)) {
        std::string k = next().text;
        next();
        e.kwargs.emplace_back(std::move(k), expression());
      } else {
        e.args.push_back(expression());
      }
      if (!is_op(",")) break;
      next();
    }
    expect_op(")");
  }
  ExprPtr postfix(ExprPtr e) {
    for (;;) {
      if (is_op(".")) {
        next();
        auto a = make(Expr::kAttr);
        if (peek().kind == Token::kInt) a->name = next().text;
        else a->name = expect_name();
        a->args.push_back(std::move(e));
        e = std::move(a);
      } else if (is_op("[")) {
        next();
        ExprPtr parts[3];
        bool slice = false;
        for (int k = 0; k < 3; ++k) {
          if (!is_op(":") && !is_op("]")) parts[k] = expression();
          if (k < 2 && is_op(":")) {
            next();
            slice = true;
          } else {
            break;
          }
        }
        expect_op("]");
        auto x = make(slice ? Expr::kSlice : Expr::kIndex);
        x->args.push_back(std::move(e));
        if (!slice && !parts[0]) fail("empty subscript");
        x->args.push_back(std::move(parts[0]));
        if (slice) {
          x->args.push_back(std::move(parts[1]));
          x->args.push_back(std::move(parts[2]));
        }
        e = std::move(x);
      } else if (is_op("(")) {
        auto c = make(Expr::kCall);
        c->args.push_back(std::move(e));
        call_args(*c);
        e = std::move(c);
      } else {
        return e;
      }
    }
  }
  ExprPtr primary() {
    Depth d(*this);
    const Token& t = peek();
    if (t.kind == Token::kString) {
      auto e = make(Expr::kLiteral);
      std::string s;
      while (peek().kind == Token::kString) s += next().text;  // adjacent literals join, as in Python
      e->value = s;
      return e;
    }
    if (t.kind == Token::kInt || t.kind == Token::kFloat) {
      auto e = make(Expr::kLiteral);
      e->value = next().value;
      return e;
    }
    if (t.kind == Token::kName) {
      const std::string n = next().text;
      auto e = make(Expr::kLiteral);
      if (n == "true" || n == "True") e->value = true;
      else if (n == "false" || n == "False") e->value = false;
      else if (n == "none" || n == "None") e->value = nullptr;
      else {
        e->kind = Expr::kName;
        e->name = n;
      }
      return e;
    }
    if (is_op("(")) {
      next();
      ExprPtr first = expression();
      if (is_op(",")) {  // a tuple: kept as a list
        auto l = make(Expr::kList);
        l->args.push_back(std::move(first));
        while (is_op(",")) {
          next();
          if (is_op(")")) break;
          l->args.push_back(expression());
        }
        expect_op(")");
        return l;
      }
      expect_op(")");
      return first;
    }
    if (is_op("[")) {
      next();
      auto l = make(Expr::kList);
      while (!is_op("]")) {
        l->args.push_back(expression());
        if (!is_op(",")) break;
        next();
      }
      expect_op("]");
      return l;
    }
    if (is_op("{")) {
      next();
      auto m = make(Expr::kDict);
      while (!is_op("}")) {
        m->args.push_back(expression());
        expect_op(":");
        m->args.push_back(expression());
        if (!is_op(",")) break;
        next();
      }
      expect_op("}");
      return m;
    }
    fail("expected a value");
  }

  const std::vector<Token>& t_;
  size_t pos_ = 0;
  int line_;
  int depth_ = 0;
};

class TemplateParser {
 public:
  explicit TemplateParser(const std::vector<Segment>& s) : s_(s) {}

  Body parse() {
    Body b = body({});
    if (pos_ < s_.size()) AERIE_FAIL("chat template line " << s_[pos_].line << ": unexpected '" << keyword(s_[pos_]) << "'");
    return b;
  }

 private:
  static std::string keyword(const Segment& s) { return s.tokens.empty() ? "" : s.tokens[0].text; }

  // Statements until one of `ends` (not consumed) or the end of the template.
  Body body(const std::set<std::string>& ends) {
    AERIE_CHECK(++depth_ <= kMaxNesting, "chat template: blocks nest too deeply");
    Body out;
    while (pos_ < s_.size()) {
      const Segment& s = s_[pos_];
      if (s.kind == Segment::kText) {
        auto n = std::make_unique<Node>();
        n->kind = Node::kText;
        n->text = s.text;
        out.push_back(std::move(n));
        ++pos_;
        continue;
      }
      if (s.kind == Segment::kOutput) {
        ExprParser p(s.tokens, s.line);
        auto n = std::make_unique<Node>();
        n->kind = Node::kOutput;
        n->line = s.line;
        n->expr = p.expression();
        p.expect_end();
        out.push_back(std::move(n));
        ++pos_;
        continue;
      }
      const std::string kw = keyword(s);
      if (ends.count(kw)) break;
      out.push_back(statement());
    }
    if (pos_ >= s_.size() && !ends.empty()) {
      std::string want;
      for (const auto& e : ends) want += (want.empty() ? "" : " or ") + e;
      AERIE_FAIL("chat template: missing '" << want << "' at the end");
    }
    --depth_;
    return out;
  }

  // Consumes a closing tag with nothing after its keyword.
  void close(const char* kw) {
    const Segment& s = s_[pos_];
    ExprParser p(s.tokens, s.line);
    if (!p.is_name(kw)) p.fail(std::string("expected '") + kw + "'");
    p.next();
    p.expect_end();
    ++pos_;
  }

  NodePtr statement() {
    const Segment& s = s_[pos_];
    ExprParser p(s.tokens, s.line);
    auto n = std::make_unique<Node>();
    n->line = s.line;
    const std::string kw = p.expect_name();
    if (kw == "if") {
      n->kind = Node::kIf;
      ExprPtr cond = p.expression();
      p.expect_end();
      ++pos_;
      for (;;) {
        Body b = body({"elif", "else", "endif"});
        n->branches.emplace_back(std::move(cond), std::move(b));
        const Segment& t = s_[pos_];
        ExprParser q(t.tokens, t.line);
        const std::string k = q.expect_name();
        if (k == "elif") {
          cond = q.expression();
          q.expect_end();
          ++pos_;
          continue;
        }
        if (k == "else") {
          q.expect_end();
          ++pos_;
          n->branches.emplace_back(nullptr, body({"endif"}));
        }
        close("endif");
        return n;
      }
    }
    if (kw == "for") {
      n->kind = Node::kFor;
      n->targets.push_back(p.expect_name());
      while (p.is_op(",")) {
        p.next();
        n->targets.push_back(p.expect_name());
      }
      if (!p.is_name("in")) p.fail("expected 'in'");
      p.next();
      n->expr = p.or_expr();
      if (p.is_name("if")) {
        p.next();
        n->filter = p.or_expr();
      }
      if (p.is_name("recursive")) p.fail("recursive loops are not supported");
      p.expect_end();
      ++pos_;
      n->body = body({"else", "endfor"});
      if (keyword(s_[pos_]) == "else") {
        close("else");
        n->else_body = body({"endfor"});
      }
      close("endfor");
      return n;
    }
    if (kw == "set") {
      std::string target = p.expect_name();
      if (p.is_op(".")) {
        p.next();
        n->attr = p.expect_name();
      }
      n->targets.push_back(target);
      if (p.at_end()) {  // {% set x %}...{% endset %}
        if (!n->attr.empty()) p.fail("a block set assigns a name");
        n->kind = Node::kSetBlock;
        ++pos_;
        n->body = body({"endset"});
        close("endset");
        return n;
      }
      n->kind = Node::kSet;
      p.expect_op("=");
      n->expr = p.expression();
      p.expect_end();
      ++pos_;
      return n;
    }
    if (kw == "break" || kw == "continue") {
      n->kind = kw == "break" ? Node::kBreak : Node::kContinue;
      p.expect_end();
      ++pos_;
      return n;
    }
    if (kw == "macro") {
      n->kind = Node::kMacro;
      n->targets.push_back(p.expect_name());
      p.expect_op("(");
      while (!p.is_op(")")) {
        n->targets.push_back(p.expect_name());
        if (p.is_op("=")) {
          p.next();
          n->defaults.push_back(p.expression());
        } else {
          n->defaults.push_back(nullptr);
        }
        if (!p.is_op(",")) break;
        p.next();
      }
      p.expect_op(")");
      p.expect_end();
      ++pos_;
      n->body = body({"endmacro"});
      close("endmacro");
      return n;
    }
    if (kw == "generation") {  // transformers' assistant-mask marker: renders its body
      p.expect_end();
      ++pos_;
      n->kind = Node::kIf;
      auto yes = std::make_unique<Expr>();
      yes->value = true;
      n->branches.emplace_back(std::move(yes), body({"endgeneration"}));
      close("endgeneration");
      return n;
    }
    AERIE_FAIL("chat template line " << s.line << ": statement '" << kw << "' is not supported");
  }

  const std::vector<Segment>& s_;
  size_t pos_ = 0;
  int depth_ = 0;
};

}  // namespace

Body parse_template(const std::vector<Segment>& segments) { return TemplateParser(segments).parse(); }

}  // namespace aerie::jinja
