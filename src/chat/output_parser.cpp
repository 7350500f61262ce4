// ChatOutputParser: the per-sequence streaming state machine
//   [reasoning] -> answer text -> call region (family syntax) -> answer text -> ...
// All text is appended to one buffer and consumed by states that only decide on bytes they
// have seen (a possible marker at the end of the buffer is held back), so the output does not
// depend on how the text was split into pushes.
//
// Whitespace: a region's leading whitespace after </think> or after a call is dropped, and a
// text run's trailing whitespace is held until non-space text follows, so the "\n\n" between
// reasoning, text and calls never shows up as content. At the end, held content whitespace is
// released (a plain answer keeps its bytes); held reasoning whitespace is dropped.
//
// Cut-off calls: call markup is never content. A region that ends before its call does (the
// output was cut, or the markup broke off) reports the call, if its name was read and so
// streamed, as an incomplete call with the arguments written so far; before that it is dropped
// (unless its opener may be plain text, llama3's "{"). Streamed deltas and the whole-text
// result are then the same by construction: nothing streamed is ever taken back.
#include <random>

#include "chat/harmony.h"
#include "chat/markup.h"
#include "chat/output_format.h"
#include "chat/tool_syntax.h"

namespace loom::chat {

using detail::Input;
using detail::Match;
using detail::Step;

namespace {

std::string random_alnum(size_t n) {
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string s(n, ' ');
  for (auto& c : s) c = kAlphabet[pick(rng)];
  return s;
}

// Arguments are streamed compact: whitespace outside JSON strings is dropped as the bytes
// arrive, so what a stream adds up to is already the finished call's arguments.
struct ArgumentsCompactor {
  bool in_string = false, escape = false;
  void append(std::string* out, std::string_view s) {
    for (char c : s) {
      if (in_string) {
        if (escape)
          escape = false;
        else if (c == '\\')
          escape = true;
        else if (c == '"')
          in_string = false;
      } else if (detail::is_ws(c)) {
        continue;
      } else if (c == '"') {
        in_string = true;
      }
      *out += c;
    }
  }
};

// A finished call's arguments: the compact text as streamed when it is JSON. Models sometimes
// write the arguments as a JSON string holding the object; unwrap that (the one case where
// the stream's text differs). Text that is not JSON is kept as written (the client sees what
// the model produced rather than an invented "{}").
std::string finish_arguments(const std::string& compact) {
  auto j = nlohmann::ordered_json::parse(compact, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return compact.empty() ? "{}" : compact;
  if (j.is_string()) {
    auto inner = nlohmann::ordered_json::parse(j.get<std::string>(), nullptr, false);
    if (inner.is_object()) return inner.dump();
  }
  return compact;
}

}  // namespace

struct ChatOutputParser::Impl final : detail::HarmonySink {
  enum class State { kStart, kReasoning, kContent, kCall, kFinished };

  OutputFormat format;
  std::unique_ptr<detail::ToolSyntax> syntax;  // null: tool markup is plain content
  std::vector<std::string> openers, start_openers;
  std::unique_ptr<detail::HarmonyParser> harmony;  // gpt-oss: replaces the states below
  bool closed_by_token = false;                    // finish(): see output_format.h

  std::string buf;  // output text; buf[pos..] unconsumed
  size_t pos = 0;
  State state = State::kStart;
  bool reasoning_first = false;  // at the start of a reasoning block: an extra <think> is skipped
  bool answer_start = true;      // no answer text yet: start-only openers apply
  bool drop_ws = false;          // drop the current region's leading whitespace
  std::string held_ws;           // trailing whitespace of the current text run
  bool held_in_reasoning = false;

  size_t call_start = 0;         // in kCall: where the current call's text starts in buf
  bool region_is_markup = true;  // in kCall: see ToolSyntax::opener_is_markup
  int32_t open_call = -1;
  ArgumentsCompactor compactor;    // the open call's
  std::vector<ToolCall> calls;     // every call begun (deltas' indices)
  std::vector<ToolCall> reported;  // tool_calls(): the ones ended, complete or cut
  ChatDelta out;

  Impl(OutputFormat f, bool tools_enabled, bool starts_in_reasoning) : format(f) {
    if (f.tools == ToolCallFormat::kHarmony || f.reasoning == ReasoningFormat::kHarmony) {
      harmony = std::make_unique<detail::HarmonyParser>(tools_enabled &&
                                                        f.tools == ToolCallFormat::kHarmony);
      return;
    }
    if (tools_enabled) set_tools(nullptr);
    if (f.reasoning != ReasoningFormat::kNone && starts_in_reasoning) {
      state = State::kReasoning;
      reasoning_first = true;
      drop_ws = true;
    } else if (f.reasoning == ReasoningFormat::kNone) {
      state = State::kContent;
    }
  }

  void set_tools(const nlohmann::ordered_json* tools) {
    syntax = detail::make_tool_syntax(format.tools, tools);
    openers.clear();
    start_openers.clear();
    if (syntax) {
      openers = syntax->openers();
      start_openers = syntax->start_openers();
    }
  }

