// Anthropic Messages API routes: POST /v1/messages (JSON or the message_start ... message_stop
// event stream) and POST /v1/messages/count_tokens, on the same chat template and engine as
// /v1/chat/completions. Request conversion lives in anthropic_messages.cpp, the response (and
// its event stream) in anthropic_job.cpp.
#include "loom/tokenizer.h"
#include "server/anthropic_messages.h"
#include "server/constraints.h"
#include "server/jobs.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {

namespace {

struct Prompt {
  std::vector<int32_t> tokens;
  std::string text;
  ToolsRequest tools;
  bool thinking_disabled = false;  // the template was told enable_thinking: false
};

// tools, thinking, chat_template_kwargs and the messages → the rendered prompt. max_tokens is
// nullopt for count_tokens (which has none).
std::optional<ApiError> render_prompt(const ServerContext& ctx, FieldReader& r, const Json& body,
                                      std::optional<int64_t> max_tokens, Prompt* p) {
  if (auto e = read_anthropic_tools(r, &p->tools)) return e;
  if (auto e = check_template_tools(ctx, p->tools, "tools")) return e;
  r.raw("system");  // read by anthropic_messages()
  r.raw("messages");
  std::optional<bool> thinking;
  if (auto e = read_anthropic_thinking(r, max_tokens, &thinking)) return e;
  const Json* given = r.opt_object("chat_template_kwargs");  // vLLM's extension, kept here too
  if (!r.ok()) return r.error();
  Json kwargs = given ? *given : Json::object();
  if (thinking) {
    // Qwen3-style templates switch reasoning on this flag (others ignore it).
    auto it = kwargs.find("enable_thinking");
    if (it != kwargs.end() && !it->is_null() && *it != *thinking)
      return bad_request("thinking and chat_template_kwargs.enable_thinking disagree", "thinking");
    kwargs["enable_thinking"] = *thinking;
  }
  auto flag = kwargs.find("enable_thinking");
  p->thinking_disabled = flag != kwargs.end() && flag->is_boolean() && !flag->get<bool>();
  Json norm;
  if (auto e = anthropic_messages(body, &norm)) return e;
  if (!ctx.tokenizer)
    return bad_request("this model has no tokenizer, so chat is unavailable", "messages");
  auto rendered =
      ctx.chat->render(norm, p->tools.declared() ? &p->tools.tools : nullptr,
                       /*add_generation_prompt=*/true, kwargs.empty() ? nullptr : &kwargs);
  if (!rendered.is_ok())
    return bad_request("chat template error: " + rendered.status().message(), "messages");
  p->tokens = ctx.tokenizer->encode(*rendered, /*add_special=*/false, /*parse_special=*/true);
  p->text = std::move(rendered).value();
  return std::nullopt;
}

// A field the route does not take, in Anthropic's words (its API refuses extra inputs too).
std::optional<ApiError> extra_input(const FieldReader& r, const std::string& route) {
  auto e = r.unread_field_error(route);
  if (!e) return std::nullopt;
  return bad_request(e->param + ": Extra inputs are not permitted (" + route +
                         " does not take it; docs/server.md lists what loom supports)",
                     e->param);
}

// metadata: Anthropic defines only user_id (an opaque end-user id: type-checked, not used).
void read_metadata(FieldReader& r) {
  const Json* m = r.opt_object("metadata");
  if (!m) return;
  FieldReader mr(*m, "metadata.");
  mr.opt_string("user_id");
  if (!mr.ok()) return r.fail(*mr.error());
  if (auto e = extra_input(mr, "metadata")) r.fail(std::move(*e));
}

// The Messages API's own sampling rules on top of the shared reader (which also takes vLLM's
// extensions such as seed, min_p or ignore_eos): temperature in [0, 1], one message per
// request, no OpenAI stream_options.
void read_anthropic_sampling(const ServerContext& ctx, FieldReader& r, const Json& body,
                             GenerationSpec* spec) {
  if (auto t = r.opt_number("temperature"); t && (*t < 0 || *t > 1))
    r.fail("temperature must be in [0, 1] (the Messages API's range), got " +
               r.raw("temperature")->dump(),
           "temperature");
  if (auto it = body.find("stream_options"); it != body.end() && !it->is_null())
    r.fail(
        "stream_options: Extra inputs are not permitted (the Messages API's stream always "
        "reports usage in message_start and message_delta)",
        "stream_options");
  read_sampling_fields(ctx, r, spec);
  if (spec->params.n != 1)
    r.fail("n: the Messages API returns one message per request, got n " +
               std::to_string(spec->params.n),
           "n");
  // Tiers are a hosted-service notion: the two that mean "as usual" are accepted.
  if (auto tier = r.opt_string("service_tier"); tier && *tier != "auto" && *tier != "standard_only")
    r.fail("service_tier must be \"auto\" or \"standard_only\", got \"" + *tier + "\"",
           "service_tier");
  read_metadata(r);
}

}  // namespace

std::optional<ApiError> parse_anthropic_request(const ServerContext& ctx, const Json& body,
                                                GenerationSpec* spec) {
  spec->kind = ApiKind::kAnthropic;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  read_anthropic_sampling(ctx, r, body, spec);
  auto max_tokens = r.opt_int("max_tokens", 1, INT32_MAX);
  if (!r.ok()) return r.error();
  if (!max_tokens) return bad_request("max_tokens is required", "max_tokens");
  Prompt p;
  if (auto e = render_prompt(ctx, r, body, max_tokens, &p)) return e;
  AnswerConstraint answer;
  if (auto e = read_anthropic_output_format(r, &answer)) return e;
  if (auto e = extra_input(r, "/v1/messages")) return e;
  if (auto e = apply_output_constraints(ctx, answer, p.tools,
                                        ChatPromptInfo{true, p.text, p.thinking_disabled}, spec))
    return e;
  spec->prompts.push_back(std::move(p.tokens));
  spec->prompt_texts.push_back(std::move(p.text));
  return finish_spec(ctx, max_tokens, spec);
}

void handle_messages(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, true);
  GenerationSpec spec;
  if (auto e = parse_anthropic_request(ctx, body, &spec)) return send_error(*out, *e, true);
  submit_generation(ctx, std::move(spec), std::move(out));
}

void handle_count_tokens(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, true);
  FieldReader r(body);
  std::string model;
  if (auto e = check_model(ctx, r, &model)) return send_error(*out, *e, true);
  Prompt p;
  if (auto e = render_prompt(ctx, r, body, std::nullopt, &p)) return send_error(*out, *e, true);
  // Checked as /v1/messages checks it; the answer's format does not change the prompt's count.
  AnswerConstraint answer;
  if (auto e = read_anthropic_output_format(r, &answer)) return send_error(*out, *e, true);
  if (auto e = extra_input(r, "/v1/messages/count_tokens")) return send_error(*out, *e, true);
  out->send(200, "application/json", dump_json(Json{{"input_tokens", p.tokens.size()}}));
}

}  // namespace loom::server
