// String helpers with Python semantics for the Jinja interpreter: UTF-8 code point access
// (Python strings index by code point, not byte), str.strip/split whitespace rules, and the
// shortest round-trip float formatting Python's repr() uses.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::jinja {

// Decodes UTF-8 into code points; invalid bytes decode as themselves (U+0080..U+00FF range
// is not assumed: each invalid byte becomes one code point so lengths stay defined).
std::u32string utf8_decode(std::string_view s);
std::string utf8_encode(std::u32string_view s);
void utf8_append(std::string& out, char32_t c);
// Number of code points (what Python's len() returns for the decoded string).
size_t utf8_length(std::string_view s);
bool is_ascii(std::string_view s);

// Python's str.isspace() for one code point.
bool py_isspace(char32_t c);

// str.strip / lstrip / rstrip. `chars` empty + has_chars false = whitespace.
std::string py_strip(std::string_view s, bool left, bool right, const std::string* chars);
// str.split / rsplit. sep == nullptr splits on runs of whitespace.
std::vector<std::string> py_split(std::string_view s, const std::string* sep, int64_t maxsplit,
                                  bool from_right);
std::string py_replace(std::string_view s, std::string_view old_s, std::string_view new_s,
                       int64_t count);
// str.upper()/str.lower(): ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic letters.
std::string ascii_upper(std::string_view s);
std::string ascii_lower(std::string_view s);
// Python's str.capitalize and str.title (ASCII letters change case; others are kept).
std::string py_capitalize(std::string_view s);
std::string py_title(std::string_view s);

// Python float repr: "1.0", "0.1", "1e+20", "1e-05", "inf", "nan".
std::string py_float_repr(double v);
// Python repr of a str: quotes chosen like CPython, escapes for control characters.
std::string py_str_repr(std::string_view s);

}  // namespace loom::jinja
