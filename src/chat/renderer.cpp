// ChatRenderer implementation.
#include "server/chat.h"

#include "loom/tokenizer.h"

namespace loom::server {

const char* const kFallbackChatTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

Result<ChatRenderer> ChatRenderer::create(const std::string& source, const Tokenizer* tokenizer) {
  const bool fallback = source.empty();
  LOOM_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(fallback ? kFallbackChatTemplate : source));
  ChatRenderer r(std::move(t), fallback);
  if (tokenizer) {
    if (tokenizer->bos() >= 0) r.bos_token_ = tokenizer->token_text(tokenizer->bos());
    if (tokenizer->eos() >= 0) r.eos_token_ = tokenizer->token_text(tokenizer->eos());
  }
  return r;
}

Result<std::string> ChatRenderer::render(const Json& messages, const Json* tools,
                                         bool add_generation_prompt, const Json* kwargs) const {
  Json ctx = Json::object();
  ctx["messages"] = messages;
  ctx["tools"] = tools ? *tools : Json();
  ctx["add_generation_prompt"] = add_generation_prompt;
  ctx["bos_token"] = bos_token_;
  ctx["eos_token"] = eos_token_;
  // chat_template_kwargs go in last so a request can set e.g. enable_thinking, but never
  // replace the messages it is rendering.
  if (kwargs) {
    for (auto it = kwargs->begin(); it != kwargs->end(); ++it) {
      if (it.key() == "messages") continue;
      ctx[it.key()] = it.value();
    }
  }
  return template_.render(ctx);
}

}  // namespace loom::server