  // ---- CallSink ----
  void item_start(size_t p) override { call_start = p; }
  void begin_call(std::string name, std::string id) override {
    if (id.empty()) {
      id = format.tools == ToolCallFormat::kMistral ? random_alnum(9) : "call_" + random_alnum(24);
    }
    open_call = static_cast<int32_t>(calls.size());
    compactor = ArgumentsCompactor();
    calls.push_back({id, name, ""});
    out.tool_calls.push_back({open_call, std::move(id), std::move(name), ""});
  }
  void args(std::string_view fragment) override {
    if (open_call < 0) return;
    std::string compact;
    compactor.append(&compact, fragment);
    if (compact.empty()) return;
    calls[open_call].arguments += compact;
    if (out.tool_calls.empty() || out.tool_calls.back().index != open_call) {
      out.tool_calls.push_back({open_call, "", "", ""});
    }
    out.tool_calls.back().arguments += compact;
  }
  void end_call() override {
    if (open_call < 0) return;
    ToolCall c = calls[open_call];
    c.arguments = finish_arguments(c.arguments);
    reported.push_back(std::move(c));
    open_call = -1;
  }
  // The open call's markup ended before the call did: it is reported as streamed.
  void cut_call() {
    if (open_call < 0) return;
    ToolCall c = calls[open_call];
    c.complete = false;
    reported.push_back(std::move(c));
    open_call = -1;
  }

  // ---- harmony ----
  void body_start() override {
    held_ws.clear();
    drop_ws = true;
  }
  void call_cut(size_t end) override {
    cut_call();
    pos = end;
  }
  void run_harmony(bool eof) {
    harmony->run(buf, &pos, eof, *this, eof && closed_by_token);
    const size_t keep = std::min(harmony->call_start(), pos);
    if (keep > 0 && keep * 2 >= buf.size()) {
      buf.erase(0, keep);
      pos -= keep;
      harmony->shift(keep);
    }
    if (eof) state = State::kFinished;
  }

  // ---- text runs ----
  void text(bool reasoning, std::string_view s) override {
    if (drop_ws) {
      size_t first = s.find_first_not_of(" \t\r\n");
      if (first == std::string_view::npos) return;
      s.remove_prefix(first);
      drop_ws = false;
    }
    size_t last = s.find_last_not_of(" \t\r\n");
    if (last == std::string_view::npos) {
      held_ws.append(s);
      held_in_reasoning = reasoning;
      return;
    }
    held_in_reasoning = reasoning;
    std::string& dst = reasoning ? out.reasoning : out.content;
    dst += held_ws;
    held_ws.clear();
    dst.append(s.substr(0, last + 1));
    held_ws.assign(s.substr(last + 1));
  }

  // ---- states ----
  // Each returns false when it needs more input.
  bool run_start(bool eof) {
    // Qwen3 / R1 outputs may open with <think> themselves.
    size_t p = buf.find_first_not_of(" \t\r\n", pos);
    if (p == std::string::npos) {
      if (!eof) return false;
      state = State::kContent;
      return true;
    }
    Input in{buf, p, eof};
    Match m = detail::match_literal(in, markup::kThinkOpen);
    if (m == Match::kMaybe) return false;
    if (m == Match::kYes) {
      pos = in.pos;
      state = State::kReasoning;
      drop_ws = true;
    } else {
      state = State::kContent;
    }
    return true;
  }

  bool run_reasoning(bool eof) {
    if (reasoning_first) {
      size_t p = buf.find_first_not_of(" \t\r\n", pos);
      if (p == std::string::npos && !eof) return false;
      if (p != std::string::npos) {
        Input in{buf, p, eof};
        Match m = detail::match_literal(in, markup::kThinkOpen);
        if (m == Match::kMaybe) return false;
        if (m == Match::kYes) pos = in.pos;
      }
      reasoning_first = false;
    }
    std::string_view r = std::string_view(buf).substr(pos);
    size_t at = r.find(markup::kThinkClose);
    if (at == std::string_view::npos) {
      size_t take = eof ? r.size() : detail::partial_marker_start(r, {markup::kThinkClose});
      text(true, r.substr(0, take));
      pos += take;
      if (eof) state = State::kFinished;
      return eof;
    }
    text(true, r.substr(0, at));
    held_ws.clear();
    pos += at + std::string_view(markup::kThinkClose).size();
    state = State::kContent;
    drop_ws = true;
    answer_start = true;
    return true;
  }

