// Jinja tokenizer with Jinja2's whitespace-control rules (see lexer.h).
#include "jinja/lexer.h"

#include <algorithm>
#include <cstring>

#include "jinja/text.h"

namespace loom::jinja {
namespace {

bool is_ws(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}
bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_name_char(char c) {
  return is_name_start(c) || is_digit(c);
}

std::string rstrip_ws(std::string_view s) {
  size_t e = s.size();
  while (e > 0 && is_ws(s[e - 1])) --e;
  return std::string(s.substr(0, e));
}

int hex_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Python's "unicode-escape" decoding of a string literal body (what Jinja2 applies).
std::string unescape(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (c != '\\' || i + 1 >= s.size()) {
      out += c;
      continue;
    }
    char e = s[++i];
    switch (e) {
      case '\n':
        break;  // line continuation
      case '\\':
        out += '\\';
        break;
      case '\'':
        out += '\'';
        break;
      case '"':
        out += '"';
        break;
      case 'a':
        out += '\a';
        break;
      case 'b':
        out += '\b';
        break;
      case 'f':
        out += '\f';
        break;
      case 'n':
        out += '\n';
        break;
      case 'r':
        out += '\r';
        break;
      case 't':
        out += '\t';
        break;
      case 'v':
        out += '\v';
        break;
      case 'x':
      case 'u':
      case 'U': {
        size_t n = e == 'x' ? 2 : e == 'u' ? 4 : 8;
        char32_t cp = 0;
        bool ok = i + n < s.size();
        for (size_t k = 1; ok && k <= n; ++k) {
          int h = hex_value(s[i + k]);
          if (h < 0) ok = false;
          cp = cp * 16 + h;
        }
        if (!ok || cp > 0x10ffff) {
          out += '\\';
          out += e;
          break;
        }
        utf8_append(out, cp);
        i += n;
        break;
      }
      default:
        if (e >= '0' && e <= '7') {
          char32_t cp = e - '0';
          for (int k = 0; k < 2 && i + 1 < s.size() && s[i + 1] >= '0' && s[i + 1] <= '7'; ++k)
            cp = cp * 8 + (s[++i] - '0');
          utf8_append(out, cp);
        } else {
          out += '\\';
          out += e;
        }
    }
  }
  return out;
}

class Lexer {
 public:
  explicit Lexer(std::string src) : src_(std::move(src)) {}

  Result<std::vector<Token>> run() {
    size_t n = src_.size();
    while (pos_ < n) {
      size_t start = find_tag(pos_);
      if (start == std::string::npos) {
        emit(TokenType::kData, src_.substr(pos_));
        advance_to(n);
        break;
      }
      std::string text = src_.substr(pos_, start - pos_);
      char kind = src_[start + 1];
      char sign =
          start + 2 < n && (src_[start + 2] == '-' || src_[start + 2] == '+') ? src_[start + 2] : 0;
      size_t raw_end = kind == '%' ? match_raw_begin(start + 2 + (sign ? 1 : 0)) : 0;
      text = lstrip_text(std::move(text), sign, kind);
      if (!text.empty()) emit(TokenType::kData, text);
      advance_to(start);
      if (kind == '#') {
        LOOM_RETURN_IF_ERROR(lex_comment(start + 2 + (sign ? 1 : 0)));
      } else if (raw_end) {
        LOOM_RETURN_IF_ERROR(lex_raw(raw_end));
      } else {
        LOOM_RETURN_IF_ERROR(lex_tag(kind, start + 2 + (sign ? 1 : 0)));
      }
    }
    tokens_.push_back({TokenType::kEof, "", line_});
    return std::move(tokens_);
  }

 private:
  size_t find_tag(size_t from) const {
    size_t p = from;
    while (true) {
      p = src_.find('{', p);
      if (p == std::string::npos || p + 1 >= src_.size()) return std::string::npos;
      char c = src_[p + 1];
      if (c == '{' || c == '%' || c == '#') return p;
      ++p;
    }
  }

