// Ollama /api/generate and /api/chat requests → GenerationSpec (see ollama_api.h).
#include <cctype>
#include <chrono>
#include <cstring>
#include <ctime>

#include "loom/tokenizer.h"
#include "server/constraints.h"
#include "server/ollama_api.h"
#include "server/server_context.h"

namespace loom::server {
namespace {

bool one_of(const std::string& s, std::initializer_list<const char*> names) {
  for (const char* n : names)
    if (s == n) return true;
  return false;
}

// Request fields loom reads; any other is a 400 naming it (Ollama ignores unknown fields, but a
// silently ignored field is an answer the client did not ask for).
std::optional<ApiError> check_fields(const Json& body, std::initializer_list<const char*> known) {
  for (const auto& [k, v] : body.items())
    if (!one_of(k, known))
      return bad_request("field \"" + k + "\" is not supported by loom's Ollama API", k);
  return std::nullopt;
}

// `options` → sampling parameters; *num_predict: nullopt = as many as fit (-1, -2 or absent).
std::optional<ApiError> read_options(const ServerContext& ctx, const Json* options,
                                     GenerationSpec* spec, std::optional<int64_t>* num_predict,
                                     std::optional<int64_t>* num_ctx) {
  if (!options) return std::nullopt;
  FieldReader r(*options);
  SamplingParams& p = spec->params;
  for (const auto& [k, v] : options->items()) {
    if (one_of(k, {"num_gpu", "main_gpu", "num_thread", "num_batch", "use_mmap", "use_mlock",
                   "low_vram", "vocab_only", "numa", "num_keep", "f16_kv", "logits_all"}))
      return bad_request("options." + k +
                             " is a load-time setting; loom's server sets it at start-up "
                             "(loom serve --help)",
                         "options");
    if (!one_of(k, {"temperature", "top_k", "top_p", "min_p", "seed", "num_predict", "stop",
                    "repeat_penalty", "presence_penalty", "frequency_penalty", "num_ctx",
                    "repeat_last_n"}))
      return bad_request("options." + k + " is not supported", "options");
  }
  if (auto t = r.opt_number("temperature")) p.temperature = static_cast<float>(*t);
  if (auto t = r.opt_int("top_k", 0, INT32_MAX)) p.top_k = static_cast<int32_t>(*t);
  if (auto t = r.opt_number("top_p")) p.top_p = static_cast<float>(*t);
  if (auto t = r.opt_number("min_p")) p.min_p = static_cast<float>(*t);
  if (auto t = r.opt_int("seed", INT64_MIN, INT64_MAX)) p.seed = static_cast<uint64_t>(*t);
  if (auto t = r.opt_number("repeat_penalty")) p.repetition_penalty = static_cast<float>(*t);
  if (auto t = r.opt_number("presence_penalty")) p.presence_penalty = static_cast<float>(*t);
  if (auto t = r.opt_number("frequency_penalty")) p.frequency_penalty = static_cast<float>(*t);
  if (auto s = r.opt_string_or_list("stop")) p.stop = *s;
  if (auto n = r.opt_int("num_predict", -2, INT32_MAX); n && *n >= 0) {
    // Ollama's runner would stop before the first token; an empty answer is not worth a
    // request, and finish_spec's complaint would name max_tokens.
    if (*n == 0)
      r.fail("num_predict must be at least 1 (or -1 for as many as fit), got 0", "num_predict");
    *num_predict = *n;
  }
  *num_ctx = r.opt_int("num_ctx", 1, INT32_MAX);
  // loom's penalties look at the whole sequence: only a window of "all" (-1) is what it does.
  if (auto n = r.opt_int("repeat_last_n", -1, INT32_MAX); n && *n != -1)
    r.fail(
        "repeat_last_n: loom's repetition penalties cover the whole sequence; only -1 is "
        "supported",
        "options");
  if (!r.ok()) {
    ApiError e = *r.error();
    e.message = "options." + e.message;
    return e;
  }
  return std::nullopt;
}

// The shared fields of both routes: model, stream, options, format, keep_alive, think.
struct Common {
  AnswerConstraint answer;
  std::optional<int64_t> num_predict, num_ctx;
  std::optional<bool> think;
  std::string think_level;  // "low" / "medium" / "high": the template's reasoning_effort
};

std::optional<ApiError> read_common(const ServerContext& ctx, const Json& body, FieldReader& r,
                                    GenerationSpec* spec, Common* c) {
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  if (spec->model.empty()) spec->model = ctx.model_name;
  spec->stream = r.opt_bool("stream").value_or(true);
  if (auto e = check_keep_alive(r.raw("keep_alive"))) return e;
  if (const Json* t = r.raw("think")) {
    if (t->is_boolean())
      c->think = t->get<bool>();
    else if (t->is_string() && one_of(t->get<std::string>(), {"low", "medium", "high"}))
      c->think = true, c->think_level = t->get<std::string>();
    else
      return bad_request("think must be true, false, \"low\", \"medium\" or \"high\"", "think");
  }
  if (c->think.value_or(false) && ctx.output_format.reasoning == chat::ReasoningFormat::kNone)
    return bad_request("\"" + spec->model + "\" does not support thinking", "think");
  if (auto e = read_options(ctx, r.opt_object("options"), spec, &c->num_predict, &c->num_ctx))
    return e;
  if (auto e = read_ollama_format(r.raw("format"), &c->answer)) return e;
  if (const Json* images = r.raw("images"); images && !(images->is_array() && images->empty()))
    return bad_request("images are not supported: this model takes text only", "images");
  spec->params.n = 1;
  return r.ok() ? std::nullopt : r.error();
}

// num_ctx: a context no larger than the server's; the prompt must fit in it.
std::optional<ApiError> check_num_ctx(const ServerContext& ctx, const Common& c,
                                      const GenerationSpec& spec,
                                      std::optional<int64_t>* max_tokens) {
  *max_tokens = c.num_predict;
  if (!c.num_ctx) return std::nullopt;
  if (*c.num_ctx > ctx.max_model_len)
    return bad_request("options.num_ctx " + std::to_string(*c.num_ctx) +
                           " is over the server's context of " + std::to_string(ctx.max_model_len) +
                           " tokens (loom serve --max-model-len)",
                       "options");
  const int64_t prompt = static_cast<int64_t>(spec.prompts[0].size());
  if (prompt >= *c.num_ctx)
    return bad_request("the prompt (" + std::to_string(prompt) + " tokens) does not fit in " +
                           "options.num_ctx " + std::to_string(*c.num_ctx),
                       "options");
  const int64_t room = *c.num_ctx - prompt;
  *max_tokens = max_tokens->has_value() ? std::min(**max_tokens, room) : room;
  return std::nullopt;
}

std::optional<ApiError> render(const ServerContext& ctx, const Json& messages,
                               const ToolsRequest& tools, const Common& c, GenerationSpec* spec) {
  if (!ctx.tokenizer)
    return bad_request("this model has no tokenizer, so chat is unavailable", "messages");
  Json kwargs = Json::object();
  if (c.think) kwargs["enable_thinking"] = *c.think;
  if (!c.think_level.empty()) kwargs["reasoning_effort"] = c.think_level;  // gpt-oss's levels
  auto text = ctx.chat->render(messages, tools.declared() ? &tools.tools : nullptr,
                               /*add_generation_prompt=*/true, kwargs.empty() ? nullptr : &kwargs);
  if (!text.is_ok())
    return bad_request("chat template error: " + text.status().message(), "messages");
  const bool thinking_off = c.think.has_value() && !*c.think;
  if (auto e = apply_output_constraints(ctx, c.answer, tools,
                                        ChatPromptInfo{true, *text, thinking_off}, spec))
    return e;
  spec->prompts.push_back(ctx.tokenizer->encode(*text, /*add_special=*/false,
                                                /*parse_special=*/true));
  spec->prompt_texts.push_back(std::move(text).value());
  return std::nullopt;
}

// Ollama message → the template's message: tool_calls' arguments objects kept as objects (the
// templates print them), tool results named by tool_name.
std::optional<ApiError> ollama_messages(const Json& messages, Json* out) {
  if (!messages.is_array()) return bad_request("messages must be a list", "messages");
  Json conv = Json::array();
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = "messages[" + std::to_string(i) + "]";
    if (!m.is_object()) return bad_request(where + " must be an object", "messages");
    for (const auto& [k, v] : m.items())
      if (!one_of(k, {"role", "content", "images", "tool_calls", "thinking", "tool_name"}))
        return bad_request(where + "." + k + " is not supported", "messages");
    if (auto im = m.find("images");
        im != m.end() && !im->is_null() && !(im->is_array() && im->empty()))
      return bad_request(where + ".images: this model takes text only", "messages");
    Json nm = {{"role", m.value("role", Json())}, {"content", m.value("content", Json(""))}};
    if (auto tc = m.find("tool_calls"); tc != m.end() && !tc->is_null()) {
      if (!tc->is_array()) return bad_request(where + ".tool_calls must be a list", "messages");
      Json calls = Json::array();
      for (const Json& call : *tc) {
        const Json* fn =
            call.is_object() && call.contains("function") ? &call["function"] : nullptr;
        if (!fn || !fn->is_object() || !fn->contains("name"))
          return bad_request(where + ".tool_calls entries need function.name", "messages");
        Json args = fn->value("arguments", Json::object());
        calls.push_back(
            {{"type", "function"}, {"function", {{"name", (*fn)["name"]}, {"arguments", args}}}});
      }
      nm["tool_calls"] = std::move(calls);
    }
    if (auto tn = m.find("tool_name"); tn != m.end() && tn->is_string()) nm["name"] = *tn;
    // An earlier turn's reasoning, under the name chat templates read.
    if (auto th = m.find("thinking");
        th != m.end() && th->is_string() && !th->get<std::string>().empty()) {
      if (nm["role"] != "assistant")
        return bad_request(where + ".thinking: only assistant messages carry thinking", "messages");
      nm["reasoning_content"] = *th;
    }
    conv.push_back(std::move(nm));
  }
  return normalize_messages(conv, out, "messages");
}

// Go's time.ParseDuration: [-+]? then one or more <decimal><unit>, unit ns us µs μs ms s m h;
// "0" alone is allowed.
bool parse_go_duration(const std::string& s) {
  size_t i = 0;
  if (i < s.size() && (s[i] == '-' || s[i] == '+')) ++i;
  if (s.substr(i) == "0") return true;
  if (i == s.size()) return false;
  static const char* const kUnits[] = {"ns", "us", "\xC2\xB5s", "\xCE\xBCs", "ms", "s", "m", "h"};
  while (i < s.size()) {
    size_t digits = 0;
    while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
    if (i < s.size() && s[i] == '.') {
      ++i;
      while (i < s.size() && std::isdigit(static_cast<unsigned char>(s[i]))) ++i, ++digits;
    }
    if (digits == 0) return false;
    size_t best = 0;  // the longest unit that matches ("ms" before "m")
    for (const char* u : kUnits) {
      const size_t n = std::strlen(u);
      if (n > best && s.compare(i, n, u) == 0) best = n;
    }
    if (best == 0) return false;
    i += best;
  }
  return true;
}

}  // namespace

