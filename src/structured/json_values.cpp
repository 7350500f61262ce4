#include "structured/json_values.h"

#include <algorithm>

namespace loom::structured::detail {

namespace {

std::string repeat(const std::string& x, int64_t min, int64_t max) {
  if (min == 0 && max == 0) return "";
  if (min == max) return x + "{" + std::to_string(min) + "}";
  if (min == 0 && max == 1) return x + "?";
  return x + "{" + std::to_string(min) + "," + std::to_string(max) + "}";
}

}  // namespace

JsonRules::JsonRules(GbnfBuilder& b, const JsonGrammarOptions& options, std::string prefix)
    : b_(b), options_(options), prefix_(std::move(prefix)) {
  options_.max_whitespace = std::max(0, options_.max_whitespace);
  options_.max_string_length = std::max(1, options_.max_string_length);
  options_.max_array_items = std::max(1, options_.max_array_items);
  options_.max_number_digits = std::max(1, options_.max_number_digits);
  options_.max_depth = std::max(1, options_.max_depth);
}

std::string JsonRules::cached(const std::string& key, const std::string& body) {
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::string n = b_.add_rule(name(key), body);
  cache_[key] = n;
  return n;
}

std::string JsonRules::ws() {
  if (options_.max_whitespace == 0) return "";
  return " " + cached("ws", repeat("[ \\t\\n]", 0, options_.max_whitespace));
}

std::string JsonRules::string_char() {
  // Escapes: the short forms, \u of a non-surrogate, or a proper surrogate pair (a pair is one
  // character, as JSON Schema's length counts code points). Raw: anything but '"', '\' and
  // control characters.
  const std::string hex = "[0-9a-fA-F]";
  const std::string body =
      "[^\"\\\\\\x00-\\x1F] | \"\\\\\" ( [\"\\\\/bfnrt] | \"u\" ( [0-9a-cA-CeEfF] " + hex +
      "{3} | [dD] [0-7] " + hex + "{2} | [dD] [89abAB] " + hex + "{2} \"\\\\u\" [dD] [c-fC-F] " +
      hex + "{2} ) )";
  return cached("char", body);
}

std::string JsonRules::string(int64_t min_len, int64_t max_len) {
  if (max_len < 0) max_len = std::max<int64_t>(min_len, options_.max_string_length);
  const std::string key = "string-" + std::to_string(min_len) + "-" + std::to_string(max_len);
  if (min_len == 0 && max_len == options_.max_string_length) {
    return cached("string", "\"\\\"\" " + repeat(string_char(), 0, max_len) + " \"\\\"\"");
  }
  std::string body = "\"\\\"\" ";
  if (max_len > 0) body += repeat(string_char(), min_len, max_len) + " ";
  return cached(key, body + "\"\\\"\"");
}

std::string JsonRules::integer() {
  const int d = options_.max_number_digits;
  return cached("integer", "\"0\" | \"-\"? [1-9] " + repeat("[0-9]", 0, d - 1));
}

std::string JsonRules::number() {
  const int d = options_.max_number_digits;
  return cached("number", "\"-\"? ( \"0\" | [1-9] " + repeat("[0-9]", 0, d - 1) + " ) ( \".\" " +
                              repeat("[0-9]", 1, d) + " )? ( [eE] [-+]? [0-9]{1,2} )?");
}

std::string JsonRules::boolean() {
  return cached("boolean", "\"true\" | \"false\"");
}
std::string JsonRules::null() {
  return cached("null", "\"null\"");
}

std::string JsonRules::any_value(int depth) {
  const std::string key = "value-" + std::to_string(depth);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  std::string body = string() + " | " + number() + " | " + boolean() + " | " + null();
  if (depth < options_.max_depth)
    body = any_object(depth) + " | " + any_array(depth) + " | " + body;
  return cached(key, body);
}

std::string JsonRules::any_object(int depth) {
  const std::string key = "object-" + std::to_string(depth);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const std::string w = ws();
  std::string member = string() + w + " \":\"" + w + " " + any_value(depth + 1) + w;
  std::string more = repeat("( \",\"" + w + " " + member + " )", 0, options_.max_array_items - 1);
  std::string body = "\"{\"" + w + " ( " + member + " " + more + " )? \"}\"";
  return cached(key, body);
}

std::string JsonRules::any_array(int depth) {
  const std::string key = "array-" + std::to_string(depth);
  auto it = cache_.find(key);
  if (it != cache_.end()) return it->second;
  const std::string w = ws();
  std::string item = any_value(depth + 1) + w;
  std::string more = repeat("( \",\"" + w + " " + item + " )", 0, options_.max_array_items - 1);
  std::string body = "\"[\"" + w + " ( " + item + " " + more + " )? \"]\"";
  return cached(key, body);
}

}  // namespace loom::structured::detail
