// llama3_json (Llama 3.1 - 3.3 with custom tools): the whole answer is the call, a bare JSON
// object {"name": "get_weather", "parameters": {"city": "Paris"}} (the template's instruction;
// "arguments" is accepted too), optionally after <|python_tag|>. Several calls are separated
// by ";" as vLLM's llama3_json parser accepts. Only the start of the answer can open a call:
// a JSON object later in a text answer is just text.
#include "chat/markup.h"
#include "chat/tool_syntax.h"

namespace loom::chat::detail {
namespace {

class Llama3JsonSyntax final : public ToolSyntax {
 public:
  std::vector<std::string> openers() const override { return {}; }
  std::vector<std::string> start_openers() const override { return {markup::kPythonTag, "{"}; }
  bool opener_is_markup(std::string_view opener) const override { return opener != "{"; }
  void begin(std::string_view opener) override {
    obj_.reset(/*opened=*/opener == "{", /*strict=*/true);
    s_ = S::kObject;
  }
  Step step(Input& in, CallSink& sink) override {
    for (;;) {
      switch (s_) {
        case S::kObject: {
          Step s = obj_.step(in, sink);
          if (s != Step::kDone) return s;
          sink.end_call();
          s_ = S::kBetween;
          break;
        }
        case S::kBetween:
        case S::kAfterSeparator: {
          size_t start = in.pos;
          skip_ws(in);
          if (in.at_end()) {
            if (in.eof) return Step::kDone;
            in.pos = start;  // keep the whitespace until we know what follows
            return Step::kNeedMore;
          }
          if (in.peek() == ';' && s_ == S::kBetween) {
            ++in.pos;
            s_ = S::kAfterSeparator;
            break;
          }
          if (in.peek() != '{') {
            in.pos = start;
            return Step::kDone;
          }
          sink.item_start(in.pos);
          ++in.pos;
          obj_.reset(/*opened=*/true, /*strict=*/true);
          s_ = S::kObject;
          break;
        }
      }
    }
  }

 private:
  enum class S { kObject, kBetween, kAfterSeparator };
  S s_ = S::kObject;
  JsonCallObjectParser obj_;
};

}  // namespace

std::unique_ptr<ToolSyntax> make_llama3_json_syntax() {
  return std::make_unique<Llama3JsonSyntax>();
}

}  // namespace loom::chat::detail
