// OpenAI request parsing and validation (see openai_request.h).
#include "server/openai_request.h"

#include <algorithm>
#include <cmath>

#include "base/json_depth.h"
#include "loom/tokenizer.h"
#include "server/constraints.h"
#include "server/server_context.h"

namespace loom::server {

namespace {

// A prompt never needs more generations than this per request (vLLM has no cap; an
// unbounded n would let one request fill the KV cache with forks).
constexpr int64_t kMaxN = 128;

std::optional<ApiError> to_error(const FieldReader& r) {
  return r.error();
}

// The most logprobs a request may ask for (SamplingParams::validate's bound), read into the
// field's own range so its error names that field (top_logprobs, not logprobs).
int64_t max_logprobs(const ServerContext& ctx) {
  return std::min<int64_t>(ctx.options.max_logprobs, ctx.n_vocab);
}

std::vector<int32_t> encode(const ServerContext& ctx, const std::string& text, bool add_special) {
  return ctx.tokenizer->encode(text, add_special, /*parse_special=*/true);
}

// Fields OpenAI's SDKs and agent frameworks send that change nothing loom computes: read (and
// type-checked) so that unread_field_error() lets them through, refused where a value would
// ask for something loom does not do.
void read_no_effect_fields(FieldReader& r) {
  r.opt_string("prompt_cache_key");   // a routing hint; loom's prefix cache needs no key
  r.opt_string("safety_identifier");  // an end-user id for abuse monitoring, like `user`
  r.opt_object("metadata");           // tags for stored completions
  if (r.opt_bool("store").value_or(false))
    r.fail("store: true is not supported (loom keeps no stored chat completions)", "store");
  if (auto tier = r.opt_string("service_tier"); tier && *tier != "auto" && *tier != "default")
    r.fail("service_tier '" + *tier + "' is not supported (loom has one tier: auto or default)",
           "service_tier");
  if (const Json* m = r.opt_array("modalities"))
    for (const Json& x : *m)
      if (x != "text") {
        r.fail("modalities: loom generates text only, got " + x.dump(), "modalities");
        break;
      }
}

// messages[i].tool_calls: only on assistant turns; each {id?, type?: "function", function:
// {name, arguments: JSON text or object}}. A malformed call would otherwise reach the template
// as Undefined and fail there with a message about template internals.
std::optional<ApiError> check_tool_calls(const Json& m, const std::string& role,
                                         const std::string& where) {
  auto tc = m.find("tool_calls");
  if (tc == m.end() || tc->is_null()) return std::nullopt;
  const std::string field = where + ".tool_calls";
  if (role != "assistant")
    return bad_request(field + ": only assistant messages carry tool calls", field);
  if (!tc->is_array())
    return bad_request(field + " must be a list, got " + json_type_name(*tc), field);
  for (size_t j = 0; j < tc->size(); ++j) {
    const Json& call = (*tc)[j];
    const std::string w = field + "[" + std::to_string(j) + "]";
    if (!call.is_object())
      return bad_request(w + " must be an object, got " + json_type_name(call), w);
    auto type = call.find("type");
    if (type != call.end() && !type->is_null() && *type != "function")
      return bad_request(w + ".type must be \"function\" (custom tools are not supported), got " +
                             type->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                         w + ".type");
    for (auto it = call.begin(); it != call.end(); ++it)
      if (it.key() != "id" && it.key() != "type" && it.key() != "function" && it.key() != "index")
        return bad_request(w + "." + it.key() + " is not a known field (id, type, function)",
                           w + "." + it.key());
    auto id = call.find("id");
    if (id != call.end() && !id->is_null() && !id->is_string())
      return bad_request(w + ".id must be a string", w + ".id");
    auto fn = call.find("function");
    if (fn == call.end() || !fn->is_object())
      return bad_request(w + ".function is required: {\"name\": ..., \"arguments\": ...}",
                         w + ".function");
    for (auto it = fn->begin(); it != fn->end(); ++it)
      if (it.key() != "name" && it.key() != "arguments")
        return bad_request(w + ".function." + it.key() + " is not a known field (name, arguments)",
                           w + ".function." + it.key());
    auto name = fn->find("name");
    if (name == fn->end() || !name->is_string() || name->get<std::string>().empty())
      return bad_request(w + ".function.name is required (a non-empty string)",
                         w + ".function.name");
    auto args = fn->find("arguments");
    if (args == fn->end() || !(args->is_string() || args->is_object()))
      return bad_request(w + ".function.arguments is required (a JSON string)",
                         w + ".function.arguments");
  }
  return std::nullopt;
}

}  // namespace

std::optional<ApiError> check_message_keys(const Json& messages, const char* param) {
  if (!messages.is_array()) return std::nullopt;  // normalize_messages says so
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    if (!m.is_object() || !m.contains("role") || !m["role"].is_string()) continue;
    const std::string role = m["role"].get<std::string>();
    std::vector<const char*> known = {"role", "content", "name"};
    if (role == "assistant") known.insert(known.end(), {"tool_calls", "reasoning_content"});
    if (role == "tool") known.push_back("tool_call_id");
    for (auto it = m.begin(); it != m.end(); ++it) {
      if (it->is_null() || std::find_if(known.begin(), known.end(), [&](const char* k) {
                             return it.key() == k;
                           }) != known.end())
        continue;
      std::string allowed;
      for (const char* k : known) allowed += std::string(allowed.empty() ? "" : ", ") + k;
      const std::string field = std::string(param) + "[" + std::to_string(i) + "]." + it.key();
      return bad_request(
          field + " is not valid on a " + role + " message (it takes " + allowed + ")", field);
    }
  }
  return std::nullopt;
}

