// vLLM's POST /tokenize (a prompt, or chat messages rendered by the chat template, with
// return_token_strs) and POST /detokenize. Every field either applies or is a 400 naming it.
#include "loom/tokenizer.h"
#include "server/constraints.h"
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
  const bool return_strs = r.opt_bool("return_token_strs").value_or(false);
  // The chat form's fields (vLLM's TokenizeChatRequest); a prompt request takes none of them.
  auto add_generation_prompt = r.opt_bool("add_generation_prompt");
  auto continue_final = r.opt_bool("continue_final_message");
  const Json* kwargs = r.opt_object("chat_template_kwargs");
  const Json* tools = r.opt_array("tools");
  const Json* messages = r.raw("messages");
  if (!r.ok()) return send_error(*out, *r.error());
  if (auto e = r.unread_field_error("/tokenize")) return send_error(*out, *e);
  if (!ctx.tokenizer) return send_error(*out, bad_request("this model has no tokenizer"));
  if (prompt.has_value() == (messages != nullptr))
    return send_error(
        *out, bad_request("send exactly one of 'prompt' (a string) or 'messages'", "prompt"));
  std::vector<int32_t> tokens;
  if (prompt) {
    for (const char* k :
         {"add_generation_prompt", "continue_final_message", "chat_template_kwargs", "tools"})
      if (r.raw(k))
        return send_error(*out, bad_request(std::string(k) + " applies to 'messages' (a chat " +
                                                "prompt), not to 'prompt'",
                                            k));
    tokens = ctx.tokenizer->encode(*prompt, add_special.value_or(true), /*parse_special=*/true);
  } else {
    // vLLM: the final message is left open for the model to continue, so no generation
    // prompt may follow it.
    if (continue_final.value_or(false) && add_generation_prompt.value_or(false))
      return send_error(*out, bad_request("continue_final_message and add_generation_prompt "
                                          "cannot both be true",
                                          "continue_final_message"));
    const bool gen_prompt = add_generation_prompt.value_or(!continue_final.value_or(false));
    Json norm;
    if (auto e = normalize_messages(*messages, &norm, "messages")) return send_error(*out, *e);
    if (auto e = check_message_keys(*messages, "messages")) return send_error(*out, *e);
    ToolsRequest declared;
    if (tools) {
      declared.tools = *tools;
      declared.mode = chat::ChatGrammarRequest::ToolMode::kAuto;
    }
    if (auto e = check_template_tools(ctx, declared, "tools")) return send_error(*out, *e);
    auto text =
        ctx.chat->render(norm, tools && !tools->empty() ? tools : nullptr, gen_prompt, kwargs);
    if (!text.is_ok())
      return send_error(*out,
                        bad_request("chat template error: " + text.status().message(), "messages"));
    std::string rendered = std::move(text).value();
    if (continue_final.value_or(false)) {
      // As vLLM does: cut what the template wrote after the final message's content (its
      // end-of-turn marker).
      const Json& last = norm.back();
      const std::string content = last.contains("content") && last["content"].is_string()
                                      ? last["content"].get<std::string>()
                                      : std::string();
      const size_t at = content.empty() ? std::string::npos : rendered.rfind(content);
      if (at == std::string::npos)
        return send_error(*out, bad_request("continue_final_message: the final message's content "
                                            "is empty or does not appear in the rendered prompt",
                                            "continue_final_message"));
      rendered.resize(at + content.size());
    }
    // Chat prompts carry their own special tokens (like /v1/chat/completions).
    tokens = ctx.tokenizer->encode(rendered, add_special.value_or(false), /*parse_special=*/true);
  }
  Json j = {{"count", tokens.size()}, {"max_model_len", ctx.max_model_len}, {"tokens", tokens}};
  if (return_strs) {
    // vLLM's token_strs: each token's own text (convert_ids_to_tokens), not decoded pieces.
    Json strs = Json::array();
    for (int32_t t : tokens) strs.push_back(ctx.tokenizer->token_text(t));
    j["token_strs"] = std::move(strs);
  }
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
  if (auto e = r.unread_field_error("/detokenize")) return send_error(*out, *e);
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
