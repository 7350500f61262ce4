// Anthropic Messages API: POST /v1/messages (JSON or the message_start ... message_stop event
// stream) and POST /v1/messages/count_tokens, on the same chat template and engine as
// /v1/chat/completions.
#include <ctime>

#include "loom/tokenizer.h"
#include "server/jobs.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {

namespace {

// Anthropic's message list (+ system) → the chat template's message list.
std::optional<ApiError> anthropic_messages(const Json& body, Json* out) {
  auto msgs = body.find("messages");
  if (msgs == body.end() || msgs->is_null()) return bad_request("messages is required", "messages");
  if (!msgs->is_array()) return bad_request("messages must be a list, got " + json_type_name(*msgs), "messages");
  Json all = Json::array();
  auto sys = body.find("system");
  if (sys != body.end() && !sys->is_null()) {
    if (!sys->is_string() && !sys->is_array())
      return bad_request("system must be a string or a list of text blocks, got " + json_type_name(*sys), "system");
    all.push_back(Json{{"role", "system"}, {"content", *sys}});
  }
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    if (m.is_object()) {
      auto role = m.find("role");
      if (role != m.end() && role->is_string() && *role != "user" && *role != "assistant")
        return bad_request("messages[" + std::to_string(i) + "].role must be 'user' or 'assistant', got '" +
                               role->get<std::string>() + "'",
                           "messages");
    }
    all.push_back(m);
  }
  if (msgs->empty()) return bad_request("messages must contain at least one message", "messages");
  return normalize_messages(all, out, "messages");
}

std::optional<ApiError> render_prompt(const ServerContext& ctx, const Json& body, std::vector<int32_t>* tokens,
                                      std::string* text) {
  Json norm;
  if (auto e = anthropic_messages(body, &norm)) return e;
  if (!ctx.tokenizer) return bad_request("this model has no tokenizer, so chat is unavailable", "messages");
  const Json* kwargs = nullptr;
  auto k = body.find("chat_template_kwargs");
  if (k != body.end() && k->is_object()) kwargs = &*k;
  auto rendered = ctx.chat->render(norm, nullptr, /*add_generation_prompt=*/true, kwargs);
  if (!rendered.is_ok()) return bad_request("chat template error: " + rendered.status().message(), "messages");
  *tokens = ctx.tokenizer->encode(*rendered, /*add_special=*/false, /*parse_special=*/true);
  *text = std::move(rendered).value();
  return std::nullopt;
}

std::string event(const char* name, const Json& data) {
  return std::string("event: ") + name + "\ndata: " + dump_json(data) + "\n\n";
}

class AnthropicJob : public GenerationJob {
 public:
  AnthropicJob(const ServerContext& ctx, GenerationSpec spec, std::string id, std::shared_ptr<Responder> out)
      : spec_(std::move(spec)), id_(std::move(id)) {
    responder = std::move(out);
    input_tokens_ = spec_.prompts.empty() ? 0 : static_cast<int64_t>(spec_.prompts[0].size());
    (void)ctx;
  }

  void start() {
    if (!spec_.stream) return;
    responder->begin_stream("text/event-stream");
    Json msg = message_object(Json::array());
    msg["usage"]["output_tokens"] = 0;
    responder->write(event("message_start", {{"type", "message_start"}, {"message", msg}}));
    responder->write(event("content_block_start", {{"type", "content_block_start"},
                                                   {"index", 0},
                                                   {"content_block", {{"type", "text"}, {"text", ""}}}}));
    responder->write(event("ping", {{"type", "ping"}}));
  }

  void on_output(size_t, RequestOutput& out) override {
    if (!out.error.empty() && error_.empty()) error_ = out.error;
    for (CompletionOutput& c : out.outputs) {
      if (c.index != 0) continue;
      output_tokens_ = c.num_output_tokens;
      if (c.finished()) {
        if (c.finish_reason == FinishReason::kLength) {
          stop_reason_ = "max_tokens";
        } else if (!c.stop_reason.empty() && !c.stop_token) {
          stop_reason_ = "stop_sequence";
          stop_sequence_ = c.stop_reason;
        } else {
          stop_reason_ = "end_turn";
        }
      }
      if (c.text.empty()) continue;
      if (spec_.stream) {
        responder->write(event("content_block_delta", {{"type", "content_block_delta"},
                                                       {"index", 0},
                                                       {"delta", {{"type", "text_delta"}, {"text", c.text}}}}));
      } else {
        text_ += c.text;
      }
    }
  }

