// Template execution (see interpreter.h).
#include "jinja/interpreter.h"

#include "jinja/builtins.h"
#include "jinja/filters.h"
#include "jinja/operators.h"

namespace loom::jinja {

const Value* Scope::find(const std::string& name) const {
  for (const Scope* s = this; s; s = s->parent.get()) {
    auto it = s->vars.find(name);
    if (it != s->vars.end()) return &it->second;
  }
  return nullptr;
}

namespace {

// Errors that already name their line (or are limits) pass through annotate() unchanged.
constexpr const char* kErrorPrefix = "chat template error at line ";

// A macro (or the caller of a {% call %} block): a body plus the scope it was defined in,
// looked up at call time like a Python closure. The scope usually holds the macro itself, so
// the macro only observes it: the Interpreter owns the closures of a render (a strong
// reference here would make a cycle, and every render defining a macro would leak).
class Macro : public Callable {
 public:
  Macro(const Stmt* def, const Body* body, const std::vector<Param>* params,
        std::weak_ptr<Scope> closure, std::shared_ptr<const Program> program, std::string name)
      : def_(def),
        body_(body),
        params_(params),
        closure_(std::move(closure)),
        program_(std::move(program)),
        name_(std::move(name)) {}

  Result<Value> call(Interpreter& in, const CallArgs& args) override {
    const Value* caller = nullptr;
    CallArgs rest;
    rest.pos = args.pos;
    for (const auto& kv : args.kw) {
      if (kv.first == "caller")
        caller = &kv.second;
      else
        rest.kw.push_back(kv);
    }
    ScopePtr closure = closure_.lock();
    if (!closure) return invalid_argument("macro '" + name_ + "' called after its render ended");
    LOOM_ASSIGN_OR_RETURN(std::string out,
                          in.run_macro(*def_, *body_, *params_, closure, rest, caller));
    return Value(std::move(out));
  }
  std::string name() const override { return name_; }

 private:
  const Stmt* def_;
  const Body* body_;
  const std::vector<Param>* params_;
  std::weak_ptr<Scope> closure_;
  std::shared_ptr<const Program> program_;  // keeps def_/body_ alive
  std::string name_;
};

// loop.cycle(a, b, ...): the argument at index0 modulo their count.
class LoopCycle : public Callable {
 public:
  explicit LoopCycle(int64_t index0) : index0_(index0) {}
  Result<Value> call(Interpreter&, const CallArgs& args) override {
    if (args.pos.empty()) return invalid_argument("no items for cycling given");
    return args.pos[index0_ % static_cast<int64_t>(args.pos.size())];
  }
  std::string name() const override { return "cycle"; }

