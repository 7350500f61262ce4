// ChatRenderer: turns an OpenAI/Anthropic message list into prompt text with the model's chat
// template (tokenizer.chat_template from the GGUF, or --chat-template FILE), passing the
// globals Hugging Face passes (messages, tools, add_generation_prompt, bos_token, eos_token,
// plus any chat_template_kwargs). Models without a template get a documented ChatML fallback.
// The interpreter bounds steps, output size and recursion, so a hostile template fails one
// request with an error instead of hanging the server.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "base/status.h"
#include "jinja/chat_template.h"

namespace loom {
class Tokenizer;
}

namespace loom::chat {

using Json = nlohmann::ordered_json;

// ChatML, used when the model ships no template (see docs/server.md).
extern const char* const kFallbackChatTemplate;

class ChatRenderer {
 public:
  // `source` empty: the fallback. A template that does not parse is an error (the caller
  // decides whether to fall back).
  static Result<ChatRenderer> create(const std::string& source, const Tokenizer* tokenizer);

  // messages: a list of {"role", "content": string, ...}. tools / kwargs may be null.
  // Agents' message shapes are adapted to what Hugging Face templates expect (as vLLM does):
  // an assistant turn's tool_calls[].function.arguments given as a JSON string is passed as
  // the object it encodes (templates apply `tojson` or iterate it); a template that instead
  // concatenates it as a string (DeepSeek's) is retried with the strings. `"content": null`
  // becomes "" unless the template tests content for none itself. Mistral templates that
  // demand 9-character call ids get the last 9 alphanumerics of longer ids, the same mapping
  // for the calls and the tool results that answer them.
  Result<std::string> render(const Json& messages, const Json* tools, bool add_generation_prompt,
                             const Json* kwargs) const;
  bool is_fallback() const { return fallback_; }
  // Whether the template reads `tools` at all: one that does not (the ChatML fallback, most
  // base-model templates) would drop a request's tools, and the model would never hear of them.
  bool renders_tools() const { return renders_tools_; }
  // The template's source text (the fallback's when is_fallback()): tool-call and reasoning
  // formats are detected from it.
  const std::string& source() const { return source_; }

 private:
  ChatRenderer(ChatTemplate t, std::string source, bool fallback)
      : template_(std::move(t)), source_(std::move(source)), fallback_(fallback) {}
  // messages adapted for the template (see render()); arguments_as_objects: parse JSON-string
  // arguments into objects.
  Json adapt_messages(const Json& messages, bool arguments_as_objects) const;
  Result<std::string> render_adapted(const Json& messages, const Json* tools,
                                     bool add_generation_prompt, const Json* kwargs) const;
  ChatTemplate template_;
  std::string source_;
  bool fallback_ = false;
  bool renders_tools_ = false;
  bool keeps_null_content_ = false;  // the template tests `content is none`
  bool needs_short_ids_ = false;     // Mistral: call ids of exactly 9 characters
  // gpt-oss's template reads an assistant turn's reasoning as `thinking`; OpenAI-style requests
  // send it as `reasoning_content` (vLLM's and llama.cpp's name), copied over for it.
  bool reads_thinking_ = false;
  std::string bos_token_;
  std::string eos_token_;
};

}  // namespace loom::chat
