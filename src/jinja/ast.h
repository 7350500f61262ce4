// The parsed form of a template: expression and statement nodes. Nodes are immutable after
// parsing, so one parsed template can render on many threads at once.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "jinja/value.h"

namespace loom::jinja {

struct Expr;
struct Stmt;
using ExprPtr = std::unique_ptr<Expr>;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

enum class ExprKind {
  kLiteral,  // literal
  kName,     // name
  kList,     // args = items
  kTuple,    // args = items
  kDict,     // args = key, value, key, value, ...
  kGetAttr,  // a.name
  kGetItem,  // a[b]
  kSlice,    // a[b:c:d]; b, c, d may be null
  kCall,     // a(args, kwargs)
  kFilter,   // a | name(args, kwargs); a is null inside a {% filter %} block head
  kTest,     // a is [not] name(args, kwargs)
  kNot,      // not a
  kNeg,      // -a
  kPos,      // +a
  kBinary,   // a op b; name = op (+ - * / // % ** ~ == != < <= > >= in "not in")
  kCompare,  // chained comparison a op1 x op2 y: kwargs = (op1, x), (op2, y)
  kAnd,      // a and b
  kOr,       // a or b
  kCond,     // b if a else c; c may be null (undefined)
};

struct Expr {
  ExprKind kind;
  int line = 0;
  Value literal;
  std::string name;
  bool negated = false;  // kTest with "is not"
  ExprPtr a, b, c;
  std::vector<ExprPtr> args;
  std::vector<std::pair<std::string, ExprPtr>> kwargs;
};

enum class StmtKind {
  kText,         // text
  kEmit,         // {{ expr }}
  kIf,           // conds[i] guards bodies[i]; else_body
  kFor,          // targets in expr [if cond]: body, else_body
  kSet,          // target = expr, or block set (body, filter)
  kMacro,        // name(params) body
  kCallBlock,    // {% call(params) expr %} body
  kFilterBlock,  // {% filter chain %} body; filter = chain with a null innermost operand
  kBreak,
  kContinue,
  kWith,  // {% with name = expr, ... %} body
  kBody,  // a plain body (e.g. {% generation %}): runs in the same scope
};

struct Param {
  std::string name;
  ExprPtr default_value;  // may be null
};

struct Stmt {
  StmtKind kind;
  int line = 0;
  std::string text;                // kText; kMacro name
  ExprPtr expr;                    // kEmit / kFor iterable / kSet value / kCallBlock call
  ExprPtr cond;                    // kFor filter
  ExprPtr target;                  // kSet: kName, kTuple of kName, or kGetAttr on a name
  ExprPtr filter;                  // kSet block filter, kFilterBlock chain
  std::vector<std::string> names;  // kFor loop variables
  bool unpack = false;             // kFor target was a tuple
  bool uses_loop = true;           // kFor body mentions `loop` (else no loop object is built)
  std::vector<ExprPtr> conds;      // kIf
  std::vector<Body> bodies;        // kIf branches
  Body body, else_body;
  std::vector<Param> params;                             // kMacro / kCallBlock
  std::vector<std::pair<std::string, ExprPtr>> assigns;  // kWith
};

// A parsed template. Macros keep raw pointers into it, so it lives as long as any render.
struct Program {
  Body body;
};

}  // namespace loom::jinja
