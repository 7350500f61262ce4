// Responses API requests → GenerationSpec (see responses_api.h). The input items become the
// chat template's OpenAI-shape messages: consecutive reasoning, assistant message and
// function_call items form one assistant turn (reasoning_content, content, tool_calls), and a
// function_call_output becomes a "tool" message naming its call. Tools, tool_choice and
// text.format are converted to the chat shapes and validated by the same code as
// /v1/chat/completions (constraints.h), so a schema error reads the same in both APIs.
#include <initializer_list>
#include <map>

#include "loom/tokenizer.h"
#include "server/constraints.h"
#include "server/responses_api.h"
#include "server/responses_store.h"
#include "server/server_context.h"

namespace loom::server {
namespace {

using ToolMode = chat::ChatGrammarRequest::ToolMode;

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

std::optional<ApiError> check_keys(const Json& obj, std::initializer_list<const char*> known,
                                   const std::string& where, const std::string& param) {
  for (const auto& [k, v] : obj.items())
    if (!one_of(k, known))
      return bad_request(where + "." + k + " is not supported by loom's Responses API", param);
  return std::nullopt;
}

// Top-level fields loom reads. Anything else is a 400 naming it.
constexpr std::initializer_list<const char*> kKnownFields = {
    "model", "input", "instructions", "tools", "tool_choice", "parallel_tool_calls",
    "max_output_tokens", "temperature", "top_p", "text", "reasoning", "stream", "stream_options",
    "store", "previous_response_id", "metadata", "user", "safety_identifier", "prompt_cache_key",
    "truncation", "include", "background", "service_tier", "top_logprobs",
    // vLLM's sampling extensions of the Responses API.
    "seed", "top_k", "min_p", "presence_penalty", "frequency_penalty", "repetition_penalty", "stop",
    "ignore_eos"};

// A message's content: a string, or a list of text parts (input_text for user / system /
// developer turns, output_text or refusal for assistant turns), joined with "\n".
std::optional<ApiError> content_text(const Json& content, const std::string& role,
                                     const std::string& where, std::string* out) {
  if (content.is_string()) {
    *out = content.get<std::string>();
    return std::nullopt;
  }
  if (!content.is_array())
    return bad_request(where + ".content must be a string or a list of content parts, got " +
                           json_type_name(content),
                       "input");
  out->clear();
  for (size_t k = 0; k < content.size(); ++k) {
    const Json& part = content[k];
    const std::string w = where + ".content[" + std::to_string(k) + "]";
    if (!part.is_object() || !part.contains("type") || !part["type"].is_string())
      return bad_request(w + " must be an object with a string 'type'", "input");
    const std::string type = part["type"].get<std::string>();
    const bool assistant = role == "assistant";
    std::string text;
    if ((type == "input_text" && !assistant) || (type == "output_text" && assistant)) {
      if (auto e = check_keys(part, {"type", "text", "annotations", "logprobs"}, w, "input"))
        return e;
      if (!part.contains("text") || !part["text"].is_string())
        return bad_request(w + ".text is required (a string)", "input");
      text = part["text"].get<std::string>();
    } else if (type == "refusal" && assistant) {
      if (!part.contains("refusal") || !part["refusal"].is_string())
        return bad_request(w + ".refusal is required (a string)", "input");
      text = part["refusal"].get<std::string>();
    } else if (one_of(type, {"input_text", "output_text", "refusal"})) {
      return bad_request(w + ": '" + type + "' parts belong in " +
                             (assistant ? "user, system or developer" : "assistant") + " messages",
                         "input");
    } else {
      return bad_request(
          w + ": content part type '" + type + "' is not supported (this model takes text only)",
          "input");
    }
    if (k > 0) *out += "\n";
    *out += text;
  }
  return std::nullopt;
}

std::optional<ApiError> required_string(const Json& item, const char* key, const std::string& where,
                                        std::string* out) {
  auto it = item.find(key);
  if (it == item.end() || !it->is_string())
    return bad_request(where + "." + key + " is required (a string)", "input");
  *out = it->get<std::string>();
  return std::nullopt;
}

// The conversation's items → the template's messages (after the instructions' system message).
class MessageBuilder {
 public:
  explicit MessageBuilder(Json* out) : out_(out) {}