std::optional<ApiError> check_template_tools(const ServerContext& ctx, const ToolsRequest& tools,
                                             const char* param) {
  if (!tools.declared() || tools.mode == chat::ChatGrammarRequest::ToolMode::kNone || !ctx.chat ||
      ctx.chat->renders_tools())
    return std::nullopt;
  return bad_request(
      std::string(param) + ": this model's chat template has no tool support (it never reads " +
          "`tools`" + (ctx.chat->is_fallback() ? ", it is loom's ChatML fallback" : "") +
          "), so the model would not be told about the tools; start the server with a template "
          "that renders them (loom serve --chat-template FILE), or send tool_choice \"none\"",
      param);
}

std::optional<ApiError> parse_json_object(const std::string& body, Json* out) {
  if (body.empty()) return bad_request("the request body is empty; send a JSON object");
  if (json_nesting_exceeds(body))
    return bad_request("the request body nests arrays and objects more than " +
                       std::to_string(kMaxJsonDepth) + " levels deep");
  try {
    *out = Json::parse(body);
  } catch (const nlohmann::json::exception& e) {
    // nlohmann rejects ill-formed UTF-8 inside strings as a parse error, so invalid UTF-8
    // ends here too.
    return bad_request(std::string("the request body is not valid JSON: ") + e.what());
  }
  if (!out->is_object())
    return bad_request("the request body must be a JSON object, got " + json_type_name(*out));
  return std::nullopt;
}

std::optional<ApiError> check_model(const ServerContext& ctx, FieldReader& r, std::string* model) {
  auto m = r.opt_string("model");
  if (!r.ok()) return r.error();
  if (m && !m->empty() && *m != ctx.model_name) return model_not_found(*m);
  *model = ctx.model_name;
  return std::nullopt;
}

