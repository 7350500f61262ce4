// Fuzz target: the sandboxed Jinja interpreter on an untrusted template and context. Input: the
// template source, optionally followed by "\n--context--\n" and a JSON object to render with
// (otherwise a conversation with tools, as chat requests bring). Parse errors, template
// errors and limits must all come back as a Status; a render must stay within its limits.
#include <ctime>
#include <nlohmann/json.hpp>
#include <string>

#include "base/json_depth.h"
#include "fuzz_target.h"
#include "jinja/chat_template.h"

namespace {

const nlohmann::ordered_json& default_context() {
  static const auto ctx = nlohmann::ordered_json::parse(R"({
    "messages": [
      {"role": "system", "content": "You can call tools."},
      {"role": "user", "content": "Weather in Paris?"},
      {"role": "assistant", "content": "", "reasoning_content": "think",
       "tool_calls": [{"id": "call_1", "type": "function",
                       "function": {"name": "get_weather", "arguments": {"city": "Paris"}}}]},
      {"role": "tool", "tool_call_id": "call_1", "content": "{\"temp\": 21}"},
      {"role": "user", "content": [{"type": "text", "text": "and now?"}]}
    ],
    "tools": [{"type": "function", "function": {"name": "get_weather",
               "description": "Current weather",
               "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                              "required": ["city"]}}}],
    "add_generation_prompt": true, "bos_token": "<s>", "eos_token": "</s>",
    "enable_thinking": false, "n": null
  })");
  return ctx;
}

}  // namespace

LOOM_FUZZ_TARGET(jinja) {
  loom::fuzz::Input in(data, size);
  auto [source, context_text] = in.split("\n--context--\n");
  nlohmann::ordered_json context = default_context();
  if (!context_text.empty()) {
    // Depth-bounded as the server bounds a request body (the context is what a request brought).
    if (loom::json_nesting_exceeds(context_text)) return;
    context = nlohmann::ordered_json::parse(context_text, nullptr, /*allow_exceptions=*/false);
    if (context.is_discarded() || !context.is_object()) return;
  }
  loom::ChatTemplateOptions options;
  options.now = [] {
    std::tm t{};
    t.tm_year = 126;
    t.tm_mon = 10;
    t.tm_mday = 29;
    t.tm_hour = 12;
    return t;
  };
  // Smaller than the defaults so that each input runs in milliseconds; the limits' code is
  // the same.
  options.limits.max_output_bytes = 256u << 10;
  options.limits.max_steps = 200'000;
  auto tmpl = loom::ChatTemplate::parse(source);
  if (!tmpl.is_ok()) {
    LOOM_FUZZ_CHECK(!tmpl.status().message().empty(), "a syntax error names its problem");
    return;
  }
  auto out = tmpl->render(context, options);
  if (out.is_ok())
    LOOM_FUZZ_CHECK(out->size() <= options.limits.max_output_bytes, "output within its limit");
}
