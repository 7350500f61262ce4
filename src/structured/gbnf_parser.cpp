// GBNF text -> GbnfAst. llama.cpp's syntax (grammars/README.md there): rules `name ::= body`
// separated by newlines; inside parentheses a body may span lines, and at top level a line
// that starts with `|` continues the previous rule's alternatives (lenient: some generators
// write grammars that way).
#include <algorithm>
#include <map>

#include "structured/gbnf_ast.h"
#include "tokenizer/unicode.h"

namespace loom::structured {
namespace {

bool is_word_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' ||
         c == '_';
}

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Result<GbnfAst> run() {
    skip_space(true);
    while (pos_ < s_.size()) {
      LOOM_RETURN_IF_ERROR(parse_rule());
      skip_space(true);
    }
    return std::move(ast_);
  }

 private:
  Status error(std::string what) const {
    return invalid_argument("GBNF line " + std::to_string(line_) + ": " + what);
  }
  bool at_end() const { return pos_ >= s_.size(); }
  char peek(size_t k = 0) const { return pos_ + k < s_.size() ? s_[pos_ + k] : '\0'; }

  // Spaces, tabs and comments; newlines too when `newlines` (inside parentheses).
  void skip_space(bool newlines) {
    while (!at_end()) {
      char c = s_[pos_];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++pos_;
      } else if (c == '#') {
        while (!at_end() && s_[pos_] != '\n') ++pos_;
      } else if (c == '\n' && newlines) {
        ++pos_;
        ++line_;
      } else {
        break;
      }
    }
  }
  // At top level: a newline followed (after blank/comment lines) by `|` continues the rule.
  bool continuation_line() {
    size_t p = pos_;
    int32_t lines = 0;
    while (p < s_.size()) {
      char c = s_[p];
      if (c == ' ' || c == '\t' || c == '\r') {
        ++p;
      } else if (c == '#') {
        while (p < s_.size() && s_[p] != '\n') ++p;
      } else if (c == '\n') {
        ++p;
        ++lines;
      } else {
        break;
      }
    }
    if (p < s_.size() && s_[p] == '|' && lines > 0) {
      pos_ = p;
      line_ += lines;
      return true;
    }
    return false;
  }

  std::string parse_name() {
    size_t b = pos_;
    while (!at_end() && is_word_char(s_[pos_])) ++pos_;
    return std::string(s_.substr(b, pos_ - b));
  }

  int32_t rule_index(const std::string& name, int32_t line) {
    auto [it, fresh] = index_.try_emplace(name, static_cast<int32_t>(ast_.rules.size()));
    if (fresh) {
      GbnfRuleAst r;
      r.name = name;
      r.line = line;
      ast_.rules.push_back(std::move(r));
    }
    return it->second;
  }

  Status parse_rule() {
    const int32_t line = line_;
    std::string name = parse_name();
    if (name.empty()) return error(std::string("expected a rule name, found '") + peek() + "'");
    skip_space(false);
    if (s_.substr(pos_, 3) != "::=") return error("expected '::=' after rule name '" + name + "'");
    pos_ += 3;
    skip_space(true);
    GbnfExpr body;
    LOOM_RETURN_IF_ERROR(parse_alternatives(body, false));
    int32_t idx = rule_index(name, line);
    GbnfRuleAst& r = ast_.rules[idx];
    if (r.defined) return error("rule '" + name + "' is defined twice");
    r.defined = true;
    r.line = line;
    r.body = std::move(body);
    skip_space(false);
    if (!at_end() && peek() != '\n') {
      if (peek() == ')') return error("unbalanced ')'");
      return error(std::string("unexpected '") + peek() + "'");
    }
    return Status::ok();
  }

  Status parse_alternatives(GbnfExpr& out, bool nested) {
    out.kind = GbnfExpr::Kind::kAlt;
    out.line = line_;
    for (;;) {
      GbnfExpr seq;
      LOOM_RETURN_IF_ERROR(parse_sequence(seq, nested));
      out.kids.push_back(std::move(seq));
      if (peek() == '|') {
        ++pos_;
        skip_space(true);
        continue;
      }
      if (!nested && peek() == '\n' && continuation_line()) {
        ++pos_;
        skip_space(true);
        continue;
      }
      break;
    }
    if (out.kids.size() == 1) {
      GbnfExpr one = std::move(out.kids[0]);
      out = std::move(one);
    }
    return Status::ok();
  }

  Status parse_sequence(GbnfExpr& out, bool nested) {
    out.kind = GbnfExpr::Kind::kSeq;
    out.line = line_;
    for (;;) {
      skip_space(nested);
      if (at_end()) break;
      const char c = peek();
      GbnfExpr item;
      item.line = line_;
      if (c == '"') {
        ++pos_;
        item.kind = GbnfExpr::Kind::kLiteral;
        while (!at_end() && peek() != '"') {
          if (peek() == '\n') return error("unterminated string literal");
          uint32_t cp = 0;
          LOOM_RETURN_IF_ERROR(parse_char(cp));
          tok::append_utf8(item.bytes, cp);
        }
        if (at_end()) return error("unterminated string literal");
        ++pos_;
      } else if (c == '[') {
        ++pos_;
        LOOM_RETURN_IF_ERROR(parse_class(item));
      } else if (c == '.') {
        ++pos_;
        item.kind = GbnfExpr::Kind::kClass;
        item.ranges = {{0, 0x10FFFF}};
      } else if (c == '(') {
        ++pos_;
        skip_space(true);
        LOOM_RETURN_IF_ERROR(parse_alternatives(item, true));
        skip_space(true);
        if (peek() != ')') return error("unbalanced '(': expected ')'");
        ++pos_;
      } else if (is_word_char(c)) {
        const size_t save = pos_;
        std::string name = parse_name();
        // `name ::=` starts the next rule (a missing newline would otherwise join them).
        size_t p = pos_;
        while (p < s_.size() && (s_[p] == ' ' || s_[p] == '\t')) ++p;
        if (s_.substr(p, 3) == "::=") {
          pos_ = save;
          if (nested) return error("unbalanced '(': rule '" + name + "' starts inside it");
          break;
        }
        item.kind = GbnfExpr::Kind::kRef;
        item.ref = rule_index(name, line_);
      } else {
        break;  // '|', ')', newline, or an error the caller reports
      }
      LOOM_RETURN_IF_ERROR(parse_postfix(item, nested));
      out.kids.push_back(std::move(item));
    }
    return Status::ok();
  }

  Status parse_postfix(GbnfExpr& item, bool nested) {
    for (;;) {
      skip_space(nested);
      const char c = peek();
      int32_t mn = 0, mx = -1;
      if (c == '*') {
        ++pos_;
      } else if (c == '+') {
        ++pos_;
        mn = 1;
      } else if (c == '?') {
        ++pos_;
        mx = 1;
      } else if (c == '{') {
        ++pos_;
        skip_space(false);
        bool have_min = false;
        LOOM_RETURN_IF_ERROR(parse_int(mn, have_min));
        skip_space(false);
        if (peek() == ',') {
          ++pos_;
          skip_space(false);
          bool have_max = false;
          LOOM_RETURN_IF_ERROR(parse_int(mx, have_max));
          if (!have_max) mx = -1;
        } else {
          if (!have_min) return error("expected a number in '{}'");
          mx = mn;
        }
        skip_space(false);
        if (peek() != '}') return error("expected '}' to close a repetition");
        ++pos_;
        if (mx >= 0 && mx < mn) return error("repetition {m,n} with n < m");
      } else {
        return Status::ok();
      }
      GbnfExpr rep;
      rep.kind = GbnfExpr::Kind::kRepeat;
      rep.line = item.line;
      rep.min = mn;
      rep.max = mx;
      rep.kids.push_back(std::move(item));
      item = std::move(rep);
    }
  }

  Status parse_int(int32_t& v, bool& have) {
    v = 0;
    have = false;
    while (peek() >= '0' && peek() <= '9') {
      v = v * 10 + (peek() - '0');
      if (v > 1000000) return error("repetition count too large");
      ++pos_;
      have = true;
    }
    return Status::ok();
  }

  Status parse_hex(int digits, uint32_t& cp) {
    cp = 0;
    for (int i = 0; i < digits; ++i) {
      char h = peek();
      int d = (h >= '0' && h <= '9')   ? h - '0'
              : (h >= 'a' && h <= 'f') ? h - 'a' + 10
              : (h >= 'A' && h <= 'F') ? h - 'A' + 10
                                       : -1;
      if (d < 0) return error("bad escape: expected " + std::to_string(digits) + " hex digits");
      cp = cp * 16 + static_cast<uint32_t>(d);
      ++pos_;
    }
    if (cp > 0x10FFFF) return error("code point out of range");
    return Status::ok();
  }

  // One character of a literal or class: an escape or one UTF-8 encoded code point.
  Status parse_char(uint32_t& cp) {
    const unsigned char c = static_cast<unsigned char>(peek());
    if (c == '\\') {
      ++pos_;
      const char e = peek();
      ++pos_;
      switch (e) {
        case 'n':
          cp = '\n';
          return Status::ok();
        case 'r':
          cp = '\r';
          return Status::ok();
        case 't':
          cp = '\t';
          return Status::ok();
        case '0':
          cp = 0;
          return Status::ok();
        case '\\':
        case '"':
        case '[':
        case ']':
        case '-':
        case '^':
        case '/':
        case '\'':
          cp = static_cast<unsigned char>(e);
          return Status::ok();
        case 'x':
          return parse_hex(2, cp);
        case 'u':
          return parse_hex(4, cp);
        case 'U':
          return parse_hex(8, cp);
        default:
          return error(std::string("bad escape '\\") + (e ? std::string(1, e) : "") + "'");
      }
    }
    // Decode UTF-8 (grammar files are UTF-8 text); a stray byte is taken as its value.
    int n = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : (c >> 3) == 30 ? 4 : 1;
    if (pos_ + n > s_.size()) n = 1;
    cp = n == 1 ? c : n == 2 ? (c & 0x1F) : n == 3 ? (c & 0x0F) : (c & 0x07);
    for (int i = 1; i < n; ++i) {
      const unsigned char k = static_cast<unsigned char>(s_[pos_ + i]);
      if ((k & 0xC0) != 0x80) return error("invalid UTF-8 in grammar text");
      cp = (cp << 6) | (k & 0x3F);
    }
    pos_ += n;
    return Status::ok();
  }

  Status parse_class(GbnfExpr& item) {
    item.kind = GbnfExpr::Kind::kClass;
    bool negated = false;
    if (peek() == '^') {
      negated = true;
      ++pos_;
    }
    std::vector<std::pair<uint32_t, uint32_t>> rs;
    while (!at_end() && peek() != ']') {
      if (peek() == '\n') return error("unterminated character class");
      uint32_t lo = 0;
      LOOM_RETURN_IF_ERROR(parse_char(lo));
      uint32_t hi = lo;
      if (peek() == '-' && peek(1) != ']' && pos_ + 1 < s_.size()) {
        ++pos_;
        LOOM_RETURN_IF_ERROR(parse_char(hi));
        if (hi < lo) return error("character class range out of order");
      }
      rs.emplace_back(lo, hi);
    }
    if (at_end()) return error("unterminated character class: expected ']'");
    ++pos_;
    std::sort(rs.begin(), rs.end());
    std::vector<std::pair<uint32_t, uint32_t>> merged;
    for (auto r : rs) {
      if (!merged.empty() && r.first <= merged.back().second + 1)
        merged.back().second = std::max(merged.back().second, r.second);
      else
        merged.push_back(r);
    }
    if (negated) {
      std::vector<std::pair<uint32_t, uint32_t>> inv;
      uint32_t next = 0;
      for (auto r : merged) {
        if (r.first > next) inv.emplace_back(next, r.first - 1);
        next = r.second + 1;
      }
      if (next <= 0x10FFFF) inv.emplace_back(next, 0x10FFFF);
      merged = std::move(inv);
    }
    item.ranges = std::move(merged);
    return Status::ok();
  }

  std::string_view s_;
  size_t pos_ = 0;
  int32_t line_ = 1;
  GbnfAst ast_;
  std::map<std::string, int32_t> index_;
};

}  // namespace

Result<GbnfAst> parse_gbnf_ast(std::string_view text) {
  return Parser(text).run();
}

}  // namespace loom::structured
