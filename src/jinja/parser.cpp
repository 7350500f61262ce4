// Jinja statement and expression parser (see parser.h).
#include "jinja/parser.h"

#include <cerrno>
#include <cstdlib>

#include "jinja/lexer.h"

namespace loom::jinja {
namespace {

// Nesting deeper than this is refused so that a hostile template cannot overflow the stack.
constexpr int kMaxNesting = 200;
// Operator and filter chains build left-nested trees; bound them for the same reason.
constexpr int kMaxChain = 1000;

bool mentions_loop(const Expr* e);
bool mentions_loop(const Body& body);

bool mentions_loop(const Expr* e) {
  if (!e) return false;
  if (e->kind == ExprKind::kName && e->name == "loop") return true;
  if (mentions_loop(e->a.get()) || mentions_loop(e->b.get()) || mentions_loop(e->c.get()))
    return true;
  for (const ExprPtr& x : e->args)
    if (mentions_loop(x.get())) return true;
  for (const auto& kv : e->kwargs)
    if (mentions_loop(kv.second.get())) return true;
  return false;
}

// Conservative: any `loop` anywhere inside, nested loops and macros included.
bool mentions_loop(const Body& body) {
  for (const StmtPtr& s : body) {
    if (mentions_loop(s->expr.get()) || mentions_loop(s->cond.get()) ||
        mentions_loop(s->target.get()) || mentions_loop(s->filter.get()))
      return true;
    for (const ExprPtr& c : s->conds)
      if (mentions_loop(c.get())) return true;
    for (const Body& b : s->bodies)
      if (mentions_loop(b)) return true;
    for (const Param& p : s->params)
      if (mentions_loop(p.default_value.get())) return true;
    for (const auto& kv : s->assigns)
      if (mentions_loop(kv.second.get())) return true;
    if (mentions_loop(s->body) || mentions_loop(s->else_body)) return true;
  }
  return false;
}

class Parser {
 public:
  explicit Parser(std::vector<Token> toks) : toks_(std::move(toks)) {}

  Result<std::shared_ptr<const Program>> run() {
    auto prog = std::make_shared<Program>();
    std::string which;
    LOOM_ASSIGN_OR_RETURN(prog->body, parse_body({}, &which));
    return std::shared_ptr<const Program>(std::move(prog));
  }

 private:
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(size_t k = 1) const { return toks_[std::min(i_ + k, toks_.size() - 1)]; }
  void next() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool at_op(const char* op) const { return cur().type == TokenType::kOp && cur().value == op; }
  bool at_name(const char* n) const { return cur().type == TokenType::kName && cur().value == n; }
  bool skip_op(const char* op) {
    if (!at_op(op)) return false;
    next();
    return true;
  }
  bool skip_name(const char* n) {
    if (!at_name(n)) return false;
    next();
    return true;
  }

  std::string describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kData:
        return "text";
      case TokenType::kVarBegin:
        return "'{{'";
      case TokenType::kVarEnd:
        return "'}}'";
      case TokenType::kBlockBegin:
        return "'{%'";
      case TokenType::kBlockEnd:
        return "'%}'";
      case TokenType::kEof:
        return "end of template";
      case TokenType::kString:
        return "string";
      default:
        return "'" + t.value + "'";
    }
  }

  Status fail(const std::string& msg) const {
    return invalid_argument("chat template syntax error at line " + std::to_string(cur().line) +
                            ": " + msg);
  }
  Status expect_op(const char* op) {
    if (skip_op(op)) return Status::ok();
    return fail(std::string("expected '") + op + "', got " + describe(cur()));
  }
  Status expect_block_end() {
    if (cur().type == TokenType::kBlockEnd) {
      next();
      return Status::ok();
    }
    return fail("expected end of statement '%}', got " + describe(cur()));
  }
  Result<std::string> expect_name() {
    if (cur().type != TokenType::kName) return fail("expected a name, got " + describe(cur()));
    std::string n = cur().value;
    next();
    return n;
  }

  Status chain_step(int& n) {
    if (++n > kMaxChain) return fail("expression too long (more than 1000 chained operators)");
    return Status::ok();
  }

