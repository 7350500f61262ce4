// Which GBNF rules can end: the standard "productive nonterminal" fixpoint over the parse tree.
// A rule terminates when some alternative consists only of terminals and terminating rules;
// `x*`, `x?` and `x{0,n}` always can (zero copies). Iterating until nothing changes finds every
// terminating rule; the rest can only recurse forever (`root ::= "a" root`).
#include "structured/gbnf_ast.h"

namespace loom::structured {
namespace {

bool expr_terminates(const GbnfExpr& e, const std::vector<bool>& rule_ok) {
  switch (e.kind) {
    case GbnfExpr::Kind::kLiteral:
      return true;
    case GbnfExpr::Kind::kClass:
      return !e.ranges.empty();
    case GbnfExpr::Kind::kRef:
      return e.ref >= 0 && e.ref < static_cast<int32_t>(rule_ok.size()) && rule_ok[e.ref];
    case GbnfExpr::Kind::kRepeat:
      return e.min == 0 || expr_terminates(e.kids[0], rule_ok);
    case GbnfExpr::Kind::kAlt:
      if (e.kids.empty()) return true;  // the parser's empty alternative: matches ""
      for (const GbnfExpr& k : e.kids)
        if (expr_terminates(k, rule_ok)) return true;
      return false;
    case GbnfExpr::Kind::kSeq:
      for (const GbnfExpr& k : e.kids)
        if (!expr_terminates(k, rule_ok)) return false;
      return true;
  }
  return false;
}

}  // namespace

std::vector<bool> terminating_rules(const GbnfAst& ast) {
  std::vector<bool> ok(ast.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < ast.rules.size(); ++r) {
      if (ok[r] || !ast.rules[r].defined) continue;
      if (expr_terminates(ast.rules[r].body, ok)) ok[r] = changed = true;
    }
  }
  return ok;
}

std::vector<int32_t> rules_reachable_from(const GbnfAst& ast, int32_t root) {
  std::vector<char> seen(ast.rules.size(), 0);
  std::vector<int32_t> order, work{root};
  while (!work.empty()) {
    const int32_t r = work.back();
    work.pop_back();
    if (r < 0 || r >= static_cast<int32_t>(ast.rules.size()) || seen[r]) continue;
    seen[r] = 1;
    order.push_back(r);
    std::vector<const GbnfExpr*> stack{&ast.rules[r].body};
    while (!stack.empty()) {
      const GbnfExpr* e = stack.back();
      stack.pop_back();
      if (e->kind == GbnfExpr::Kind::kRef) work.push_back(e->ref);
      for (const GbnfExpr& k : e->kids) stack.push_back(&k);
    }
  }
  return order;
}

}  // namespace loom::structured
