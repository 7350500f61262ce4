// A bound on how deeply JSON text nests, checked on the raw text before parsing it.
// nlohmann::json parses deep nesting fine, but copying, comparing and printing a value recurse
// once per level, as does every walk loom makes over a request (messages, schemas, template
// contexts): a body of 100,000 '[' would overflow the stack. Each parse of untrusted JSON
// checks json_nesting_exceeds() first and answers with a clear error instead.
#pragma once

#include <string_view>

namespace loom {

// Deeper than any real request, schema or config (JSON Schemas nest a few tens of levels);
// shallow enough that every recursive walk stays far inside a thread's stack.
inline constexpr int kMaxJsonDepth = 128;

// True when arrays and objects in `text` nest deeper than `max_depth` (brackets inside strings
// do not count). Linear in the text, no allocation; any text that is not JSON just counts
// brackets, which is all a parser would reach before failing.
inline bool json_nesting_exceeds(std::string_view text, int max_depth = kMaxJsonDepth) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (c == '\\') {
        ++i;  // the escaped character cannot end the string
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return true;
    } else if (c == ']' || c == '}') {
      if (depth > 0) --depth;
    }
  }
  return false;
}

}  // namespace loom
