// Anthropic request conversion (see anthropic_messages.h): content blocks → the OpenAI-shape
// message list the chat template sees, tools / tool_choice → ToolsRequest, thinking →
// enable_thinking. Every refusal names the field, as Anthropic's own errors do.
#include "server/anthropic_messages.h"

#include <algorithm>
#include <set>
#include <string>
#include <vector>

#include "server/openai_request.h"

namespace loom::server {

namespace {

using ToolMode = chat::ChatGrammarRequest::ToolMode;

bool is_one_of(const std::string& s, std::initializer_list<const char*> names) {
  return std::any_of(names.begin(), names.end(), [&](const char* n) { return s == n; });
}

// A block or object key outside `known` → 400 naming it (Anthropic refuses extra fields too,
// and a silently dropped field would change what the request means).
std::optional<ApiError> check_keys(const Json& obj, std::initializer_list<const char*> known,
                                   const std::string& where, const char* param) {
  for (auto it = obj.begin(); it != obj.end(); ++it)
    if (!is_one_of(it.key(), known))
      return bad_request(where + "." + it.key() + " is not a known field", param);
  return std::nullopt;
}

std::optional<ApiError> block_type(const Json& b, const std::string& where, std::string* type) {
  if (!b.is_object())
    return bad_request(where + " must be a content block object, got " + json_type_name(b),
                       "messages");
  auto t = b.find("type");
  if (t == b.end() || !t->is_string())
    return bad_request(where + ".type is required (a string)", "messages");
  *type = t->get<std::string>();
  return std::nullopt;
}

// A block type this server cannot take (images, documents, server-tool results...).
ApiError unsupported_block(const std::string& where, const std::string& type) {
  if (is_one_of(type, {"image", "document", "file", "container_upload", "search_result"}))
    return bad_request(
        where + ": content block type '" + type + "' is not supported (this model takes text only)",
        "messages");
  return bad_request(where + ": content block type '" + type +
                         "' is not supported here (known: text, tool_use, tool_result, thinking, "
                         "redacted_thinking)",
                     "messages");
}

std::optional<ApiError> text_of(const Json& b, const std::string& where, std::string* out) {
  // cache_control is a prompt-caching hint (loom's prefix cache needs none).
  if (auto e = check_keys(b, {"type", "text", "cache_control"}, where, "messages")) return e;
  auto t = b.find("text");
  if (t == b.end() || !t->is_string())
    return bad_request(where + ": a text block needs a string 'text'", "messages");
  *out = t->get<std::string>();
  return std::nullopt;
}

// Joins text blocks with "\n" (how the OpenAI route joins content parts).
void append_text(std::string* dst, const std::string& s, bool* any) {
  if (*any) *dst += "\n";
  *dst += s;
  *any = true;
}

// system: a string or a list of text blocks.
std::optional<ApiError> system_text(const Json& sys, std::string* out) {
  if (sys.is_string()) {
    *out = sys.get<std::string>();
    return std::nullopt;
  }
  if (!sys.is_array())
    return bad_request(
        "system must be a string or a list of text blocks, got " + json_type_name(sys), "system");
  bool any = false;
  for (size_t i = 0; i < sys.size(); ++i) {
    const std::string where = "system[" + std::to_string(i) + "]";
    std::string type, text;
    if (!sys[i].is_object() || !sys[i].contains("type") || !sys[i]["type"].is_string())
      return bad_request(where + " must be a text block {type: 'text', text}", "system");
    type = sys[i]["type"].get<std::string>();
    if (type != "text")
      return bad_request(where + ": system blocks must be text, got '" + type + "'", "system");
    if (auto e = text_of(sys[i], where, &text)) return bad_request(e->message, "system");
    append_text(out, text, &any);
  }
  return std::nullopt;
}

// A tool_result's content: absent, a string, or a list of text blocks.
std::optional<ApiError> tool_result_text(const Json& b, const std::string& where,
                                         std::string* out) {
  auto c = b.find("content");
  if (c == b.end() || c->is_null()) return std::nullopt;
  if (c->is_string()) {
    *out = c->get<std::string>();
    return std::nullopt;
  }
  if (!c->is_array())
    return bad_request(
        where + ".content must be a string or a list of text blocks, got " + json_type_name(*c),
        "messages");
  bool any = false;
  for (size_t k = 0; k < c->size(); ++k) {
    const std::string w = where + ".content[" + std::to_string(k) + "]";
    std::string type, text;
    if (auto e = block_type((*c)[k], w, &type)) return e;
    if (type != "text") return unsupported_block(w, type);
    if (auto e = text_of((*c)[k], w, &text)) return e;
    append_text(out, text, &any);
  }
  return std::nullopt;
}

// The conversation's tool_use ids so far: a tool_result must answer one of them.
using SeenIds = std::set<std::string>;

std::optional<ApiError> convert_user(const Json& blocks, const std::string& where,
                                     const SeenIds& seen, Json* out) {
  std::string text;
  bool any_text = false;
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string w = where + ".content[" + std::to_string(k) + "]";
    const Json& b = blocks[k];
    std::string type;
    if (auto e = block_type(b, w, &type)) return e;
    if (type == "text") {
      std::string s;
      if (auto e = text_of(b, w, &s)) return e;
      append_text(&text, s, &any_text);
    } else if (type == "tool_result") {
      if (auto e = check_keys(b, {"type", "tool_use_id", "content", "is_error", "cache_control"}, w,
                              "messages"))
        return e;
      auto id = b.find("tool_use_id");
      if (id == b.end() || !id->is_string())
        return bad_request(w + ".tool_use_id is required (a string)", "messages");
      if (!seen.count(id->get<std::string>()))
        return bad_request(w + ".tool_use_id '" + id->get<std::string>() +
                               "' does not match any earlier tool_use block",
                           "messages");
      auto err = b.find("is_error");
      if (err != b.end() && !err->is_null() && !err->is_boolean())
        return bad_request(w + ".is_error must be a boolean", "messages");
      std::string content;
      if (auto e = tool_result_text(b, w, &content)) return e;
      Json m = {{"role", "tool"}, {"tool_call_id", *id}, {"content", content}};
      // Templates have no place for it; kept on the message for templates that look.
      if (err != b.end() && err->is_boolean() && err->get<bool>()) m["is_error"] = true;
      out->push_back(std::move(m));
    } else if (type == "tool_use" || type == "thinking" || type == "redacted_thinking") {
      return bad_request(w + ": '" + type + "' blocks belong in assistant turns", "messages");
    } else {
      return unsupported_block(w, type);
    }
  }
  // A turn of only tool results has no user message of its own (as the OpenAI shape has none).
  if (any_text || blocks.empty()) out->push_back(Json{{"role", "user"}, {"content", text}});
  return std::nullopt;
}

std::optional<ApiError> convert_assistant(const Json& blocks, const std::string& where,
                                          SeenIds* seen, Json* out) {
  std::string text, reasoning;
  bool any_text = false, any_reasoning = false;
  Json calls = Json::array();
  for (size_t k = 0; k < blocks.size(); ++k) {
    const std::string w = where + ".content[" + std::to_string(k) + "]";
    const Json& b = blocks[k];
    std::string type;
    if (auto e = block_type(b, w, &type)) return e;
    if (type == "text") {
      std::string s;
      if (auto e = text_of(b, w, &s)) return e;
      append_text(&text, s, &any_text);
    } else if (type == "tool_use") {
      if (auto e = check_keys(b, {"type", "id", "name", "input", "cache_control"}, w, "messages"))
        return e;
      auto id = b.find("id");
      auto name = b.find("name");
      auto input = b.find("input");
      if (id == b.end() || !id->is_string() || id->get<std::string>().empty())
        return bad_request(w + ".id is required (a non-empty string)", "messages");
      if (name == b.end() || !name->is_string())
        return bad_request(w + ".name is required (a string)", "messages");
      if (input == b.end() || !input->is_object())
        return bad_request(w + ".input is required (an object)", "messages");
      seen->insert(id->get<std::string>());
      // arguments as JSON text, as OpenAI clients send it; the renderer turns it back into an
      // object for templates that iterate over it.
      calls.push_back({{"id", *id},
                       {"type", "function"},
                       {"function", {{"name", *name}, {"arguments", input->dump()}}}});
    } else if (type == "thinking") {
      if (auto e = check_keys(b, {"type", "thinking", "signature"}, w, "messages")) return e;
      auto t = b.find("thinking");
      if (t == b.end() || !t->is_string())
        return bad_request(w + ": a thinking block needs a string 'thinking'", "messages");
      // The signature only means something to Anthropic's servers: dropped.
      append_text(&reasoning, t->get<std::string>(), &any_reasoning);
    } else if (type == "redacted_thinking") {
      continue;  // encrypted by Anthropic: nothing a local model can read
    } else if (type == "tool_result") {
      return bad_request(w + ": 'tool_result' blocks belong in user turns", "messages");
    } else {
      return unsupported_block(w, type);
    }
  }
  Json m = {{"role", "assistant"}};
  m["content"] = !any_text && !calls.empty() ? Json() : Json(text);
  if (any_reasoning) m["reasoning_content"] = reasoning;
  if (!calls.empty()) m["tool_calls"] = std::move(calls);
  out->push_back(std::move(m));
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> anthropic_messages(const Json& body, Json* out) {
  auto msgs = body.find("messages");
  if (msgs == body.end() || msgs->is_null()) return bad_request("messages is required", "messages");
  if (!msgs->is_array())
    return bad_request("messages must be a list, got " + json_type_name(*msgs), "messages");
  if (msgs->empty()) return bad_request("messages must contain at least one message", "messages");
  Json all = Json::array();
  auto sys = body.find("system");
  if (sys != body.end() && !sys->is_null()) {
    std::string text;
    if (auto e = system_text(*sys, &text)) return e;
    all.push_back(Json{{"role", "system"}, {"content", text}});
  }
  SeenIds seen;
  for (size_t i = 0; i < msgs->size(); ++i) {
    const Json& m = (*msgs)[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object())
      return bad_request(where + " must be an object, got " + json_type_name(m), "messages");
    if (auto e = check_keys(m, {"role", "content"}, where, "messages")) return e;
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad_request(where + ".role is required (a string)", "messages");
    const std::string r = role->get<std::string>();
    if (r != "user" && r != "assistant")
      return bad_request(where + ".role must be 'user' or 'assistant', got '" + r + "'",
                         "messages");
    auto content = m.find("content");
    if (content == m.end() || content->is_null())
      return bad_request(where + ".content is required", "messages");
    if (content->is_string()) {
      all.push_back(Json{{"role", r}, {"content", *content}});
      continue;
    }
    if (!content->is_array())
      return bad_request(where + ".content must be a string or a list of content blocks, got " +
                             json_type_name(*content),
                         "messages");
    if (r == "user") {
      if (auto e = convert_user(*content, where, seen, &all)) return e;
    } else if (auto e = convert_assistant(*content, where, &seen, &all)) {
      return e;
    }
  }
  return normalize_messages(all, out, "messages");
}

std::optional<ApiError> read_anthropic_tools(FieldReader& r, ToolsRequest* out) {
  *out = ToolsRequest();
  const Json* tools = r.opt_array("tools");
  const Json* choice = r.opt_object("tool_choice");
  if (!r.ok()) return r.error();
  std::vector<std::string> names;
  for (size_t i = 0; tools && i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object())
      return bad_request(where + " must be an object, got " + json_type_name(t), "tools");
    auto type = t.find("type");
    if (type != t.end() && !type->is_null()) {
      if (!type->is_string()) return bad_request(where + ".type must be a string", "tools");
      if (*type != "custom")
        return bad_request(
            where + ".type '" + type->get<std::string>() +
                "' is a server tool, which this server does not run; only custom tools "
                "({name, description, input_schema}) are supported",
            "tools");
    }
    if (auto e = check_keys(
            t, {"type", "name", "description", "input_schema", "cache_control", "strict"}, where,
            "tools"))
      return e;
    auto name = t.find("name");
    if (name == t.end() || !name->is_string())
      return bad_request(where + ".name is required (a string)", "tools");
    auto desc = t.find("description");
    if (desc != t.end() && !desc->is_null() && !desc->is_string())
      return bad_request(where + ".description must be a string", "tools");
    auto strict = t.find("strict");
    if (strict != t.end() && !strict->is_null() && !strict->is_boolean())
      return bad_request(where + ".strict must be a boolean", "tools");
    auto schema = t.find("input_schema");
    if (schema == t.end() || schema->is_null())
      return bad_request(where + ".input_schema is required (a JSON Schema object)", "tools");
    if (!schema->is_object())
      return bad_request(
          where + ".input_schema must be a JSON Schema object, got " + json_type_name(*schema),
          "tools");
    auto st = schema->find("type");
    if (st == schema->end() || *st != "object")
      return bad_request(
          where + ".input_schema.type must be 'object' (tool input is always an object)", "tools");
    Json fn = {{"name", *name}};
    if (desc != t.end() && desc->is_string()) fn["description"] = *desc;
    fn["parameters"] = *schema;
    out->tools.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
    names.push_back(name->get<std::string>());
  }
  out->mode = out->declared() ? ToolMode::kAuto : ToolMode::kNone;
  if (choice) {
    auto type = choice->find("type");
    if (type == choice->end() || !type->is_string())
      return bad_request("tool_choice.type is required: auto, any, tool or none", "tool_choice");
    const std::string t = type->get<std::string>();
    if (t == "tool") {
      if (auto e = check_keys(*choice, {"type", "name", "disable_parallel_tool_use"}, "tool_choice",
                              "tool_choice"))
        return e;
    } else if (t == "auto" || t == "any") {
      if (auto e = check_keys(*choice, {"type", "disable_parallel_tool_use"}, "tool_choice",
                              "tool_choice"))
        return e;
    } else if (t == "none") {
      if (auto e = check_keys(*choice, {"type"}, "tool_choice", "tool_choice")) return e;
    } else {
      return bad_request("tool_choice.type must be auto, any, tool or none, got '" + t + "'",
                         "tool_choice");
    }
    auto dp = choice->find("disable_parallel_tool_use");
    if (dp != choice->end() && !dp->is_null()) {
      if (!dp->is_boolean())
        return bad_request("tool_choice.disable_parallel_tool_use must be a boolean",
                           "tool_choice");
      out->parallel_tool_calls = !dp->get<bool>();
    }
    if (t == "none") {
      out->mode = ToolMode::kNone;
    } else if (t == "any") {
      out->mode = ToolMode::kRequired;
    } else if (t == "tool") {
      auto name = choice->find("name");
      if (name == choice->end() || !name->is_string())
        return bad_request("tool_choice.name is required (a string) for type 'tool'",
                           "tool_choice");
      out->mode = ToolMode::kNamed;
      out->function_name = name->get<std::string>();
      if (std::find(names.begin(), names.end(), out->function_name) == names.end())
        return bad_request(
            "tool_choice.name '" + out->function_name + "' is not among the declared tools",
            "tool_choice");
    }
    if ((t == "any" || t == "tool") && !out->declared())
      return bad_request("tool_choice '" + t + "' requires tools to be declared", "tool_choice");
  }
  if (auto e = validate_tools(*out, "tools")) {
    // validate_tools speaks OpenAI ("parameters"); Anthropic users wrote input_schema.
    const std::string from = "invalid parameters:";
    if (size_t p = e->message.find(from); p != std::string::npos)
      e->message.replace(p, from.size(), "invalid input_schema:");
    return e;
  }
  return std::nullopt;
}

std::optional<ApiError> read_anthropic_thinking(FieldReader& r, std::optional<int64_t> max_tokens,
                                                std::optional<bool>* enable_thinking) {
  *enable_thinking = std::nullopt;
  const Json* t = r.opt_object("thinking");
  if (!r.ok()) return r.error();
  if (!t) return std::nullopt;
  auto type = t->find("type");
  if (type == t->end() || !type->is_string())
    return bad_request("thinking.type is required: 'enabled', 'adaptive' or 'disabled'",
                       "thinking");
  const std::string kind = type->get<std::string>();
  if (kind == "disabled") {
    if (auto e = check_keys(*t, {"type"}, "thinking", "thinking")) return e;
    *enable_thinking = false;
    return std::nullopt;
  }
  if (kind != "enabled" && kind != "adaptive")
    return bad_request(
        "thinking.type must be 'enabled', 'adaptive' or 'disabled', got '" + kind + "'",
        "thinking");
  if (auto e = kind == "enabled"
                   ? check_keys(*t, {"type", "budget_tokens", "display"}, "thinking", "thinking")
                   : check_keys(*t, {"type", "display"}, "thinking", "thinking"))
    return e;
  auto display = t->find("display");
  if (display != t->end() && !display->is_null()) {
    if (!display->is_string() || (*display != "summarized" && *display != "omitted"))
      return bad_request("thinking.display must be 'summarized' or 'omitted'", "thinking");
    // The reasoning is returned as the model wrote it; hiding it is not implemented.
    if (*display == "omitted")
      return bad_request("thinking.display 'omitted' is not supported", "thinking");
  }
  if (kind == "enabled") {
    auto b = t->find("budget_tokens");
    int64_t budget = 0;
    if (b == t->end() || b->is_null())
      return bad_request("thinking.budget_tokens is required when thinking is enabled", "thinking");
    if (b->is_boolean() || !json_to_int(*b, INT64_MIN, INT64_MAX, &budget))
      return bad_request("thinking.budget_tokens must be an integer, got " + b->dump(), "thinking");
    if (budget < 1024)
      return bad_request(
          "thinking.budget_tokens must be at least 1024, got " + std::to_string(budget),
          "thinking");
    if (max_tokens && budget >= *max_tokens)
      return bad_request("thinking.budget_tokens (" + std::to_string(budget) +
                             ") must be less than max_tokens (" + std::to_string(*max_tokens) + ")",
                         "thinking");
  }
  *enable_thinking = true;
  return std::nullopt;
}

std::optional<ApiError> read_anthropic_output_format(FieldReader& r, AnswerConstraint* out) {
  *out = AnswerConstraint();
  const Json* config = r.opt_object("output_config");
  const Json* beta = r.opt_object("output_format");
  if (!r.ok()) return r.error();
  const Json* format = nullptr;
  std::string field;
  if (config) {
    if (auto e = check_keys(*config, {"format", "effort"}, "output_config", "output_config"))
      return e;
    auto effort = config->find("effort");
    if (effort != config->end() && !effort->is_null() &&
        (!effort->is_string() ||
         !is_one_of(effort->get<std::string>(), {"low", "medium", "high", "xhigh", "max"})))
      return bad_request("output_config.effort must be low, medium, high, xhigh or max",
                         "output_config");
    auto f = config->find("format");
    if (f != config->end() && !f->is_null()) {
      format = &*f;
      field = "output_config.format";
    }
  }
  if (beta) {
    if (format)
      return bad_request("give output_config.format or output_format, not both", "output_format");
    format = beta;
    field = "output_format";
  }
  if (!format) return std::nullopt;
  const std::string param = field.substr(0, field.find('.'));
  if (!format->is_object()) return bad_request(field + " must be an object", param);
  if (auto e = check_keys(*format, {"type", "schema"}, field, param.c_str())) return e;
  auto type = format->find("type");
  if (type == format->end() || *type != "json_schema")
    return bad_request(field + ".type must be 'json_schema'", param);
  auto schema = format->find("schema");
  if (schema == format->end() || !schema->is_object())
    return bad_request(field + ".schema is required (a JSON Schema object)", param);
  // The same compilation as OpenAI's response_format json_schema, through the lead's reader;
  // its messages are rewritten to this API's field names.
  const Json as_openai = {
      {"response_format",
       {{"type", "json_schema"}, {"json_schema", {{"name", "output"}, {"schema", *schema}}}}}};
  FieldReader fr(as_openai);
  if (auto e = read_answer_constraint(fr, out)) {
    const std::string from = "response_format.json_schema.schema";
    if (size_t p = e->message.find(from); p != std::string::npos)
      e->message.replace(p, from.size(), field + ".schema");
    e->param = param;
    return e;
  }
  out->field = field;
  return std::nullopt;
}

}  // namespace loom::server
