// Grammar: the one grammar form every input compiles to (JSON Schema, regex, choice, any
// JSON, structural tags and tool-call formats all produce GBNF text through GbnfBuilder).
// parse_gbnf reads llama.cpp's GBNF syntax, so existing .gbnf files work unchanged:
//   rule ::= alternatives | ... ; "literals" with \n \t \\ \" \xHH \uHHHH \UHHHHHHHH escapes;
//   [a-z] [^"\\] character classes; . (any character); ( ) grouping; * + ? {m} {m,} {m,n};
//   # comments; rule names [a-zA-Z0-9-]+.
// Errors name the line and what is wrong (undefined rule, unbalanced parenthesis, ...); a
// rule that can only recurse forever without consuming input (left recursion) is refused, and
// so is a grammar whose root can never end (`root ::= "a" root`). A rule that cannot end but
// is used only by some alternatives is not an error: those alternatives are removed, so that
// every prefix a matcher accepts can still be completed.
//
// The compiled form is byte level: every rule is an epsilon-free NFA over bytes whose edges
// either consume one byte from a range or call another rule (a pushdown automaton). Character
// classes over code points become UTF-8 byte paths, `x*` loops stay inside the rule (no
// recursion), small non-recursive rules are inlined at their use so that the innermost rule
// on the stack is usually a large one (that is what makes the per-position token tables of
// matcher.h effective). `x{m,n}` with a large n becomes a *counted* rule: its stack frame
// carries how many iterations have started, instead of n copies of x.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom::structured {

// Consumes one byte in [lo, hi] and moves to `target` (same rule, same frame).
struct ByteEdge {
  uint8_t lo = 0;
  uint8_t hi = 0;
  bool literal = false;  // from a quoted literal: special tokens may only pass such edges
  bool iter = false;     // starts a new iteration of the counted rule (count + 1 <= max_iter)
  int32_t target = 0;
};

// Pushes `rule` (a new frame at its start); when it ends the caller continues at `ret`.
struct CallEdge {
  int32_t rule = 0;
  int32_t ret = 0;
  bool iter = false;  // as ByteEdge::iter
};

struct GrammarState {
  int32_t rule = 0;
  bool final = false;                     // the rule may end here (pop the frame)
  uint32_t byte_begin = 0, byte_end = 0;  // edges in Grammar::byte_edges
  uint32_t call_begin = 0, call_end = 0;  // edges in Grammar::call_edges
};

struct GrammarRule {
  std::string name;
  int32_t start = 0;
  int32_t max_iter = 0;   // > 0: counted rule, at most max_iter iterations
  bool clamp_ok = false;  // every iteration consumes a byte (counts can be clamped in keys)
  bool nullable = false;
  int32_t n_states = 0;  // size of its automaton (small rules extend token-table keys)
};

class Grammar {
 public:
  std::vector<GrammarRule> rules;
  std::vector<GrammarState> states;
  std::vector<ByteEdge> byte_edges;
  std::vector<CallEdge> call_edges;
  int32_t root = 0;  // rule index

  int32_t num_states() const { return static_cast<int32_t>(states.size()); }
  // A state where the rule can only end: calls returning here can be tail calls.
  bool is_pure_end(int32_t s) const {
    const GrammarState& st = states[s];
    return st.final && st.byte_begin == st.byte_end && st.call_begin == st.call_end;
  }
  std::string debug_string() const;
};

Result<std::shared_ptr<const Grammar>> parse_gbnf(std::string_view text,
                                                  std::string_view root = "root");

}  // namespace loom::structured
