// Ollama /api/generate and /api/chat responses: NDJSON chunks ({"model", "created_at",
// "response" | "message", "done": false}) and a last object with "done": true, "done_reason"
// ("stop" or "length") and the timings in nanoseconds; or, with "stream": false, one object
// holding the whole answer. Reasoning goes to "thinking", tool calls to message.tool_calls (each
// once, when complete, with its arguments as a JSON object), never into the text.
#include "chat/output_format.h"
#include "server/jobs.h"
#include "server/ollama_api.h"
#include "server/server_context.h"

namespace loom::server {
namespace {

int64_t ns(double seconds) {
  return static_cast<int64_t>(seconds * 1e9);
}

class OllamaJob : public GenerationJob {
 public:
  OllamaJob(GenerationSpec spec, std::shared_ptr<Responder> out) : spec_(std::move(spec)) {
    responder = std::move(out);
    chat_ = spec_.kind == ApiKind::kOllamaChat;
    if (spec_.output.enabled)
      parser_ = std::make_unique<chat::ChatOutputParser>(
          spec_.output.format, spec_.output.tools_enabled, spec_.output.starts_in_reasoning);
    if (parser_) parser_->set_tools(spec_.output.tools);
  }

  void start() {
    if (spec_.stream) responder->begin_stream("application/x-ndjson");
  }

  void on_output(size_t, RequestOutput& out) override {
    if (!out.error.empty() && error_.empty()) error_ = out.error;
    prompt_tokens_ = out.num_prompt_tokens;
    ttft_s_ = out.time_to_first_token_s;
    queue_s_ = out.queue_time_s;
    elapsed_s_ = out.elapsed_s;
    for (CompletionOutput& c : out.outputs) {
      if (c.index != 0) continue;
      output_tokens_ = c.num_output_tokens;
      ids_.insert(ids_.end(), c.token_ids.begin(), c.token_ids.end());
      chat::ChatDelta d = next_chat_delta(parser_.get(), std::move(c.text), c);
      if (c.finished()) finish_ = c.finish_reason;
      content_ += d.content;
      thinking_ += d.reasoning;
      Json calls = new_calls();
      if (spec_.stream && (!d.content.empty() || !d.reasoning.empty() || !calls.empty()))
        responder->write(line(chunk(d.content, d.reasoning, std::move(calls))));
    }
  }

  void on_finished() override {
    if (responder->closed()) return;
    if (!error_.empty()) {
      ApiError e;
      e.status = 500;
      e.message = "generation failed: " + error_;
      if (spec_.stream)
        responder->write(line(Json{{"error", e.message}}));
      else
        send_error(*responder, e, ErrorShape::kOllama);
      if (spec_.stream) responder->end_stream();
      return;
    }
    Json last =
        spec_.stream ? chunk("", "", Json::array()) : chunk(content_, thinking_, all_calls());
    last["done"] = true;
    last["done_reason"] = finish_ == FinishReason::kLength ? "length" : "stop";
    if (!chat_) {
      std::vector<int32_t> context =
          spec_.prompts.empty() ? std::vector<int32_t>() : spec_.prompts[0];
      context.insert(context.end(), ids_.begin(), ids_.end());
      last["context"] = std::move(context);
    }
    const double prompt_s = std::max(0.0, ttft_s_ - queue_s_);
    last["total_duration"] = ns(elapsed_s_);
    last["load_duration"] = 0;
    last["prompt_eval_count"] = prompt_tokens_;
    last["prompt_eval_duration"] = ns(prompt_s);
    last["eval_count"] = output_tokens_;
    last["eval_duration"] = ns(std::max(0.0, elapsed_s_ - ttft_s_));
    if (spec_.stream) {
      responder->write(line(last));
      responder->end_stream();
    } else {
      responder->send(200, "application/json", dump_json(last));
    }
  }

 private:
  static std::string line(const Json& j) { return dump_json(j) + "\n"; }

  Json call_json(const chat::ToolCall& t) const {
    Json args = Json::parse(t.arguments, nullptr, /*allow_exceptions=*/false);
    if (args.is_discarded()) args = Json(t.arguments);
    return {{"function", {{"name", t.name}, {"arguments", std::move(args)}}}};
  }
  // Calls completed since the last chunk. Ollama sends a call only once it is complete, so
  // one cut short (done_reason "length") was never announced and is left out, streamed or not.
  Json new_calls() {
    Json calls = Json::array();
    if (!parser_) return calls;
    const auto& all = parser_->tool_calls();
    for (; sent_calls_ < all.size(); ++sent_calls_)
      if (all[sent_calls_].complete) calls.push_back(call_json(all[sent_calls_]));
    return calls;
  }
  Json all_calls() const {
    Json calls = Json::array();
    if (parser_)
      for (const chat::ToolCall& t : parser_->tool_calls())
        if (t.complete) calls.push_back(call_json(t));
    return calls;
  }

  Json chunk(const std::string& content, const std::string& thinking, Json calls) const {
    Json j = {{"model", spec_.model}, {"created_at", ollama_timestamp()}};
    if (chat_) {
      Json m = {{"role", "assistant"}, {"content", content}};
      if (!thinking.empty()) m["thinking"] = thinking;
      if (!calls.empty()) m["tool_calls"] = std::move(calls);
      j["message"] = std::move(m);
    } else {
      j["response"] = content;
      if (!thinking.empty()) j["thinking"] = thinking;
    }
    j["done"] = false;
    return j;
  }

  GenerationSpec spec_;
  bool chat_ = false;
  std::unique_ptr<chat::ChatOutputParser> parser_;
  std::string content_, thinking_;
  size_t sent_calls_ = 0;
  std::vector<int32_t> ids_;
  FinishReason finish_ = FinishReason::kNone;
  int64_t prompt_tokens_ = 0, output_tokens_ = 0;
  double ttft_s_ = 0, queue_s_ = 0, elapsed_s_ = 0;
  std::string error_;
};

}  // namespace

std::shared_ptr<GenerationJob> make_ollama_job(const ServerContext&, GenerationSpec spec,
                                               std::string, std::shared_ptr<Responder> out) {
  auto job = std::make_shared<OllamaJob>(std::move(spec), std::move(out));
  job->start();
  return job;
}

}  // namespace loom::server
