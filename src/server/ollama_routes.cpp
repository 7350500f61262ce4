// Ollama's API routes (see ollama_api.h): the model listing and details (/api/tags, /api/show,
// /api/ps), /api/version, and /api/generate and /api/chat through the engine.
#include <cstdio>

#include "base/version.h"
#include "format/file_type.h"
#include "model/model.h"
#include "server/jobs.h"
#include "server/ollama_api.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {
namespace {

// "494.9M" / "7.6B", as Ollama's parameter_size.
std::string parameter_size(uint64_t n) {
  char buf[32];
  if (n >= 1000000000ull)
    std::snprintf(buf, sizeof buf, "%.1fB", n / 1e9);
  else
    std::snprintf(buf, sizeof buf, "%.1fM", n / 1e6);
  return buf;
}

Json model_details(const ServerContext& ctx) {
  const Model& m = ctx.engine->engine().model();
  const ModelConfig& c = m.config();
  return {{"parent_model", ""},
          {"format", "gguf"},
          {"family", c.arch},
          {"families", Json::array({c.arch})},
          {"parameter_size", parameter_size(m.weight_stats().total_params)},
          {"quantization_level", std::string(file_type_name(c.file_type).value_or(""))}};
}

// One entry of /api/tags and /api/ps.
Json model_entry(const ServerContext& ctx) {
  const Model& m = ctx.engine->engine().model();
  return {{"name", ctx.model_name},
          {"model", ctx.model_name},
          {"modified_at", ollama_timestamp()},
          {"size", m.weight_stats().total_bytes},
          {"digest", ""},
          {"details", model_details(ctx)}};
}

void answer_load(const ServerContext& ctx, bool chat, const std::string& model, Responder& out) {
  Json j = {{"model", model.empty() ? ctx.model_name : model}, {"created_at", ollama_timestamp()}};
  if (chat)
    j["message"] = {{"role", "assistant"}, {"content", ""}};
  else
    j["response"] = "";
  j["done"] = true;
  j["done_reason"] = "load";
  out.send(200, "application/json", dump_json(j));
}

using Parse = std::optional<ApiError> (*)(const ServerContext&, const Json&, GenerationSpec*,
                                          bool*);

void generate(ServerContext& ctx, const HttpRequest& req, ResponderPtr out, Parse parse,
              bool chat) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, ErrorShape::kOllama);
  GenerationSpec spec;
  bool load_only = false;
  if (auto e = parse(ctx, body, &spec, &load_only))
    return send_error(*out, *e, ErrorShape::kOllama);
  if (load_only) return answer_load(ctx, chat, spec.model, *out);
  submit_generation(ctx, std::move(spec), std::move(out));
}

}  // namespace

void handle_ollama_version(ServerContext&, const HttpRequest&, ResponderPtr out) {
  out->send(200, "application/json", dump_json(Json{{"version", build_info().version}}));
}

void handle_ollama_tags(ServerContext& ctx, const HttpRequest&, ResponderPtr out) {
  out->send(200, "application/json", dump_json(Json{{"models", Json::array({model_entry(ctx)})}}));
}

void handle_ollama_ps(ServerContext& ctx, const HttpRequest&, ResponderPtr out) {
  Json e = model_entry(ctx);
  e["expires_at"] = "2318-01-01T00:00:00Z";  // never unloaded
  e["size_vram"] = 0;
  e["context_length"] = ctx.max_model_len;
  out->send(200, "application/json", dump_json(Json{{"models", Json::array({e})}}));
}

void handle_ollama_show(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, ErrorShape::kOllama);
  FieldReader r(body);
  // Ollama's clients send "model" (older ones "name"); one of them is required.
  std::string name = r.opt_string("model").value_or(r.opt_string("name").value_or(""));
  r.opt_bool("verbose");
  if (!r.ok()) return send_error(*out, *r.error(), ErrorShape::kOllama);
  if (auto e = r.unread_field_error("/api/show")) return send_error(*out, *e, ErrorShape::kOllama);
  if (name.empty())
    return send_error(*out, bad_request("model is required", "model"), ErrorShape::kOllama);
  if (!name.empty() && name != ctx.model_name) {
    ApiError e = model_not_found(name);
    e.message = "model '" + name + "' not found";
    return send_error(*out, e, ErrorShape::kOllama);
  }
  const ModelConfig& c = ctx.engine->engine().model().config();
  // Ollama's capabilities: an embedding server embeds and does nothing else.
  Json capabilities = Json::array();
  if (ctx.pooling.task == ServerTask::kEmbed) {
    capabilities.push_back("embedding");
  } else if (ctx.pooling.task == ServerTask::kGenerate) {
    capabilities.push_back("completion");
    if (ctx.output_format.tools != chat::ToolCallFormat::kNone) capabilities.push_back("tools");
    if (ctx.output_format.reasoning != chat::ReasoningFormat::kNone)
      capabilities.push_back("thinking");
  }
  const std::string a = c.arch;
  Json info = {
      {"general.architecture", a},
      {"general.parameter_count", ctx.engine->engine().model().weight_stats().total_params},
      {a + ".context_length", ctx.max_model_len},
      {a + ".embedding_length", c.n_embd},
      {a + ".block_count", c.n_layer},
      {a + ".attention.head_count", c.n_head},
      {a + ".attention.head_count_kv", c.n_head_kv},
      {a + ".vocab_size", c.n_vocab}};
  if (c.file_type >= 0) info["general.file_type"] = c.file_type;
  Json j = {{"modelfile", ""},
            {"parameters", ""},
            {"template", ctx.chat ? ctx.chat->source() : ""},
            {"details", model_details(ctx)},
            {"model_info", std::move(info)},
            {"capabilities", std::move(capabilities)},
            {"modified_at", ollama_timestamp()}};
  out->send(200, "application/json", dump_json(j));
}

void handle_ollama_generate(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  generate(ctx, req, std::move(out), parse_ollama_generate, /*chat=*/false);
}

void handle_ollama_chat(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  generate(ctx, req, std::move(out), parse_ollama_chat, /*chat=*/true);
}

}  // namespace loom::server