  // Text before a tag: "-" strips all trailing whitespace; otherwise lstrip_blocks removes
  // spaces between the line start and a block/comment tag.
  std::string lstrip_text(std::string text, char sign, char kind) const {
    if (sign == '-') return rstrip_ws(text);
    if (sign == '+' || kind == '{') return text;
    size_t nl = text.rfind('\n');
    size_t l_pos = nl == std::string::npos ? 0 : nl + 1;
    if (l_pos > 0 || line_starting_) {
      bool all_ws = l_pos < text.size();
      for (size_t i = l_pos; i < text.size(); ++i)
        if (!is_ws(text[i])) all_ws = false;
      if (all_ws) text.resize(l_pos);
    }
    return text;
  }

  void emit(TokenType t, std::string v) { tokens_.push_back({t, std::move(v), line_}); }

  void advance_to(size_t p) {
    line_ += static_cast<int>(std::count(src_.begin() + pos_, src_.begin() + p, '\n'));
    if (p > pos_) line_starting_ = src_[p - 1] == '\n';
    pos_ = p;
  }

  // After "%}" / "#}": "-" eats all whitespace, "+" nothing, else trim_blocks eats one "\n".
  size_t after_end(size_t p, char sign, bool trim) const {
    if (sign == '-') {
      while (p < src_.size() && is_ws(src_[p])) ++p;
    } else if (sign != '+' && trim && p < src_.size() && src_[p] == '\n') {
      ++p;
    }
    return p;
  }

