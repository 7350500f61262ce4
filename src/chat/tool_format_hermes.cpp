// hermes (Qwen 2.5 / Qwen 3 / Hermes 2 Pro): each call is a JSON object in its own tags,
//   <tool_call>\n{"name": "get_weather", "arguments": {"city": "Paris"}}\n</tool_call>
// as the templates' system prompts instruct and their assistant turns render. Several calls
// are several tagged blocks, usually separated by "\n".
#include "chat/markup.h"
#include "chat/tool_syntax.h"

namespace loom::chat::detail {
namespace {

class HermesSyntax final : public ToolSyntax {
 public:
  std::vector<std::string> openers() const override { return {markup::kToolCallOpen}; }
  void begin(std::string_view) override {
    obj_.reset(/*opened=*/false, /*strict=*/false);
    closing_ = false;
  }
  Step step(Input& in, CallSink& sink) override {
    if (!closing_) {
      Step s = obj_.step(in, sink);
      if (s != Step::kDone) return s;
      closing_ = true;
    }
    skip_ws(in);
    switch (match_literal(in, markup::kToolCallClose)) {
      case Match::kMaybe:
        return Step::kNeedMore;
      case Match::kYes:
        sink.end_call();
        return Step::kDone;
      case Match::kNo:
        if (in.at_end() && !in.eof) return Step::kNeedMore;
        // The object is complete but the closing tag is missing (or cut off): Qwen models
        // sometimes end the turn (or start the next <tool_call>) right after the JSON. The
        // call is whole, so keep it; what follows is answer text again.
        consume_cut_literal(in, markup::kToolCallClose);
        sink.end_call();
        return Step::kDone;
    }
    return Step::kFail;
  }

 private:
  JsonCallObjectParser obj_;
  bool closing_ = false;
};

}  // namespace

std::unique_ptr<ToolSyntax> make_hermes_syntax() {
  return std::make_unique<HermesSyntax>();
}

}  // namespace loom::chat::detail
