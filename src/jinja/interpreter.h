// Executes a parsed template: scopes, loops, macros, output capture and the sandbox limits.
// One Interpreter serves one render on one thread; the Program it runs is shared read-only.
#pragma once

#include <ctime>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "jinja/ast.h"
#include "jinja/chat_template.h"
#include "jinja/value.h"

namespace loom::jinja {

struct Scope {
  explicit Scope(std::shared_ptr<Scope> p) : parent(std::move(p)) {}
  const Value* find(const std::string& name) const;
  void set(const std::string& name, Value v) { vars[name] = std::move(v); }

  std::shared_ptr<Scope> parent;
  std::unordered_map<std::string, Value> vars;
};
using ScopePtr = std::shared_ptr<Scope>;

class Interpreter {
 public:
  Interpreter(std::shared_ptr<const Program> program, const ChatTemplateOptions& options);
  ~Interpreter();  // empties the namespaces of the render (see own_namespace)
  Interpreter(const Interpreter&) = delete;
  Interpreter& operator=(const Interpreter&) = delete;

  Result<std::string> render(const Value& context);

  // Services for filters, tests and builtin functions.
  Result<Value> call(const Value& fn, const CallArgs& args);
  Status count_step();
  // Fails when a string or list of `bytes` would exceed the output limit.
  Status check_size(size_t bytes) const;
  // namespace() objects are the only mutable values, so the only way to make a cycle
  // ({% set ns.me = ns %}): the render empties every one it made when it ends, so that no
  // cycle outlives it (and leaks).
  void own_namespace(const std::shared_ptr<Dict>& ns) { namespaces_.push_back(ns); }
  std::tm now() const;
  // raise_exception(): the render fails with exactly this message.
  Status raise(std::string message);
  // Runs a macro body with the given bindings and returns what it printed.
  Result<std::string> run_macro(const Stmt& macro, const Body& body,
                                const std::vector<Param>& params, const ScopePtr& closure,
                                const CallArgs& args, const Value* caller);

 private:
  enum class Flow { kNormal, kBreak, kContinue };

  Result<Flow> exec_body(const Body& body, const ScopePtr& scope);
  Result<Flow> exec(const Stmt& s, const ScopePtr& scope);
  Result<Flow> exec_for(const Stmt& s, const ScopePtr& scope);
  Status exec_set(const Stmt& s, const ScopePtr& scope);
  Result<Value> eval(const Expr& e, const ScopePtr& scope);
  Result<Value> eval_inner(const Expr& e, const ScopePtr& scope);
  Status eval_args(const Expr& e, const ScopePtr& scope, CallArgs& args);
  Result<Value> apply_filter_chain(const Expr& f, Value base, const ScopePtr& scope);
  Result<std::string> capture(const Body& body, const ScopePtr& scope);
  Status emit(std::string_view text);
  Status annotate(Status st, int line) const;
  // Keeps a macro's defining scope alive until the render ends (see Macro in interpreter.cpp).
  void keep_closure(const ScopePtr& scope) {
    if (closures_.empty() || closures_.back() != scope) closures_.push_back(scope);
  }

  std::shared_ptr<const Program> program_;
  const ChatTemplateOptions& options_;
  std::string* out_ = nullptr;
  uint64_t steps_ = 0;
  int call_depth_ = 0;
  std::optional<std::string> raised_;
  std::vector<ScopePtr> closures_;
  std::vector<std::weak_ptr<Dict>> namespaces_;
};

}  // namespace loom::jinja
