// The JSON building blocks every JSON front-end shares (schemas, json_object, structural
// tags): whitespace, string characters, strings of bounded length, numbers, integers and
// arbitrary values of bounded depth, each added to the builder once per prefix and reused.
//
// Caps (JsonGrammarOptions), so that every constrained document can end:
//   strings  at most max_string_length characters unless the schema says otherwise
//   arrays   at most max_array_items items (also the cap on extra object members)
//   numbers  at most max_number_digits digits in the integer part and in the fraction; the
//            exponent at most 2 digits (so that every number is a finite double)
//   nesting  max_depth levels for values whose shape the schema leaves open
#pragma once

#include <map>
#include <string>

#include "structured/frontends.h"
#include "structured/gbnf_builder.h"

namespace loom::structured::detail {

class JsonRules {
 public:
  JsonRules(GbnfBuilder& b, const JsonGrammarOptions& options, std::string prefix);

  GbnfBuilder& builder() { return b_; }
  const JsonGrammarOptions& options() const { return options_; }
  const std::string& prefix() const { return prefix_; }

  // " ws" or "" (when max_whitespace is 0): append between tokens.
  std::string ws();
  // One character of JSON string content (an escape, a surrogate pair, or a raw character).
  std::string string_char();
  // A JSON string of min..max characters (max < 0: the max_string_length cap).
  std::string string(int64_t min_len = 0, int64_t max_len = -1);
  std::string number();
  std::string integer();
  std::string boolean();
  std::string null();
  // Any JSON value / object, nested at most max_depth - depth levels further.
  std::string any_value(int depth = 0);
  std::string any_object(int depth = 0);
  std::string any_array(int depth = 0);

  std::string name(std::string_view suffix) const { return prefix_ + "-" + std::string(suffix); }

 private:
  std::string cached(const std::string& key, const std::string& body);

  GbnfBuilder& b_;
  JsonGrammarOptions options_;
  std::string prefix_;
  std::map<std::string, std::string> cache_;  // key -> rule name
};

}  // namespace loom::structured::detail
