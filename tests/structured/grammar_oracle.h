// Test helpers: random non-recursive grammars written both as GBNF and as an equivalent PCRE2
// regex (the independent oracle), sampling of sentences, and PCRE2 prefix / full matching.
#pragma once

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

namespace loom::structured::testing {

// Characters random grammars and strings are built from: ASCII, 2-, 3- and 4-byte UTF-8.
inline const std::vector<std::string>& alphabet() {
  static const std::vector<std::string> a = {
      "a", "b", "c", "<", ">", "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80"};
  return a;
}

struct Node {
  enum Kind { kLit, kClass, kNegClass, kDot, kAlt, kSeq, kRepeat, kRef } kind;
  std::string text;  // kLit: the literal; kClass/kNegClass: the class members
  std::vector<Node> kids;
  int min = 0, max = -1;  // kRepeat
  int ref = -1;           // kRef
};

class RandomGrammar {
 public:
  RandomGrammar(uint32_t seed, int n_rules) : rng_(seed) {
    rules_.resize(n_rules);
    for (int r = n_rules - 1; r >= 0; --r) rules_[r] = gen(3, r);
  }

  std::string gbnf() const {
    std::string out;
    for (size_t r = 0; r < rules_.size(); ++r)
      out += (r == 0 ? std::string("root") : "r" + std::to_string(r)) +
             " ::= " + to_gbnf(rules_[r]) + "\n";
    return out;
  }
  std::string regex() const { return to_regex(rules_[0]); }
  std::string sample(std::mt19937& rng) const {
    std::string s;
    sample(rules_[0], rng, s);
    return s;
  }

 private:
  int pick(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }
  std::string random_chars(int n) {
    std::string s;
    for (int i = 0; i < n; ++i) s += alphabet()[pick(static_cast<int>(alphabet().size()))];
    return s;
  }

  Node gen(int depth, int rule) {
    const int k = pick(depth > 0 ? 9 : 4);
    Node n;
    switch (k) {
      case 0:
        n.kind = Node::kLit;
        n.text = random_chars(1 + pick(3));
        return n;
      case 1:
        n.kind = Node::kClass;
        n.text = random_chars(1 + pick(3));
        return n;
      case 2:
        n.kind = pick(2) ? Node::kNegClass : Node::kDot;
        n.text = random_chars(1 + pick(2));
        return n;
      case 3:
        if (rule + 1 < static_cast<int>(rules_.size())) {
          n.kind = Node::kRef;
          n.ref = rule + 1 + pick(static_cast<int>(rules_.size()) - rule - 1);
          return n;
        }
        n.kind = Node::kLit;
        n.text = random_chars(1);
        return n;
      case 4:
      case 5: {
        n.kind = k == 4 ? Node::kAlt : Node::kSeq;
        const int m = 2 + pick(2);
        for (int i = 0; i < m; ++i) n.kids.push_back(gen(depth - 1, rule));
        return n;
      }
      default: {
        n.kind = Node::kRepeat;
        n.kids.push_back(gen(depth - 1, rule));
        switch (pick(6)) {
          case 0:
            n.min = 0;
            n.max = -1;
            break;
          case 1:
            n.min = 1;
            n.max = -1;
            break;
          case 2:
            n.min = 0;
            n.max = 1;
            break;
          case 3:
            n.min = pick(3);
            n.max = n.min + pick(3);
            break;
          case 4:
            n.min = pick(2);
            n.max = n.min + 9 + pick(4);
            break;  // counted rule
          default:
            n.min = 2;
            n.max = -1;
            break;
        }
        return n;
      }
    }
  }

  static std::string repeat_suffix(const Node& n) {
    if (n.min == 0 && n.max < 0) return "*";
    if (n.min == 1 && n.max < 0) return "+";
    if (n.min == 0 && n.max == 1) return "?";
    if (n.max < 0) return "{" + std::to_string(n.min) + ",}";
    if (n.max == n.min) return "{" + std::to_string(n.min) + "}";
    return "{" + std::to_string(n.min) + "," + std::to_string(n.max) + "}";
  }

  std::string to_gbnf(const Node& n) const {
    switch (n.kind) {
      case Node::kLit:
        return "\"" + n.text + "\"";
      case Node::kClass:
        return "[" + n.text + "]";
      case Node::kNegClass:
        return "[^" + n.text + "]";
      case Node::kDot:
        return ".";
      case Node::kRef:
        return "r" + std::to_string(n.ref);
      case Node::kRepeat:
        return "(" + to_gbnf(n.kids[0]) + ")" + repeat_suffix(n);
      default: {
        std::string s = "(";
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (i) s += n.kind == Node::kAlt ? " | " : " ";
          s += to_gbnf(n.kids[i]);
        }
        return s + ")";
      }
    }
  }

  std::string to_regex(const Node& n) const {
    switch (n.kind) {
      case Node::kLit:
        return "(?:" + n.text + ")";
      case Node::kClass:
        return "[" + n.text + "]";
      case Node::kNegClass:
        return "[^" + n.text + "]";
      case Node::kDot:
        return ".";
      case Node::kRef:
        return "(?:" + to_regex(rules_[n.ref]) + ")";
      case Node::kRepeat:
        return "(?:" + to_regex(n.kids[0]) + ")" + repeat_suffix(n);
      default: {
        std::string s = "(?:";
        for (size_t i = 0; i < n.kids.size(); ++i) {
          if (i && n.kind == Node::kAlt) s += "|";
          s += to_regex(n.kids[i]);
        }
        return s + ")";
      }
    }
  }

