// /v1/completions, /v1/chat/completions, /v1/models[/{id}], and the submit path shared with
// /v1/messages: overload check, one engine request per prompt, disconnect → abort.
#include <cctype>
#include <cstring>
#include <ctime>
#include <string>

#include "base/log.h"
#include "server/jobs.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {

void submit_generation(ServerContext& ctx, GenerationSpec spec, ResponderPtr out) {
  const bool anthropic = spec.kind == ApiKind::kAnthropic;
  const bool ollama = spec.kind == ApiKind::kOllamaGenerate || spec.kind == ApiKind::kOllamaChat;
  const ErrorShape shape = anthropic ? ErrorShape::kAnthropic
                           : ollama  ? ErrorShape::kOllama
                                     : ErrorShape::kOpenAI;
  if (ctx.pooling.task != ServerTask::kGenerate) {
    send_error(
        *out,
        bad_request("this server runs task " + std::string(server_task_name(ctx.pooling.task)) +
                        ": text generation needs `loom serve --task generate`",
                    "model"),
        shape);
    return;
  }
  const int64_t n_req = static_cast<int64_t>(spec.prompts.size());
  const int64_t limit = static_cast<int64_t>(ctx.max_num_seqs) + ctx.options.max_queue;
  if (ctx.in_flight.fetch_add(n_req) + n_req > limit) {
    ctx.in_flight.fetch_sub(n_req);
    send_error(*out,
               overloaded("the server is overloaded (" + std::to_string(limit) +
                          " requests running or queued); retry later"),
               shape);
    return;
  }
  const bool responses = spec.kind == ApiKind::kResponses;
  const char* prefix = anthropic                     ? "msg_"
                       : responses                   ? "resp_"
                       : spec.kind == ApiKind::kChat ? "chatcmpl-"
                                                     : "cmpl-";
  const std::string id = ctx.new_id(prefix);
  std::vector<std::string> ids;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < spec.prompts.size(); ++i) {
    GenerateRequest g;
    g.request_id = spec.prompts.size() == 1 ? id : id + "-" + std::to_string(i);
    g.prompt = spec.prompts[i];
    g.params = spec.params;
    auto s = ctx.engine->submit(std::move(g));
    if (!s.is_ok()) {
      for (const std::string& done : ids) ctx.engine->abort(done);
      // (Every prompt passed Engine::validate already; this is the engine shutting down.)
      ctx.in_flight.fetch_sub(n_req);
      send_error(*out, bad_request(s.status().message(), "prompt"), shape);
      return;
    }
    ids.push_back(spec.prompts.size() == 1 ? id : id + "-" + std::to_string(i));
    streams.push_back(std::move(s).value());
  }
  const char* route = anthropic                               ? "/v1/messages"
                      : responses                             ? "/v1/responses"
                      : spec.kind == ApiKind::kOllamaChat     ? "/api/chat"
                      : spec.kind == ApiKind::kOllamaGenerate ? "/api/generate"
                      : spec.kind == ApiKind::kChat           ? "/v1/chat/completions"
                                                              : "/v1/completions";
  auto job = anthropic   ? make_anthropic_job(ctx, std::move(spec), id, out)
             : ollama    ? make_ollama_job(ctx, std::move(spec), id, out)
             : responses ? make_responses_job(ctx, std::move(spec), id, out)
                         : make_openai_job(ctx, std::move(spec), id, out);
  dispatch_job(ctx, job, std::move(ids), std::move(streams), route, *out);
}

void dispatch_job(ServerContext& ctx, const std::shared_ptr<GenerationJob>& job,
                  std::vector<std::string> request_ids,
                  std::vector<std::shared_ptr<RequestStream>> streams, const char* route,
                  Responder& out) {
  job->request_ids = std::move(request_ids);
  job->streams = std::move(streams);
  job->in_flight = &ctx.in_flight;
  job->route = route;
  std::weak_ptr<GenerationJob> weak = job;
  AsyncEngine* engine = ctx.engine.get();
  out.on_disconnect([weak, engine] {
    if (auto j = weak.lock()) {
      j->cancelled = true;
      for (const std::string& rid : j->request_ids) engine->abort(rid);
    }
  });
  ctx.dispatcher->add(job);
}

void handle_completions(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e);
  GenerationSpec spec;
  if (auto e = parse_completion_request(ctx, body, &spec)) return send_error(*out, *e);
  submit_generation(ctx, std::move(spec), std::move(out));
}

void handle_chat_completions(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e);
  GenerationSpec spec;
  if (auto e = parse_chat_request(ctx, body, &spec)) return send_error(*out, *e);
  submit_generation(ctx, std::move(spec), std::move(out));
}

namespace {

Json model_object(const ServerContext& ctx) {
  return {{"id", ctx.model_name},
          {"object", "model"},
          {"created", ctx.created},
          {"owned_by", "loom"},
          {"root", ctx.options.model_path.empty() ? ctx.model_name : ctx.options.model_path},
          {"parent", nullptr},
          {"max_model_len", ctx.max_model_len},
          {"permission", Json::array()}};
}

// %XX escapes decoded (a served name like "org/model" arrives as "org%2Fmodel" or as is).
std::string percent_decode(const std::string& s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(s.substr(i + 1, 2), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

void handle_models(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  Json j = {{"object", "list"}, {"data", Json::array({model_object(ctx)})}};
  out->send(200, "application/json", dump_json(j));
}

void handle_model(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  const std::string id = percent_decode(req.path.substr(std::strlen("/v1/models/")));
  if (id != ctx.model_name) return send_error(*out, model_not_found(id));
  out->send(200, "application/json", dump_json(model_object(ctx)));
}

}  // namespace loom::server