std::optional<ApiError> check_keep_alive(const Json* k) {
  if (!k || k->is_number()) return std::nullopt;  // seconds; negative = forever
  if (k->is_string() && parse_go_duration(k->get<std::string>())) return std::nullopt;
  return bad_request(
      "keep_alive must be a duration such as \"5m\" or \"1h30m\", or a number of "
      "seconds (negative: forever), got " +
          k->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "keep_alive");
}

std::optional<ApiError> require_ollama_model(const Json& body) {
  auto m = body.find("model");
  if (m == body.end() || m->is_null() || (m->is_string() && m->get<std::string>().empty()))
    return bad_request("model is required", "model");
  return std::nullopt;
}

std::string ollama_timestamp() {
  const auto now = std::chrono::system_clock::now();
  const std::time_t t = std::chrono::system_clock::to_time_t(now);
  const auto ns =
      std::chrono::duration_cast<std::chrono::nanoseconds>(now.time_since_epoch()).count() %
      1000000000;
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[64];
  std::snprintf(buf, sizeof buf, "%04d-%02d-%02dT%02d:%02d:%02d.%09lldZ", tm.tm_year + 1900,
                tm.tm_mon + 1, tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec,
                static_cast<long long>(ns));
  return buf;
}

std::optional<ApiError> parse_ollama_generate(const ServerContext& ctx, const Json& body,
                                              GenerationSpec* spec, bool* load_only) {
  if (auto e = check_fields(
          body, {"model", "prompt", "suffix", "system", "template", "context", "stream", "raw",
                 "format", "options", "keep_alive", "images", "think"}))
    return e;
  if (auto e = require_ollama_model(body)) return e;
  spec->kind = ApiKind::kOllamaGenerate;
  FieldReader r(body);
  Common c;
  if (auto e = read_common(ctx, body, r, spec, &c)) return e;
  const std::string prompt = r.opt_string("prompt").value_or("");
  const std::string system = r.opt_string("system").value_or("");
  const bool raw = r.opt_bool("raw").value_or(false);
  if (auto s = r.opt_string("suffix"); s && !s->empty())
    r.fail("suffix (fill-in-the-middle) is not supported", "suffix");
  if (auto t = r.opt_string("template"); t && !t->empty())
    r.fail(
        "template: Ollama's Go templates are not supported; loom renders the model's "
        "Jinja chat template (loom serve --chat-template)",
        "template");
  auto context = r.opt_int_list("context");
  if (!r.ok()) return r.error();
  *load_only = prompt.empty() && system.empty();
  if (*load_only) return std::nullopt;
  if (!ctx.tokenizer) return bad_request("this model has no tokenizer", "prompt");
  ToolsRequest no_tools;
  if (raw) {
    if (!system.empty()) return bad_request("system cannot be used with raw", "system");
    if (auto e = apply_output_constraints(ctx, c.answer, no_tools, ChatPromptInfo{}, spec))
      return e;
    spec->prompts.push_back(ctx.tokenizer->encode(prompt, /*add_special=*/context ? false : true,
                                                  /*parse_special=*/true));
    spec->prompt_texts.push_back(prompt);
  } else {
    Json messages = Json::array();
    if (!system.empty()) messages.push_back({{"role", "system"}, {"content", system}});
    messages.push_back({{"role", "user"}, {"content", prompt}});
    if (auto e = render(ctx, messages, no_tools, c, spec)) return e;
  }
  // The earlier exchange's ids (the "context" a previous response returned) come first.
  if (context) {
    for (int32_t t : *context)
      if (t < 0 || t >= ctx.n_vocab)
        return bad_request(
            "context holds token id " + std::to_string(t) + ", outside the vocabulary", "context");
    spec->prompts[0].insert(spec->prompts[0].begin(), context->begin(), context->end());
  }
  std::optional<int64_t> max_tokens;
  if (auto e = check_num_ctx(ctx, c, *spec, &max_tokens)) return e;
  return finish_spec(ctx, max_tokens, spec);
}

std::optional<ApiError> parse_ollama_chat(const ServerContext& ctx, const Json& body,
                                          GenerationSpec* spec, bool* load_only) {
  if (auto e = check_fields(body, {"model", "messages", "tools", "format", "options", "stream",
                                   "keep_alive", "think"}))
    return e;
  if (auto e = require_ollama_model(body)) return e;
  spec->kind = ApiKind::kOllamaChat;
  FieldReader r(body);
  Common c;
  if (auto e = read_common(ctx, body, r, spec, &c)) return e;
  ToolsRequest tools;
  if (auto e = read_openai_tools(r, &tools)) return e;
  if (auto e = check_template_tools(ctx, tools, "tools")) return e;
  const Json* messages = r.raw("messages");
  if (!r.ok()) return r.error();
  *load_only = !messages || (messages->is_array() && messages->empty());
  if (*load_only) return std::nullopt;
  Json norm;
  if (auto e = ollama_messages(*messages, &norm)) return e;
  if (auto e = render(ctx, norm, tools, c, spec)) return e;
  std::optional<int64_t> max_tokens;
  if (auto e = check_num_ctx(ctx, c, *spec, &max_tokens)) return e;
  return finish_spec(ctx, max_tokens, spec);
}

}  // namespace loom::server
