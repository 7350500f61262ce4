// qwen3_coder (Qwen3-Coder, Qwen3.5): XML-ish calls with one element per parameter,
//   <tool_call>
//   <function=get_weather>
//   <parameter=city>
//   Paris
//   </parameter>
//   </function>
//   </tool_call>
// converted to a JSON arguments object. Values follow vLLM's qwen3_coder rule: one leading and
// one trailing "\n" are stripped; "null" (any case) is null; otherwise the parameter's type in
// the tool's schema decides: string types stay strings, integer / number / boolean values are
// converted (kept as strings when they do not convert), object / array / other types are
// parsed as JSON when they parse; parameters the schema does not declare (or no schema at
// all) stay strings. As vLLM does, a missing </parameter> is tolerated when the next
// <parameter= or </function> follows.
//
// String values are streamed (escaped) as they arrive, since they can be whole files; other
// values are short and are converted once complete.
#include <cctype>
#include <charconv>
#include <cmath>

#include "chat/markup.h"
#include "chat/tool_syntax.h"

namespace loom::chat::detail {
namespace {

using Json = nlohmann::ordered_json;
using namespace markup;

enum class ParamKind { kString, kInteger, kNumber, kBoolean, kJson };

ParamKind kind_of_type(std::string t) {
  for (auto& c : t) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (t == "string" || t == "str" || t == "text" || t == "varchar" || t == "char" || t == "enum")
    return ParamKind::kString;
  if (t.rfind("int", 0) == 0 || t.rfind("uint", 0) == 0 || t.rfind("long", 0) == 0 ||
      t.rfind("short", 0) == 0 || t.rfind("unsigned", 0) == 0)
    return ParamKind::kInteger;
  if (t.rfind("num", 0) == 0 || t.rfind("float", 0) == 0) return ParamKind::kNumber;
  if (t == "boolean" || t == "bool" || t == "binary") return ParamKind::kBoolean;
  return ParamKind::kJson;
}

// The kind of parameter `param` of function `fn` in the request's tools.
ParamKind param_kind(const Json* tools, const std::string& fn, const std::string& param) {
  if (!tools || !tools->is_array()) return ParamKind::kString;
  for (const auto& tool : *tools) {
    const Json* f = tool.contains("function") ? &tool["function"] : &tool;
    if (!f->is_object() || f->value("name", "") != fn) continue;
    auto params = f->find("parameters");
    if (params == f->end() || !params->is_object()) return ParamKind::kString;
    auto props = params->find("properties");
    if (props == params->end() || !props->is_object()) return ParamKind::kString;
    auto p = props->find(param);
    if (p == props->end() || !p->is_object()) return ParamKind::kString;
    auto type = p->find("type");
    if (type == p->end()) return ParamKind::kString;
    if (type->is_string()) return kind_of_type(type->get<std::string>());
    if (type->is_array()) {  // ["integer", "null"]: the first non-null type
      for (const auto& t : *type) {
        if (t.is_string() && t.get<std::string>() != "null")
          return kind_of_type(t.get<std::string>());
      }
    }
    return ParamKind::kString;
  }
  return ParamKind::kString;
}

bool is_null_text(std::string_view v) {
  if (v.size() != 4) return false;
  for (size_t i = 0; i < 4; ++i) {
    if (std::tolower(static_cast<unsigned char>(v[i])) != "null"[i]) return false;
  }
  return true;
}

// A complete non-string value as JSON text.
std::string convert_value(const std::string& v, ParamKind kind) {
  if (is_null_text(v)) return "null";
  switch (kind) {
    case ParamKind::kString:
      break;
    case ParamKind::kInteger: {
      long long x = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && end == v.data() + v.size()) return std::to_string(x);
      break;
    }
    case ParamKind::kNumber: {
      double x = 0;
      auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), x);
      if (ec == std::errc() && end == v.data() + v.size() && std::isfinite(x)) {
        if (x == std::floor(x) && std::fabs(x) < 9e15)
          return std::to_string(static_cast<long long>(x));
        return Json(x).dump();
      }
      break;
    }
    case ParamKind::kBoolean: {
      std::string l = v;
      for (auto& c : l) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
      return l == "true" ? "true" : "false";
    }
    case ParamKind::kJson: {
      auto j = Json::parse(v, nullptr, /*allow_exceptions=*/false);
      if (!j.is_discarded()) return j.dump();
      break;
    }
  }
  std::string s = "\"";
  append_json_escaped(&s, v);
  return s + "\"";
}

class Qwen3CoderSyntax final : public ToolSyntax {
 public:
  explicit Qwen3CoderSyntax(const Json* tools) : tools_(tools ? *tools : Json()) {}

  std::vector<std::string> openers() const override { return {kToolCallOpen}; }
  void begin(std::string_view) override { s_ = S::kFunction; }