void read_sampling_fields(const ServerContext& ctx, FieldReader& r, GenerationSpec* spec) {
  SamplingParams& p = spec->params;
  if (auto v = r.opt_number("temperature")) p.temperature = static_cast<float>(*v);
  if (auto v = r.opt_number("top_p")) p.top_p = static_cast<float>(*v);
  if (auto v = r.opt_int("top_k")) p.top_k = static_cast<int32_t>(*v);
  if (auto v = r.opt_number("min_p")) p.min_p = static_cast<float>(*v);
  if (auto v = r.opt_number("presence_penalty")) p.presence_penalty = static_cast<float>(*v);
  if (auto v = r.opt_number("frequency_penalty")) p.frequency_penalty = static_cast<float>(*v);
  if (auto v = r.opt_number("repetition_penalty")) p.repetition_penalty = static_cast<float>(*v);
  if (auto v = r.opt_int("seed", INT64_MIN, INT64_MAX)) p.seed = static_cast<uint64_t>(*v);
  if (auto v = r.opt_string_or_list("stop")) {
    for (const std::string& s : *v)
      if (s.empty()) r.fail("stop strings must not be empty", "stop");
    p.stop = std::move(*v);
  }
  if (auto v = r.opt_string_or_list("stop_sequences")) {  // Anthropic's name
    for (const std::string& s : *v)
      if (s.empty()) r.fail("stop_sequences must not contain empty strings", "stop_sequences");
    p.stop.insert(p.stop.end(), v->begin(), v->end());
  }
  if (auto v = r.opt_int_list("stop_token_ids")) p.stop_token_ids = std::move(*v);
  if (auto v = r.opt_bool("ignore_eos")) p.ignore_eos = *v;
  if (auto v = r.opt_int("min_tokens")) p.min_tokens = static_cast<int32_t>(*v);
  if (auto v = r.opt_bool("include_stop_str_in_output")) p.include_stop_str_in_output = *v;
  if (auto v = r.opt_bool("skip_special_tokens")) p.skip_special_tokens = *v;
  if (auto v = r.opt_int("n", 1, kMaxN)) {
    if (*v > ctx.options.max_n)
      r.fail("n " + std::to_string(*v) + " is over the server's limit of " +
                 std::to_string(ctx.options.max_n) + " (loom serve --max-n)",
             "n");
    p.n = static_cast<int32_t>(*v);
  }
  if (auto v = r.opt_int_list("allowed_token_ids")) p.allowed_token_ids = std::move(*v);
  r.opt_string("user");  // accepted and type-checked, not used
  if (const Json* bias = r.opt_object("logit_bias")) {
    for (auto it = bias->begin(); it != bias->end(); ++it) {
      const std::string& key = it.key();
      char* end = nullptr;
      errno = 0;
      long long id = std::strtoll(key.c_str(), &end, 10);
      if (key.empty() || *end != '\0' || errno != 0 || id < INT32_MIN || id > INT32_MAX) {
        r.fail("logit_bias keys must be token ids, got '" + key + "'", "logit_bias");
        break;
      }
      if (!it.value().is_number()) {
        r.fail("logit_bias values must be numbers, got " + json_type_name(it.value()),
               "logit_bias");
        break;
      }
      p.logit_bias.emplace_back(static_cast<int32_t>(id), it.value().get<float>());
    }
  }
  if (auto v = r.opt_bool("stream")) spec->stream = *v;
  if (const Json* so = r.opt_object("stream_options")) {
    if (!spec->stream)
      r.fail("stream_options can only be set when stream is true", "stream_options");
    FieldReader sr(*so, "stream_options.");
    if (auto v = sr.opt_bool("include_usage")) spec->include_usage = *v;
    if (auto v = sr.opt_bool("continuous_usage_stats")) spec->continuous_usage = *v;
    // vLLM sends per-chunk usage only when the final usage chunk is asked for too.
    if (spec->continuous_usage && !spec->include_usage)
      sr.fail(
          "stream_options.continuous_usage_stats needs stream_options.include_usage: true "
          "(usage is sent on every chunk only when it is sent at all)",
          "stream_options.continuous_usage_stats");
    if (!sr.ok()) r.fail(*sr.error());
    if (auto e = sr.unread_field_error("stream_options")) r.fail(std::move(*e));
  }
  (void)ctx;
}

// vLLM's prompt_logprobs (completions and chat): each prompt token's logprob and the top k, in
// the response's prompt_logprobs. Not streamed (vLLM refuses it with stream too).
void read_prompt_logprobs(const ServerContext& ctx, FieldReader& r, GenerationSpec* spec) {
  auto v = r.opt_int("prompt_logprobs", 0, max_logprobs(ctx));
  if (!v) return;
  if (spec->stream) {
    r.fail("prompt_logprobs is not supported with stream: true", "prompt_logprobs");
    return;
  }
  spec->prompt_logprobs = static_cast<int32_t>(*v);
  spec->params.prompt_logprobs = std::max(spec->params.prompt_logprobs, spec->prompt_logprobs);
}

