// Public entry points: parse once, render per request (see chat_template.h).
#include "jinja/chat_template.h"

#include "base/json_depth.h"
#include "jinja/interpreter.h"
#include "jinja/parser.h"

namespace loom {

Result<ChatTemplate> ChatTemplate::parse(std::string_view source) {
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<const jinja::Program> program,
                        jinja::parse_template(source));
  return ChatTemplate(std::move(program));
}

namespace {

// Whether `j` nests arrays and objects deeper than `max_depth`. Converting the context to
// template values (and destroying them) recurses once per level, so a context nested tens of
// thousands deep would overflow the stack; this walk itself stops at the bound.
template <typename Json>
bool nests_deeper_than(const Json& j, int max_depth) {
  if (!j.is_structured()) return false;
  if (max_depth == 0) return true;
  for (const auto& e : j)
    if (nests_deeper_than(e, max_depth - 1)) return true;
  return false;
}

template <typename Json>
Result<std::string> render_impl(const std::shared_ptr<const jinja::Program>& program,
                                const Json& context, const ChatTemplateOptions& options) {
  if (!context.is_object() && !context.is_null())
    return invalid_argument("chat template context must be a JSON object");
  if (nests_deeper_than(context, kMaxJsonDepth))
    return invalid_argument("chat template context nests arrays and objects deeper than " +
                            std::to_string(kMaxJsonDepth) + " levels");
  jinja::Value ctx = context.is_null() ? jinja::Value::new_dict() : jinja::from_json(context);
  jinja::Interpreter interpreter(program, options);
  return interpreter.render(ctx);
}

}  // namespace

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& context,
                                         const ChatTemplateOptions& options) const {
  return render_impl(program_, context, options);
}

Result<std::string> ChatTemplate::render(const nlohmann::json& context,
                                         const ChatTemplateOptions& options) const {
  return render_impl(program_, context, options);
}

Result<std::string> render_chat_template(std::string_view source,
                                         const nlohmann::ordered_json& context,
                                         const ChatTemplateOptions& options) {
  LOOM_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source));
  return t.render(context, options);
}

Result<std::string> render_chat_template(std::string_view source, const nlohmann::json& context,
                                         const ChatTemplateOptions& options) {
  LOOM_ASSIGN_OR_RETURN(ChatTemplate t, ChatTemplate::parse(source));
  return t.render(context, options);
}

}  // namespace loom