  Step step(Input& in, CallSink& sink) override {
    constexpr size_t kMaxName = 256;
    for (;;) {
      switch (s_) {
        case S::kFunction: {
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          Match m = match_literal(in, kFunctionOpen);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kNo) return Step::kFail;
          fn_name_buf_.clear();
          s_ = S::kFunctionName;
          break;
        }
        case S::kFunctionName:
        case S::kParamName: {
          std::string& out = s_ == S::kFunctionName ? fn_name_buf_ : name_;
          while (!in.at_end() && in.peek() != '>' && in.peek() != '\n' && in.peek() != '<' &&
                 out.size() <= kMaxName) {
            out += in.peek();
            ++in.pos;
          }
          if (out.size() > kMaxName) return Step::kFail;
          if (in.at_end()) return Step::kNeedMore;
          if (in.peek() != '>' || out.empty()) return Step::kFail;
          ++in.pos;
          if (s_ == S::kFunctionName) {
            function_ = fn_name_buf_;
            fn_name_buf_.clear();
            sink.begin_call(function_, "");
            n_params_ = 0;
            s_ = S::kParams;
          } else {
            begin_param(sink);
            s_ = S::kValue;
          }
          break;
        }
        case S::kParams: {
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          Match m = match_literal(in, kParameterOpen);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kYes) {
            name_.clear();
            s_ = S::kParamName;
            break;
          }
          m = match_literal(in, kFunctionClose);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kNo) return Step::kFail;
          sink.args(n_params_ == 0 ? "{}" : "}");
          s_ = S::kToolCallClose;
          break;
        }
        case S::kValue: {
          static const std::vector<std::string> kEnds = {kParameterClose, kParameterOpen,
                                                         kFunctionClose};
          std::string_view r = in.rest();
          auto [at, which] = find_first_marker(r, kEnds);
          size_t take = at != std::string_view::npos ? at : partial_marker_start(r, kEnds);
          value_bytes(r.substr(0, take), sink);
          in.pos += take;
          if (at == std::string_view::npos) return Step::kNeedMore;
          end_param(sink);
          if (which == 0) in.pos += std::string_view(kParameterClose).size();
          s_ = S::kParams;
          break;
        }
        case S::kToolCallClose: {
          skip_ws(in);
          Match m = match_literal(in, kToolCallClose);
          if (m == Match::kMaybe || (in.at_end() && !in.eof)) return Step::kNeedMore;
          // A missing (or cut off) </tool_call> after a complete </function>: the call is whole.
          if (m == Match::kNo) consume_cut_literal(in, kToolCallClose);
          sink.end_call();
          return Step::kDone;
        }
      }
    }
  }

 private:
  enum class S { kFunction, kFunctionName, kParams, kParamName, kValue, kToolCallClose };

  void begin_param(CallSink& sink) {
    std::string head = n_params_++ == 0 ? "{" : ", ";
    head += Json(name_).dump();
    head += ": ";
    sink.args(head);
    kind_ = param_kind(&tools_, function_, name_);
    value_.clear();
    at_value_start_ = true;
    held_newline_ = false;
    streaming_ = false;
  }

  // Value text as it arrives: strip one leading "\n" now and hold a trailing "\n" back (it is
  // dropped if the value ends there). String values stream once they cannot be "null".
  void value_bytes(std::string_view s, CallSink& sink) {
    if (s.empty()) return;
    if (at_value_start_) {
      at_value_start_ = false;
      if (s.front() == '\n') s.remove_prefix(1);
      if (s.empty()) return;
    }
    std::string text;
    if (held_newline_) text += '\n';
    held_newline_ = !s.empty() && s.back() == '\n';
    text.append(s.substr(0, s.size() - (held_newline_ ? 1 : 0)));
    if (kind_ != ParamKind::kString) {
      value_ += text;
      return;
    }
    if (!streaming_) {
      value_ += text;
      // Still possibly "null"? Then wait.
      if (value_.size() <= 4 && is_null_text(value_ + std::string("null").substr(value_.size())))
        return;
      streaming_ = true;
      std::string out = "\"";
      append_json_escaped(&out, value_);
      sink.args(out);
      return;
    }
    std::string out;
    append_json_escaped(&out, text);
    if (!out.empty()) sink.args(out);
  }

  void end_param(CallSink& sink) {
    if (streaming_) {
      sink.args("\"");
    } else {
      sink.args(convert_value(value_, kind_));
    }
  }

  Json tools_;
  S s_ = S::kFunction;
  std::string function_, fn_name_buf_, name_, value_;
  ParamKind kind_ = ParamKind::kString;
  int n_params_ = 0;
  bool at_value_start_ = false, held_newline_ = false, streaming_ = false;
};

}  // namespace

std::unique_ptr<ToolSyntax> make_qwen3_coder_syntax(const nlohmann::ordered_json* tools) {
  return std::make_unique<Qwen3CoderSyntax>(tools);
}

}  // namespace loom::chat::detail