std::optional<ApiError> finish_spec(const ServerContext& ctx, std::optional<int64_t> max_tokens,
                                    GenerationSpec* spec) {
  SamplingParams& p = spec->params;
  size_t longest = 0;
  for (const auto& pr : spec->prompts) {
    if (pr.empty()) return bad_request("the prompt is empty (no tokens)", "prompt");
    longest = std::max(longest, pr.size());
  }
  if (ctx.options.max_prompt_tokens > 0 &&
      static_cast<int64_t>(longest) > ctx.options.max_prompt_tokens)
    return bad_request(
        "the prompt has " + std::to_string(longest) + " tokens, over the server's limit of " +
            std::to_string(ctx.options.max_prompt_tokens) + " (loom serve --max-prompt-tokens)",
        "prompt");
  const size_t n_stops = p.stop.size() + p.stop_token_ids.size();
  if (n_stops > static_cast<size_t>(ctx.options.max_stop))
    return bad_request(std::to_string(n_stops) + " stop strings and stop token ids, over the " +
                           "server's limit of " + std::to_string(ctx.options.max_stop) +
                           " (loom serve --max-stop)",
                       "stop");
  for (const std::string& s : p.stop)
    if (s.size() > static_cast<size_t>(ctx.options.max_stop_bytes))
      return bad_request(
          "a stop string of " + std::to_string(s.size()) + " bytes, over the server's limit of " +
              std::to_string(ctx.options.max_stop_bytes) + " (loom serve --max-stop-bytes)",
          "stop");
  if (static_cast<int64_t>(longest) >= ctx.max_model_len)
    return bad_request("the prompt has " + std::to_string(longest) +
                           " tokens, which leaves no room to generate within max_model_len " +
                           std::to_string(ctx.max_model_len),
                       "prompt");
  if (max_tokens) {
    if (*max_tokens < 1)
      return bad_request("max_tokens must be at least 1, got " + std::to_string(*max_tokens),
                         "max_tokens");
    p.max_tokens = static_cast<int32_t>(*max_tokens);
  } else {
    p.max_tokens = ctx.max_model_len - static_cast<int32_t>(longest);
  }
  if (Status st = p.validate(ctx.n_vocab, ctx.options.max_logprobs); !st.is_ok()) {
    // Name the field when the message starts with it (SamplingParams messages do).
    std::string param = st.message().substr(0, st.message().find(' '));
    return bad_request(st.message(), param);
  }
  for (const auto& pr : spec->prompts) {
    GenerateRequest probe;
    probe.request_id = "validate";
    probe.prompt = pr;
    probe.params = p;
    if (Status st = ctx.engine->engine().validate(probe); !st.is_ok()) {
      return bad_request(st.message(), st.message().find("max_model_len") != std::string::npos
                                           ? "max_tokens"
                                           : "prompt");
    }
  }
  return std::nullopt;
}

std::optional<ApiError> normalize_messages(const Json& messages, Json* out, const char* param) {
  if (!messages.is_array())
    return bad_request(std::string(param) + " must be a list, got " + json_type_name(messages),
                       param);
  if (messages.empty())
    return bad_request(std::string(param) + " must contain at least one message", param);
  *out = Json::array();
  static const char* const kRoles[] = {"system",    "developer", "user",
                                       "assistant", "tool",      "function"};
  for (size_t i = 0; i < messages.size(); ++i) {
    const Json& m = messages[i];
    const std::string where = std::string(param) + "[" + std::to_string(i) + "]";
    if (!m.is_object())
      return bad_request(where + " must be an object, got " + json_type_name(m), param);
    auto role = m.find("role");
    if (role == m.end() || !role->is_string())
      return bad_request(where + ".role is required and must be a string", param);
    const std::string r = role->get<std::string>();
    if (std::find_if(std::begin(kRoles), std::end(kRoles), [&](const char* k) { return r == k; }) ==
        std::end(kRoles))
      return bad_request(
          where + ".role '" + r + "' is not one of system, developer, user, assistant, tool",
          param);
    if (auto e = check_tool_calls(m, r, where)) return e;
    Json nm = m;
    auto content = m.find("content");
    if (content == m.end() || content->is_null()) {
      // An assistant turn that only calls tools has no content.
      if (r != "assistant" || !m.contains("tool_calls"))
        return bad_request(where + ".content is required", param);
    } else if (content->is_array()) {
      std::string text;
      for (const Json& part : *content) {
        if (!part.is_object()) return bad_request(where + ".content parts must be objects", param);
        auto type = part.find("type");
        if (type == part.end() || !type->is_string())
          return bad_request(where + ".content parts need a string 'type'", param);
        if (*type != "text" && *type != "input_text")
          return bad_request(where + ": content part type '" + type->get<std::string>() +
                                 "' is not supported (this model takes text only)",
                             param);
        auto t = part.find("text");
        if (t == part.end() || !t->is_string())
          return bad_request(where + ": a text part needs a string 'text'", param);
        if (!text.empty()) text += "\n";
        text += t->get<std::string>();
      }
      nm["content"] = text;
    } else if (!content->is_string()) {
      return bad_request(where + ".content must be a string or a list of content parts, got " +
                             json_type_name(*content),
                         param);
    }
    out->push_back(std::move(nm));
  }
  return std::nullopt;
}

