// The parse tree of GBNF text (gbnf_parser.cpp), before it is compiled to the byte-level
// automaton of grammar.h (grammar_compile.cpp). Internal to src/structured.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "base/status.h"

namespace loom::structured {

struct GbnfExpr {
  enum class Kind { kAlt, kSeq, kLiteral, kClass, kRef, kRepeat };
  Kind kind = Kind::kSeq;
  std::vector<GbnfExpr> kids;  // kAlt, kSeq: the parts; kRepeat: the one repeated expression
  std::string bytes;           // kLiteral: UTF-8 bytes
  std::vector<std::pair<uint32_t, uint32_t>> ranges;  // kClass: sorted disjoint code points
  int32_t ref = -1;                                   // kRef: rule index
  int32_t min = 0, max = -1;                          // kRepeat: max -1 = unbounded
  int32_t line = 0;
};

struct GbnfRuleAst {
  std::string name;
  GbnfExpr body;
  int32_t line = 0;  // where defined (0: only referenced)
  bool defined = false;
};

struct GbnfAst {
  std::vector<GbnfRuleAst> rules;
};

// Syntax only: rule references are resolved to indices (undefined ones are reported by the
// compiler, which knows which rules are used).
Result<GbnfAst> parse_gbnf_ast(std::string_view text);

// Per rule: can it derive a finite string (some alternative made only of terminals and
// terminating rules; gbnf_termination.cpp)? A rule that cannot is only ever left by running
// out of tokens, so the compiler refuses a grammar whose root cannot end and prunes the
// alternatives that use such a rule.
std::vector<bool> terminating_rules(const GbnfAst& ast);
// The rules `root` can reach (itself first), for naming the culprits in errors.
std::vector<int32_t> rules_reachable_from(const GbnfAst& ast, int32_t root);

}  // namespace loom::structured
