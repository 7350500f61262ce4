// GbnfBuilder: how every grammar front-end (JSON Schema, regex, choice, structural tags, the
// tool-call formats of src/chat) writes its output: GBNF text in llama.cpp's syntax, the one
// grammar form that parse_gbnf() compiles. Front-ends compose by sharing one builder: each adds
// its rules under a name prefix and returns the name of its entry rule, so a tool-call grammar
// can embed a schema's rules without name clashes.
#pragma once

#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace loom::structured {

class GbnfBuilder {
 public:
  // Adds `name ::= body` and returns the name used: `name` itself, or `name-N` when taken.
  // Names are sanitized to GBNF's [a-zA-Z0-9-] alphabet.
  std::string add_rule(std::string_view name, std::string_view body);
  // Reserves a name for a rule defined later with define() (recursive rules, $ref).
  std::string reserve(std::string_view name);
  void define(const std::string& reserved_name, std::string_view body);
  bool has_rule(const std::string& name) const { return rules_.count(name) != 0; }

  // GBNF text: `root` first (when defined), then the other rules in the order added.
  std::string str() const;

  // A GBNF string literal matching exactly `bytes` ("..." with \\, \", \n, \r, \t and \xHH
  // escapes for other control bytes).
  static std::string literal(std::string_view bytes);

 private:
  std::string unique_name(std::string_view name);
  std::map<std::string, std::string> rules_;  // name -> body ("" while only reserved)
  std::vector<std::string> order_;
};

}  // namespace loom::structured
