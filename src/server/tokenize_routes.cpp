// vLLM's POST /tokenize and POST /detokenize.
#include "loom/tokenizer.h"
#include "server/jobs.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {

void handle_tokenize(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e);
  FieldReader r(body);
  std::string model;
  if (auto e = check_model(ctx, r, &model)) return send_error(*out, *e);
  auto prompt = r.opt_string("prompt");
  auto add_special = r.opt_bool("add_special_tokens");
  const bool add_generation_prompt = r.opt_bool("add_generation_prompt").value_or(true);
  const Json* kwargs = r.opt_object("chat_template_kwargs");
  const Json* tools = r.opt_array("tools");
  const Json* messages = r.raw("messages");
  if (!r.ok()) return send_error(*out, *r.error());
  if (!ctx.tokenizer) return send_error(*out, bad_request("this model has no tokenizer"));
  if (prompt.has_value() == (messages != nullptr))
    return send_error(
        *out, bad_request("send exactly one of 'prompt' (a string) or 'messages'", "prompt"));
  std::vector<int32_t> tokens;
  if (prompt) {
    tokens = ctx.tokenizer->encode(*prompt, add_special.value_or(true), /*parse_special=*/true);
  } else {
    Json norm;
    if (auto e = normalize_messages(*messages, &norm, "messages")) return send_error(*out, *e);
    auto text = ctx.chat->render(norm, tools, add_generation_prompt, kwargs);
    if (!text.is_ok())
      return send_error(*out,
                        bad_request("chat template error: " + text.status().message(), "messages"));
    // Chat prompts carry their own special tokens (like /v1/chat/completions).
    tokens = ctx.tokenizer->encode(*text, add_special.value_or(false), /*parse_special=*/true);
  }
  Json j = {{"count", tokens.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", tokens}};
  out->send(200, "application/json", dump_json(j));
}

void handle_detokenize(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e);
  FieldReader r(body);
  std::string model;
  if (auto e = check_model(ctx, r, &model)) return send_error(*out, *e);
  auto tokens = r.opt_int_list("tokens");
  if (!r.ok()) return send_error(*out, *r.error());
  if (!tokens) return send_error(*out, bad_request("tokens is required", "tokens"));
  if (!ctx.tokenizer) return send_error(*out, bad_request("this model has no tokenizer"));
  for (int32_t t : *tokens)
    if (t < 0 || t >= ctx.n_vocab)
      return send_error(
          *out, bad_request("token id " + std::to_string(t) + " is outside the vocabulary [0, " +
                                std::to_string(ctx.n_vocab) + ")",
                            "tokens"));
  out->send(200, "application/json", dump_json(Json{{"prompt", ctx.tokenizer->decode(*tokens)}}));
}

}  // namespace loom::server