 private:
  int64_t index0_;
};

}  // namespace

Interpreter::Interpreter(std::shared_ptr<const Program> program, const ChatTemplateOptions& options)
    : program_(std::move(program)), options_(options) {}

Interpreter::~Interpreter() {
  for (const auto& weak : namespaces_) {
    if (auto ns = weak.lock()) {
      // Moved out first: destroying the entries may drop the last other reference to `ns`.
      auto entries = std::move(ns->entries);
      ns->entries.clear();
      ns->index.clear();
    }
  }
}

Status Interpreter::count_step() {
  if (++steps_ > options_.limits.max_steps)
    return Status(StatusCode::kResourceExhausted,
                  "chat template exceeded the evaluation step limit (" +
                      std::to_string(options_.limits.max_steps) + ")");
  return Status::ok();
}

Status Interpreter::check_size(size_t bytes) const {
  if (bytes > options_.limits.max_output_bytes)
    return Status(StatusCode::kResourceExhausted,
                  "chat template output exceeds the limit of " +
                      std::to_string(options_.limits.max_output_bytes) + " bytes");
  return Status::ok();
}

std::tm Interpreter::now() const {
  if (options_.now) return options_.now();
  std::time_t t = std::time(nullptr);
  std::tm tm{};
  localtime_r(&t, &tm);
  return tm;
}

Status Interpreter::raise(std::string message) {
  raised_ = std::move(message);
  return invalid_argument(*raised_);
}

Status Interpreter::emit(std::string_view text) {
  LOOM_RETURN_IF_ERROR(check_size(out_->size() + text.size()));
  out_->append(text);
  return Status::ok();
}

Status Interpreter::annotate(Status st, int line) const {
  if (st.is_ok() || raised_ || st.code() == StatusCode::kResourceExhausted ||
      st.message().rfind(kErrorPrefix, 0) == 0)
    return st;
  return Status(st.code(), kErrorPrefix + std::to_string(line) + ": " + st.message());
}

Result<std::string> Interpreter::render(const Value& context) {
  auto globals = std::make_shared<Scope>(nullptr);
  add_globals(globals->vars);
  if (context.is_dict())
    for (const auto& [k, v] : context.dict().entries)
      if (k.is_string()) globals->vars[k.str()] = v;
  // Template-level assignments go into their own scope above the context, as in Jinja2.
  auto top = std::make_shared<Scope>(globals);
  std::string out;
  out_ = &out;
  Result<Flow> r = exec_body(program_->body, top);
  if (raised_) return invalid_argument(*raised_);
  if (!r.is_ok()) return r.status();
  if (*r != Flow::kNormal)
    return invalid_argument("chat template error: 'break' or 'continue' outside a loop");
  return out;
}

Result<Interpreter::Flow> Interpreter::exec_body(const Body& body, const ScopePtr& scope) {
  for (const StmtPtr& s : body) {
    LOOM_ASSIGN_OR_RETURN(Flow f, exec(*s, scope));
    if (f != Flow::kNormal) return f;
  }
  return Flow::kNormal;
}

Result<std::string> Interpreter::capture(const Body& body, const ScopePtr& scope) {
  std::string buf;
  std::string* saved = out_;
  out_ = &buf;
  Result<Flow> r = exec_body(body, scope);
  out_ = saved;
  if (!r.is_ok()) return r.status();
  return buf;
}

Result<Interpreter::Flow> Interpreter::exec(const Stmt& s, const ScopePtr& scope) {
  LOOM_RETURN_IF_ERROR(count_step());
  switch (s.kind) {
    case StmtKind::kText:
      LOOM_RETURN_IF_ERROR(emit(s.text));
      return Flow::kNormal;
    case StmtKind::kEmit: {
      LOOM_ASSIGN_OR_RETURN(Value v, eval(*s.expr, scope));
      LOOM_RETURN_IF_ERROR(emit(to_str(v)));
      return Flow::kNormal;
    }
    case StmtKind::kIf: {
      for (size_t i = 0; i < s.conds.size(); ++i) {
        LOOM_ASSIGN_OR_RETURN(Value c, eval(*s.conds[i], scope));
        if (c.truthy()) return exec_body(s.bodies[i], scope);
      }
      return exec_body(s.else_body, scope);
    }
    case StmtKind::kFor:
      return exec_for(s, scope);
    case StmtKind::kSet:
      LOOM_RETURN_IF_ERROR(exec_set(s, scope));
      return Flow::kNormal;
    case StmtKind::kMacro: {
      keep_closure(scope);
      auto m = std::make_shared<Macro>(&s, &s.body, &s.params, scope, program_, s.text);
      scope->set(s.text, Value::callable(std::move(m)));
      return Flow::kNormal;
    }
    case StmtKind::kCallBlock: {
      const Expr& call = *s.expr;
      LOOM_ASSIGN_OR_RETURN(Value fn, eval(*call.a, scope));
      CallArgs args;
      LOOM_RETURN_IF_ERROR(eval_args(call, scope, args));
      keep_closure(scope);
      auto caller = std::make_shared<Macro>(&s, &s.body, &s.params, scope, program_, "caller");
      args.kw.emplace_back("caller", Value::callable(std::move(caller)));
      Result<Value> r = this->call(fn, args);
      if (!r.is_ok()) return annotate(r.status(), s.line);
      LOOM_RETURN_IF_ERROR(emit(to_str(*r)));
      return Flow::kNormal;
    }
    case StmtKind::kFilterBlock: {
      LOOM_ASSIGN_OR_RETURN(std::string text, capture(s.body, scope));
      LOOM_ASSIGN_OR_RETURN(Value v, apply_filter_chain(*s.filter, Value(std::move(text)), scope));
      LOOM_RETURN_IF_ERROR(emit(to_str(v)));
      return Flow::kNormal;
    }
    case StmtKind::kBreak:
      return Flow::kBreak;
    case StmtKind::kContinue:
      return Flow::kContinue;
    case StmtKind::kWith: {
      auto inner = std::make_shared<Scope>(scope);
      for (const auto& [name, e] : s.assigns) {
        LOOM_ASSIGN_OR_RETURN(Value v, eval(*e, scope));
        inner->set(name, std::move(v));
      }
      return exec_body(s.body, inner);
    }
    case StmtKind::kBody:
      return exec_body(s.body, scope);
  }
  return Flow::kNormal;
}

Result<Interpreter::Flow> Interpreter::exec_for(const Stmt& s, const ScopePtr& scope) {
  LOOM_ASSIGN_OR_RETURN(Value iterable, eval(*s.expr, scope));
  // Lists and tuples are iterated in place (`iterable` keeps them alive); the rest is copied.
  List copied;
  const List* items = nullptr;
  if (iterable.is_sequence()) {
    items = &iterable.items();
  } else {
    Result<List> r = iterate(iterable);
    if (!r.is_ok()) return annotate(r.status(), s.line);
    copied = std::move(r).value();
    items = &copied;
  }

  auto bind = [&](Scope& target, const Value& item) -> Status {
    if (!s.unpack) {
      target.set(s.names[0], item);
      return Status::ok();
    }
    Result<List> parts = iterate(item);
    if (!parts.is_ok()) return annotate(parts.status(), s.line);
    if (parts->size() != s.names.size())
      return annotate(invalid_argument("cannot unpack " + std::to_string(parts->size()) +
                                       " values into " + std::to_string(s.names.size()) + " names"),
                      s.line);
    for (size_t i = 0; i < s.names.size(); ++i) target.set(s.names[i], (*parts)[i]);
    return Status::ok();
  };

  if (s.cond) {  // {% for x in xs if cond %}: filter first, so loop.* counts the kept items
    List kept;
    for (const Value& item : *items) {
      LOOM_RETURN_IF_ERROR(count_step());
      auto probe = std::make_shared<Scope>(scope);
      LOOM_RETURN_IF_ERROR(bind(*probe, item));
      LOOM_ASSIGN_OR_RETURN(Value c, eval(*s.cond, probe));
      if (c.truthy()) kept.push_back(item);
    }
    copied = std::move(kept);
    items = &copied;
  }
  if (items->empty()) return exec_body(s.else_body, scope);

  const int64_t n = static_cast<int64_t>(items->size());
  ScopePtr iter_scope;
  for (int64_t i = 0; i < n; ++i) {
    LOOM_RETURN_IF_ERROR(count_step());
    // Jinja2: assignments in the body last one iteration. Reuse the scope object unless a
    // macro defined in the body captured it.
    if (iter_scope && iter_scope.use_count() == 1) {
      iter_scope->vars.clear();
    } else {
      iter_scope = std::make_shared<Scope>(scope);
    }
    const Value& item = (*items)[i];
    LOOM_RETURN_IF_ERROR(bind(*iter_scope, item));
    if (s.uses_loop) {
      auto loop = std::make_shared<Dict>();
      loop->set(Value("index"), Value(i + 1));
      loop->set(Value("index0"), Value(i));
      loop->set(Value("revindex"), Value(n - i));
      loop->set(Value("revindex0"), Value(n - i - 1));
      loop->set(Value("first"), Value(i == 0));
      loop->set(Value("last"), Value(i == n - 1));
      loop->set(Value("length"), Value(n));
      loop->set(Value("depth"), Value(int64_t{1}));
      loop->set(Value("depth0"), Value(int64_t{0}));
      if (i > 0) loop->set(Value("previtem"), (*items)[i - 1]);
      if (i + 1 < n) loop->set(Value("nextitem"), (*items)[i + 1]);
      loop->set(Value("cycle"), Value::callable(std::make_shared<LoopCycle>(i)));
      iter_scope->set("loop", Value::dict(std::move(loop)));
    }
    LOOM_ASSIGN_OR_RETURN(Flow f, exec_body(s.body, iter_scope));
    if (f == Flow::kBreak) break;
  }
  return Flow::kNormal;
}

Status Interpreter::exec_set(const Stmt& s, const ScopePtr& scope) {
  Value v;
  if (s.expr) {
    LOOM_ASSIGN_OR_RETURN(v, eval(*s.expr, scope));
  } else {
    LOOM_ASSIGN_OR_RETURN(std::string text, capture(s.body, scope));
    v = Value(std::move(text));
    if (s.filter) {
      LOOM_ASSIGN_OR_RETURN(v, apply_filter_chain(*s.filter, std::move(v), scope));
    }
  }
  const Expr& t = *s.target;
  if (t.kind == ExprKind::kName) {
    scope->set(t.name, std::move(v));
  } else if (t.kind == ExprKind::kTuple) {
    Result<List> parts = iterate(v);
    if (!parts.is_ok()) return annotate(parts.status(), s.line);
    if (parts->size() != t.args.size())
      return annotate(invalid_argument("cannot unpack " + std::to_string(parts->size()) +
                                       " values into " + std::to_string(t.args.size()) + " names"),
                      s.line);
    for (size_t i = 0; i < t.args.size(); ++i) scope->set(t.args[i]->name, (*parts)[i]);
  } else {  // {% set ns.attr = v %}
    const Value* target = scope->find(t.a->name);
    if (!target || !target->is_namespace())
      return annotate(
          invalid_argument("cannot assign attribute on non-namespace object '" + t.a->name + "'"),
          s.line);
    if (value_nesting_exceeds(v, kMaxValueDepth - 1))
      return annotate(Status(StatusCode::kResourceExhausted,
                             "chat template built a value nested more than " +
                                 std::to_string(kMaxValueDepth) + " levels deep"),
                      s.line);
    target->dict().set(Value(t.name), std::move(v));
  }
  return Status::ok();
}

Result<std::string> Interpreter::run_macro(const Stmt& macro, const Body& body,
                                           const std::vector<Param>& params,
                                           const ScopePtr& closure, const CallArgs& args,
                                           const Value* caller) {
  if (call_depth_ >= options_.limits.max_call_depth)
    return Status(StatusCode::kResourceExhausted,
                  "chat template exceeded the macro call depth limit (" +
                      std::to_string(options_.limits.max_call_depth) + ")");
  auto scope = std::make_shared<Scope>(closure);
  std::vector<bool> bound(params.size(), false);
  List varargs;
  for (size_t i = 0; i < args.pos.size(); ++i) {
    if (i < params.size()) {
      scope->set(params[i].name, args.pos[i]);
      bound[i] = true;
    } else {
      varargs.push_back(args.pos[i]);
    }
  }
  auto kwargs = std::make_shared<Dict>();
  for (const auto& [k, v] : args.kw) {
    bool found = false;
    for (size_t i = 0; i < params.size(); ++i) {
      if (params[i].name == k) {
        if (bound[i])
          return invalid_argument("macro '" + macro.text + "' got multiple values for argument '" +
                                  k + "'");
        scope->set(k, v);
        bound[i] = found = true;
      }
    }
    if (!found) kwargs->set(Value(k), v);
  }
  for (size_t i = 0; i < params.size(); ++i) {
    if (bound[i]) continue;
    if (params[i].default_value) {
      LOOM_ASSIGN_OR_RETURN(Value d, eval(*params[i].default_value, scope));
      scope->set(params[i].name, std::move(d));
    } else {
      scope->set(params[i].name,
                 Value::undefined("parameter '" + params[i].name + "' was not provided"));
    }
  }
  scope->set("varargs", Value::tuple(std::move(varargs)));
  scope->set("kwargs", Value::dict(std::move(kwargs)));
  if (caller) scope->set("caller", *caller);
  ++call_depth_;
  Result<std::string> out = capture(body, scope);
  --call_depth_;
  return out;
}

Result<Value> Interpreter::call(const Value& fn, const CallArgs& args) {
  if (fn.is_undefined()) return undefined_error(fn);
  if (!fn.is_callable())
    return invalid_argument(std::string("'") + fn.type_name() + "' object is not callable");
  return fn.fn().call(*this, args);
}

Status Interpreter::eval_args(const Expr& e, const ScopePtr& scope, CallArgs& args) {
  for (const ExprPtr& a : e.args) {
    LOOM_ASSIGN_OR_RETURN(Value v, eval(*a, scope));
    args.pos.push_back(std::move(v));
  }
  for (const auto& [k, a] : e.kwargs) {
    LOOM_ASSIGN_OR_RETURN(Value v, eval(*a, scope));
    args.kw.emplace_back(k, std::move(v));
  }
  return Status::ok();
}

Result<Value> Interpreter::apply_filter_chain(const Expr& f, Value base, const ScopePtr& scope) {
  if (f.a) {
    LOOM_ASSIGN_OR_RETURN(base, apply_filter_chain(*f.a, std::move(base), scope));
  }
  CallArgs args;
  LOOM_RETURN_IF_ERROR(eval_args(f, scope, args));
  Result<Value> r = apply_filter(*this, f.name, base, args);
  if (!r.is_ok()) return annotate(r.status(), f.line);
  return r;
}

Result<Value> Interpreter::eval(const Expr& e, const ScopePtr& scope) {
  LOOM_RETURN_IF_ERROR(count_step());
  Result<Value> r = eval_inner(e, scope);
  if (!r.is_ok()) return annotate(r.status(), e.line);
  return r;
}

Result<Value> Interpreter::eval_inner(const Expr& e, const ScopePtr& scope) {
  const size_t max_bytes = options_.limits.max_output_bytes;
  switch (e.kind) {
    case ExprKind::kLiteral:
      return e.literal;
    case ExprKind::kName: {
      const Value* v = scope->find(e.name);
      return v ? *v : Value::undefined("'" + e.name + "' is undefined");
    }
    case ExprKind::kList:
    case ExprKind::kTuple: {
      List items;
      for (const ExprPtr& a : e.args) {
        LOOM_ASSIGN_OR_RETURN(Value v, eval(*a, scope));
        items.push_back(std::move(v));
      }
      return e.kind == ExprKind::kList ? Value::list(std::move(items))
                                       : Value::tuple(std::move(items));
    }
    case ExprKind::kDict: {
      auto d = std::make_shared<Dict>();
      for (size_t i = 0; i + 1 < e.args.size(); i += 2) {
        LOOM_ASSIGN_OR_RETURN(Value k, eval(*e.args[i], scope));
        LOOM_ASSIGN_OR_RETURN(Value v, eval(*e.args[i + 1], scope));
        if (k.is_sequence() || k.is_dict() || k.is_namespace())
          return invalid_argument(std::string("unhashable type: '") + k.type_name() + "'");
        d->set(k, std::move(v));
      }
      return Value::dict(std::move(d));
    }
    case ExprKind::kGetAttr: {
      LOOM_ASSIGN_OR_RETURN(Value obj, eval(*e.a, scope));
      return get_attr(obj, e.name);
    }
    case ExprKind::kGetItem: {
      LOOM_ASSIGN_OR_RETURN(Value obj, eval(*e.a, scope));
      LOOM_ASSIGN_OR_RETURN(Value key, eval(*e.b, scope));
      return get_item(obj, key);
    }
    case ExprKind::kSlice: {
      LOOM_ASSIGN_OR_RETURN(Value obj, eval(*e.a, scope));
      Value start, stop, step;
      if (e.b) {
        LOOM_ASSIGN_OR_RETURN(start, eval(*e.b, scope));
      }
      if (e.c) {
        LOOM_ASSIGN_OR_RETURN(stop, eval(*e.c, scope));
      }
      if (!e.args.empty()) {
        LOOM_ASSIGN_OR_RETURN(step, eval(*e.args[0], scope));
      }
      return slice(obj, start, stop, step);
    }
    case ExprKind::kCall: {
      LOOM_ASSIGN_OR_RETURN(Value fn, eval(*e.a, scope));
      CallArgs args;
      LOOM_RETURN_IF_ERROR(eval_args(e, scope, args));
      return call(fn, args);
    }
    case ExprKind::kFilter: {
      LOOM_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      CallArgs args;
      LOOM_RETURN_IF_ERROR(eval_args(e, scope, args));
      return apply_filter(*this, e.name, v, args);
    }
    case ExprKind::kTest: {
      LOOM_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      CallArgs args;
      LOOM_RETURN_IF_ERROR(eval_args(e, scope, args));
      LOOM_ASSIGN_OR_RETURN(bool r, apply_test(*this, e.name, v, args));
      return Value(e.negated ? !r : r);
    }
    case ExprKind::kNot: {
      LOOM_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      return Value(!v.truthy());
    }
    case ExprKind::kNeg: {
      LOOM_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      return unary_minus(v);
    }
    case ExprKind::kPos: {
      LOOM_ASSIGN_OR_RETURN(Value v, eval(*e.a, scope));
      if (v.is_undefined()) return undefined_error(v);
      if (!v.is_number())
        return invalid_argument(std::string("bad operand type for unary +: '") + v.type_name() +
                                "'");
      return v.is_bool() ? Value(v.as_int()) : v;
    }
    case ExprKind::kBinary: {
      LOOM_ASSIGN_OR_RETURN(Value a, eval(*e.a, scope));
      LOOM_ASSIGN_OR_RETURN(Value b, eval(*e.b, scope));
      return binary_op(e.name, a, b, max_bytes);
    }
    case ExprKind::kCompare: {
      LOOM_ASSIGN_OR_RETURN(Value left, eval(*e.a, scope));
      Value result(true);
      for (const auto& [op, operand] : e.kwargs) {
        LOOM_ASSIGN_OR_RETURN(Value right, eval(*operand, scope));
        LOOM_ASSIGN_OR_RETURN(result, binary_op(op, left, right, max_bytes));
        if (!result.truthy()) return result;
        left = std::move(right);
      }
      return result;
    }
    case ExprKind::kAnd: {
      LOOM_ASSIGN_OR_RETURN(Value a, eval(*e.a, scope));
      if (!a.truthy()) return a;
      return eval(*e.b, scope);
    }
    case ExprKind::kOr: {
      LOOM_ASSIGN_OR_RETURN(Value a, eval(*e.a, scope));
      if (a.truthy()) return a;
      return eval(*e.b, scope);
    }
    case ExprKind::kCond: {
      LOOM_ASSIGN_OR_RETURN(Value c, eval(*e.a, scope));
      if (c.truthy()) return eval(*e.b, scope);
      if (e.c) return eval(*e.c, scope);
      return Value::undefined(
          "the inline if-expression evaluated to false and no else section was defined");
    }
  }
  return internal_error("unknown expression kind");
}

}  // namespace loom::jinja