  // Returns the position after "{% raw %}" when the tag at p (after "{%" and sign) is one.
  size_t match_raw_begin(size_t p) const {
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "raw") != 0) return 0;
    p += 3;
    while (p < src_.size() && is_ws(src_[p])) ++p;
    if (src_.compare(p, 3, "-%}") == 0) return after_end(p + 3, '-', false);
    if (src_.compare(p, 2, "%}") == 0) return p + 2;
    return 0;
  }

  Status lex_comment(size_t p) {
    size_t q = src_.find("#}", p);
    if (q == std::string::npos) return invalid_argument(err("missing end of comment tag"));
    char sign = (q > p && (src_[q - 1] == '-' || src_[q - 1] == '+')) ? src_[q - 1] : 0;
    advance_to(after_end(q + 2, sign, true));
    return Status::ok();
  }

  Status lex_raw(size_t p) {
    advance_to(p);
    size_t q = p;
    while (true) {
      q = src_.find("{%", q);
      if (q == std::string::npos) return invalid_argument(err("missing {% endraw %}"));
      size_t r = q + 2;
      char sign = r < src_.size() && (src_[r] == '-' || src_[r] == '+') ? src_[r] : 0;
      if (sign) ++r;
      while (r < src_.size() && is_ws(src_[r])) ++r;
      if (src_.compare(r, 6, "endraw") == 0) {
        r += 6;
        while (r < src_.size() && is_ws(src_[r])) ++r;
        char end_sign = 0;
        if (r < src_.size() && (src_[r] == '-' || src_[r] == '+')) end_sign = src_[r++];
        if (src_.compare(r, 2, "%}") == 0) {
          std::string text = lstrip_text(src_.substr(p, q - p), sign, '%');
          if (!text.empty()) emit(TokenType::kData, text);
          advance_to(after_end(r + 2, end_sign, true));
          return Status::ok();
        }
      }
      q += 2;
    }
  }

  Status lex_tag(char kind, size_t p) {
    emit(kind == '{' ? TokenType::kVarBegin : TokenType::kBlockBegin, "");
    advance_to(p);
    int depth = 0;
    size_t n = src_.size();
    while (true) {
      while (pos_ < n && is_ws(src_[pos_])) advance_to(pos_ + 1);
      if (pos_ >= n)
        return invalid_argument(err(kind == '{' ? "unexpected end of template, expected '}}'"
                                                : "unexpected end of template, expected '%}'"));
      size_t p0 = pos_;
      char c = src_[p0];
      if (depth == 0) {
        if (kind == '{') {
          if (src_.compare(p0, 3, "-}}") == 0) {
            emit(TokenType::kVarEnd, "");
            advance_to(after_end(p0 + 3, '-', false));
            return Status::ok();
          }
          if (src_.compare(p0, 2, "}}") == 0) {
            emit(TokenType::kVarEnd, "");
            advance_to(p0 + 2);
            return Status::ok();
          }
        } else {
          char sign = (c == '-' || c == '+') ? c : 0;
          if (src_.compare(p0 + (sign ? 1 : 0), 2, "%}") == 0) {
            emit(TokenType::kBlockEnd, "");
            advance_to(after_end(p0 + (sign ? 3 : 2), sign, true));
            return Status::ok();
          }
        }
      }
      if (c == '\'' || c == '"') {
        size_t q = p0 + 1;
        while (q < n && src_[q] != c) q += src_[q] == '\\' ? 2 : 1;
        if (q >= n) return invalid_argument(err("unterminated string literal"));
        emit(TokenType::kString, unescape(std::string_view(src_).substr(p0 + 1, q - p0 - 1)));
        advance_to(q + 1);
        continue;
      }
      if (is_digit(c)) {
        size_t q = p0;
        while (q < n && (is_digit(src_[q]) || src_[q] == '_')) ++q;
        bool is_float = false;
        bool after_dot = p0 > 0 && src_[p0 - 1] == '.';
        if (!after_dot && q + 1 < n && src_[q] == '.' && is_digit(src_[q + 1])) {
          is_float = true;
          ++q;
          while (q < n && (is_digit(src_[q]) || src_[q] == '_')) ++q;
        }
        if (!after_dot && q < n && (src_[q] == 'e' || src_[q] == 'E')) {
          size_t r = q + 1;
          if (r < n && (src_[r] == '+' || src_[r] == '-')) ++r;
          if (r < n && is_digit(src_[r])) {
            is_float = true;
            q = r;
            while (q < n && (is_digit(src_[q]) || src_[q] == '_')) ++q;
          }
        }
        std::string num;
        for (size_t i = p0; i < q; ++i)
          if (src_[i] != '_') num += src_[i];
        emit(is_float ? TokenType::kFloat : TokenType::kInt, num);
        advance_to(q);
        continue;
      }
      if (is_name_start(c)) {
        size_t q = p0;
        while (q < n && is_name_char(src_[q])) ++q;
        emit(TokenType::kName, src_.substr(p0, q - p0));
        advance_to(q);
        continue;
      }
      static const char* kTwo[] = {"//", "**", "==", "!=", "<=", ">="};
      std::string op;
      for (const char* t : kTwo)
        if (src_.compare(p0, 2, t) == 0) op = t;
      if (op.empty()) {
        if (!std::strchr("+-*/%~()[]{}<>=.:|,;", c))
          return invalid_argument(err(std::string("unexpected character '") + c + "'"));
        op = std::string(1, c);
      }
      if (op == "(" || op == "[" || op == "{") ++depth;
      if (op == ")" || op == "]" || op == "}") {
        if (depth == 0) return invalid_argument(err("unexpected '" + op + "'"));
        --depth;
      }
      emit(TokenType::kOp, op);
      advance_to(p0 + op.size());
    }
  }

  std::string err(const std::string& m) const {
    return "chat template syntax error at line " + std::to_string(line_) + ": " + m;
  }

  std::string src_;
  size_t pos_ = 0;
  int line_ = 1;
  bool line_starting_ = true;
  std::vector<Token> tokens_;
};

std::string normalize_newlines(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '\r') {
      out += '\n';
      if (i + 1 < s.size() && s[i + 1] == '\n') ++i;
    } else {
      out += s[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

}  // namespace

Result<std::vector<Token>> tokenize(std::string_view source) {
  return Lexer(normalize_newlines(source)).run();
}

}  // namespace loom::jinja
