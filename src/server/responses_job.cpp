// Responses API output: the response object ({"object": "response", "status", "output": [items],
// "usage", ...}) and its event stream. The model's text goes through the chat output parser;
// its deltas open and close output items in the order the model wrote them (a reasoning item,
// a message, function_call items), and the non-streamed object is built from the same items,
// so a stream reassembles to it. Per item the stream sends
//   response.output_item.added
//   message:   response.content_part.added, response.output_text.delta..., .output_text.done,
//              response.content_part.done
//   reasoning: response.content_part.added (reasoning_text), response.reasoning_text.delta...,
//              response.reasoning_text.done, response.content_part.done
//   call:      response.function_call_arguments.delta..., .function_call_arguments.done
//   response.output_item.done
// between response.created + response.in_progress and the terminal response.completed
// (response.incomplete when max_output_tokens cut it short, response.failed on an engine
// error). Every event carries a sequence_number counting from 0.
#include <algorithm>
#include <ctime>
#include <random>

#include "chat/output_format.h"
#include "loom/tokenizer.h"
#include "server/jobs.h"
#include "server/responses_api.h"
#include "server/responses_store.h"
#include "server/server_context.h"

namespace loom::server {

namespace {

// prefix + 24 hex digits (item ids: msg_, rs_, fc_).
std::string random_id(const char* prefix) {
  thread_local std::mt19937_64 rng{std::random_device{}()};
  char buf[32];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(rng() & 0xffffffffu));
  return std::string(prefix) + buf;
}

class ResponsesJob : public GenerationJob {
 public:
  ResponsesJob(const ServerContext& ctx, GenerationSpec spec, std::string id,
               std::shared_ptr<Responder> out)
      : tokenizer_(ctx.tokenizer),
        spec_(std::move(spec)),
        rc_(*spec_.responses),
        id_(std::move(id)),
        created_(std::time(nullptr)) {
    responder = std::move(out);
    input_tokens_ = spec_.prompts.empty() ? 0 : static_cast<int64_t>(spec_.prompts[0].size());
    if (spec_.output.enabled) {
      parser_ = std::make_unique<chat::ChatOutputParser>(
          spec_.output.format, spec_.output.tools_enabled, spec_.output.starts_in_reasoning);
      parser_->set_tools(spec_.output.tools);
    }
  }

  void start() {
    if (!spec_.stream) return;
    responder->begin_stream("text/event-stream");
    const Json r = response_object("in_progress", Json::array(), Json());
    emit("response.created", {{"response", r}});
    emit("response.in_progress", {{"response", r}});
  }

  void on_output(size_t, RequestOutput& out) override {
    if (!out.error.empty() && error_.empty()) error_ = out.error;
    if (out.num_prompt_tokens > 0) input_tokens_ = out.num_prompt_tokens;
    cached_tokens_ = out.num_cached_tokens;
    for (CompletionOutput& c : out.outputs) {
      if (c.index != 0) continue;
      output_tokens_ = c.num_output_tokens;
      if (c.finished()) finish_ = c.finish_reason;
      apply(next_chat_delta(parser_.get(), std::move(c.text), c));
    }
  }

  void on_finished() override {
    if (responder->closed()) return;
    if (!items_.empty() && open_) {
      if (finish_ == FinishReason::kLength) items_.back().status = "incomplete";
      close_item();
    }
    const char* status = !error_.empty()                    ? "failed"
                         : finish_ == FinishReason::kLength ? "incomplete"
                                                            : "completed";
    Json output = Json::array();
    for (const Item& it : items_) output.push_back(item_json(it));
    Json r = response_object(status, output, usage());
    if (!error_.empty()) r["error"] = {{"code", "server_error"}, {"message", error_}};
    if (finish_ == FinishReason::kLength && error_.empty())
      r["incomplete_details"] = {{"reason", "max_output_tokens"}};
    // Stored before the client can see it, so a follow-up naming it always finds it.
    if (rc_.store && error_.empty() && rc_.store_to) {
      StoredResponse s{r, rc_.items};
      for (const Json& it : output) s.items.push_back(it);
      rc_.store_to->put(id_, std::move(s), rc_.store_capacity);
    }
    if (spec_.stream) {
      emit(std::string("response.") + status, {{"response", std::move(r)}});
      responder->end_stream();
      return;
    }
    if (!error_.empty()) {
      ApiError e;
      e.status = 500;
      e.type = "server_error";
      e.message = "generation failed: " + error_;
      send_error(*responder, e);
      return;
    }
    responder->send(200, "application/json", dump_json(r));
  }

