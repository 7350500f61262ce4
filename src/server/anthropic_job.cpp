// Anthropic Messages API responses: the message object with its content blocks (thinking, text,
// tool_use) and the event stream (message_start, content_block_start / _delta / _stop per block,
// message_delta, message_stop). The model's text goes through a chat::ChatOutputParser when the
// request has tools or the model reasons; its deltas open and close blocks in order, and the
// non-streaming message is built from the same blocks, so a stream reassembles to it.
#include <cctype>
#include <random>

#include "chat/output_format.h"
#include "server/jobs.h"
#include "server/server_context.h"

namespace loom::server {

namespace {

std::string event(const char* name, const Json& data) {
  return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

bool is_alnum(const std::string& s) {
  for (char c : s)
    if (!std::isalnum(static_cast<unsigned char>(c))) return false;
  return true;
}

// Anthropic's id shape: "toolu_" + 24 alphanumerics. The parser's own "call_" + 24 ids keep
// their random part (so logs of both APIs line up); model-written ids are replaced.
std::string tool_use_id(const std::string& call_id) {
  const std::string prefix = "call_";
  if (call_id.size() == prefix.size() + 24 && call_id.rfind(prefix, 0) == 0 &&
      is_alnum(call_id.substr(prefix.size())))
    return "toolu_" + call_id.substr(prefix.size());
  static constexpr char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
  thread_local std::mt19937_64 rng{std::random_device{}()};
  std::uniform_int_distribution<size_t> pick(0, sizeof(kAlphabet) - 2);
  std::string id = "toolu_";
  for (int i = 0; i < 24; ++i) id += kAlphabet[pick(rng)];
  return id;
}

// A call's arguments as the tool_use input: the JSON value the arguments text holds (an object
// whenever the grammar constrained it); text that is not JSON is passed on as a string rather
// than replaced by an invented {}. A call cut short (stop_reason "max_tokens") holds the start
// of its arguments, which the stream sent as input_json_delta: its input is {} (as the
// stream's content_block_start said) unless that text happens to be whole JSON already.
Json tool_input(const chat::ToolCall& t) {
  Json j = Json::parse(t.arguments, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) return t.complete ? Json(t.arguments) : Json::object();
  return j;
}

class AnthropicJob : public GenerationJob {
 public:
  AnthropicJob(GenerationSpec spec, std::string id, std::shared_ptr<Responder> out)
      : spec_(std::move(spec)), id_(std::move(id)) {
    responder = std::move(out);
    input_tokens_ = spec_.prompts.empty() ? 0 : static_cast<int64_t>(spec_.prompts[0].size());
    if (spec_.output.enabled)
      parser_ = std::make_unique<chat::ChatOutputParser>(
          spec_.output.format, spec_.output.tools_enabled, spec_.output.starts_in_reasoning);
    if (parser_) parser_->set_tools(spec_.output.tools);
  }

  void start() {
    if (!spec_.stream) return;
    responder->begin_stream("text/event-stream");
    Json msg = message_object(Json::array(), Json(), Json());
    msg["usage"]["output_tokens"] = 0;
    responder->write(event("message_start", {{"type", "message_start"}, {"message", msg}}));
    responder->write(event("ping", {{"type", "ping"}}));
  }

  void on_output(size_t, RequestOutput& out) override {
    if (!out.error.empty() && error_.empty()) error_ = out.error;
    for (CompletionOutput& c : out.outputs) {
      if (c.index != 0) continue;
      output_tokens_ = c.num_output_tokens;
      chat::ChatDelta d = next_chat_delta(parser_.get(), std::move(c.text), c);
      apply(d);
      if (c.finished()) {
        finish_ = c.finish_reason;
        if (!c.stop_reason.empty() && !c.stop_token) stop_string_ = c.stop_reason;
      }
    }
  }

  void on_finished() override {
    if (responder->closed()) return;
    auto [stop_reason, stop_sequence] = stop_reason_json();
    if (!spec_.stream) {
      if (!error_.empty()) {
        ApiError e;
        e.status = 500;
        e.type = "api_error";
        e.message = "generation failed: " + error_;
        send_error(*responder, e, /*anthropic=*/true);
        return;
      }
      responder->send(200, "application/json",
                      dump_json(message_object(final_content(), stop_reason, stop_sequence)));
      return;
    }
    if (!error_.empty())
      responder->write(event(
          "error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", error_}}}}));
    // Anthropic messages always carry a block: an answer with nothing in it is one empty text.
    if (blocks_.empty()) open_block(Block{Kind::kText});
    close_block();
    responder->write(
        event("message_delta",
              {{"type", "message_delta"},
               {"delta", {{"stop_reason", stop_reason}, {"stop_sequence", stop_sequence}}},
               {"usage", {{"output_tokens", output_tokens_}}}}));
    responder->write(event("message_stop", {{"type", "message_stop"}}));
    responder->end_stream();
  }

 private:
  enum class Kind { kThinking, kText, kToolUse };
  struct Block {
    explicit Block(Kind k) : kind(k) {}
    Kind kind;
    std::string text;       // kThinking, kText
    int32_t call = -1;      // kToolUse: the parser's call index
    std::string call_id;    // kToolUse: the parser's id (matches tool_calls())
    std::string id, name;   // kToolUse: as the client sees them
    std::string arguments;  // kToolUse: the streamed argument text
  };

  void apply(const chat::ChatDelta& d) {
    visit_in_order(
        d, [&](const auto& t) { call_arguments(t); },
        [&](const std::string& s) { append_text(Kind::kThinking, s); },
        [&](const std::string& s) { append_text(Kind::kText, s); },
        [&](const auto& t) {
          Block b{Kind::kToolUse};
          b.call = t.index;
          b.call_id = t.id;
          b.id = tool_use_id(t.id);
          b.name = t.name;
          open_block(std::move(b));
        });
  }

  void call_arguments(const chat::ChatDelta::ToolCallDelta& t) {
    if (t.arguments.empty()) return;
    // The parser streams one call at a time, so this is the open block; a fragment for another
    // call would be a parser bug, and still goes to its own block rather than being lost.
    size_t at = blocks_.size();
    while (at > 0 && !(blocks_[at - 1].kind == Kind::kToolUse && blocks_[at - 1].call == t.index))
      --at;
    if (at == 0) return;
    blocks_[at - 1].arguments += t.arguments;
    if (spec_.stream)
      write_delta(at - 1, Json{{"type", "input_json_delta"}, {"partial_json", t.arguments}});
  }

  void append_text(Kind kind, const std::string& s) {
    if (!open_ || blocks_.back().kind != kind) open_block(Block{kind});
    blocks_.back().text += s;
    if (!spec_.stream) return;
    if (kind == Kind::kThinking)
      write_delta(blocks_.size() - 1, Json{{"type", "thinking_delta"}, {"thinking", s}});
    else
      write_delta(blocks_.size() - 1, Json{{"type", "text_delta"}, {"text", s}});
  }

  void open_block(Block b) {
    close_block();
    blocks_.push_back(std::move(b));
    open_ = true;
    if (!spec_.stream) return;
    const Block& o = blocks_.back();
    Json cb;
    switch (o.kind) {
      case Kind::kThinking:
        cb = {{"type", "thinking"}, {"thinking", ""}, {"signature", ""}};
        break;
      case Kind::kText:
        cb = {{"type", "text"}, {"text", ""}};
        break;
      case Kind::kToolUse:
        cb = {{"type", "tool_use"}, {"id", o.id}, {"name", o.name}, {"input", Json::object()}};
        break;
    }
    responder->write(event("content_block_start", {{"type", "content_block_start"},
                                                   {"index", blocks_.size() - 1},
                                                   {"content_block", std::move(cb)}}));
  }

  void close_block() {
    if (!open_) return;
    open_ = false;
    if (!spec_.stream) return;
    // Anthropic closes a thinking block with its signature; there is none to give here.
    if (blocks_.back().kind == Kind::kThinking)
      write_delta(blocks_.size() - 1, Json{{"type", "signature_delta"}, {"signature", ""}});
    responder->write(event("content_block_stop",
                           {{"type", "content_block_stop"}, {"index", blocks_.size() - 1}}));
  }

  void write_delta(size_t index, Json delta) {
    responder->write(
        event("content_block_delta",
              {{"type", "content_block_delta"}, {"index", index}, {"delta", std::move(delta)}}));
  }

  // The parser's calls (one cut short included: its tool_use block was announced).
  size_t num_calls() const { return parser_ ? parser_->tool_calls().size() : 0; }

  Json final_content() const {
    Json content = Json::array();
    for (const Block& b : blocks_) {
      switch (b.kind) {
        case Kind::kThinking:
          content.push_back({{"type", "thinking"}, {"thinking", b.text}, {"signature", ""}});
          break;
        case Kind::kText:
          content.push_back({{"type", "text"}, {"text", b.text}});
          break;
        case Kind::kToolUse:
          for (const chat::ToolCall& t : parser_->tool_calls())
            if (t.id == b.call_id)
              content.push_back(
                  {{"type", "tool_use"}, {"id", b.id}, {"name", t.name}, {"input", tool_input(t)}});
          break;
      }
    }
    if (content.empty()) content.push_back({{"type", "text"}, {"text", ""}});
    return content;
  }

  // {stop_reason, stop_sequence}: null while unfinished; a response that made calls and was
  // not cut short stopped for them ("tool_use", as OpenAI's "tool_calls").
  std::pair<Json, Json> stop_reason_json() const {
    switch (finish_) {
      case FinishReason::kNone:
        return {Json(), Json()};
      case FinishReason::kLength:
        return {Json("max_tokens"), Json()};
      default:
        break;
    }
    if (num_calls() > 0) return {Json("tool_use"), Json()};
    if (!stop_string_.empty()) return {Json("stop_sequence"), Json(stop_string_)};
    return {Json("end_turn"), Json()};
  }

  Json message_object(Json content, Json stop_reason, Json stop_sequence) const {
    return Json{{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", spec_.model},
                {"content", std::move(content)},
                {"stop_reason", std::move(stop_reason)},
                {"stop_sequence", std::move(stop_sequence)},
                {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", output_tokens_}}}};
  }

  GenerationSpec spec_;
  std::string id_;
  std::unique_ptr<chat::ChatOutputParser> parser_;  // when spec_.output.enabled
  std::vector<Block> blocks_;
  bool open_ = false;  // blocks_.back() is still open (streams: not yet stopped)
  FinishReason finish_ = FinishReason::kNone;
  std::string stop_string_;  // the stop sequence that ended the output, if one did
  int64_t input_tokens_ = 0;
  int64_t output_tokens_ = 0;
  std::string error_;
};

}  // namespace

std::shared_ptr<GenerationJob> make_anthropic_job(const ServerContext& ctx, GenerationSpec spec,
                                                  std::string id, std::shared_ptr<Responder> out) {
  (void)ctx;
  auto job = std::make_shared<AnthropicJob>(std::move(spec), std::move(id), std::move(out));
  job->start();
  return job;
}

}  // namespace loom::server