  ExprPtr make(ExprKind k) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->line = cur().line;
    return e;
  }
  StmtPtr make_stmt(StmtKind k, int line) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->line = line;
    return s;
  }

  // Parses statements until one of `ends` opens a block tag; leaves the tokens after the
  // tag's name for the caller and stores the tag name in *which.
  Result<Body> parse_body(const std::vector<std::string>& ends, std::string* which) {
    Body body;
    if (++depth_ > kMaxNesting) return fail("blocks nested too deeply");
    while (true) {
      const Token& t = cur();
      if (t.type == TokenType::kEof) {
        if (ends.empty()) break;
        std::string want;
        for (const auto& e : ends) want += (want.empty() ? "'" : " or '") + e + "'";
        return fail("unexpected end of template, expected " + want);
      }
      if (t.type == TokenType::kData) {
        auto s = make_stmt(StmtKind::kText, t.line);
        s->text = t.value;
        body.push_back(std::move(s));
        next();
      } else if (t.type == TokenType::kVarBegin) {
        int line = t.line;
        next();
        auto s = make_stmt(StmtKind::kEmit, line);
        LOOM_ASSIGN_OR_RETURN(s->expr, parse_tuple_expr());
        if (cur().type != TokenType::kVarEnd) return fail("expected '}}', got " + describe(cur()));
        next();
        body.push_back(std::move(s));
      } else if (t.type == TokenType::kBlockBegin) {
        const Token& name = peek();
        if (name.type != TokenType::kName) return fail("expected a statement name after '{%'");
        for (const auto& e : ends) {
          if (name.value == e) {
            *which = e;
            next();
            next();
            --depth_;
            return body;
          }
        }
        next();
        LOOM_ASSIGN_OR_RETURN(StmtPtr s, parse_statement());
        body.push_back(std::move(s));
      } else {
        return fail("unexpected " + describe(t));
      }
    }
    --depth_;
    return body;
  }

  Result<StmtPtr> parse_statement() {
    int line = cur().line;
    std::string tag = cur().value;
    next();
    std::string which;
    if (tag == "if") {
      auto s = make_stmt(StmtKind::kIf, line);
      while (true) {
        LOOM_ASSIGN_OR_RETURN(ExprPtr c, parse_expression());
        LOOM_RETURN_IF_ERROR(expect_block_end());
        LOOM_ASSIGN_OR_RETURN(Body b, parse_body({"elif", "else", "endif"}, &which));
        s->conds.push_back(std::move(c));
        s->bodies.push_back(std::move(b));
        if (which != "elif") break;
      }
      if (which == "else") {
        LOOM_RETURN_IF_ERROR(expect_block_end());
        LOOM_ASSIGN_OR_RETURN(s->else_body, parse_body({"endif"}, &which));
      }
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "for") {
      auto s = make_stmt(StmtKind::kFor, line);
      bool paren = skip_op("(");
      do {
        LOOM_ASSIGN_OR_RETURN(std::string n, expect_name());
        s->names.push_back(std::move(n));
        if (!at_op(",")) break;
        next();
        s->unpack = true;
      } while (cur().type == TokenType::kName && !at_name("in"));
      if (paren) {
        s->unpack = true;
        LOOM_RETURN_IF_ERROR(expect_op(")"));
      }
      if (!skip_name("in")) return fail("expected 'in' in for loop, got " + describe(cur()));
      LOOM_ASSIGN_OR_RETURN(s->expr, parse_expression(false));
      if (skip_name("if")) {
        LOOM_ASSIGN_OR_RETURN(s->cond, parse_expression());
      }
      if (at_name("recursive")) return fail("recursive for loops are not supported");
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"else", "endfor"}, &which));
      s->uses_loop = mentions_loop(s->body);
      if (which == "else") {
        LOOM_RETURN_IF_ERROR(expect_block_end());
        LOOM_ASSIGN_OR_RETURN(s->else_body, parse_body({"endfor"}, &which));
      }
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "set") {
      auto s = make_stmt(StmtKind::kSet, line);
      LOOM_ASSIGN_OR_RETURN(std::string n, expect_name());
      auto target = make(ExprKind::kName);
      target->name = n;
      if (at_op(".")) {
        next();
        auto attr = make(ExprKind::kGetAttr);
        LOOM_ASSIGN_OR_RETURN(attr->name, expect_name());
        attr->a = std::move(target);
        target = std::move(attr);
      } else if (at_op(",")) {
        auto tuple = make(ExprKind::kTuple);
        tuple->args.push_back(std::move(target));
        while (skip_op(",")) {
          if (cur().type != TokenType::kName) break;
          auto e = make(ExprKind::kName);
          LOOM_ASSIGN_OR_RETURN(e->name, expect_name());
          tuple->args.push_back(std::move(e));
        }
        target = std::move(tuple);
      }
      s->target = std::move(target);
      if (skip_op("=")) {
        LOOM_ASSIGN_OR_RETURN(s->expr, parse_tuple_expr());
        LOOM_RETURN_IF_ERROR(expect_block_end());
        return s;
      }
      if (s->target->kind != ExprKind::kName) return fail("expected '=' in set statement");
      if (at_op("|")) {
        LOOM_ASSIGN_OR_RETURN(s->filter, parse_filter_chain(nullptr));
      }
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"endset"}, &which));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "macro") {
      auto s = make_stmt(StmtKind::kMacro, line);
      LOOM_ASSIGN_OR_RETURN(s->text, expect_name());
      LOOM_RETURN_IF_ERROR(parse_params(s->params));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"endmacro"}, &which));
      if (cur().type == TokenType::kName) next();  // {% endmacro name %}
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "call") {
      auto s = make_stmt(StmtKind::kCallBlock, line);
      if (at_op("(")) LOOM_RETURN_IF_ERROR(parse_params(s->params));
      LOOM_ASSIGN_OR_RETURN(s->expr, parse_expression());
      if (s->expr->kind != ExprKind::kCall) return fail("expected a call in {% call %}");
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"endcall"}, &which));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "filter") {
      auto s = make_stmt(StmtKind::kFilterBlock, line);
      LOOM_ASSIGN_OR_RETURN(s->filter, parse_filter_chain(nullptr, /*leading_pipe=*/false));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"endfilter"}, &which));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "break" || tag == "continue") {  // outside a loop: a render error
      auto s = make_stmt(tag == "break" ? StmtKind::kBreak : StmtKind::kContinue, line);
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "with") {
      auto s = make_stmt(StmtKind::kWith, line);
      while (cur().type == TokenType::kName) {
        LOOM_ASSIGN_OR_RETURN(std::string n, expect_name());
        LOOM_RETURN_IF_ERROR(expect_op("="));
        LOOM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        s->assigns.emplace_back(std::move(n), std::move(v));
        if (!skip_op(",")) break;
      }
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"endwith"}, &which));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    if (tag == "generation") {  // Hugging Face's assistant-mask marker: renders its body
      auto s = make_stmt(StmtKind::kBody, line);
      LOOM_RETURN_IF_ERROR(expect_block_end());
      LOOM_ASSIGN_OR_RETURN(s->body, parse_body({"endgeneration"}, &which));
      LOOM_RETURN_IF_ERROR(expect_block_end());
      return s;
    }
    i_ -= 1;
    return fail("unknown or unsupported tag '" + tag + "'");
  }

  Status parse_params(std::vector<Param>& params) {
    LOOM_RETURN_IF_ERROR(expect_op("("));
    while (!at_op(")")) {
      Param p;
      LOOM_ASSIGN_OR_RETURN(p.name, expect_name());
      if (skip_op("=")) {
        LOOM_ASSIGN_OR_RETURN(p.default_value, parse_expression());
      }
      params.push_back(std::move(p));
      if (!skip_op(",")) break;
    }
    return expect_op(")");
  }

  // "| f(args) | g" applied to `operand` (null for {% filter %} blocks and block sets).
  Result<ExprPtr> parse_filter_chain(ExprPtr operand, bool leading_pipe = true) {
    bool first = true;
    int n = 0;
    while ((first && !leading_pipe) || skip_op("|")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      first = false;
      LOOM_ASSIGN_OR_RETURN(operand, parse_filter(std::move(operand)));
    }
    return operand;
  }

  Result<ExprPtr> parse_filter(ExprPtr operand) {
    auto f = make(ExprKind::kFilter);
    LOOM_ASSIGN_OR_RETURN(f->name, expect_name());
    while (at_op(".")) {
      next();
      LOOM_ASSIGN_OR_RETURN(std::string part, expect_name());
      f->name += "." + part;
    }
    f->a = std::move(operand);
    if (at_op("(")) LOOM_RETURN_IF_ERROR(parse_call_args(*f));
    return f;
  }

  Status parse_call_args(Expr& call) {
    LOOM_RETURN_IF_ERROR(expect_op("("));
    while (!at_op(")")) {
      if (at_op("*") || at_op("**")) return fail("*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().value == "=") {
        std::string n = cur().value;
        next();
        next();
        LOOM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        call.kwargs.emplace_back(std::move(n), std::move(v));
      } else {
        if (!call.kwargs.empty()) return fail("positional argument after keyword argument");
        LOOM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        call.args.push_back(std::move(v));
      }
      if (!skip_op(",")) break;
    }
    return expect_op(")");
  }

  // expression (',' expression)* — a bare comma list is a tuple.
  Result<ExprPtr> parse_tuple_expr() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
    if (!at_op(",")) return e;
    auto t = make(ExprKind::kTuple);
    t->args.push_back(std::move(e));
    while (skip_op(",")) {
      if (cur().type == TokenType::kVarEnd || cur().type == TokenType::kBlockEnd) break;
      LOOM_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
      t->args.push_back(std::move(item));
    }
    return t;
  }

  Result<ExprPtr> parse_expression(bool with_cond = true) {
    if (++depth_ > kMaxNesting) return fail("expression nested too deeply");
    Result<ExprPtr> r = with_cond ? parse_condexpr() : parse_or();
    --depth_;
    return r;
  }

  Result<ExprPtr> parse_condexpr() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr e1, parse_or());
    while (skip_name("if")) {
      auto c = make(ExprKind::kCond);
      LOOM_ASSIGN_OR_RETURN(c->a, parse_or());
      c->b = std::move(e1);
      if (skip_name("else")) {
        LOOM_ASSIGN_OR_RETURN(c->c, parse_condexpr());
      }
      e1 = std::move(c);
    }
    return e1;
  }

  Result<ExprPtr> binary(ExprKind k, const std::string& op, ExprPtr a, ExprPtr b) {
    auto e = make(k);
    e->name = op;
    e->a = std::move(a);
    e->b = std::move(b);
    return e;
  }

  Result<ExprPtr> parse_or() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_and());
    int n = 0;
    while (skip_name("or")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_and());
      LOOM_ASSIGN_OR_RETURN(a, binary(ExprKind::kOr, "or", std::move(a), std::move(b)));
    }
    return a;
  }

  Result<ExprPtr> parse_and() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_not());
    int n = 0;
    while (skip_name("and")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_not());
      LOOM_ASSIGN_OR_RETURN(a, binary(ExprKind::kAnd, "and", std::move(a), std::move(b)));
    }
    return a;
  }

  Result<ExprPtr> parse_not() {
    if (at_name("not")) {
      auto e = make(ExprKind::kNot);
      next();
      if (++depth_ > kMaxNesting) return fail("expression nested too deeply");
      LOOM_ASSIGN_OR_RETURN(e->a, parse_not());
      --depth_;
      return e;
    }
    return parse_compare();
  }

  Result<ExprPtr> parse_compare() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_math1());
    std::vector<std::pair<std::string, ExprPtr>> ops;
    int n = 0;
    while (true) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      std::string op;
      if (cur().type == TokenType::kOp &&
          (cur().value == "==" || cur().value == "!=" || cur().value == "<" ||
           cur().value == "<=" || cur().value == ">" || cur().value == ">=")) {
        op = cur().value;
        next();
      } else if (at_name("in")) {
        op = "in";
        next();
      } else if (at_name("not") && peek().type == TokenType::kName && peek().value == "in") {
        op = "not in";
        next();
        next();
      } else {
        break;
      }
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_math1());
      ops.emplace_back(std::move(op), std::move(b));
    }
    if (ops.empty()) return a;
    if (ops.size() == 1)
      return binary(ExprKind::kBinary, ops[0].first, std::move(a), std::move(ops[0].second));
    // Python chains comparisons: a < b < c means a < b and b < c.
    auto e = make(ExprKind::kCompare);
    e->a = std::move(a);
    e->kwargs = std::move(ops);
    return e;
  }

  Result<ExprPtr> parse_math1() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_concat());
    int n = 0;
    while (at_op("+") || at_op("-")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      std::string op = cur().value;
      next();
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_concat());
      LOOM_ASSIGN_OR_RETURN(a, binary(ExprKind::kBinary, op, std::move(a), std::move(b)));
    }
    return a;
  }

  Result<ExprPtr> parse_concat() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_math2());
    int n = 0;
    while (skip_op("~")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_math2());
      LOOM_ASSIGN_OR_RETURN(a, binary(ExprKind::kBinary, "~", std::move(a), std::move(b)));
    }
    return a;
  }

  Result<ExprPtr> parse_math2() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_pow());
    int n = 0;
    while (at_op("*") || at_op("/") || at_op("//") || at_op("%")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      std::string op = cur().value;
      next();
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_pow());
      LOOM_ASSIGN_OR_RETURN(a, binary(ExprKind::kBinary, op, std::move(a), std::move(b)));
    }
    return a;
  }

  Result<ExprPtr> parse_pow() {
    LOOM_ASSIGN_OR_RETURN(ExprPtr a, parse_unary());
    int n = 0;
    while (skip_op("**")) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      LOOM_ASSIGN_OR_RETURN(ExprPtr b, parse_unary());
      LOOM_ASSIGN_OR_RETURN(a, binary(ExprKind::kBinary, "**", std::move(a), std::move(b)));
    }
    return a;
  }

  Result<ExprPtr> parse_unary(bool with_filter = true) {
    if (++depth_ > kMaxNesting) return fail("expression nested too deeply");
    ExprPtr node;
    if (at_op("-") || at_op("+")) {
      node = make(at_op("-") ? ExprKind::kNeg : ExprKind::kPos);
      next();
      LOOM_ASSIGN_OR_RETURN(node->a, parse_unary(false));
    } else {
      LOOM_ASSIGN_OR_RETURN(node, parse_primary());
    }
    LOOM_ASSIGN_OR_RETURN(node, parse_postfix(std::move(node)));
    if (with_filter) {
      LOOM_ASSIGN_OR_RETURN(node, parse_filter_expr(std::move(node)));
    }
    --depth_;
    return node;
  }

  Result<ExprPtr> parse_primary() {
    const Token& t = cur();
    auto lit = [&](Value v) {
      auto e = make(ExprKind::kLiteral);
      e->literal = std::move(v);
      return e;
    };
    if (t.type == TokenType::kName) {
      std::string n = t.value;
      next();
      if (n == "true" || n == "True") return lit(Value(true));
      if (n == "false" || n == "False") return lit(Value(false));
      if (n == "none" || n == "None") return lit(Value::none());
      auto e = make(ExprKind::kName);
      e->name = n;
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string s;
      while (cur().type == TokenType::kString) {  // adjacent literals concatenate
        s += cur().value;
        next();
      }
      return lit(Value(std::move(s)));
    }
    if (t.type == TokenType::kInt) {
      errno = 0;
      char* end = nullptr;
      long long v = std::strtoll(t.value.c_str(), &end, 10);
      if (errno == ERANGE) return fail("integer literal too large: " + t.value);
      next();
      return lit(Value(static_cast<int64_t>(v)));
    }
    if (t.type == TokenType::kFloat) {
      double v = std::strtod(t.value.c_str(), nullptr);
      next();
      return lit(Value(v));
    }
    if (skip_op("(")) {
      if (skip_op(")")) return make(ExprKind::kTuple);
      LOOM_ASSIGN_OR_RETURN(ExprPtr e, parse_expression());
      if (at_op(",")) {
        auto tup = make(ExprKind::kTuple);
        tup->args.push_back(std::move(e));
        while (skip_op(",")) {
          if (at_op(")")) break;
          LOOM_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
          tup->args.push_back(std::move(item));
        }
        e = std::move(tup);
      }
      LOOM_RETURN_IF_ERROR(expect_op(")"));
      return e;
    }
    if (skip_op("[")) {
      auto e = make(ExprKind::kList);
      while (!at_op("]")) {
        LOOM_ASSIGN_OR_RETURN(ExprPtr item, parse_expression());
        e->args.push_back(std::move(item));
        if (!skip_op(",")) break;
      }
      LOOM_RETURN_IF_ERROR(expect_op("]"));
      return e;
    }
    if (skip_op("{")) {
      auto e = make(ExprKind::kDict);
      while (!at_op("}")) {
        LOOM_ASSIGN_OR_RETURN(ExprPtr k, parse_expression());
        LOOM_RETURN_IF_ERROR(expect_op(":"));
        LOOM_ASSIGN_OR_RETURN(ExprPtr v, parse_expression());
        e->args.push_back(std::move(k));
        e->args.push_back(std::move(v));
        if (!skip_op(",")) break;
      }
      LOOM_RETURN_IF_ERROR(expect_op("}"));
      return e;
    }
    return fail("unexpected " + describe(t));
  }

  Result<ExprPtr> parse_postfix(ExprPtr node) {
    int n = 0;
    while (true) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      if (at_op(".")) {
        next();
        if (cur().type == TokenType::kInt) {
          auto e = make(ExprKind::kGetItem);
          auto idx = make(ExprKind::kLiteral);
          idx->literal =
              Value(static_cast<int64_t>(std::strtoll(cur().value.c_str(), nullptr, 10)));
          next();
          e->a = std::move(node);
          e->b = std::move(idx);
          node = std::move(e);
          continue;
        }
        auto e = make(ExprKind::kGetAttr);
        LOOM_ASSIGN_OR_RETURN(e->name, expect_name());
        e->a = std::move(node);
        node = std::move(e);
      } else if (at_op("[")) {
        next();
        LOOM_ASSIGN_OR_RETURN(node, parse_subscript(std::move(node)));
      } else if (at_op("(")) {
        auto e = make(ExprKind::kCall);
        e->a = std::move(node);
        LOOM_RETURN_IF_ERROR(parse_call_args(*e));
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  Result<ExprPtr> parse_subscript(ExprPtr node) {
    ExprPtr start, stop, step;
    if (!at_op(":")) {
      LOOM_ASSIGN_OR_RETURN(start, parse_expression());
      if (!at_op(":")) {
        LOOM_RETURN_IF_ERROR(expect_op("]"));
        auto e = make(ExprKind::kGetItem);
        e->a = std::move(node);
        e->b = std::move(start);
        return e;
      }
    }
    next();  // ':'
    if (!at_op("]") && !at_op(":")) {
      LOOM_ASSIGN_OR_RETURN(stop, parse_expression());
    }
    if (skip_op(":")) {
      if (!at_op("]")) {
        LOOM_ASSIGN_OR_RETURN(step, parse_expression());
      }
    }
    LOOM_RETURN_IF_ERROR(expect_op("]"));
    auto e = make(ExprKind::kSlice);
    e->a = std::move(node);
    e->b = std::move(start);
    e->c = std::move(stop);
    if (step) e->args.push_back(std::move(step));
    return e;
  }

  Result<ExprPtr> parse_filter_expr(ExprPtr node) {
    int n = 0;
    while (true) {
      LOOM_RETURN_IF_ERROR(chain_step(n));
      if (skip_op("|")) {
        LOOM_ASSIGN_OR_RETURN(node, parse_filter(std::move(node)));
      } else if (at_name("is")) {
        next();
        auto e = make(ExprKind::kTest);
        e->negated = skip_name("not");
        LOOM_ASSIGN_OR_RETURN(e->name, expect_name());
        e->a = std::move(node);
        if (at_op("(")) {
          LOOM_RETURN_IF_ERROR(parse_call_args(*e));
        } else if ((cur().type == TokenType::kName || cur().type == TokenType::kString ||
                    cur().type == TokenType::kInt || cur().type == TokenType::kFloat ||
                    at_op("[") || at_op("{")) &&
                   !at_name("else") && !at_name("or") && !at_name("and")) {
          if (at_name("is")) return fail("you cannot chain multiple tests with 'is'");
          LOOM_ASSIGN_OR_RETURN(ExprPtr arg, parse_primary());
          LOOM_ASSIGN_OR_RETURN(arg, parse_postfix(std::move(arg)));
          e->args.push_back(std::move(arg));
        }
        node = std::move(e);
      } else if (at_op("(")) {
        auto e = make(ExprKind::kCall);
        e->a = std::move(node);
        LOOM_RETURN_IF_ERROR(parse_call_args(*e));
        node = std::move(e);
      } else {
        return node;
      }
    }
  }

  std::vector<Token> toks_;
  size_t i_ = 0;
  int depth_ = 0;
};

}  // namespace

Result<std::shared_ptr<const Program>> parse_template(std::string_view source) {
  LOOM_ASSIGN_OR_RETURN(std::vector<Token> toks, tokenize(source));
  return Parser(std::move(toks)).run();
}

}  // namespace loom::jinja
