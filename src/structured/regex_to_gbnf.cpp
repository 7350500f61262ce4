// Regular expression (ECMAScript / PCRE syntax subset) → GBNF, full-match semantics.
//
// The pattern is parsed into a small tree over code points (sets, concatenation,
// alternation, repetition) and the tree is printed as one GBNF expression. Semantics follow
// ECMAScript with the `u` flag where the two dialects differ (JSON Schema `pattern` is
// ECMAScript): `.` excludes \n \r U+2028 U+2029, \s is Unicode whitespace, \d \w are ASCII.
// Anything outside the subset is an error naming the feature; syntax that the two dialects
// read differently (`[]`, a lone `{`) is refused rather than guessed.
#include <cctype>
#include <cstdio>

#include "structured/charset.h"
#include "structured/frontends.h"
#include "structured/json_schema_internal.h"

namespace loom::structured {

using detail::CharSet;

namespace {

struct Node {
  enum Kind { kEmpty, kSet, kConcat, kAlt, kRepeat } kind = kEmpty;
  CharSet set;
  std::vector<Node> kids;
  int min = 0, max = -1;  // kRepeat; max < 0: unbounded
};

constexpr int kMaxCount = 10000;  // largest {m,n} bound accepted

CharSet digit_set() {
  return CharSet::range('0', '9');
}
CharSet word_set() {
  CharSet s = CharSet::range('a', 'z');
  s.add('A', 'Z');
  s.add('0', '9');
  s.add('_', '_');
  return s;
}
CharSet space_set() {  // ECMAScript WhiteSpace + LineTerminator
  CharSet s = CharSet::range('\t', '\r');
  for (uint32_t c : {0x20u, 0xA0u, 0x1680u, 0x2028u, 0x2029u, 0x202Fu, 0x205Fu, 0x3000u, 0xFEFFu})
    s.add(c, c);
  s.add(0x2000, 0x200A);
  return s;
}

class RegexParser {
 public:
  explicit RegexParser(std::vector<uint32_t> cps) : s_(std::move(cps)) {}

  Result<Node> parse() {
    LOOM_ASSIGN_OR_RETURN(Node n, parse_alt(0));
    if (pos_ < s_.size()) return err("unbalanced ')'");
    return n;
  }

 private:
  Status err(const std::string& what) const {
    return invalid_argument("regex: " + what + " at offset " + std::to_string(pos_));
  }
  bool at_end() const { return pos_ >= s_.size(); }
  uint32_t peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : 0xFFFFFFFF; }

  Result<Node> parse_alt(int depth) {
    Node alt;
    alt.kind = Node::kAlt;
    for (;;) {
      LOOM_ASSIGN_OR_RETURN(Node c, parse_concat(depth));
      alt.kids.push_back(std::move(c));
      if (peek() != '|') break;
      ++pos_;
    }
    if (alt.kids.size() == 1) return std::move(alt.kids[0]);
    return alt;
  }

  Result<Node> parse_concat(int depth) {
    Node cat;
    cat.kind = Node::kConcat;
    // Anchors are accepted where full-match semantics makes them no-ops: ^ at the start and
    // $ at the end of a top-level alternative.
    if (depth == 0 && peek() == '^') ++pos_;
    while (!at_end() && peek() != '|' && peek() != ')') {
      if (peek() == '$') {
        ++pos_;
        if (depth == 0 && (at_end() || peek() == '|')) break;
        return err("anchor '$' inside the pattern is not supported");
      }
      if (peek() == '^') return err("anchor '^' inside the pattern is not supported");
      LOOM_ASSIGN_OR_RETURN(Node atom, parse_atom(depth));
      LOOM_ASSIGN_OR_RETURN(atom, parse_quantifiers(std::move(atom)));
      cat.kids.push_back(std::move(atom));
    }
    if (depth == 0 && peek() == ')') return err("unbalanced ')'");
    if (cat.kids.size() == 1) return std::move(cat.kids[0]);
    if (cat.kids.empty()) return Node{};
    return cat;
  }

  // {m}, {m,}, {m,n} at pos_ (which is '{'): true and the bounds, or false if not one.
  bool read_braces(int* min, int* max, size_t* len) const {
    size_t i = pos_ + 1;
    auto number = [&](int* out) {
      size_t start = i;
      long v = 0;
      while (i < s_.size() && s_[i] >= '0' && s_[i] <= '9') {
        v = std::min<long>(v * 10 + (s_[i] - '0'), 1L << 30);
        ++i;
      }
      *out = static_cast<int>(v);
      return i > start;
    };
    if (!number(min)) return false;
    *max = *min;
    if (i < s_.size() && s_[i] == ',') {
      ++i;
      if (!number(max)) *max = -1;
    }
    if (i >= s_.size() || s_[i] != '}') return false;
    *len = i + 1 - pos_;
    return true;
  }