 private:
  enum class Kind { kReasoning, kMessage, kCall };
  struct Item {
    explicit Item(Kind k) : kind(k) {}
    Kind kind;
    std::string id;
    std::string status = "in_progress";
    std::string text;       // kReasoning, kMessage
    int32_t call = -1;      // kCall: the parser's call index
    std::string call_id;    // kCall: the parser's id (matches tool_calls())
    std::string name;       // kCall
    std::string arguments;  // kCall: streamed, then the parsed call's once complete
  };

  void apply(const chat::ChatDelta& d) {
    visit_in_order(
        d, [&](const auto& t) { call_arguments(t); },
        [&](const std::string& s) { append_text(Kind::kReasoning, s); },
        [&](const std::string& s) { append_text(Kind::kMessage, s); },
        [&](const auto& t) {
          Item it{Kind::kCall};
          it.call = t.index;
          it.call_id = t.id;
          it.name = t.name;
          open_item(std::move(it));
        });
  }

  void call_arguments(const chat::ChatDelta::ToolCallDelta& t) {
    if (t.arguments.empty()) return;
    size_t at = items_.size();
    while (at > 0 && !(items_[at - 1].kind == Kind::kCall && items_[at - 1].call == t.index)) --at;
    if (at == 0) return;
    items_[at - 1].arguments += t.arguments;
    if (spec_.stream)
      emit("response.function_call_arguments.delta",
           {{"item_id", items_[at - 1].id}, {"output_index", at - 1}, {"delta", t.arguments}});
  }

  void append_text(Kind kind, const std::string& s) {
    if (!open_ || items_.back().kind != kind) open_item(Item{kind});
    items_.back().text += s;
    if (!spec_.stream) return;
    Json e = {{"item_id", items_.back().id},
              {"output_index", items_.size() - 1},
              {"content_index", 0},
              {"delta", s}};
    if (kind == Kind::kMessage) {
      e["logprobs"] = Json::array();
      emit("response.output_text.delta", std::move(e));
    } else {
      emit("response.reasoning_text.delta", std::move(e));
    }
  }

  void open_item(Item it) {
    close_item();
    it.id = random_id(it.kind == Kind::kMessage     ? "msg_"
                      : it.kind == Kind::kReasoning ? "rs_"
                                                    : "fc_");
    items_.push_back(std::move(it));
    open_ = true;
    if (!spec_.stream) return;
    const size_t index = items_.size() - 1;
    const Item& o = items_.back();
    emit("response.output_item.added", {{"output_index", index}, {"item", item_json(o)}});
    if (o.kind != Kind::kCall)
      emit("response.content_part.added", {{"item_id", o.id},
                                           {"output_index", index},
                                           {"content_index", 0},
                                           {"part", part_json(o.kind, "")}});
  }

  void close_item() {
    if (!open_) return;
    open_ = false;
    Item& it = items_.back();
    if (it.kind == Kind::kCall) {
      // A call the parser completed has its canonical arguments; one cut short stays as
      // streamed, marked incomplete.
      bool complete = false;
      if (parser_)
        for (const chat::ToolCall& t : parser_->tool_calls())
          if (t.id == it.call_id && t.complete) {
            it.arguments = t.arguments;
            complete = true;
          }
      if (!complete) it.status = "incomplete";
    }
    if (it.status == "in_progress") it.status = "completed";
    if (!spec_.stream) return;
    const size_t index = items_.size() - 1;
    if (it.kind == Kind::kCall) {
      emit("response.function_call_arguments.done", {{"item_id", it.id},
                                                     {"output_index", index},
                                                     {"name", it.name},
                                                     {"arguments", it.arguments}});
    } else {
      Json done = {{"item_id", it.id}, {"output_index", index}, {"content_index", 0}};
      done["text"] = it.text;
      if (it.kind == Kind::kMessage) {
        done["logprobs"] = Json::array();
        emit("response.output_text.done", done);
      } else {
        emit("response.reasoning_text.done", done);
      }
      done.erase("text");
      done.erase("logprobs");
      done["part"] = part_json(it.kind, it.text);
      emit("response.content_part.done", std::move(done));
    }
    emit("response.output_item.done", {{"output_index", index}, {"item", item_json(it)}});
  }

