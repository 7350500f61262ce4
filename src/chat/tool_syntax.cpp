// Scanning helpers shared by the tool-call syntaxes, the JSON call-object parser used by the
// families that write calls as JSON objects, and the syntax factory.
#include "chat/tool_syntax.h"

#include <algorithm>
#include <cstdio>

namespace loom::chat::detail {

Match match_literal(Input& in, std::string_view lit) {
  std::string_view r = in.rest();
  if (r.size() >= lit.size()) {
    if (r.substr(0, lit.size()) != lit) return Match::kNo;
    in.pos += lit.size();
    return Match::kYes;
  }
  if (lit.substr(0, r.size()) == r && !in.eof) return Match::kMaybe;
  return Match::kNo;
}

void consume_cut_literal(Input& in, std::string_view lit) {
  std::string_view r = in.rest();
  if (in.eof && r.size() < lit.size() && lit.substr(0, r.size()) == r) in.pos = in.text.size();
}

size_t partial_marker_start(std::string_view s, const std::vector<std::string>& markers) {
  size_t longest = 0;
  for (const auto& m : markers) longest = std::max(longest, m.size());
  size_t from = s.size() > longest ? s.size() - longest + 1 : 0;
  for (size_t p = from; p < s.size(); ++p) {
    std::string_view tail = s.substr(p);
    for (const auto& m : markers) {
      if (m.size() > tail.size() && std::string_view(m).substr(0, tail.size()) == tail) return p;
    }
  }
  return s.size();
}

std::pair<size_t, size_t> find_first_marker(std::string_view s,
                                            const std::vector<std::string>& markers) {
  size_t best = std::string_view::npos, which = 0;
  for (size_t i = 0; i < markers.size(); ++i) {
    size_t at = s.find(markers[i]);
    if (at < best) best = at, which = i;
  }
  return {best, which};
}

static bool is_scalar_byte(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '.' ||
         c == '+' || c == '-';
}

size_t JsonValueScanner::feed(std::string_view s) {
  size_t i = 0;
  for (; i < s.size() && !done_ && !failed_; ++i) {
    char c = s[i];
    if (!started_) {
      started_ = true;
      if (c == '{' || c == '[') {
        depth_ = 1;
      } else if (c == '"') {
        in_string_ = true;
      } else if (c == '-' || (c >= '0' && c <= '9') || c == 't' || c == 'f' || c == 'n') {
        scalar_ = true;
      } else {
        failed_ = true;
        return i;
      }
      continue;
    }
    if (scalar_) {
      if (!is_scalar_byte(c)) {
        done_ = true;
        return i;  // the delimiter belongs to what follows
      }
      continue;
    }
    if (in_string_) {
      if (escape_) {
        escape_ = false;
      } else if (c == '\\') {
        escape_ = true;
      } else if (c == '"') {
        in_string_ = false;
        if (depth_ == 0) done_ = true;
      }
      continue;
    }
    if (c == '"') {
      in_string_ = true;
    } else if (c == '{' || c == '[') {
      if (++depth_ > 512) failed_ = true;
    } else if (c == '}' || c == ']') {
      if (--depth_ == 0) done_ = true;
    }
  }
  return i;
}

size_t JsonStringReader::feed(std::string_view s) {
  size_t i = 0;
  for (; i < s.size() && !done_; ++i) {
    char c = s[i];
    if (escape_) {
      escape_ = false;
    } else if (c == '\\') {
      escape_ = true;
    } else if (c == '"') {
      done_ = true;
      continue;
    }
    raw_ += c;
  }
  return i;
}

bool JsonStringReader::value(std::string* out) const {
  auto j = nlohmann::json::parse("\"" + raw_ + "\"", nullptr, /*allow_exceptions=*/false);
  if (!j.is_string()) return false;
  *out = j.get<std::string>();
  return true;
}

void append_json_escaped(std::string* out, std::string_view s) {
  for (char c : s) {
    switch (c) {
      case '"':
        *out += "\\\"";
        break;
      case '\\':
        *out += "\\\\";
        break;
      case '\n':
        *out += "\\n";
        break;
      case '\r':
        *out += "\\r";
        break;
      case '\t':
        *out += "\\t";
        break;
      case '\b':
        *out += "\\b";
        break;
      case '\f':
        *out += "\\f";
        break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char hex[8];
          std::snprintf(hex, sizeof hex, "\\u%04x", static_cast<unsigned char>(c));
          *out += hex;
        } else {
          *out += c;
        }
    }
  }
}

// ---- JsonCallObjectParser ---------------------------------------------------------------