  static std::vector<std::string> chars_of(const std::string& s) {
    std::vector<std::string> out;
    for (size_t i = 0; i < s.size();) {
      const unsigned char c = static_cast<unsigned char>(s[i]);
      const size_t n = c < 0x80 ? 1 : c < 0xE0 ? 2 : c < 0xF0 ? 3 : 4;
      out.push_back(s.substr(i, n));
      i += n;
    }
    return out;
  }

  void sample(const Node& n, std::mt19937& rng, std::string& out) const {
    auto pick = [&](int k) { return std::uniform_int_distribution<int>(0, k - 1)(rng); };
    switch (n.kind) {
      case Node::kLit:
        out += n.text;
        return;
      case Node::kClass: {
        auto cs = chars_of(n.text);
        out += cs[pick(static_cast<int>(cs.size()))];
        return;
      }
      case Node::kNegClass:
      case Node::kDot: {
        for (;;) {
          std::string c = alphabet()[pick(static_cast<int>(alphabet().size()))];
          if (n.kind == Node::kDot || n.text.find(c) == std::string::npos) {
            out += c;
            return;
          }
          if (pick(4) == 0) {
            out += "z";
            return;
          }
        }
      }
      case Node::kRef:
        sample(rules_[n.ref], rng, out);
        return;
      case Node::kAlt:
        sample(n.kids[pick(static_cast<int>(n.kids.size()))], rng, out);
        return;
      case Node::kSeq:
        for (const Node& k : n.kids) sample(k, rng, out);
        return;
      case Node::kRepeat: {
        const int hi = n.max < 0 ? n.min + 3 : n.max;
        const int times = n.min + pick(hi - n.min + 1);
        for (int i = 0; i < times; ++i) sample(n.kids[0], rng, out);
        return;
      }
    }
  }

  std::mt19937 rng_;
  std::vector<Node> rules_;
};

// A compiled anchored regex: full(s) = s matches entirely; prefix(s) = s can be extended to a
// match (PCRE2 hard partial matching; a truncated UTF-8 character at the end is allowed).
class Oracle {
 public:
  explicit Oracle(const std::string& pattern) {
    int err = 0;
    PCRE2_SIZE off = 0;
    re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(),
                        PCRE2_UTF | PCRE2_DOTALL | PCRE2_ANCHORED | PCRE2_ENDANCHORED, &err, &off,
                        nullptr);
    // PCRE2 refuses partial matching with PCRE2_ENDANCHORED: \\z anchors the end instead.
    const std::string anchored = "(?:" + pattern + ")\\z";
    partial_re_ = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(anchored.data()), anchored.size(),
                                PCRE2_UTF | PCRE2_DOTALL | PCRE2_ANCHORED, &err, &off, nullptr);
    if (re_) md_ = pcre2_match_data_create_from_pattern(re_, nullptr);
    // Nested quantifiers can backtrack exponentially: bound the work, report it (gave_up()).
    mc_ = pcre2_match_context_create(nullptr);
    pcre2_set_match_limit(mc_, 200000);
  }
  bool gave_up() const { return gave_up_; }
  ~Oracle() {
    if (md_) pcre2_match_data_free(md_);
    if (mc_) pcre2_match_context_free(mc_);
    if (re_) pcre2_code_free(re_);
    if (partial_re_) pcre2_code_free(partial_re_);
  }
  bool ok() const { return re_ != nullptr && partial_re_ != nullptr; }
  bool full(const std::string& s) const {
    const int rc =
        pcre2_match(re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0, 0, md_, mc_);
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) gave_up_ = true;
    return rc > 0;
  }
  // PCRE2 reports a truncated UTF-8 character as an error even in partial mode, so a
  // truncated tail is completed instead: with the alphabet's characters, and with generic
  // characters (every character outside the alphabet behaves alike in these grammars).
  bool prefix(const std::string& s) const {
    size_t tail = 0;  // bytes of an incomplete character at the end
    for (size_t k = 1; k <= 3 && k <= s.size(); ++k) {
      const unsigned char c = static_cast<unsigned char>(s[s.size() - k]);
      if ((c & 0xC0) == 0x80) continue;
      const size_t need = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
      if (need > k) tail = k;
      break;
    }
    if (tail == 0) return raw_prefix(s);
    const std::string head = s.substr(0, s.size() - tail), part = s.substr(s.size() - tail);
    const unsigned char lead = static_cast<unsigned char>(part[0]);
    const size_t need = lead >= 0xF0 ? 4 : lead >= 0xE0 ? 3 : 2;
    for (const std::string& c : alphabet())
      if (c.size() == need && c.compare(0, tail, part) == 0 && raw_prefix(head + c)) return true;
    for (unsigned char first : {0x80, 0x90, 0xA0, 0xBF}) {
      std::string c = part;
      while (c.size() < need) c += static_cast<char>(c.size() == tail ? first : 0x80);
      if (raw_prefix(head + c)) return true;
    }
    return false;
  }
  bool raw_prefix(const std::string& s) const {
    const int rc = pcre2_match(partial_re_, reinterpret_cast<PCRE2_SPTR>(s.data()), s.size(), 0,
                               PCRE2_PARTIAL_HARD, md_, mc_);
    if (rc == PCRE2_ERROR_MATCHLIMIT || rc == PCRE2_ERROR_DEPTHLIMIT) gave_up_ = true;
    return rc > 0 || rc == PCRE2_ERROR_PARTIAL;
  }

 private:
  pcre2_code* re_ = nullptr;
  pcre2_code* partial_re_ = nullptr;
  pcre2_match_data* md_ = nullptr;
  pcre2_match_context* mc_ = nullptr;
  mutable bool gave_up_ = false;
};

}  // namespace loom::structured::testing