  Result<Node> parse_quantifiers(Node atom) {
    int min = 0, max = 0;
    size_t len = 0;
    const uint32_t c = peek();
    if (c == '*')
      min = 0, max = -1, len = 1;
    else if (c == '+')
      min = 1, max = -1, len = 1;
    else if (c == '?')
      min = 0, max = 1, len = 1;
    else if (c == '{') {
      if (!read_braces(&min, &max, &len)) return err("lone '{' (write \\{ for a literal brace)");
    } else {
      return atom;
    }
    pos_ += len;
    if (min > kMaxCount || max > kMaxCount)
      return err("repetition count above " + std::to_string(kMaxCount));
    if (max >= 0 && min > max) return err("repetition {m,n} with m > n");
    if (peek() == '?')
      ++pos_;  // lazy: the same language
    else if (peek() == '+')
      return err("possessive quantifiers are not supported");
    const uint32_t n = peek();
    if (n == '*' || n == '+' || n == '?' || (n == '{' && read_braces(&min, &max, &len)))
      return err("nothing to repeat (stacked quantifiers)");
    Node r;
    r.kind = Node::kRepeat;
    r.min = min, r.max = max;
    r.kids.push_back(std::move(atom));
    return r;
  }

  Result<Node> parse_atom(int depth) {
    const uint32_t c = s_[pos_];
    Node n;
    n.kind = Node::kSet;
    switch (c) {
      case '(': {
        ++pos_;
        if (peek() == '?') {
          const uint32_t k = peek(1);
          if (k == ':') {
            pos_ += 2;
          } else if (k == '=' || k == '!') {
            return err("lookahead (?= (?! is not supported");
          } else if (k == '<' && (peek(2) == '=' || peek(2) == '!')) {
            return err("lookbehind (?<= (?<! is not supported");
          } else if (k == '<' || (k == 'P' && peek(2) == '<')) {
            // Named group: the name changes nothing about the language.
            pos_ += k == 'P' ? 3 : 2;
            while (!at_end() && peek() != '>') ++pos_;
            if (at_end()) return err("unterminated group name");
            ++pos_;
          } else if (k == '>') {
            return err("atomic groups (?> are not supported");
          } else {
            return err("group modifiers and inline flags (?...) are not supported");
          }
        }
        LOOM_ASSIGN_OR_RETURN(Node inner, parse_alt(depth + 1));
        if (peek() != ')') return err("missing ')'");
        ++pos_;
        return inner;
      }
      case '[':
        return parse_class();
      case '.':
        ++pos_;
        n.set = CharSet::all().minus(CharSet::of('\n')).minus(CharSet::of('\r'));
        n.set = n.set.minus(CharSet::range(0x2028, 0x2029));
        return n;
      case '\\':
        ++pos_;
        return parse_escape(false);
      case '*':
      case '+':
      case '?':
        return err("nothing to repeat");
      case '{':
        return err("lone '{' (write \\{ for a literal brace)");
      case '}':
      case ']':
        return err(std::string("lone '") + static_cast<char>(c) + "' (escape it)");
      default:
        ++pos_;
        n.set = CharSet::of(c);
        return n;
    }
  }

  // After a backslash. In a class, \b is backspace and \d \w \s are allowed as members.
  Result<Node> parse_escape(bool in_class) {
    if (at_end()) return err("trailing backslash");
    const uint32_t c = s_[pos_++];
    Node n;
    n.kind = Node::kSet;
    auto single = [&](uint32_t cp) {
      n.set = CharSet::of(cp);
      return n;
    };
    switch (c) {
      case 'd':
        n.set = digit_set();
        return n;
      case 'D':
        n.set = digit_set().complement();
        return n;
      case 'w':
        n.set = word_set();
        return n;
      case 'W':
        n.set = word_set().complement();
        return n;
      case 's':
        n.set = space_set();
        return n;
      case 'S':
        n.set = space_set().complement();
        return n;
      case 't':
        return single('\t');
      case 'n':
        return single('\n');
      case 'r':
        return single('\r');
      case 'f':
        return single('\f');
      case 'v':
        return single('\v');
      case 'b':
        if (in_class) return single('\b');
        return err("word boundary \\b is not supported");
      case 'B':
        return err("word boundary \\B is not supported");
      case '0':
        if (peek() >= '0' && peek() <= '9') return err("octal escapes are not supported");
        return single(0);
      case 'x': {
        uint32_t v = 0;
        for (int i = 0; i < 2; ++i) {
          int h = hex(peek());
          if (h < 0) return err("\\x needs two hex digits");
          v = v * 16 + h, ++pos_;
        }
        return single(v);
      }
      case 'u': {
        uint32_t v = 0;
        if (peek() == '{') {
          ++pos_;
          int digits = 0;
          while (hex(peek()) >= 0 && digits < 7) v = v * 16 + hex(peek()), ++pos_, ++digits;
          if (peek() != '}' || digits == 0 || v > detail::kMaxCodePoint)
            return err("bad \\u{...} escape");
          ++pos_;
        } else {
          for (int i = 0; i < 4; ++i) {
            int h = hex(peek());
            if (h < 0) return err("\\u needs four hex digits");
            v = v * 16 + h, ++pos_;
          }
        }
        if (v >= 0xD800 && v <= 0xDFFF) return err("surrogate code points are not supported");
        return single(v);
      }
      case 'p':
      case 'P':
        return err("unicode property classes \\p{...} are not supported");
      case 'k':
        return err("named backreferences \\k<...> are not supported");
      case 'c':
        return err("control escapes \\cX are not supported");
      case 'A':
      case 'z':
      case 'Z':
      case 'G':
        return err(std::string("anchor \\") + static_cast<char>(c) + " is not supported");
      case 'Q':
      case 'E':
        return err("quoting \\Q...\\E is not supported");
      default:
        if (c >= '1' && c <= '9') return err("backreferences are not supported");
        if (c < 0x80 && !std::isalnum(static_cast<int>(c))) return single(c);
        if (c >= 0x80) return single(c);
        return err(std::string("unknown escape \\") + static_cast<char>(c));
    }
  }

