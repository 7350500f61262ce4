// Renders Hugging Face chat templates: a sandboxed Jinja interpreter that produces exactly
// what Python's Jinja2 produces with trim_blocks=True and lstrip_blocks=True (the settings
// transformers uses), with transformers' additions: raise_exception(msg), strftime_now(fmt),
// the tojson filter as json.dumps(ensure_ascii=False, indent=...), and loop controls.
//
// The sandbox: templates cannot touch files, the network or the environment, cannot mutate
// lists or dicts (only namespace() objects), and every render is bounded by the limits below,
// so a hostile template fails fast with an error instead of hanging or exhausting memory.
//
// Key order matters (tojson prints keys in insertion order, as Python does): pass the context
// as nlohmann::ordered_json to keep the order of the request; nlohmann::json sorts keys.
#pragma once

#include <cstddef>
#include <cstdint>
#include <ctime>
#include <functional>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "base/status.h"

namespace loom {

namespace jinja {
struct Program;
}

struct ChatTemplateLimits {
  // Bytes of rendered text, and of any one string or list a template builds.
  size_t max_output_bytes = 8u << 20;
  // Statements executed + expressions evaluated + loop iterations (a template rendering a
  // long conversation with tools takes a few tens of thousands; a step costs ~0.1 µs).
  uint64_t max_steps = 3'000'000;
  // Nested macro calls (Jinja2 in CPython fails near a few hundred).
  int max_call_depth = 100;
};

struct ChatTemplateOptions {
  // Local civil time for strftime_now(); empty = the system clock's local time. Tests fix it.
  std::function<std::tm()> now;
  ChatTemplateLimits limits;
};

// A parsed template: parse once, render many times. render() is const and thread-safe.
class ChatTemplate {
 public:
  // Syntax errors come back as kInvalidArgument with the line number.
  static Result<ChatTemplate> parse(std::string_view source);

  // Renders with `context` as the template's variables (messages, tools,
  // add_generation_prompt, bos_token, eos_token, and any chat_template_kwargs). A template
  // error (including raise_exception(msg), whose message is returned as is) is
  // kInvalidArgument; exceeding a limit is kResourceExhausted.
  Result<std::string> render(const nlohmann::ordered_json& context,
                             const ChatTemplateOptions& options = {}) const;
  Result<std::string> render(const nlohmann::json& context,
                             const ChatTemplateOptions& options = {}) const;

 private:
  explicit ChatTemplate(std::shared_ptr<const jinja::Program> program)
      : program_(std::move(program)) {}
  std::shared_ptr<const jinja::Program> program_;
};

// parse + render in one call.
Result<std::string> render_chat_template(std::string_view source,
                                         const nlohmann::ordered_json& context,
                                         const ChatTemplateOptions& options = {});
Result<std::string> render_chat_template(std::string_view source, const nlohmann::json& context,
                                         const ChatTemplateOptions& options = {});

}  // namespace loom
