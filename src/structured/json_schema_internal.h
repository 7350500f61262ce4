// Pieces of the JSON Schema front-end that live in their own files: string formats, exact
// integer ranges, allOf merging, and the oneOf disjointness check.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.h"
#include "structured/frontends.h"
#include "structured/json_values.h"

namespace loom::structured::detail {

// The rule (a whole JSON string, quotes included) for a supported `format`; error naming the
// format otherwise. Formats follow ajv-formats' "full" mode (real calendar dates, leap years).
Result<std::string> add_format_string(JsonRules& j, std::string_view format,
                                      const std::string& path);

// GBNF for the decimal integers in [lo, hi] (nullopt = unbounded on that side, then capped at
// max_digits digits). Unambiguous: every integer has one derivation. Empty range: nullopt.
std::optional<std::string> integer_range_gbnf(std::optional<int64_t> lo, std::optional<int64_t> hi,
                                              int max_digits);

// allOf: one schema equivalent to all of `schemas` together (object schemas merged property
// by property, bounds tightened), or an error naming what cannot be merged exactly.
Result<OrderedJson> merge_all_of(const OrderedJson& schemas, const std::string& path);

// oneOf is compiled like anyOf, which is exact only when no value matches two branches: OK
// when the branches (each narrowed by the sibling keywords) are provably pairwise disjoint,
// else an error naming 'oneOf' (json_schema_one_of.cpp says what counts as a proof).
Status check_one_of_disjoint(const OrderedJson& branches, const OrderedJson& siblings,
                             const OrderedJson& root, const std::string& path);

// Called when compiling `entry` met recursive $refs (the $ref string -> its rule): an error
// naming the $refs when the entry rule has no finite sentence (json_schema_termination.cpp).
Status check_schema_can_end(const GbnfBuilder& b, const std::string& entry,
                            const std::map<std::string, std::string>& recursive_refs);

// JSON pointer helpers.
std::string pointer_escape(std::string_view key);
inline std::string at(const std::string& path) {
  return path.empty() ? "/" : path;
}

// Regex front-end entry used for `pattern`: the regex's language emitted as JSON string
// content (characters that JSON must escape appear in their escaped form); `*`, `+` and open
// `{m,}` are capped at max_repeat so that the string ends.
struct RegexEmitOptions {
  bool json_string = false;
  int max_repeat = -1;  // < 0: unbounded
};
Result<std::string> add_regex_expr(GbnfBuilder& b, std::string_view pattern,
                                   const RegexEmitOptions& options, std::string_view name);

}  // namespace loom::structured::detail