void JsonCallObjectParser::reset(bool opened, bool strict) {
  *this = JsonCallObjectParser();
  s_ = opened ? S::kKeyOrEnd : S::kOpen;
  strict_ = strict;
}

Step JsonCallObjectParser::step(Input& in, CallSink& sink) {
  constexpr size_t kMaxKey = 256;
  for (;;) {
    switch (s_) {
      case S::kOpen:
        skip_ws(in);
        if (in.at_end()) return Step::kNeedMore;
        if (in.peek() != '{') return Step::kFail;
        ++in.pos;
        s_ = S::kKeyOrEnd;
        break;
      case S::kKeyOrEnd:
        skip_ws(in);
        if (in.at_end()) return Step::kNeedMore;
        if (in.peek() == '"') {
          ++in.pos;
          str_.reset();
          s_ = S::kKey;
        } else if (in.peek() == '}' && !first_key_) {
          ++in.pos;
          goto close;
        } else {
          return Step::kFail;
        }
        break;
      case S::kKey:
        in.pos += str_.feed(in.rest());
        if (str_.raw_size() > kMaxKey) return Step::kFail;
        if (!str_.done()) return Step::kNeedMore;
        if (!str_.value(&key_)) return Step::kFail;
        s_ = S::kColon;
        break;
      case S::kColon:
        skip_ws(in);
        if (in.at_end()) return Step::kNeedMore;
        if (in.peek() != ':') return Step::kFail;
        ++in.pos;
        s_ = S::kValue;
        break;
      case S::kValue: {
        skip_ws(in);
        if (in.at_end()) return Step::kNeedMore;
        const bool is_args = key_ == "arguments" || key_ == "parameters";
        if (key_ == "name") {
          if (have_name_ || in.peek() != '"') return Step::kFail;
          ++in.pos;
          str_.reset();
          s_ = S::kName;
        } else if (is_args) {
          if (have_args_) return Step::kFail;
          have_args_ = true;
          scan_.reset();
          s_ = S::kArgs;
        } else {
          if (strict_ && first_key_) return Step::kFail;
          scan_.reset();
          s_ = S::kSkip;
        }
        first_key_ = false;
        break;
      }
      case S::kName: {
        in.pos += str_.feed(in.rest());
        if (str_.raw_size() > kMaxKey) return Step::kFail;
        if (!str_.done()) return Step::kNeedMore;
        std::string name;
        if (!str_.value(&name) || name.empty()) return Step::kFail;
        have_name_ = true;
        sink.begin_call(std::move(name), "");
        if (!pending_args_.empty()) sink.args(pending_args_);
        pending_args_.clear();
        s_ = S::kCommaOrEnd;
        break;
      }
      case S::kArgs:
      case S::kSkip: {
        size_t n = scan_.feed(in.rest());
        if (in.eof && in.pos + n == in.text.size()) scan_.finish_at_eof();
        std::string_view frag = in.rest().substr(0, n);
        in.pos += n;
        if (s_ == S::kArgs && !frag.empty()) {
          if (have_name_) {
            sink.args(frag);
          } else {
            pending_args_ += frag;
          }
        }
        if (scan_.failed()) return Step::kFail;
        if (!scan_.done()) return Step::kNeedMore;
        s_ = S::kCommaOrEnd;
        break;
      }
      case S::kCommaOrEnd:
        skip_ws(in);
        if (in.at_end()) return Step::kNeedMore;
        if (in.peek() == ',') {
          ++in.pos;
          s_ = S::kKeyOrEnd;
          break;
        }
        if (in.peek() != '}') return Step::kFail;
        ++in.pos;
        goto close;
    }
  }
close:
  if (!have_name_) return Step::kFail;
  if (!have_args_) sink.args("{}");
  return Step::kDone;
}

std::unique_ptr<ToolSyntax> make_tool_syntax(ToolCallFormat format,
                                             const nlohmann::ordered_json* tools) {
  switch (format) {
    case ToolCallFormat::kNone:
      return nullptr;
    case ToolCallFormat::kHermes:
      return make_hermes_syntax();
    case ToolCallFormat::kLlama3Json:
      return make_llama3_json_syntax();
    case ToolCallFormat::kMistral:
      return make_mistral_syntax();
    case ToolCallFormat::kDeepSeekV3:
      return make_deepseek_v3_syntax();
    case ToolCallFormat::kQwen3Coder:
      return make_qwen3_coder_syntax(tools);
    case ToolCallFormat::kHarmony:  // whole messages, not call regions: chat/harmony.h
      return nullptr;
  }
  return nullptr;
}

}  // namespace loom::chat::detail