std::optional<ApiError> parse_completion_request(const ServerContext& ctx, const Json& body,
                                                 GenerationSpec* spec) {
  spec->kind = ApiKind::kCompletion;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  read_sampling_fields(ctx, r, spec);
  auto max_tokens = r.opt_int("max_tokens", 1, INT32_MAX);
  if (auto v = r.opt_bool("echo")) spec->echo = *v;
  if (auto v = r.opt_int("logprobs", 0, max_logprobs(ctx)))
    spec->params.logprobs = static_cast<int32_t>(*v);
  // vLLM's: echo with logprobs scores the prompt's tokens too.
  if (spec->echo && spec->params.logprobs >= 0)
    spec->params.prompt_logprobs = spec->params.logprobs;
  read_prompt_logprobs(ctx, r, spec);
  const bool add_special = r.opt_bool("add_special_tokens").value_or(true);
  if (r.opt_string("suffix")) r.fail("suffix is not supported (no fill-in-the-middle)", "suffix");
  if (!r.ok()) return to_error(r);
  AnswerConstraint answer;
  if (auto e = read_answer_constraint(r, &answer)) return e;

  const Json* prompt = r.raw("prompt");
  read_no_effect_fields(r);
  if (!r.ok()) return to_error(r);
  if (auto e = r.unread_field_error("/v1/completions")) return e;
  if (!prompt) return bad_request("prompt is required", "prompt");
  auto need_tokenizer = [&]() -> std::optional<ApiError> {
    if (!ctx.tokenizer)
      return bad_request("this model has no tokenizer: send the prompt as token ids", "prompt");
    return std::nullopt;
  };
  if (prompt->is_string()) {
    if (auto e = need_tokenizer()) return e;
    spec->prompts.push_back(encode(ctx, prompt->get<std::string>(), add_special));
    spec->prompt_texts.push_back(prompt->get<std::string>());
  } else if (prompt->is_array()) {
    if (prompt->empty()) return bad_request("prompt must not be an empty list", "prompt");
    const Json& first = (*prompt)[0];
    if (first.is_string()) {
      if (auto e = need_tokenizer()) return e;
      for (const Json& s : *prompt) {
        if (!s.is_string())
          return bad_request("prompt: a list of prompts must hold only strings", "prompt");
        spec->prompts.push_back(encode(ctx, s.get<std::string>(), add_special));
        spec->prompt_texts.push_back(s.get<std::string>());
      }
    } else if (first.is_array()) {
      for (const Json& ids : *prompt) {
        if (!ids.is_array() || ids.empty())
          return bad_request("prompt: each token id list must be a non-empty list", "prompt");
        std::vector<int32_t> v;
        for (const Json& t : ids) {
          int64_t x;
          if (!json_to_int(t, INT32_MIN, INT32_MAX, &x))
            return bad_request("prompt: token ids must be integers", "prompt");
          v.push_back(static_cast<int32_t>(x));
        }
        spec->prompts.push_back(std::move(v));
      }
    } else {
      std::vector<int32_t> v;
      for (const Json& t : *prompt) {
        int64_t x;
        if (!json_to_int(t, INT32_MIN, INT32_MAX, &x))
          return bad_request("prompt must be a string, a list of strings, or token ids; found " +
                                 t.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
                             "prompt");
        v.push_back(static_cast<int32_t>(x));
      }
      spec->prompts.push_back(std::move(v));
    }
  } else {
    return bad_request(
        "prompt must be a string, a list of strings, or token ids; got " + json_type_name(*prompt),
        "prompt");
  }
  if (spec->prompts.size() > 256) return bad_request("at most 256 prompts per request", "prompt");
  for (const auto& pr : spec->prompts)
    for (int32_t t : pr)
      if (t < 0 || t >= ctx.n_vocab)
        return bad_request("prompt token id " + std::to_string(t) +
                               " is outside the vocabulary [0, " + std::to_string(ctx.n_vocab) +
                               ")",
                           "prompt");
  if (spec->echo && spec->prompt_texts.empty()) {
    for (const auto& pr : spec->prompts)
      spec->prompt_texts.push_back(ctx.tokenizer ? ctx.tokenizer->decode(pr) : std::string());
  }
  if (auto e = apply_output_constraints(ctx, answer, ToolsRequest(), ChatPromptInfo(), spec))
    return e;
  return finish_spec(ctx, max_tokens, spec);
}