  static int hex(uint32_t c) {
    if (c >= '0' && c <= '9') return static_cast<int>(c - '0');
    if (c >= 'a' && c <= 'f') return static_cast<int>(c - 'a' + 10);
    if (c >= 'A' && c <= 'F') return static_cast<int>(c - 'A' + 10);
    return -1;
  }

  Result<Node> parse_class() {
    ++pos_;  // '['
    bool negate = false;
    if (peek() == '^') negate = true, ++pos_;
    if (peek() == ']')
      return err("empty or ']'-first character class (dialects differ; escape it as \\])");
    Node n;
    n.kind = Node::kSet;
    // One member: a single code point (returned as cp) or a class escape (returned in set).
    auto member = [&](uint32_t* cp, CharSet* set) -> Status {
      if (at_end()) return err("unterminated character class");
      uint32_t c = s_[pos_];
      if (c == '\\') {
        ++pos_;
        auto e = parse_escape(true);
        if (!e) return e.status();
        if (e->set.size() == 1)
          *cp = e->set.ranges()[0].lo;
        else
          *set = e->set, *cp = 0xFFFFFFFF;
        return Status::ok();
      }
      if (c == '[' && peek(1) == ':') return err("POSIX classes [:name:] are not supported");
      ++pos_;
      *cp = c;
      return Status::ok();
    };
    while (!at_end() && peek() != ']') {
      uint32_t a;
      CharSet sa;
      LOOM_RETURN_IF_ERROR(member(&a, &sa));
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
        ++pos_;
        uint32_t b;
        CharSet sb;
        LOOM_RETURN_IF_ERROR(member(&b, &sb));
        if (a == 0xFFFFFFFF || b == 0xFFFFFFFF) return err("a class escape cannot bound a range");
        if (a > b) return err("character range out of order");
        n.set.add(a, b);
      } else if (a == 0xFFFFFFFF) {
        n.set.add(sa);
      } else {
        n.set.add(a, a);
      }
    }
    if (at_end()) return err("unterminated character class");
    ++pos_;                                   // ']'
    n.set = n.set.intersect(CharSet::all());  // no surrogates
    if (negate) n.set = n.set.complement();
    if (n.set.empty()) return err("character class matches nothing");
    return n;
  }

  std::vector<uint32_t> s_;
  size_t pos_ = 0;
};

// ---- printing ---------------------------------------------------------------------------

struct Expr {
  std::string text;
  enum Prec { kNone, kAtom, kSeq, kAlt } prec = kNone;  // kNone: matches only ""
};

class Printer {
 public:
  explicit Printer(const detail::RegexEmitOptions& o) : o_(o) {}

  // How one code point is written: itself, or (JSON string content) its JSON escape.
  std::string char_bytes(uint32_t c) const {
    if (!o_.json_string) return detail::encode_utf8(c);
    switch (c) {
      case '"':
        return "\\\"";
      case '\\':
        return "\\\\";
      case '\b':
        return "\\b";
      case '\f':
        return "\\f";
      case '\n':
        return "\\n";
      case '\r':
        return "\\r";
      case '\t':
        return "\\t";
    }
    if (c < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      return buf;
    }
    return detail::encode_utf8(c);
  }