  void on_finished() override {
    if (responder->closed()) return;
    if (!spec_.stream) {
      if (!error_.empty()) {
        ApiError e;
        e.status = 500;
        e.type = "api_error";
        e.message = "generation failed: " + error_;
        send_error(*responder, e, /*anthropic=*/true);
        return;
      }
      Json content = Json::array({Json{{"type", "text"}, {"text", text_}}});
      responder->send(200, "application/json", dump_json(message_object(std::move(content))));
      return;
    }
    if (!error_.empty()) {
      responder->write(event("error", {{"type", "error"}, {"error", {{"type", "api_error"}, {"message", error_}}}}));
    }
    responder->write(event("content_block_stop", {{"type", "content_block_stop"}, {"index", 0}}));
    responder->write(event("message_delta", {{"type", "message_delta"},
                                             {"delta", {{"stop_reason", stop_reason_}, {"stop_sequence", stop_sequence_}}},
                                             {"usage", {{"output_tokens", output_tokens_}}}}));
    responder->write(event("message_stop", {{"type", "message_stop"}}));
    responder->end_stream();
  }

 private:
  Json message_object(Json content) const {
    return Json{{"id", id_},
                {"type", "message"},
                {"role", "assistant"},
                {"model", spec_.model},
                {"content", std::move(content)},
                {"stop_reason", stop_reason_},
                {"stop_sequence", stop_sequence_},
                {"usage", {{"input_tokens", input_tokens_}, {"output_tokens", output_tokens_}}}};
  }

  GenerationSpec spec_;
  std::string id_;
  std::string text_;
  Json stop_reason_;    // null until finished
  Json stop_sequence_;  // null unless a stop sequence matched
  int64_t input_tokens_ = 0;
  int64_t output_tokens_ = 0;
  std::string error_;
};

}  // namespace

std::shared_ptr<GenerationJob> make_anthropic_job(const ServerContext& ctx, GenerationSpec spec,
                                                  std::string id, std::shared_ptr<Responder> out) {
  auto job = std::make_shared<AnthropicJob>(ctx, std::move(spec), std::move(id), std::move(out));
  job->start();
  return job;
}

void handle_messages(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, true);
  GenerationSpec spec;
  spec.kind = ApiKind::kAnthropic;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec.model)) return send_error(*out, *e, true);
  read_sampling_fields(ctx, r, &spec);
  spec.params.n = 1;
  auto max_tokens = r.opt_int("max_tokens", INT32_MIN, INT32_MAX);
  r.opt_object("metadata");
  if (!r.ok()) return send_error(*out, *r.error(), true);
  if (!max_tokens) return send_error(*out, bad_request("max_tokens is required", "max_tokens"), true);
  std::vector<int32_t> tokens;
  std::string text;
  if (auto e = render_prompt(ctx, body, &tokens, &text)) return send_error(*out, *e, true);
  spec.prompts.push_back(std::move(tokens));
  spec.prompt_texts.push_back(std::move(text));
  if (auto e = finish_spec(ctx, max_tokens, &spec)) return send_error(*out, *e, true);
  submit_generation(ctx, std::move(spec), std::move(out));
}

void handle_count_tokens(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, true);
  FieldReader r(body);
  std::string model;
  if (auto e = check_model(ctx, r, &model)) return send_error(*out, *e, true);
  std::vector<int32_t> tokens;
  std::string text;
  if (auto e = render_prompt(ctx, body, &tokens, &text)) return send_error(*out, *e, true);
  out->send(200, "application/json", dump_json(Json{{"input_tokens", tokens.size()}}));
}

}  // namespace loom::server