std::optional<ApiError> parse_chat_request(const ServerContext& ctx, const Json& body,
                                           GenerationSpec* spec) {
  spec->kind = ApiKind::kChat;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  read_sampling_fields(ctx, r, spec);
  auto max_tokens = r.opt_int("max_tokens", 1, INT32_MAX);
  if (auto v = r.opt_int("max_completion_tokens", 1, INT32_MAX)) max_tokens = v;
  spec->chat_logprobs = r.opt_bool("logprobs").value_or(false);
  auto top = r.opt_int("top_logprobs", 0, max_logprobs(ctx));
  if (top && !spec->chat_logprobs)
    r.fail("top_logprobs requires logprobs to be true", "top_logprobs");
  if (spec->chat_logprobs) spec->params.logprobs = static_cast<int32_t>(top.value_or(0));
  read_prompt_logprobs(ctx, r, spec);
  const bool add_generation_prompt = r.opt_bool("add_generation_prompt").value_or(true);
  const bool add_special = r.opt_bool("add_special_tokens").value_or(false);
  const Json* kwargs = r.opt_object("chat_template_kwargs");
  // OpenAI's reasoning_effort (vLLM: low, medium, high): a template variable of reasoning
  // models' templates (gpt-oss renders it into its system message); chat_template_kwargs win.
  Json effort_kwargs;
  if (auto effort = r.opt_string("reasoning_effort")) {
    if (*effort != "low" && *effort != "medium" && *effort != "high")
      r.fail("reasoning_effort must be \"low\", \"medium\" or \"high\", got \"" + *effort + "\"",
             "reasoning_effort");
    else if (ctx.output_format.reasoning == chat::ReasoningFormat::kNone)
      // As /v1/responses answers reasoning.effort: a template variable nobody reads would be
      // an effort silently ignored.
      r.fail("reasoning_effort \"" + *effort + "\": model '" + ctx.model_name +
                 "' does not reason (its chat template has no reasoning format; loom serve "
                 "--reasoning-parser)",
             "reasoning_effort");
    effort_kwargs = kwargs ? *kwargs : Json::object();
    if (!effort_kwargs.contains("reasoning_effort")) effort_kwargs["reasoning_effort"] = *effort;
    kwargs = &effort_kwargs;
  }
  if (r.opt_bool("echo").value_or(false))
    r.fail("echo is not supported for chat completions", "echo");
  if (!r.ok()) return to_error(r);
  AnswerConstraint answer;
  if (auto e = read_answer_constraint(r, &answer)) return e;
  ToolsRequest tools;
  if (auto e = read_openai_tools(r, &tools)) return e;
  const Json* messages = r.raw("messages");
  read_no_effect_fields(r);
  if (!r.ok()) return to_error(r);
  if (auto e = r.unread_field_error("/v1/chat/completions")) return e;
  if (!messages) return bad_request("messages is required", "messages");
  Json norm;
  if (auto e = normalize_messages(*messages, &norm, "messages")) return e;
  if (auto e = check_message_keys(*messages, "messages")) return e;
  if (auto e = check_template_tools(ctx, tools, "tools")) return e;
  if (!ctx.tokenizer)
    return bad_request(
        "this model has no tokenizer, so chat is unavailable; use /v1/completions with token ids",
        "messages");
  auto text = ctx.chat->render(norm, tools.declared() ? &tools.tools : nullptr,
                               add_generation_prompt, kwargs);
  if (!text.is_ok())
    return bad_request("chat template error: " + text.status().message(), "messages");
  ChatPromptInfo info{true, *text, false};
  if (kwargs) {
    auto it = kwargs->find("enable_thinking");
    info.thinking_disabled = it != kwargs->end() && it->is_boolean() && !it->get<bool>();
  }
  if (auto e = apply_output_constraints(ctx, answer, tools, info, spec)) return e;
  spec->prompts.push_back(encode(ctx, *text, add_special));
  spec->prompt_texts.push_back(std::move(text).value());
  return finish_spec(ctx, max_tokens, spec);
}

}  // namespace loom::server
