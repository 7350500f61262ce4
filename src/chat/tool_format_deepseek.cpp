// deepseek_v3 (DeepSeek V3 / R1 and the R1 distills, whose templates render calls this way):
//   <｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather
//   ```json
//   {"city": "Paris"}
//   ```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>...<｜tool▁call▁end｜><｜tool▁calls▁end｜>
// DeepSeek V3.1 drops the type and the fence: <｜tool▁call▁begin｜>NAME<｜tool▁sep｜>{...}
// <｜tool▁call▁end｜>; both are accepted (the text before <｜tool▁sep｜> tells them apart).
#include "chat/markup.h"
#include "chat/tool_syntax.h"

namespace loom::chat::detail {

using namespace markup;

namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && is_ws(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_ws(s.back())) s.remove_suffix(1);
  return s;
}

class DeepSeekV3Syntax final : public ToolSyntax {
 public:
  std::vector<std::string> openers() const override { return {kDeepSeekCallsBegin}; }
  void begin(std::string_view) override { s_ = S::kBetween; }
  Step step(Input& in, CallSink& sink) override {
    constexpr size_t kMaxHead = 256;
    for (;;) {
      switch (s_) {
        case S::kBetween: {
          size_t start = in.pos;
          skip_ws(in);
          if (in.at_end()) {
            if (in.eof) return Step::kDone;
            in.pos = start;
            return Step::kNeedMore;
          }
          size_t at = in.pos;
          Match m = match_literal(in, kDeepSeekCallBegin);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kYes) {
            sink.item_start(at);
            head_.clear();
            s_ = S::kHead;
            break;
          }
          m = match_literal(in, kDeepSeekCallsEnd);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kNo) in.pos = start;
          return Step::kDone;
        }
        case S::kHead: {
          // "function" (V3) or the name (V3.1), up to <｜tool▁sep｜>.
          std::string_view r = in.rest();
          size_t at = r.find(kDeepSeekSep);
          size_t take = at != std::string_view::npos ? at : partial_marker_start(r, {kDeepSeekSep});
          head_.append(r.substr(0, take));
          in.pos += take;
          if (head_.size() > kMaxHead) return Step::kFail;
          if (at == std::string_view::npos) return Step::kNeedMore;
          in.pos += std::string_view(kDeepSeekSep).size();
          std::string_view head = trim(head_);
          if (head == "function") {
            name_.clear();
            s_ = S::kV3Name;
          } else {
            if (head.empty()) return Step::kFail;
            sink.begin_call(std::string(head), "");
            fenced_ = false;
            s_ = S::kArgsStart;
          }
          break;
        }
        case S::kV3Name: {
          while (!in.at_end() && in.peek() != '\n' && name_.size() <= kMaxHead) {
            name_ += in.peek();
            ++in.pos;
          }
          if (name_.size() > kMaxHead) return Step::kFail;
          if (in.at_end()) return Step::kNeedMore;
          ++in.pos;  // '\n'
          std::string_view name = trim(name_);
          if (name.empty()) return Step::kFail;
          sink.begin_call(std::string(name), "");
          s_ = S::kFence;
          break;
        }
        case S::kFence: {
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          Match m = match_literal(in, "```json");
          if (m == Match::kMaybe) return Step::kNeedMore;
          fenced_ = m == Match::kYes;
          s_ = S::kArgsStart;
          break;
        }
        case S::kArgsStart:
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          scan_.reset();
          s_ = S::kArgs;
          break;
        case S::kArgs: {
          size_t n = scan_.feed(in.rest());
          if (n) sink.args(in.rest().substr(0, n));
          in.pos += n;
          if (scan_.failed()) return Step::kFail;
          if (!scan_.done()) return Step::kNeedMore;
          s_ = fenced_ ? S::kCloseFence : S::kCallEnd;
          break;
        }
        case S::kCloseFence: {
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          Match m = match_literal(in, "```");
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kNo) return Step::kFail;
          s_ = S::kCallEnd;
          break;
        }
        case S::kCallEnd: {
          skip_ws(in);
          if (in.at_end()) return Step::kNeedMore;
          Match m = match_literal(in, kDeepSeekCallEnd);
          if (m == Match::kMaybe) return Step::kNeedMore;
          if (m == Match::kNo) return Step::kFail;
          sink.end_call();
          s_ = S::kBetween;
          break;
        }
      }
    }
  }

 private:
  enum class S { kBetween, kHead, kV3Name, kFence, kArgsStart, kArgs, kCloseFence, kCallEnd };
  S s_ = S::kBetween;
  std::string head_, name_;
  bool fenced_ = false;
  JsonValueScanner scan_;
};

}  // namespace

std::unique_ptr<ToolSyntax> make_deepseek_v3_syntax() {
  return std::make_unique<DeepSeekV3Syntax>();
}

}  // namespace loom::chat::detail
