// Code-point sets and UTF-8 helpers shared by the grammar front-ends (regex classes, JSON
// string characters, text_without's automaton). GBNF character classes are over code points,
// so every front-end reasons in code points and emits classes with gbnf_class().
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::structured::detail {

constexpr uint32_t kMaxCodePoint = 0x10FFFF;

struct CodeRange {
  uint32_t lo, hi;  // inclusive
};

// A set of code points: sorted, disjoint, non-adjacent ranges (normalize() restores that).
class CharSet {
 public:
  CharSet() = default;
  static CharSet of(uint32_t cp) { return range(cp, cp); }
  static CharSet range(uint32_t lo, uint32_t hi);
  static CharSet all();  // every scalar value (surrogates excluded: UTF-8 cannot carry them)

  void add(uint32_t lo, uint32_t hi);
  void add(const CharSet& other);
  CharSet complement() const;  // relative to all()
  CharSet minus(const CharSet& other) const;
  CharSet intersect(const CharSet& other) const;
  bool contains(uint32_t cp) const;
  bool empty() const { return ranges_.empty(); }
  uint64_t size() const;
  const std::vector<CodeRange>& ranges() const { return ranges_; }

 private:
  void normalize();
  std::vector<CodeRange> ranges_;
};

// Decodes strict UTF-8 (no overlongs, no surrogates). False on malformed input.
bool decode_utf8(std::string_view s, std::vector<uint32_t>* out);
std::string encode_utf8(uint32_t cp);

// "[...]" matching exactly `set` (which must not be empty). Uses [^...] when that is shorter.
std::string gbnf_class(const CharSet& set);
// A GBNF literal for one code point.
std::string gbnf_char_literal(uint32_t cp);

}  // namespace loom::structured::detail
