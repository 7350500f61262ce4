// guided_choice: exactly one of a list of strings.
#include "structured/frontends.h"
#include "tokenizer/unicode.h"

namespace loom::structured {

Result<std::string> add_choice(GbnfBuilder& b, const std::vector<std::string>& choices,
                               std::string_view name) {
  if (choices.empty()) return invalid_argument("choice: the list of choices is empty");
  std::string body;
  bool has_empty = false;
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string& c = choices[i];
    // A grammar is UTF-8 text: a choice that is not cannot be written as a literal.
    if (tok::utf8_split(c).valid_prefix != c.size())
      return invalid_argument("choice: choice " + std::to_string(i) + " is not valid UTF-8");
    if (c.empty()) {
      has_empty = true;  // GBNF has no empty alternative: the whole choice becomes optional
      continue;
    }
    body += (body.empty() ? "" : " | ") + GbnfBuilder::literal(c);
  }
  if (body.empty()) return b.add_rule(name, "\"\"");
  return b.add_rule(name, has_empty ? "( " + body + " )?" : body);
}

Result<std::string> choice_to_gbnf(const std::vector<std::string>& choices) {
  GbnfBuilder b;
  LOOM_ASSIGN_OR_RETURN(std::string root, add_choice(b, choices, "root"));
  (void)root;
  return b.str();
}

}  // namespace loom::structured