  static Json part_json(Kind kind, const std::string& text) {
    if (kind == Kind::kReasoning) return {{"type", "reasoning_text"}, {"text", text}};
    return {{"type", "output_text"},
            {"text", text},
            {"annotations", Json::array()},
            {"logprobs", Json::array()}};
  }

  // The item as the response shows it; an open message or reasoning item has no parts yet
  // (they arrive by content_part events).
  Json item_json(const Item& it) const {
    const bool open = it.status == "in_progress";
    switch (it.kind) {
      case Kind::kMessage:
        return {{"id", it.id},
                {"type", "message"},
                {"status", it.status},
                {"role", "assistant"},
                {"content", open ? Json::array() : Json::array({part_json(it.kind, it.text)})}};
      case Kind::kReasoning:
        return {{"id", it.id},
                {"type", "reasoning"},
                {"summary", Json::array()},
                {"content", open ? Json::array() : Json::array({part_json(it.kind, it.text)})},
                {"status", it.status}};
      case Kind::kCall:
        break;
    }
    return {{"id", it.id},           {"type", "function_call"},
            {"status", it.status},   {"arguments", it.arguments},
            {"call_id", it.call_id}, {"name", it.name}};
  }

  Json usage() const {
    // Reasoning tokens: the reasoning text re-tokenized (the parser sees text, not tokens).
    int64_t reasoning = 0;
    for (const Item& it : items_)
      if (it.kind == Kind::kReasoning && tokenizer_)
        reasoning += static_cast<int64_t>(tokenizer_->encode(it.text, false, false).size());
    reasoning = std::min(reasoning, output_tokens_);
    return {{"input_tokens", input_tokens_},
            {"input_tokens_details", {{"cached_tokens", cached_tokens_}}},
            {"output_tokens", output_tokens_},
            {"output_tokens_details", {{"reasoning_tokens", reasoning}}},
            {"total_tokens", input_tokens_ + output_tokens_}};
  }

  Json response_object(const char* status, Json output, Json usage) const {
    const Json& e = rc_.echo;
    return Json{{"id", id_},
                {"object", "response"},
                {"created_at", created_},
                {"status", status},
                {"background", false},
                {"error", nullptr},
                {"incomplete_details", nullptr},
                {"instructions", e["instructions"]},
                {"max_output_tokens", e["max_output_tokens"]},
                {"max_tool_calls", nullptr},
                {"model", spec_.model},
                {"output", std::move(output)},
                {"parallel_tool_calls", e["parallel_tool_calls"]},
                {"previous_response_id", e["previous_response_id"]},
                {"reasoning", e["reasoning"]},
                {"service_tier", "default"},
                {"store", e["store"]},
                {"temperature", e["temperature"]},
                {"text", e["text"]},
                {"tool_choice", e["tool_choice"]},
                {"tools", e["tools"]},
                {"top_logprobs", 0},
                {"top_p", e["top_p"]},
                {"truncation", e["truncation"]},
                {"usage", std::move(usage)},
                {"user", e["user"]},
                {"metadata", e["metadata"]}};
  }

  void emit(const std::string& type, Json fields) {
    Json j = {{"type", type}};
    for (auto& [k, v] : fields.items()) j[k] = std::move(v);
    j["sequence_number"] = sequence_++;
    responder->write("event: " + type + "\ndata: " + dump_json(j) + "\n\n");
  }

  const Tokenizer* tokenizer_;
  GenerationSpec spec_;
  const ResponsesContext& rc_;  // owned by spec_
  std::string id_;
  int64_t created_;
  std::unique_ptr<chat::ChatOutputParser> parser_;
  std::vector<Item> items_;
  bool open_ = false;  // items_.back() is still open
  int64_t sequence_ = 0;
  FinishReason finish_ = FinishReason::kNone;
  int64_t input_tokens_ = 0, cached_tokens_ = 0, output_tokens_ = 0;
  std::string error_;
};

}  // namespace

std::shared_ptr<GenerationJob> make_responses_job(const ServerContext& ctx, GenerationSpec spec,
                                                  std::string id, std::shared_ptr<Responder> out) {
  auto job = std::make_shared<ResponsesJob>(ctx, std::move(spec), std::move(id), std::move(out));
  job->start();
  return job;
}

}  // namespace loom::server
