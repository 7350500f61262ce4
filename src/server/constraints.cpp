// Structured-output and tool fields of a request (see constraints.h).
#include "server/constraints.h"

#include <regex>

#include "base/json_depth.h"
#include "server/openai_request.h"
#include "server/server_context.h"
#include "structured/frontends.h"
#include "structured/matcher.h"

namespace loom::server {

namespace {

using structured::OrderedJson;

// "response_format.json_schema.schema" -> "response_format": errors name the request's
// top-level field as `param`, and the full path in the message.
std::string top_field(const std::string& field) {
  return field.substr(0, field.find_first_of(".["));
}

ApiError field_error(const std::string& message, const std::string& field) {
  return bad_request(message, top_field(field));
}
using ToolMode = chat::ChatGrammarRequest::ToolMode;

// A schema given either as a JSON object or as a string holding one (vLLM accepts both).
std::optional<ApiError> schema_value(const Json& v, const std::string& field, Json* out) {
  if (v.is_object() || v.is_boolean()) {
    *out = v;
    return std::nullopt;
  }
  if (v.is_string()) {
    if (json_nesting_exceeds(v.get_ref<const std::string&>()))
      return field_error(
          field + " nests more than " + std::to_string(kMaxJsonDepth) + " levels deep", field);
    try {
      *out = Json::parse(v.get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      return field_error(field + " is not valid JSON: " + e.what(), field);
    }
    if (out->is_object() || out->is_boolean()) return std::nullopt;
  }
  return field_error(field + " must be a JSON Schema object, got " + json_type_name(v), field);
}

std::optional<ApiError> from_result(Result<std::string> r, const std::string& field,
                                    std::string* gbnf) {
  if (!r.is_ok()) return field_error(field + ": " + r.status().message(), field);
  *gbnf = std::move(r).value();
  return std::nullopt;
}

std::optional<ApiError> schema_gbnf(const Json& v, const std::string& field, std::string* gbnf) {
  Json schema;
  if (auto e = schema_value(v, field, &schema)) return e;
  return from_result(structured::json_schema_to_gbnf(schema), field, gbnf);
}

std::optional<ApiError> string_list(const Json& v, const std::string& field,
                                    std::vector<std::string>* out) {
  if (!v.is_array() || v.empty())
    return field_error(field + " must be a non-empty list of strings", field);
  for (const Json& s : v) {
    if (!s.is_string()) return field_error(field + " must be a list of strings", field);
    out->push_back(s.get<std::string>());
  }
  return std::nullopt;
}

// vLLM's structural tag: {"type": "structural_tag", "structures": [{"begin", "schema", "end"}],
// "triggers": [...]} (as an object, or a string holding one).
std::optional<ApiError> structural_tag_gbnf(const Json& v, const std::string& field,
                                            std::string* gbnf) {
  Json tag = v;
  if (v.is_string()) {
    if (json_nesting_exceeds(v.get_ref<const std::string&>()))
      return field_error(
          field + " nests more than " + std::to_string(kMaxJsonDepth) + " levels deep", field);
    try {
      tag = Json::parse(v.get<std::string>());
    } catch (const nlohmann::json::exception& e) {
      return field_error(field + " is not valid JSON: " + e.what(), field);
    }
  }
  if (!tag.is_object()) return field_error(field + " must be an object", field);
  for (auto it = tag.begin(); it != tag.end(); ++it)
    if (it.key() != "type" && it.key() != "structures" && it.key() != "triggers")
      return field_error(
          field + "." + it.key() + " is not supported (expected type, structures, triggers)",
          field);
  auto structures = tag.find("structures");
  if (structures == tag.end() || !structures->is_array() || structures->empty())
    return field_error(field + ".structures must be a non-empty list", field);
  std::vector<structured::StructuralTagItem> items;
  for (const Json& s : *structures) {
    if (!s.is_object()) return field_error(field + ".structures items must be objects", field);
    structured::StructuralTagItem item;
    auto b = s.find("begin"), e = s.find("end"), sc = s.find("schema");
    if (b == s.end() || !b->is_string() || b->get<std::string>().empty() || e == s.end() ||
        !e->is_string())
      return field_error(field + ".structures items need string 'begin' (non-empty) and 'end'",
                         field);
    item.begin = b->get<std::string>();
    item.end = e->get<std::string>();
    Json schema = Json::object();
    if (sc != s.end() && !sc->is_null())
      if (auto err = schema_value(*sc, field + ".structures.schema", &schema)) return err;
    item.schema = schema;
    items.push_back(std::move(item));
  }
  std::vector<std::string> triggers;
  auto t = tag.find("triggers");
  if (t == tag.end()) return field_error(field + ".triggers is required", field);
  if (auto e = string_list(*t, field + ".triggers", &triggers)) return e;
  for (const auto& it : items) {
    bool covered = false;
    for (const auto& tr : triggers) covered |= it.begin.rfind(tr, 0) == 0;
    if (!covered)
      return field_error(
          field + ": structure begin '" + it.begin + "' does not start with any trigger", field);
  }
  return from_result(structured::structural_tag_to_gbnf(items, triggers), field, gbnf);
}

// One constraint source; a second one in the same request is an error.
struct Collector {
  AnswerConstraint* out;
  std::optional<ApiError> error;
  bool take(const std::string& field) {
    if (error) return false;
    if (!out->field.empty()) {
      error = field_error(
          "only one output constraint may be given, got both " + out->field + " and " + field,
          field);
      return false;
    }
    out->field = field;
    return true;
  }
  void set(std::optional<ApiError> e) {
    if (e && !error) error = std::move(e);
  }
};

void read_response_format(const Json& rf, Collector& c) {
  if (!rf.is_object())
    return c.set(field_error("response_format must be an object", "response_format"));
  auto type = rf.find("type");
  if (type == rf.end() || !type->is_string())
    return c.set(field_error(
        "response_format.type is required: text, json_object, json_schema or structural_tag",
        "response_format"));
  const std::string t = type->get<std::string>();
  for (auto it = rf.begin(); it != rf.end(); ++it) {
    const std::string& k = it.key();
    const bool known = k == "type" || (t == "json_schema" && k == "json_schema") ||
                       (t == "structural_tag" && (k == "structures" || k == "triggers"));
    if (!known)
      return c.set(field_error("response_format." + k + " is not valid for type '" + t + "'",
                               "response_format"));
  }
  if (t == "text") return;
  if (t == "json_object") {
    if (c.take("response_format")) c.out->gbnf = structured::any_json_object_gbnf();
    return;
  }
  if (t == "json_schema") {
    auto js = rf.find("json_schema");
    if (js == rf.end() || !js->is_object())
      return c.set(field_error("response_format.json_schema is required for type json_schema",
                               "response_format"));
    for (auto it = js->begin(); it != js->end(); ++it) {
      const std::string& k = it.key();
      if (k != "name" && k != "schema" && k != "strict" && k != "description")
        return c.set(field_error("response_format.json_schema." + k +
                                     " is not a known field (name, schema, strict, description)",
                                 "response_format"));
    }
    auto name = js->find("name");
    if (name == js->end() || !name->is_string())
      return c.set(field_error("response_format.json_schema.name is required (a string)",
                               "response_format"));
    static const std::regex kName("^[a-zA-Z0-9_-]{1,64}$");
    if (!std::regex_match(name->get<std::string>(), kName))
      return c.set(
          field_error("response_format.json_schema.name must be 1-64 of a-z, A-Z, 0-9, _ and -",
                      "response_format"));
    auto strict = js->find("strict");
    if (strict != js->end() && !strict->is_null() && !strict->is_boolean())
      return c.set(
          field_error("response_format.json_schema.strict must be a boolean", "response_format"));
    auto schema = js->find("schema");
    // Without a schema OpenAI accepts any JSON object.
    if (!c.take("response_format")) return;
    if (schema == js->end() || schema->is_null()) {
      c.out->gbnf = structured::any_json_object_gbnf();
      return;
    }
    return c.set(schema_gbnf(*schema, "response_format.json_schema.schema", &c.out->gbnf));
  }
  if (t == "structural_tag") {
    if (c.take("response_format")) c.set(structural_tag_gbnf(rf, "response_format", &c.out->gbnf));
    return;
  }
  c.set(field_error(
      "response_format.type must be text, json_object, json_schema or structural_tag, got '" + t +
          "'",
      "response_format"));
}

void read_structured_outputs(const Json& so, Collector& c) {
  const std::string f = "structured_outputs";
  if (!so.is_object()) return c.set(field_error(f + " must be an object", f));
  for (auto it = so.begin(); it != so.end(); ++it) {
    const std::string& k = it.key();
    const Json& v = it.value();
    if (v.is_null()) continue;
    const std::string field = f + "." + k;
    if (k == "json") {
      if (c.take(field)) c.set(schema_gbnf(v, field, &c.out->gbnf));
    } else if (k == "json_object") {
      if (!v.is_boolean()) return c.set(field_error(field + " must be a boolean", f));
      if (v.get<bool>() && c.take(field)) c.out->gbnf = structured::any_json_object_gbnf();
    } else if (k == "regex") {
      if (!v.is_string()) return c.set(field_error(field + " must be a string", f));
      if (c.take(field))
        c.set(from_result(structured::regex_to_gbnf(v.get<std::string>()), field, &c.out->gbnf));
    } else if (k == "choice") {
      std::vector<std::string> choices;
      if (auto e = string_list(v, field, &choices)) return c.set(std::move(e));
      if (c.take(field))
        c.set(from_result(structured::choice_to_gbnf(choices), field, &c.out->gbnf));
    } else if (k == "grammar") {
      if (!v.is_string()) return c.set(field_error(field + " must be a string (GBNF)", f));
      if (c.take(field)) c.out->gbnf = v.get<std::string>();
    } else if (k == "structural_tag") {
      if (c.take(field)) c.set(structural_tag_gbnf(v, field, &c.out->gbnf));
    } else if (k == "disable_fallback" || k == "disable_any_whitespace" ||
               k == "disable_additional_properties") {
      // Options that only say what the output may not be; loom's grammars already never fall
      // back, emit no free whitespace, and follow additionalProperties as written.
      if (!v.is_boolean()) return c.set(field_error(field + " must be a boolean", f));
      if (k == "disable_additional_properties" && v.get<bool>())
        return c.set(field_error(
            field + " is not supported: set additionalProperties: false in the schema", f));
    } else {
      return c.set(field_error(field + " is not supported (known: json, regex, choice, grammar, "
                                       "json_object, structural_tag)",
                               f));
    }
  }
}

}  // namespace

std::optional<ApiError> read_answer_constraint(FieldReader& r, AnswerConstraint* out) {
  *out = AnswerConstraint();
  Collector c{out, std::nullopt};
  if (const Json* rf = r.raw("response_format")) read_response_format(*rf, c);
  if (const Json* so = r.raw("structured_outputs")) read_structured_outputs(*so, c);
  if (const Json* v = r.raw("guided_json"))
    if (c.take("guided_json")) c.set(schema_gbnf(*v, "guided_json", &out->gbnf));
  if (const Json* v = r.raw("json_schema"))  // llama-server
    if (c.take("json_schema")) c.set(schema_gbnf(*v, "json_schema", &out->gbnf));
  if (const Json* v = r.raw("guided_regex")) {
    if (!v->is_string())
      c.set(bad_request("guided_regex must be a string", "guided_regex"));
    else if (c.take("guided_regex"))
      c.set(from_result(structured::regex_to_gbnf(v->get<std::string>()), "guided_regex",
                        &out->gbnf));
  }
  if (const Json* v = r.raw("guided_choice")) {
    std::vector<std::string> choices;
    if (auto e = string_list(*v, "guided_choice", &choices))
      c.set(std::move(e));
    else if (c.take("guided_choice"))
      c.set(from_result(structured::choice_to_gbnf(choices), "guided_choice", &out->gbnf));
  }
  for (const char* k : {"guided_grammar", "grammar"}) {
    if (const Json* v = r.raw(k)) {
      if (!v->is_string())
        c.set(bad_request(std::string(k) + " must be a string (GBNF)", k));
      else if (c.take(k))
        out->gbnf = v->get<std::string>();
    }
  }
  // Which engine enforces the grammar does not change what the output may be: any name is
  // served by loom's own.
  r.opt_string("guided_decoding_backend");
  if (r.raw("guided_whitespace_pattern"))
    c.set(bad_request("guided_whitespace_pattern is not supported (JSON output is compact)",
                      "guided_whitespace_pattern"));
  if (!r.ok()) return r.error();
  return c.error;
}

std::optional<ApiError> validate_tools(const ToolsRequest& tools, const char* param) {
  static const std::regex kName("^[a-zA-Z0-9_.-]{1,64}$");
  std::vector<std::string> names;
  for (size_t i = 0; i < tools.tools.size(); ++i) {
    const Json& fn = tools.tools[i]["function"];
    const std::string where = std::string(param) + "[" + std::to_string(i) + "]";
    const std::string name = fn["name"].get<std::string>();
    if (!std::regex_match(name, kName))
      return bad_request(
          where + ": function name '" + name + "' must be 1-64 of a-z, A-Z, 0-9, _, . and -",
          param);
    for (const auto& n : names)
      if (n == name)
        return bad_request(where + ": function '" + name + "' is declared twice", param);
    names.push_back(name);
    if (fn.contains("parameters")) {
      const Json& p = fn["parameters"];
      if (!p.is_object())
        return bad_request(where + ": parameters must be a JSON Schema object", param);
      auto g = structured::json_schema_to_gbnf(p);
      if (!g.is_ok())
        return bad_request(where + " (" + name + "): invalid parameters: " + g.status().message(),
                           param);
    }
  }
  if (tools.mode == ToolMode::kNamed &&
      std::find(names.begin(), names.end(), tools.function_name) == names.end())
    return bad_request("tool_choice names function '" + tools.function_name +
                           "', which is not among the declared tools",
                       "tool_choice");
  return std::nullopt;
}

std::optional<ApiError> read_openai_tools(FieldReader& r, ToolsRequest* out) {
  *out = ToolsRequest();
  const Json* tools = r.opt_array("tools");
  if (!r.ok()) return r.error();
  if (tools) {
    for (size_t i = 0; i < tools->size(); ++i) {
      const Json& t = (*tools)[i];
      const std::string where = "tools[" + std::to_string(i) + "]";
      if (!t.is_object()) return bad_request(where + " must be an object", "tools");
      auto type = t.find("type");
      if (type == t.end() || *type != "function")
        return bad_request(where + ".type must be 'function'", "tools");
      auto fn = t.find("function");
      if (fn == t.end() || !fn->is_object())
        return bad_request(where + ".function must be an object", "tools");
      auto name = fn->find("name");
      if (name == fn->end() || !name->is_string())
        return bad_request(where + ".function.name is required (a string)", "tools");
      for (auto it = fn->begin(); it != fn->end(); ++it) {
        const std::string& k = it.key();
        if (k != "name" && k != "description" && k != "parameters" && k != "strict")
          return bad_request(where + ".function." + k + " is not a known field", "tools");
      }
      auto desc = fn->find("description");
      if (desc != fn->end() && !desc->is_null() && !desc->is_string())
        return bad_request(where + ".function.description must be a string", "tools");
      Json norm = {{"type", "function"}, {"function", *fn}};
      if (norm["function"].contains("parameters") && norm["function"]["parameters"].is_null())
        norm["function"].erase("parameters");
      out->tools.push_back(std::move(norm));
    }
  }
  const Json* choice = r.raw("tool_choice");
  out->mode = out->declared() ? ToolMode::kAuto : ToolMode::kNone;
  if (choice) {
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none")
        out->mode = ToolMode::kNone;
      else if (c == "auto")
        out->mode = out->declared() ? ToolMode::kAuto : ToolMode::kNone;
      else if (c == "required")
        out->mode = ToolMode::kRequired;
      else
        return bad_request(
            "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", "
            "\"function\": {\"name\": ...}}, got '" +
                c + "'",
            "tool_choice");
    } else if (choice->is_object()) {
      auto type = choice->find("type");
      auto fn = choice->find("function");
      if (type == choice->end() || *type != "function" || fn == choice->end() || !fn->is_object() ||
          !fn->contains("name") || !(*fn)["name"].is_string())
        return bad_request(
            "tool_choice must be {\"type\": \"function\", \"function\": {\"name\": ...}}",
            "tool_choice");
      out->mode = ToolMode::kNamed;
      out->function_name = (*fn)["name"].get<std::string>();
    } else {
      return bad_request(
          "tool_choice must be a string or an object, got " + json_type_name(*choice),
          "tool_choice");
    }
    if ((out->mode == ToolMode::kRequired || out->mode == ToolMode::kNamed) && !out->declared())
      return bad_request("tool_choice requires tools to be declared", "tool_choice");
  }
  if (auto v = r.opt_bool("parallel_tool_calls")) out->parallel_tool_calls = *v;
  if (!r.ok()) return r.error();
  return validate_tools(*out, "tools");
}

std::optional<ApiError> apply_output_constraints(const ServerContext& ctx,
                                                 const AnswerConstraint& answer,
                                                 const ToolsRequest& tools,
                                                 const ChatPromptInfo& prompt,
                                                 GenerationSpec* spec) {
  const bool chat = prompt.chat;
  if (tools.tools.size() > static_cast<size_t>(ctx.options.max_tools))
    return bad_request(std::to_string(tools.tools.size()) + " tools, over the server's limit of " +
                           std::to_string(ctx.options.max_tools) + " (loom serve --max-tools)",
                       "tools");
  OutputParsing& out = spec->output;
  chat::ChatGrammarRequest g;
  g.answer_gbnf = answer.gbnf;
  if (chat) {
    g.format = ctx.output_format;
    // Any model can be made to call tools when the call is required: models whose template has
    // no tool-call convention get Hermes-style markup.
    if (tools.mode != ToolMode::kNone && g.format.tools == chat::ToolCallFormat::kNone)
      g.format.tools = chat::ToolCallFormat::kHermes;
    g.starts_in_reasoning =
        chat::prompt_opens_reasoning(g.format.reasoning, prompt.rendered_prompt);
    g.allow_reasoning =
        g.format.reasoning != chat::ReasoningFormat::kNone && !prompt.thinking_disabled;
    g.tool_mode = tools.mode;
    g.tools = tools.tools;
    g.function_name = tools.function_name;
    g.parallel_tool_calls = tools.parallel_tool_calls;
    // A format for the answer and tools together, as OpenAI takes them: under "auto" the turn
    // is either an answer in that format or calls (chat_grammar: answer-root | calls); under
    // "required" or a named function it is calls, and the format waits for the answer after
    // the tool results. llama3_json's calls are bare JSON objects, which a JSON answer could
    // not be told apart from.
    if (tools.mode == ToolMode::kAuto && !answer.gbnf.empty() &&
        g.format.tools == chat::ToolCallFormat::kLlama3Json)
      return bad_request(answer.field +
                             " cannot be combined with tool_choice 'auto' for this model: its "
                             "tool calls are bare JSON (llama3_json), indistinguishable from a "
                             "JSON answer; set tool_choice to 'none' or 'required', or drop " +
                             answer.field,
                         answer.field);
    out.format = g.format;
    out.tools_enabled = tools.mode != ToolMode::kNone;
    out.starts_in_reasoning = g.starts_in_reasoning;
    out.enabled = out.tools_enabled || g.format.reasoning != chat::ReasoningFormat::kNone;
    out.tools = tools.tools;
    // Tool and reasoning markers are often special tokens ([TOOL_CALLS], DeepSeek's): the
    // parser must see their text; other control tokens are still skipped. (EOS never reaches
    // the text.)
    if (out.enabled)
      spec->params.kept_special_tokens = chat::parser_markers(out.format, out.tools_enabled);
  } else {
    g.allow_reasoning = false;
  }
  std::string gbnf = answer.gbnf;
  if (chat) {
    auto built = chat::build_chat_grammar(g);
    if (!built.is_ok())
      return bad_request(built.status().message(), tools.declared() ? "tools" : answer.field);
    gbnf = std::move(built).value();
  }
  if (gbnf.empty()) return std::nullopt;
  if (gbnf.size() > ctx.options.max_grammar_bytes) {
    const std::string field = answer.field.empty() ? "tools" : answer.field;
    return bad_request(field + " compiles to a grammar of " + std::to_string(gbnf.size()) +
                           " bytes, over the server's limit of " +
                           std::to_string(ctx.options.max_grammar_bytes) +
                           " (loom serve --max-grammar-bytes)",
                       field);
  }
  if (!ctx.token_vocab || !ctx.grammar_cache)
    return bad_request("this model has no tokenizer, so its output cannot be constrained",
                       answer.field.empty() ? "tools" : answer.field);
  auto compiled = ctx.grammar_cache->get(gbnf, ctx.token_vocab);
  if (!compiled.is_ok())
    return bad_request((answer.field.empty() ? std::string("tools") : answer.field) + ": " +
                           compiled.status().message(),
                       answer.field.empty() ? "tools" : answer.field);
  spec->params.grammar = std::move(compiled).value();
  return std::nullopt;
}

std::optional<ApiError> read_ollama_format(const Json* format, AnswerConstraint* out) {
  *out = AnswerConstraint();
  if (!format || format->is_null() || (format->is_string() && format->get<std::string>().empty()))
    return std::nullopt;
  out->field = "format";
  if (format->is_string()) {
    if (format->get<std::string>() != "json")
      return bad_request("format must be \"json\" or a JSON Schema object, got \"" +
                             format->get<std::string>() + "\"",
                         "format");
    out->gbnf = structured::any_json_object_gbnf();
    return std::nullopt;
  }
  if (!format->is_object())
    return bad_request(
        "format must be \"json\" or a JSON Schema object, got " + json_type_name(*format),
        "format");
  return schema_gbnf(*format, "format", &out->gbnf);
}

}  // namespace loom::server
