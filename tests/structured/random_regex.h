// Seeded random regular expressions for property tests, each written twice: in the
// ECMAScript reading the regex front-end implements, and as PCRE2 text with the same language
// (where PCRE2 reads the same text differently, . and \\s, the PCRE2 copy spells the class
// out); and a PCRE2 full-match wrapper, the independent oracle. Used by the front-end test
// (tests/structured) and the engine's property test (tests/engine).
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <random>
#include <string>
#include <vector>

namespace loom::structured::test {

class Pcre {
 public:
  explicit Pcre(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    code_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.c_str()), pattern.size(),
                          PCRE2_UTF | PCRE2_DOLLAR_ENDONLY, &err, &off, nullptr);
    if (code_) md_ = pcre2_match_data_create_from_pattern(code_, nullptr);
  }
  Pcre(const Pcre&) = delete;
  Pcre& operator=(const Pcre&) = delete;
  ~Pcre() {
    if (md_) pcre2_match_data_free(md_);
    if (code_) pcre2_code_free(code_);
  }
  bool ok() const { return code_ != nullptr; }
  bool full_match(const std::string& s) const {
    return pcre2_match(code_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                       PCRE2_ANCHORED | PCRE2_ENDANCHORED, md_, nullptr) >= 0;
  }

 private:
  pcre2_code* code_ = nullptr;
  pcre2_match_data* md_ = nullptr;
};

struct Re {
  std::string ecma, pcre;
};

inline const char* kSpace =
    "[\\t\\n\\x{0b}\\f\\r "
    "\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}]";
inline const char* kNotSpace =
    "[^\\t\\n\\x{0b}\\f\\r "
    "\\x{a0}\\x{1680}\\x{2000}-\\x{200a}\\x{2028}\\x{2029}\\x{202f}\\x{205f}\\x{3000}\\x{feff}]";

inline Re random_atom(std::mt19937_64& rng, int depth);

inline Re random_regex(std::mt19937_64& rng, int depth) {
  std::uniform_int_distribution<int> n(1, 3);
  Re out;
  const int branches = depth < 2 && rng() % 4 == 0 ? 2 : 1;
  for (int b = 0; b < branches; ++b) {
    if (b) out.ecma += "|", out.pcre += "|";
    for (int i = n(rng); i > 0; --i) {
      Re a = random_atom(rng, depth);
      std::string q;
      switch (rng() % 10) {
        case 0:
          q = "*";
          break;
        case 1:
          q = "+";
          break;
        case 2:
          q = "?";
          break;
        case 3:
          q = "{2}";
          break;
        case 4:
          q = "{1,3}";
          break;
        case 5:
          q = "{2,}";
          break;
        case 6:
          q = "*?";
          break;
        default:
          break;
      }
      out.ecma += a.ecma + q, out.pcre += a.pcre + q;
    }
  }
  return out;
}

inline Re random_atom(std::mt19937_64& rng, int depth) {
  static const std::vector<Re> leaves = {{"a", "a"},
                                         {"b", "b"},
                                         {"\xc3\xa9", "\xc3\xa9"},
                                         {"\\-", "\\-"},
                                         {"[abc]", "[abc]"},
                                         {"[^a]", "[^a]"},
                                         {"[a-c1]", "[a-c1]"},
                                         {"\\d", "\\d"},
                                         {"\\w", "\\w"},
                                         {"\\W", "\\W"},
                                         {"\\s", kSpace},
                                         {"\\S", kNotSpace},
                                         {".", "[^\\n\\r\\x{2028}\\x{2029}]"},
                                         {"[\\s\\d]", "(?:\\d|" + std::string(kSpace) + ")"},
                                         {"\\u00e9", "\\x{e9}"},
                                         {"[^\\w\\-]", "[^\\w\\-]"},
                                         {"\\.", "\\."},
                                         {"\\n", "\\n"}};
  if (depth < 2 && rng() % 4 == 0) {
    Re inner = random_regex(rng, depth + 1);
    const bool capture = rng() % 2;
    return {(capture ? "(" : "(?:") + inner.ecma + ")", "(?:" + inner.pcre + ")"};
  }
  return leaves[rng() % leaves.size()];
}

}  // namespace loom::structured::test
