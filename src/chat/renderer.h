// ChatRenderer: turns an OpenAI/Anthropic message list into prompt text with the model's chat
// template (tokenizer.chat_template from the GGUF, or --chat-template FILE), passing the
// globals Hugging Face passes (messages, tools, add_generation_prompt, bos_token, eos_token,
// plus any chat_template_kwargs). Models without a template get a documented ChatML fallback.
// The interpreter bounds steps, output size and recursion, so a hostile template fails one
// request with an error instead of hanging the server.
#pragma once

#include <string>

#include "base/status.h"
#include "server/json_fields.h"
#include "tokenizer/chat_template/chat_template.h"

namespace loom {
class Tokenizer;
}

namespace loom::server {

// ChatML, used when the model ships no template (see docs/server.md).
extern const char* const kFallbackChatTemplate;

class ChatRenderer {
 public:
  // `source` empty: the fallback. A template that does not parse is an error (the caller
  // decides whether to fall back).
  static Result<ChatRenderer> create(const std::string& source, const Tokenizer* tokenizer);

  // messages: a list of {"role", "content": string, ...}. tools / kwargs may be null.
  Result<std::string> render(const Json& messages, const Json* tools, bool add_generation_prompt,
                             const Json* kwargs) const;
  bool is_fallback() const { return fallback_; }

 private:
  ChatRenderer(ChatTemplate t, bool fallback) : template_(std::move(t)), fallback_(fallback) {}
  ChatTemplate template_;
  bool fallback_ = false;
  std::string bos_token_;
  std::string eos_token_;
};

}  // namespace loom::server
