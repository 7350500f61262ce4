// A JSON Schema whose every value must contain another value of itself has no finite
// instance; its grammar would only ever be stopped by "length". Checked after compiling, on
// the GBNF rules written so far, with the termination fixpoint of gbnf_termination.cpp.
#include "structured/gbnf_ast.h"
#include "structured/json_schema_internal.h"

namespace loom::structured::detail {

// Only recursion can make a schema's values infinite: then the rules written so far are read
// back and the termination fixpoint (gbnf_termination.cpp) says whether the entry rule can
// end. A recursive $ref that cannot end but is optional somewhere leaves the schema usable
// (the compiler prunes that alternative); one the entry rule cannot avoid is an error.
Status check_schema_can_end(const GbnfBuilder& b, const std::string& entry,
                            const std::map<std::string, std::string>& recursive_refs) {
  LOOM_ASSIGN_OR_RETURN(GbnfAst ast, parse_gbnf_ast(b.str()));
  const std::vector<bool> ok = terminating_rules(ast);
  std::map<std::string, size_t> index;
  for (size_t i = 0; i < ast.rules.size(); ++i) index[ast.rules[i].name] = i;
  auto it = index.find(entry);
  if (it == index.end() || ok[it->second]) return Status::ok();
  std::string refs;
  for (const auto& [ref, rule] : recursive_refs) {
    auto r = index.find(rule);
    if (r != index.end() && !ok[r->second]) refs += (refs.empty() ? "'" : ", '") + ref + "'";
  }
  return invalid_argument(
      "JSON Schema has no finite instance: every value must contain another value of " +
      (refs.empty() ? std::string("itself") : "'$ref' " + refs) +
      " (required recursion); make the recursive property optional, allow an empty array, or "
      "add a branch without it");
}

}  // namespace loom::structured::detail
