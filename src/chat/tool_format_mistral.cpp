// mistral: calls follow the [TOOL_CALLS] control token, in one of two shapes:
//   - a JSON array (Mistral 7B v0.3, Nemo, Small up to 3.1; the Nemo template renders this):
//       [TOOL_CALLS][{"name": "get_weather", "arguments": {"city": "Paris"}}, {...}]
//     items may carry the "id" the template renders after the arguments; it is ignored;
//   - name + [ARGS] (tokenizer v11+: Mistral Small 3.2, Magistral, Devstral), optionally with
//     the model's own id after [CALL_ID], one [TOOL_CALLS] per call:
//       [TOOL_CALLS]get_weather[ARGS]{"city": "Paris"}
// Mistral's templates require 9-character alphanumeric call ids (see the parser's ids).
#include "chat/markup.h"
#include "chat/tool_syntax.h"

namespace loom::chat::detail {
namespace {

bool is_name_byte(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
         c == '-' || c == '.';
}

class MistralSyntax final : public ToolSyntax {
 public:
  std::vector<std::string> openers() const override { return {markup::kMistralToolCalls}; }
  void begin(std::string_view) override {
    s_ = S::kStart;
    name_.clear();
    id_.clear();
  }
  Step step(Input& in, CallSink& sink) override {
    constexpr size_t kMaxName = 256;
    for (;;) {
      switch (s_) {
        case S::kStart:
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          if (in.peek() == '[') {
            ++in.pos;
            s_ = S::kItem;
          } else {
            s_ = S::kName;
          }
          break;
        case S::kItem:
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          if (in.peek() != '{') return Step::kFail;
          sink.item_start(in.pos);
          obj_.reset(/*opened=*/false, /*strict=*/false);
          s_ = S::kObject;
          break;
        case S::kObject: {
          Step s = obj_.step(in, sink);
          if (s != Step::kDone) return s;
          sink.end_call();
          s_ = S::kNextItem;
          break;
        }
        case S::kNextItem:
          skip_ws(in);
          if (in.at_end()) return in.eof ? Step::kDone : Step::kNeedMore;
          if (in.peek() == ',') {
            ++in.pos;
            s_ = S::kItem;
            break;
          }
          if (in.peek() == ']') ++in.pos;
          return Step::kDone;
        // name[CALL_ID]id[ARGS]{...}
        case S::kName:
        case S::kId: {
          std::string& out = s_ == S::kName ? name_ : id_;
          while (!in.at_end() && is_name_byte(in.peek()) && out.size() <= kMaxName) {
            out += in.peek();
            ++in.pos;
          }
          if (out.size() > kMaxName) return Step::kFail;
          if (in.at_end()) return Step::kNeedMore;
          if (in.peek() != '[' || out.empty()) return Step::kFail;
          s_ = s_ == S::kName ? S::kAfterName : S::kAfterId;
          break;
        }
        case S::kAfterName:
        case S::kAfterId: {
          Match m = match_literal(in, markup::kMistralArgs);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kYes) {
            sink.begin_call(name_, id_);
            scan_.reset();
            s_ = S::kArgsStart;
            break;
          }
          if (s_ == S::kAfterName) {
            m = match_literal(in, markup::kMistralCallId);
            if (m == Match::kMaybe) return Step::kNeedMore;
            if (m == Match::kYes) {
              s_ = S::kId;
              break;
            }
          }
          return Step::kFail;
        }
        case S::kArgsStart:
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          s_ = S::kArgs;
          break;
        case S::kArgs: {
          size_t n = scan_.feed(in.rest());
          if (in.eof && in.pos + n == in.text.size()) scan_.finish_at_eof();
          if (n) sink.args(in.rest().substr(0, n));
          in.pos += n;
          if (scan_.failed()) return Step::kFail;
          if (!scan_.done()) return Step::kNeedMore;
          sink.end_call();
          return Step::kDone;
        }
      }
    }
  }

 private:
  enum class S {
    kStart,
    kItem,
    kObject,
    kNextItem,  // array shape
    kName,
    kAfterName,
    kId,
    kAfterId,
    kArgsStart,
    kArgs,  // [ARGS] shape
  };
  S s_ = S::kStart;
  std::string name_, id_;
  JsonCallObjectParser obj_;
  JsonValueScanner scan_;
};

}  // namespace

std::unique_ptr<ToolSyntax> make_mistral_syntax() {
  return std::make_unique<MistralSyntax>();
}

}  // namespace loom::chat::detail
