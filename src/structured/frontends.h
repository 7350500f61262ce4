// Grammar front-ends: every constrained-output request shape compiles to GBNF text here
// (then parse_gbnf + CompiledGrammar, see matcher.h). Each function adds its rules to a
// GbnfBuilder and returns the name of its entry rule, so callers can embed one grammar in
// another (a tool call's arguments inside its family's markup); the *_gbnf convenience forms
// return a whole grammar whose root is that rule.
//
// Fail closed: a keyword, format or regex feature that is not supported is an error naming
// it (the server turns it into a 400), never a silently weaker grammar.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "structured/gbnf_builder.h"

namespace loom::structured {

using OrderedJson = nlohmann::ordered_json;

struct JsonGrammarOptions {
  // Whitespace allowed between JSON tokens: at most this many of ' ', '\n', '\t' (0 = compact
  // output only, the default). Bounded so that a weak model cannot loop on whitespace.
  int max_whitespace = 0;
  // Unbounded strings / arrays / numbers still end (a model can always close them); these
  // bound the document when the schema does not, so that constrained output always ends.
  int max_string_length = 4096;
  int max_array_items = 256;
  int max_number_digits = 18;
  int max_depth = 16;  // nesting of arbitrary JSON (json_object, schemas without "type")
};

// JSON Schema (draft 2020-12 subset used by OpenAI strict mode and Pydantic): type (and type
// lists), properties, required, additionalProperties, items, prefixItems, enum, const, anyOf,
// oneOf, allOf, $ref / $defs / definitions (with recursion), minLength, maxLength, pattern,
// format (date, time, date-time, uuid, email, ipv4), minimum / maximum / exclusiveMinimum /
// exclusiveMaximum for integers, minItems, maxItems, nullable; annotations (title,
// description, default, examples, $schema, $id, $comment, OpenAPI's discriminator) are
// ignored. Anything else: error "unsupported JSON Schema keyword 'X' at /path".
// oneOf only with provably disjoint branches (different types, integer and number counting as
// one; disjoint const/enum values; objects whose common required property has disjoint
// values, as Pydantic's tagged unions): otherwise an error "'oneOf' at /path: branches i and
// k may overlap ...", since a grammar cannot exclude a value that matches two branches.
// A schema with no finite instance (required recursion through $ref) is an error naming the
// $ref; recursion that some branch or optional member avoids is accepted.
Result<std::string> add_json_schema(GbnfBuilder& b, const OrderedJson& schema,
                                    const JsonGrammarOptions& options, std::string_view name);
Result<std::string> json_schema_to_gbnf(const OrderedJson& schema,
                                        const JsonGrammarOptions& options = {});

// Any JSON value whose top level is an object (response_format json_object).
std::string add_any_json_object(GbnfBuilder& b, const JsonGrammarOptions& options);
std::string any_json_object_gbnf(const JsonGrammarOptions& options = {});

// A regular expression (ECMAScript / PCRE syntax) matched in full: literals, escapes, . [...]
// classes (\d \w \s and negations), groups (capturing, (?:...)), |, * + ? {m,n} (greedy and
// lazy forms mean the same language). Anchors ^ $ at the ends only. Backreferences,
// lookaround, and other features: error naming them.
Result<std::string> add_regex(GbnfBuilder& b, std::string_view pattern, std::string_view name);
Result<std::string> regex_to_gbnf(std::string_view pattern);

// Exactly one of the strings (guided_choice / structured_outputs.choice). Empty list: error.
Result<std::string> add_choice(GbnfBuilder& b, const std::vector<std::string>& choices,
                               std::string_view name);
Result<std::string> choice_to_gbnf(const std::vector<std::string>& choices);

// Any text that does not contain any of `triggers` (the free text of a structural tag, or the
// reasoning before "</think>"). Bytes form valid UTF-8 across token boundaries.
Result<std::string> add_text_without(GbnfBuilder& b, const std::vector<std::string>& triggers,
                                     std::string_view name);

// Structural tag (vLLM / XGrammar "structural_tag"): free text; whenever one of the triggers
// appears, the text continues with one of the structures whose `begin` starts with that
// trigger: begin, then content matching its schema, then end; then free text again.
struct StructuralTagItem {
  std::string begin;   // e.g. "<function=get_weather>"
  OrderedJson schema;  // the content's JSON Schema
  std::string end;     // e.g. "</function>"
};
Result<std::string> structural_tag_to_gbnf(const std::vector<StructuralTagItem>& structures,
                                           const std::vector<std::string>& triggers,
                                           const JsonGrammarOptions& options = {});

}  // namespace loom::structured