  bool run_content(bool eof) {
    if (syntax && answer_start && !start_openers.empty()) {
      size_t p = buf.find_first_not_of(" \t\r\n", pos);
      if (p == std::string::npos) {
        text(false, std::string_view(buf).substr(pos));
        pos = buf.size();
        if (eof) state = State::kFinished;
        return eof;
      }
      for (const auto& o : start_openers) {
        Input in{buf, p, eof};
        Match m = detail::match_literal(in, o);
        if (m == Match::kMaybe) return false;
        if (m == Match::kYes) {
          text(false, std::string_view(buf).substr(pos, p - pos));
          open_region(p, in.pos, o);
          return true;
        }
      }
    }
    answer_start = false;
    std::string_view r = std::string_view(buf).substr(pos);
    auto [at, which] = detail::find_first_marker(r, openers);
    if (at == std::string_view::npos) {
      // A cut output may end in the start of a call's opener ("<tool_ca"): markup, dropped.
      const bool cut = eof && !closed_by_token;
      size_t take = eof && !cut ? r.size() : detail::partial_marker_start(r, openers);
      text(false, r.substr(0, take));
      if (cut && take < r.size()) held_ws.clear();  // spacing before the markup
      pos = buf.size() - (eof ? 0 : r.size() - take);
      if (eof) state = State::kFinished;
      return eof;
    }
    text(false, r.substr(0, at));
    open_region(pos + at, pos + at + openers[which].size(), openers[which]);
    return true;
  }

  void open_region(size_t start, size_t after, std::string_view opener) {
    held_ws.clear();  // whitespace before a call is markup spacing, not content
    call_start = start;
    region_is_markup = syntax->opener_is_markup(opener);
    pos = after;
    answer_start = false;
    syntax->begin(opener);
    state = State::kCall;
  }

  bool run_call(bool eof) {
    Input in{buf, pos, eof};
    Step s = syntax->step(in, *this);
    pos = in.pos;
    switch (s) {
      case Step::kNeedMore:
        if (!eof) return false;
        if (open_call >= 0 || region_is_markup) {
          cut_call();  // the rest of the region is markup of a call cut short
          pos = buf.size();
          state = State::kContent;
          return true;
        }
        unterminated(buf.size());
        return true;
      case Step::kDone:
        if (open_call >= 0) end_call();  // a syntax that ends the region ends its call
        state = State::kContent;
        drop_ws = true;
        return true;
      case Step::kFail:
        if (open_call >= 0) {
          // Announced already: the call stays a (cut) call, and what broke it off is text,
          // unless the output was cut there (a cut-off marker is no text).
          cut_call();
          if (eof && !closed_by_token) pos = buf.size();
          state = State::kContent;
          return true;
        }
        unterminated(pos);
        return true;
    }
    return true;
  }

  // The current region's text up to `end` held no call: it is content.
  void unterminated(size_t end) {
    drop_ws = false;
    text(false, std::string_view(buf).substr(call_start, end - call_start));
    pos = end;
    state = State::kContent;
  }

  void run(bool eof) {
    if (harmony) return run_harmony(eof);
    for (;;) {
      bool progressed = false;
      switch (state) {
        case State::kStart:
          progressed = run_start(eof);
          break;
        case State::kReasoning:
          progressed = run_reasoning(eof);
          break;
        case State::kContent:
          progressed = run_content(eof);
          break;
        case State::kCall:
          progressed = run_call(eof);
          break;
        case State::kFinished:
          return;
      }
      if (!progressed) break;
    }
    // Drop consumed text (keep an open call's text: it may yet turn out to be content).
    size_t keep = state == State::kCall ? std::min(call_start, pos) : pos;
    if (keep > 0 && keep * 2 >= buf.size()) {
      buf.erase(0, keep);
      pos -= keep;
      if (state == State::kCall) call_start -= keep;
    }
  }

  ChatDelta take() {
    ChatDelta d = std::move(out);
    out = ChatDelta();
    return d;
  }
};

ChatOutputParser::ChatOutputParser(OutputFormat format, bool tools_enabled,
                                   bool starts_in_reasoning)
    : impl_(std::make_unique<Impl>(format, tools_enabled, starts_in_reasoning)) {}
ChatOutputParser::~ChatOutputParser() = default;
ChatOutputParser::ChatOutputParser(ChatOutputParser&&) noexcept = default;

void ChatOutputParser::set_tools(const nlohmann::ordered_json& tools) {
  if (impl_->syntax) impl_->set_tools(&tools);
}

ChatDelta ChatOutputParser::push(std::string_view text) {
  if (impl_->state == Impl::State::kFinished) return {};
  impl_->buf.append(text);
  impl_->run(/*eof=*/false);
  return impl_->take();
}

ChatDelta ChatOutputParser::finish(bool closed_by_token) {
  if (impl_->state != Impl::State::kFinished) {
    impl_->closed_by_token = closed_by_token;
    impl_->run(/*eof=*/true);
    // A plain answer keeps its trailing whitespace; after reasoning it is dropped.
    if (!impl_->held_in_reasoning) impl_->out.content += impl_->held_ws;
    impl_->held_ws.clear();
    impl_->state = Impl::State::kFinished;
  }
  return impl_->take();
}

const std::vector<ToolCall>& ChatOutputParser::tool_calls() const {
  return impl_->reported;
}

}  // namespace loom::chat