  std::optional<ApiError> add(const Json& item, const std::string& where) {
    if (!item.is_object()) return bad_request(where + " must be an object", "input");
    std::string type = "message";  // EasyInputMessage has no type
    if (auto t = item.find("type"); t != item.end()) {
      if (!t->is_string()) return bad_request(where + ".type must be a string", "input");
      type = t->get<std::string>();
    }
    if (type == "message") return message(item, where);
    if (type == "function_call") return function_call(item, where);
    if (type == "function_call_output") return function_call_output(item, where);
    if (type == "reasoning") return reasoning(item, where);
    return bad_request(where + ": item type '" + type +
                           "' is not supported (message, function_call, function_call_output, "
                           "reasoning)",
                       "input");
  }

  void finish() { flush(); }

 private:
  std::optional<ApiError> message(const Json& item, const std::string& where) {
    if (auto e = check_keys(item, {"type", "role", "content", "id", "status"}, where, "input"))
      return e;
    std::string role;
    if (auto e = required_string(item, "role", where, &role)) return e;
    if (!one_of(role, {"user", "assistant", "system", "developer"}))
      return bad_request(
          where + ".role '" + role + "' is not one of user, assistant, system, developer", "input");
    auto content = item.find("content");
    if (content == item.end() || content->is_null())
      return bad_request(where + ".content is required", "input");
    std::string text;
    if (auto e = content_text(*content, role, where, &text)) return e;
    if (role == "assistant") {
      // A second message, or one after the turn's calls, starts a new turn.
      if (turn_ && (turn_->contains("tool_calls") || !(*turn_)["content"].is_null())) flush();
      open_turn();
      (*turn_)["content"] = text;
      return std::nullopt;
    }
    flush();
    out_->push_back(Json{{"role", role}, {"content", text}});
    return std::nullopt;
  }

  std::optional<ApiError> function_call(const Json& item, const std::string& where) {
    if (auto e = check_keys(item, {"type", "call_id", "name", "arguments", "id", "status"}, where,
                            "input"))
      return e;
    std::string call_id, name, arguments;
    if (auto e = required_string(item, "call_id", where, &call_id)) return e;
    if (auto e = required_string(item, "name", where, &name)) return e;
    if (auto e = required_string(item, "arguments", where, &arguments)) return e;
    if (call_id.empty()) return bad_request(where + ".call_id must not be empty", "input");
    open_turn();
    if (!turn_->contains("tool_calls")) (*turn_)["tool_calls"] = Json::array();
    (*turn_)["tool_calls"].push_back({{"id", call_id},
                                      {"type", "function"},
                                      {"function", {{"name", name}, {"arguments", arguments}}}});
    call_names_[call_id] = name;
    return std::nullopt;
  }

  std::optional<ApiError> function_call_output(const Json& item, const std::string& where) {
    if (auto e = check_keys(item, {"type", "call_id", "output", "id", "status"}, where, "input"))
      return e;
    std::string call_id;
    if (auto e = required_string(item, "call_id", where, &call_id)) return e;
    auto output = item.find("output");
    if (output == item.end() || output->is_null())
      return bad_request(where + ".output is required", "input");
    std::string text;
    if (auto e = content_text(*output, "tool", where + ".output", &text)) return e;
    auto name = call_names_.find(call_id);
    if (name == call_names_.end())
      return bad_request(
          where + ": no function_call with call_id '" + call_id + "' comes before this output",
          "input");
    flush();
    out_->push_back(Json{
        {"role", "tool"}, {"tool_call_id", call_id}, {"name", name->second}, {"content", text}});
    return std::nullopt;
  }

