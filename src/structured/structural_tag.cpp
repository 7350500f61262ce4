// Structural tags: free text in which every trigger starts one of the structures (begin
// literal, JSON content per its schema, end literal), followed by free text again.
#include "structured/frontends.h"

namespace loom::structured {

Result<std::string> structural_tag_to_gbnf(const std::vector<StructuralTagItem>& structures,
                                           const std::vector<std::string>& triggers,
                                           const JsonGrammarOptions& options) {
  if (structures.empty()) return invalid_argument("structural_tag: no structures");
  if (triggers.empty()) return invalid_argument("structural_tag: no triggers");
  GbnfBuilder b;
  std::string alts;
  for (size_t i = 0; i < structures.size(); ++i) {
    const StructuralTagItem& s = structures[i];
    bool triggered = false;
    for (const std::string& t : triggers)
      triggered = triggered || (!t.empty() && s.begin.rfind(t, 0) == 0);
    // A structure no trigger announces could never start: free text may not contain the
    // trigger that would lead to it. Say so instead of silently dropping it.
    if (!triggered)
      return invalid_argument("structural_tag: begin '" + s.begin +
                              "' does not start with any trigger");
    auto content = add_json_schema(b, s.schema, options, "tag" + std::to_string(i));
    if (!content)
      return invalid_argument("structural_tag: structure " + std::to_string(i) + ": " +
                              content.status().message());
    const std::string rule = b.add_rule(
        "tag" + std::to_string(i) + "-structure",
        GbnfBuilder::literal(s.begin) + " " + *content + " " + GbnfBuilder::literal(s.end));
    alts += (alts.empty() ? "" : " | ") + rule;
  }
  LOOM_ASSIGN_OR_RETURN(std::string text, add_text_without(b, triggers, "text"));
  b.add_rule("root", text + " ( ( " + alts + " ) " + text + " )*");
  return b.str();
}

}  // namespace loom::structured