  Expr set(const CharSet& s) const {
    if (s.size() == 1) return {GbnfBuilder::literal(char_bytes(s.ranges()[0].lo)), Expr::kAtom};
    if (!o_.json_string) return {detail::gbnf_class(s), Expr::kAtom};
    // JSON content: characters JSON must escape appear as their escapes.
    CharSet special = CharSet::range(0, 0x1F);
    special.add('"', '"');
    special.add('\\', '\\');
    const CharSet raw = s.minus(special);
    std::vector<std::string> alts;
    if (!raw.empty()) alts.push_back(detail::gbnf_class(raw));
    const CharSet escaped = s.intersect(special);
    for (const detail::CodeRange& r : escaped.ranges())
      for (uint32_t c = r.lo; c <= r.hi; ++c) alts.push_back(GbnfBuilder::literal(char_bytes(c)));
    if (alts.size() == 1) return {alts[0], Expr::kAtom};
    std::string t;
    for (size_t i = 0; i < alts.size(); ++i) t += (i ? " | " : "") + alts[i];
    return {t, Expr::kAlt};
  }

  static std::string group(const Expr& e) {
    return e.prec == Expr::kAtom ? e.text : "( " + e.text + " )";
  }

  Expr print(const Node& n) const {
    switch (n.kind) {
      case Node::kEmpty:
        return {};
      case Node::kSet:
        return set(n.set);
      case Node::kConcat: {
        std::string t, lit;  // lit: a run of single characters, printed as one literal
        int parts = 0;
        Expr::Prec last = Expr::kAtom;  // of the only part, when there is one
        auto flush = [&] {
          if (lit.empty()) return;
          t += (t.empty() ? "" : " ") + GbnfBuilder::literal(lit);
          lit.clear();
          last = Expr::kAtom;
          ++parts;
        };
        for (const Node& k : n.kids) {
          if (k.kind == Node::kSet && k.set.size() == 1) {
            lit += char_bytes(k.set.ranges()[0].lo);
            continue;
          }
          Expr e = print(k);
          if (e.prec == Expr::kNone) continue;
          flush();
          t += (t.empty() ? "" : " ") + (e.prec == Expr::kAlt ? "( " + e.text + " )" : e.text);
          last = e.prec == Expr::kSeq ? Expr::kSeq : Expr::kAtom;
          ++parts;
        }
        flush();
        if (t.empty()) return {};
        return {t, parts == 1 ? last : Expr::kSeq};
      }
      case Node::kAlt: {
        std::string t;
        bool optional = false;
        for (const Node& k : n.kids) {
          Expr e = print(k);
          if (e.prec == Expr::kNone) {
            optional = true;
            continue;
          }
          t += (t.empty() ? "" : " | ") + e.text;
        }
        if (t.empty()) return {};
        if (optional) return {"( " + t + " )?", Expr::kAtom};
        return {t, Expr::kAlt};
      }
      case Node::kRepeat: {
        Expr e = print(n.kids[0]);
        int max = n.max;
        if (e.prec == Expr::kNone || max == 0) return {};
        if (max < 0 && o_.max_repeat >= 0) max = std::max(n.min, o_.max_repeat);
        const std::string g = group(e);
        std::string q;
        if (max < 0)
          q = n.min == 0 ? "*" : n.min == 1 ? "+" : "{" + std::to_string(n.min) + ",}";
        else if (n.min == 0 && max == 1)
          q = "?";
        else if (n.min == max)
          q = "{" + std::to_string(max) + "}";
        else
          q = "{" + std::to_string(n.min) + "," + std::to_string(max) + "}";
        if (q == "{1}") return e;
        return {g + q, Expr::kAtom};
      }
    }
    return {};
  }

 private:
  detail::RegexEmitOptions o_;
};

}  // namespace

namespace detail {

Result<std::string> add_regex_expr(GbnfBuilder& b, std::string_view pattern,
                                   const RegexEmitOptions& options, std::string_view name) {
  std::vector<uint32_t> cps;
  if (!decode_utf8(pattern, &cps)) return invalid_argument("regex: pattern is not valid UTF-8");
  RegexParser parser(std::move(cps));
  LOOM_ASSIGN_OR_RETURN(Node tree, parser.parse());
  Expr e = Printer(options).print(tree);
  return b.add_rule(name, e.prec == Expr::kNone ? "\"\"" : e.text);
}

}  // namespace detail

Result<std::string> add_regex(GbnfBuilder& b, std::string_view pattern, std::string_view name) {
  return detail::add_regex_expr(b, pattern, {}, name);
}

Result<std::string> regex_to_gbnf(std::string_view pattern) {
  GbnfBuilder b;
  LOOM_ASSIGN_OR_RETURN(std::string root, add_regex(b, pattern, "root"));
  (void)root;
  return b.str();
}

}  // namespace loom::structured