  std::optional<ApiError> reasoning(const Json& item, const std::string& where) {
    if (auto e =
            check_keys(item, {"type", "id", "summary", "content", "encrypted_content", "status"},
                       where, "input"))
      return e;
    if (auto ec = item.find("encrypted_content"); ec != item.end() && !ec->is_null())
      return bad_request(where +
                             ".encrypted_content: loom does not encrypt reasoning; send the "
                             "item's content as the response returned it",
                         "input");
    // The reasoning text is the item's content (reasoning_text parts); a summary is what a
    // client kept of it when there is no content.
    std::string text;
    for (const char* key : {"content", "summary"}) {
      auto parts = item.find(key);
      if (parts == item.end() || parts->is_null()) continue;
      if (!parts->is_array()) return bad_request(where + "." + key + " must be a list", "input");
      const char* part_type = std::string(key) == "content" ? "reasoning_text" : "summary_text";
      for (size_t k = 0; k < parts->size(); ++k) {
        const Json& p = (*parts)[k];
        const std::string w = where + "." + key + "[" + std::to_string(k) + "]";
        if (!p.is_object() || p.value("type", "") != part_type || !p.contains("text") ||
            !p["text"].is_string())
          return bad_request(w + " must be {\"type\": \"" + part_type + "\", \"text\": ...}",
                             "input");
        if (!text.empty()) text += "\n";
        text += p["text"].get<std::string>();
      }
      if (!text.empty()) break;
    }
    if (turn_ && (turn_->contains("tool_calls") || !(*turn_)["content"].is_null())) flush();
    open_turn();
    std::string prev = turn_->value("reasoning_content", "");
    (*turn_)["reasoning_content"] = prev.empty() ? text : prev + "\n" + text;
    return std::nullopt;
  }

  void open_turn() {
    if (!turn_) turn_ = Json{{"role", "assistant"}, {"content", nullptr}};
  }
  void flush() {
    if (!turn_) return;
    out_->push_back(std::move(*turn_));
    turn_.reset();
  }

