// ChatRenderer implementation.
#include "chat/renderer.h"

#include <cctype>
#include <regex>

#include "base/json_depth.h"
#include "loom/tokenizer.h"

namespace loom::chat {

const char* const kFallbackChatTemplate =
    "{% for message in messages %}"
    "{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}{% endif %}";

Result<ChatRenderer> ChatRenderer::create(const std::string& source, const Tokenizer* tokenizer) {
  const bool fallback = source.empty();
  std::string text = fallback ? std::string(kFallbackChatTemplate) : source;
  LOOM_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(text));
  ChatRenderer r(std::move(t), std::move(text), fallback);
  const std::string& src = r.source_;
  // `.content is none` / `['content'] is not none` (not `reasoning_content is none`).
  static const std::regex kTestsNone(
      R"((\.content|\[\s*['"]content['"]\s*\])\s+is\s+(not\s+)?none)");
  r.keeps_null_content_ = std::regex_search(src, kTestsNone);
  r.reads_thinking_ = src.find("message.thinking") != std::string::npos;
  static const std::regex kTools(R"(\btools\b)");
  r.renders_tools_ = std::regex_search(src, kTools);
  r.needs_short_ids_ =
      src.find("[TOOL_CALLS]") != std::string::npos && src.find("length != 9") != std::string::npos;
  if (tokenizer) {
    if (tokenizer->bos() >= 0) r.bos_token_ = tokenizer->token_text(tokenizer->bos());
    if (tokenizer->eos() >= 0) r.eos_token_ = tokenizer->token_text(tokenizer->eos());
  }
  return r;
}

namespace {

// Mistral's templates reject call ids that are not 9 characters; OpenAI-style ids are longer.
std::string short_call_id(const std::string& id) {
  std::string alnum;
  for (char c : id) {
    if (std::isalnum(static_cast<unsigned char>(c))) alnum += c;
  }
  if (alnum.size() >= 9) return alnum.substr(alnum.size() - 9);
  return std::string(9 - alnum.size(), '0') + alnum;
}

}  // namespace

Json ChatRenderer::adapt_messages(const Json& messages, bool arguments_as_objects) const {
  if (!messages.is_array()) return messages;
  Json out = messages;
  for (auto& m : out) {
    if (!m.is_object()) continue;
    auto content = m.find("content");
    if (content != m.end() && content->is_null() && !keeps_null_content_) *content = "";
    if (reads_thinking_ && !m.contains("thinking") && m.contains("reasoning_content") &&
        m["reasoning_content"].is_string() &&
        !m["reasoning_content"].get_ref<const std::string&>().empty())
      m["thinking"] = m["reasoning_content"];
    if (needs_short_ids_ && m.contains("tool_call_id") && m["tool_call_id"].is_string()) {
      m["tool_call_id"] = short_call_id(m["tool_call_id"].get<std::string>());
    }
    auto calls = m.find("tool_calls");
    if (calls == m.end() || !calls->is_array()) continue;
    for (auto& call : *calls) {
      if (!call.is_object()) continue;
      if (needs_short_ids_ && call.contains("id") && call["id"].is_string()) {
        call["id"] = short_call_id(call["id"].get<std::string>());
      }
      auto fn = call.find("function");
      if (!arguments_as_objects || fn == call.end() || !fn->is_object()) continue;
      auto args = fn->find("arguments");
      // Arguments nested deeper than any request may be stay text (the template prints them).
      if (args == fn->end() || !args->is_string() ||
          json_nesting_exceeds(args->get_ref<const std::string&>()))
        continue;
      auto parsed = Json::parse(args->get<std::string>(), nullptr, /*allow_exceptions=*/false);
      if (parsed.is_object()) *args = std::move(parsed);
    }
  }
  return out;
}

static bool has_string_arguments(const Json& messages) {
  if (!messages.is_array()) return false;
  for (const auto& m : messages) {
    if (!m.is_object() || !m.contains("tool_calls") || !m["tool_calls"].is_array()) continue;
    for (const auto& c : m["tool_calls"]) {
      if (c.is_object() && c.contains("function") && c["function"].is_object() &&
          c["function"].contains("arguments") && c["function"]["arguments"].is_string())
        return true;
    }
  }
  return false;
}

Result<std::string> ChatRenderer::render(const Json& messages, const Json* tools,
                                         bool add_generation_prompt, const Json* kwargs) const {
  auto r = render_adapted(adapt_messages(messages, true), tools, add_generation_prompt, kwargs);
  // DeepSeek's templates concatenate the arguments as a string ('...' + arguments).
  if (!r.is_ok() && has_string_arguments(messages)) {
    auto retry =
        render_adapted(adapt_messages(messages, false), tools, add_generation_prompt, kwargs);
    if (retry.is_ok()) return retry;
  }
  return r;
}

Result<std::string> ChatRenderer::render_adapted(const Json& messages, const Json* tools,
                                                 bool add_generation_prompt,
                                                 const Json* kwargs) const {
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

}  // namespace loom::chat