  Json* out_;
  std::optional<Json> turn_;  // the assistant turn being assembled
  std::map<std::string, std::string> call_names_;
};

// The flat function tools → the chat shape ({"type": "function", "function": {...}}), and
// tool_choice.
std::optional<ApiError> read_tools(FieldReader& r, ToolsRequest* out) {
  *out = ToolsRequest();
  const Json* tools = r.opt_array("tools");
  if (!r.ok()) return r.error();
  for (size_t i = 0; tools && i < tools->size(); ++i) {
    const Json& t = (*tools)[i];
    const std::string where = "tools[" + std::to_string(i) + "]";
    if (!t.is_object() || !t.contains("type") || !t["type"].is_string())
      return bad_request(where + " must be an object with a string 'type'", "tools");
    const std::string type = t["type"].get<std::string>();
    if (type != "function")
      return bad_request(
          where + ".type '" + type + "' is not supported (loom serves function tools only)",
          "tools");
    if (auto e =
            check_keys(t, {"type", "name", "description", "parameters", "strict"}, where, "tools"))
      return e;
    if (!t.contains("name") || !t["name"].is_string())
      return bad_request(where + ".name is required (a string)", "tools");
    Json fn = {{"name", t["name"]}};
    if (auto d = t.find("description"); d != t.end() && !d->is_null()) {
      if (!d->is_string()) return bad_request(where + ".description must be a string", "tools");
      fn["description"] = *d;
    }
    if (auto p = t.find("parameters"); p != t.end() && !p->is_null()) fn["parameters"] = *p;
    if (auto s = t.find("strict"); s != t.end() && !s->is_null()) {
      if (!s->is_boolean()) return bad_request(where + ".strict must be a boolean", "tools");
      fn["strict"] = *s;
    }
    out->tools.push_back(Json{{"type", "function"}, {"function", std::move(fn)}});
  }
  out->mode = out->declared() ? ToolMode::kAuto : ToolMode::kNone;
  if (const Json* choice = r.raw("tool_choice")) {
    const std::string expected =
        "tool_choice must be 'none', 'auto', 'required' or {\"type\": \"function\", \"name\": ...}";
    if (choice->is_string()) {
      const std::string c = choice->get<std::string>();
      if (c == "none")
        out->mode = ToolMode::kNone;
      else if (c == "required")
        out->mode = ToolMode::kRequired;
      else if (c != "auto")
        return bad_request(expected + ", got '" + c + "'", "tool_choice");
    } else if (choice->is_object()) {
      if (choice->value("type", "") != "function" || !choice->contains("name") ||
          !(*choice)["name"].is_string())
        return bad_request(expected + " (loom serves function tools only)", "tool_choice");
      if (auto e = check_keys(*choice, {"type", "name"}, "tool_choice", "tool_choice")) return e;
      out->mode = ToolMode::kNamed;
      out->function_name = (*choice)["name"].get<std::string>();
    } else {
      return bad_request(expected + ", got " + json_type_name(*choice), "tool_choice");
    }
    if ((out->mode == ToolMode::kRequired || out->mode == ToolMode::kNamed) && !out->declared())
      return bad_request("tool_choice requires tools to be declared", "tool_choice");
  }
  if (auto v = r.opt_bool("parallel_tool_calls")) out->parallel_tool_calls = *v;
  if (!r.ok()) return r.error();
  return validate_tools(*out, "tools");
}

// "response_format..." in a message from constraints.cpp → "text.format...".
void rename_format_field(ApiError* e) {
  const std::string from = "response_format";
  for (const std::string& old : {from + ".json_schema", from}) {
    size_t pos;
    while ((pos = e->message.find(old)) != std::string::npos)
      e->message.replace(pos, old.size(), "text.format");
  }
  e->param = "text";
}

// text {format: {type: text | json_object | json_schema, ...}}: the answer's grammar, read by
// the chat API's response_format code.
std::optional<ApiError> read_text_format(FieldReader& r, AnswerConstraint* answer, Json* echo) {
  *echo = Json{{"format", {{"type", "text"}}}};
  const Json* text = r.opt_object("text");
  if (!r.ok()) return r.error();
  if (!text) return std::nullopt;
  if (auto e = check_keys(*text, {"format", "verbosity"}, "text", "text")) return e;
  if (auto v = text->find("verbosity"); v != text->end() && !v->is_null() && *v != "medium")
    return bad_request("text.verbosity: only 'medium' is supported (loom does not steer length)",
                       "text");
  auto format = text->find("format");
  if (format == text->end() || format->is_null()) return std::nullopt;
  if (!format->is_object() || !format->contains("type") || !(*format)["type"].is_string())
    return bad_request("text.format must be an object with a string 'type'", "text");
  const std::string type = (*format)["type"].get<std::string>();
  Json rf = {{"type", type}};
  if (type == "json_schema") {
    Json js = Json::object();
    for (const auto& [k, v] : format->items()) {
      if (k == "type") continue;
      if (!one_of(k, {"name", "schema", "strict", "description"}))
        return bad_request("text.format." + k +
                               " is not a known field (name, schema, strict, "
                               "description)",
                           "text");
      js[k] = v;
    }
    if (!js.contains("schema"))
      return bad_request("text.format.schema is required for type json_schema", "text");
    rf["json_schema"] = std::move(js);
  } else if (type == "text" || type == "json_object") {
    if (auto e = check_keys(*format, {"type"}, "text.format", "text")) return e;
  } else {
    return bad_request(
        "text.format.type must be text, json_object or json_schema, got '" + type + "'", "text");
  }
  Json holder = {{"response_format", rf}};
  FieldReader hr(holder);
  if (auto e = read_answer_constraint(hr, answer)) {
    rename_format_field(&*e);
    return e;
  }
  answer->field = "text";
  (*echo)["format"] = *format;
  return std::nullopt;
}

// reasoning {effort, summary} → the template's thinking switch (nullopt: the model's default).
std::optional<ApiError> read_reasoning(const ServerContext& ctx, FieldReader& r,
                                       std::optional<bool>* thinking, Json* effort_out,
                                       Json* echo) {
  *echo = Json{{"effort", nullptr}, {"summary", nullptr}};
  const Json* reasoning = r.opt_object("reasoning");
  if (!r.ok()) return r.error();
  if (!reasoning) return std::nullopt;
  if (auto e = check_keys(*reasoning, {"effort", "summary", "generate_summary"}, "reasoning",
                          "reasoning"))
    return e;
  for (const char* k : {"summary", "generate_summary"}) {
    auto s = reasoning->find(k);
    if (s == reasoning->end() || s->is_null()) continue;
    // "auto" leaves the form to the server: loom returns the reasoning itself, in full, as the
    // reasoning item's content. A summary of it would need a second model.
    if (*s != "auto")
      return bad_request(std::string("reasoning.") + k +
                             ": only 'auto' is supported (the reasoning is returned in full as "
                             "reasoning_text content, never summarised)",
                         "reasoning");
    (*echo)["summary"] = "auto";
  }
  auto effort = reasoning->find("effort");
  if (effort == reasoning->end() || effort->is_null()) return std::nullopt;
  if (!effort->is_string() ||
      !one_of(effort->get<std::string>(), {"none", "minimal", "low", "medium", "high", "xhigh"}))
    return bad_request("reasoning.effort must be one of none, minimal, low, medium, high, xhigh",
                       "reasoning");
  const std::string e = effort->get<std::string>();
  *thinking = !(e == "none" || e == "minimal");
  if (**thinking && ctx.output_format.reasoning == chat::ReasoningFormat::kNone)
    return bad_request("reasoning.effort '" + e + "': model '" + ctx.model_name +
                           "' does not reason (its chat template has no reasoning format; "
                           "loom serve --reasoning-parser)",
                       "reasoning");
  (*echo)["effort"] = e;
  *effort_out = e;
  return std::nullopt;
}

// Fields accepted only at the value that means "what loom does anyway".
std::optional<ApiError> read_fixed_fields(FieldReader& r, Json* echo) {
  if (const Json* inc = r.raw("include"); inc && !(inc->is_array() && inc->empty()))
    return bad_request("include: no additional output data is supported (got " +
                           inc->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) +
                           ")",
                       "include");
  if (r.opt_bool("background").value_or(false))
    return bad_request("background responses are not supported", "background");
  if (auto t = r.opt_string("service_tier"); t && *t != "auto" && *t != "default")
    return bad_request("service_tier '" + *t + "' is not supported (auto, default)",
                       "service_tier");
  if (auto t = r.opt_string("truncation"); t && *t != "disabled")
    return bad_request(
        "truncation '" + *t + "' is not supported: loom never drops input items (use 'disabled')",
        "truncation");
  if (auto n = r.opt_int("top_logprobs", 0, 20); n && *n != 0)
    return bad_request("top_logprobs is not supported by loom's Responses API", "top_logprobs");
  if (const Json* so = r.opt_object("stream_options")) {
    if (auto e = check_keys(*so, {"include_obfuscation"}, "stream_options", "stream_options"))
      return e;
    if (so->value("include_obfuscation", false))
      return bad_request("stream_options.include_obfuscation: obfuscation padding is not supported",
                         "stream_options");
  }
  for (const char* k : {"safety_identifier", "prompt_cache_key"}) r.opt_string(k);
  // metadata: up to 16 string pairs, returned with the response.
  (*echo)["metadata"] = Json::object();
  if (const Json* md = r.opt_object("metadata")) {
    if (md->size() > 16) return bad_request("metadata holds at most 16 pairs", "metadata");
    for (const auto& [k, v] : md->items())
      if (k.size() > 64 || !v.is_string() || v.get<std::string>().size() > 512)
        return bad_request("metadata keys (<= 64 chars) map to strings (<= 512 chars)", "metadata");
    (*echo)["metadata"] = *md;
  }
  auto user = r.opt_string("user");
  (*echo)["user"] = user ? Json(*user) : Json();
  return r.ok() ? std::nullopt : r.error();
}

// input (a string or a list of items) → items, each an object with its "type".
std::optional<ApiError> read_input(const Json* input, Json* items) {
  if (!input) return bad_request("input is required", "input");
  if (input->is_string()) {
    items->push_back(Json{{"type", "message"}, {"role", "user"}, {"content", *input}});
    return std::nullopt;
  }
  if (!input->is_array())
    return bad_request("input must be a string or a list of items, got " + json_type_name(*input),
                       "input");
  for (const Json& item : *input) {
    Json it = item;
    if (it.is_object() && !it.contains("type")) it["type"] = "message";
    items->push_back(std::move(it));
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> parse_responses_request(const ServerContext& ctx, ResponsesStore& store,
                                                const Json& body, GenerationSpec* spec) {
  for (const auto& [k, v] : body.items())
    if (!one_of(k, kKnownFields))
      return bad_request("field \"" + k + "\" is not supported by loom's Responses API", k);
  spec->kind = ApiKind::kResponses;
  auto rc = std::make_shared<ResponsesContext>();
  Json& echo = rc->echo;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  read_sampling_fields(ctx, r, spec);  // temperature, top_p, seed, stop, ..., stream
  auto max_tokens = r.opt_int("max_output_tokens", INT32_MIN, INT32_MAX);
  auto instructions = r.opt_string("instructions");
  rc->store = r.opt_bool("store").value_or(false);
  auto previous = r.opt_string("previous_response_id");
  if (!r.ok()) return r.error();
  if (auto e = read_fixed_fields(r, &echo)) return e;
  if (rc->store && ctx.options.max_stored_responses <= 0)
    return bad_request("store is off on this server (loom serve --max-stored-responses 0)",
                       "store");
  rc->store_to = &store;
  rc->store_capacity = static_cast<size_t>(std::max(0, ctx.options.max_stored_responses));

  AnswerConstraint answer;
  if (auto e = read_text_format(r, &answer, &echo["text"])) return e;
  ToolsRequest tools;
  if (auto e = read_tools(r, &tools)) return e;
  std::optional<bool> thinking;
  Json effort;
  if (auto e = read_reasoning(ctx, r, &thinking, &effort, &echo["reasoning"])) return e;

  if (previous) {
    auto prev = store.get(*previous);
    if (!prev) {
      ApiError e = bad_request("Previous response with id '" + *previous +
                                   "' not found (responses are kept only when created with "
                                   "store: true, and only the latest --max-stored-responses)",
                               "previous_response_id");
      e.code = "previous_response_not_found";
      return e;
    }
    rc->items = std::move(prev->items);
  }
  Json input_items = Json::array();
  if (auto e = read_input(r.raw("input"), &input_items)) return e;
  const size_t first_input = rc->items.size();
  for (Json& it : input_items) rc->items.push_back(std::move(it));

  Json messages = Json::array();
  if (instructions) messages.push_back(Json{{"role", "system"}, {"content", *instructions}});
  MessageBuilder builder(&messages);
  for (size_t i = 0; i < rc->items.size(); ++i) {
    // Items from the stored conversation were checked when they were sent.
    const std::string where = i >= first_input ? "input[" + std::to_string(i - first_input) + "]"
                                               : "previous_response_id item " + std::to_string(i);
    if (auto e = builder.add(rc->items[i], where)) return e;
  }
  builder.finish();
  if (messages.empty()) return bad_request("input must contain at least one item", "input");
  if (!ctx.tokenizer)
    return bad_request("this model has no tokenizer, so the Responses API is unavailable", "input");

  Json kwargs = Json::object();
  if (thinking) kwargs["enable_thinking"] = *thinking;
  if (effort.is_string()) kwargs["reasoning_effort"] = effort;  // gpt-oss-style templates
  if (auto e = check_template_tools(ctx, tools, "tools")) return e;
  auto text = ctx.chat->render(messages, tools.declared() ? &tools.tools : nullptr,
                               /*add_generation_prompt=*/true, kwargs.empty() ? nullptr : &kwargs);
  if (!text.is_ok()) return bad_request("chat template error: " + text.status().message(), "input");
  const bool thinking_off = thinking.has_value() && !*thinking;
  if (auto e = apply_output_constraints(ctx, answer, tools,
                                        ChatPromptInfo{true, *text, thinking_off}, spec))
    return e;
  spec->params.n = 1;
  spec->prompts.push_back(ctx.tokenizer->encode(*text, /*add_special=*/false,
                                                /*parse_special=*/true));
  spec->prompt_texts.push_back(std::move(text).value());
  if (auto e = finish_spec(ctx, max_tokens, spec)) {
    if (e->param == "max_tokens") e->param = "max_output_tokens";
    if (e->param == "prompt") e->param = "input";  // this API's name for what it renders
    size_t pos = e->message.find("max_tokens");
    if (pos != std::string::npos) e->message.replace(pos, 10, "max_output_tokens");
    return e;
  }

  echo["instructions"] = instructions ? Json(*instructions) : Json();
  echo["max_output_tokens"] = max_tokens ? Json(*max_tokens) : Json();
  echo["parallel_tool_calls"] = tools.parallel_tool_calls;
  echo["previous_response_id"] = previous ? Json(*previous) : Json();
  echo["store"] = rc->store;
  // As sent (a float's widening would print 0.7 as 0.699999988...); else the default in use.
  echo["temperature"] = r.raw("temperature") ? *r.raw("temperature") : Json(1.0);
  echo["top_p"] = r.raw("top_p") ? *r.raw("top_p") : Json(1.0);
  echo["tool_choice"] = r.raw("tool_choice") ? *r.raw("tool_choice") : Json("auto");
  echo["tools"] = r.raw("tools") ? *r.raw("tools") : Json::array();
  echo["truncation"] = "disabled";
  spec->responses = std::move(rc);
  return std::nullopt;
}

}  // namespace loom::server
