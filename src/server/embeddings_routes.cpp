// /v1/embeddings, /api/embed (and the legacy /api/embeddings) and /v1/rerank (see
// embeddings_api.h): one engine pooling request per input, a job that gathers every result,
// then one JSON answer in the route's shape.
#include <algorithm>
#include <numeric>

#include "base/log.h"
#include "server/embeddings_api.h"
#include "server/jobs.h"
#include "server/ollama_api.h"
#include "server/openai_request.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace loom::server {
namespace {

ErrorShape shape_of(PoolingJobSpec::Api api) {
  return api == PoolingJobSpec::Api::kOllamaEmbed || api == PoolingJobSpec::Api::kOllamaEmbeddings
             ? ErrorShape::kOllama
             : ErrorShape::kOpenAI;
}

class PoolingJob final : public GenerationJob {
 public:
  PoolingJob(const ServerContext& ctx, PoolingJobSpec spec, std::shared_ptr<Responder> out)
      : ctx_(ctx), spec_(std::move(spec)), results_(spec_.inputs.size()) {
    responder = std::move(out);
  }

  void on_output(size_t i, RequestOutput& out) override {
    if (!out.error.empty()) error_ = out.error;
    if (!out.finished) return;
    bool aborted = out.pooled.empty();
    for (const CompletionOutput& c : out.outputs)
      aborted = aborted || c.finish_reason == FinishReason::kAbort;
    if (aborted) failed_ = true;
    results_[i] = std::move(out.pooled);
  }

  void on_finished() override {
    if (cancelled.load() || responder->closed()) return;  // nobody to answer
    if (failed_ || !error_.empty()) {
      ApiError e;
      e.status = 503;
      e.type = "server_error";
      e.message = error_.empty() ? "the request was aborted (the server is stopping)"
                                 : "the engine failed the request: " + error_;
      return send_error(*responder, e, shape_of(spec_.api));
    }
    int64_t tokens = 0;
    for (const auto& in : spec_.inputs) tokens += static_cast<int64_t>(in.size());
    switch (spec_.api) {
      case PoolingJobSpec::Api::kOpenAIEmbeddings:
        return responder->send(200, "application/json", dump_json(openai_body(tokens)));
      case PoolingJobSpec::Api::kOllamaEmbed:
        return responder->send(200, "application/json", dump_json(ollama_body(tokens)));
      case PoolingJobSpec::Api::kOllamaEmbeddings:
        return responder->send(200, "application/json",
                               dump_json(Json{{"embedding", results_.at(0)}}));
      case PoolingJobSpec::Api::kRerank:
        return responder->send(200, "application/json", dump_json(rerank_body(tokens)));
    }
  }

 private:
  std::vector<float> embedding(size_t i) const {
    return spec_.dimensions > 0 ? truncate_embedding(results_[i], spec_.dimensions) : results_[i];
  }

  Json openai_body(int64_t tokens) const {
    Json data = Json::array();
    for (size_t i = 0; i < results_.size(); ++i) {
      std::vector<float> v = embedding(i);
      Json e = {{"object", "embedding"}, {"index", i}};
      if (spec_.base64)
        e["embedding"] = base64_floats(v);
      else
        e["embedding"] = v;
      data.push_back(std::move(e));
    }
    return {{"object", "list"},
            {"data", std::move(data)},
            {"model", spec_.model},
            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}};
  }

  Json ollama_body(int64_t tokens) const {
    Json embeddings = Json::array();
    for (size_t i = 0; i < results_.size(); ++i) embeddings.push_back(embedding(i));
    const auto ns = std::chrono::duration_cast<std::chrono::nanoseconds>(
                        std::chrono::steady_clock::now() - spec_.start)
                        .count();
    return {{"model", spec_.model},
            {"embeddings", std::move(embeddings)},
            {"total_duration", ns},
            {"load_duration", 0},  // loaded at start-up
            {"prompt_eval_count", tokens}};
  }

  Json rerank_body(int64_t tokens) const {
    std::vector<double> score(results_.size());
    for (size_t i = 0; i < results_.size(); ++i) score[i] = rerank_score(ctx_.pooling, results_[i]);
    std::vector<size_t> order(results_.size());
    std::iota(order.begin(), order.end(), 0);
    // Highest first; equal scores keep the documents' order.
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return score[a] > score[b]; });
    if (spec_.top_n > 0 && static_cast<size_t>(spec_.top_n) < order.size())
      order.resize(static_cast<size_t>(spec_.top_n));
    Json results = Json::array();
    for (size_t i : order) {
      Json r = {{"index", i}};
      if (spec_.return_documents) r["document"] = {{"text", spec_.documents[i]}};
      r["relevance_score"] = score[i];
      results.push_back(std::move(r));
    }
    return {{"id", ctx_id_},
            {"model", spec_.model},
            {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}},
            {"results", std::move(results)}};
  }

 public:
  std::string ctx_id_;

 private:
  const ServerContext& ctx_;
  PoolingJobSpec spec_;
  std::vector<std::vector<float>> results_;
  bool failed_ = false;
  std::string error_;
};

using Parse = std::optional<ApiError> (*)(const ServerContext&, const Json&, PoolingJobSpec*);

void submit_pooling(ServerContext& ctx, const HttpRequest& req, ResponderPtr out, Parse parse,
                    ErrorShape shape, const char* route, const char* id_prefix) {
  Json body;
  if (auto e = parse_json_object(req.body, &body)) return send_error(*out, *e, shape);
  PoolingJobSpec spec;
  if (auto e = parse(ctx, body, &spec)) return send_error(*out, *e, shape);
  if (spec.inputs.empty()) {
    // Ollama's empty input or prompt: the model is loaded (it always is), nothing embedded.
    Json j = spec.api == PoolingJobSpec::Api::kOllamaEmbeddings
                 ? Json{{"embedding", Json::array()}}
                 : Json{{"model", spec.model},
                        {"embeddings", Json::array()},
                        {"total_duration", 0},
                        {"load_duration", 0},
                        {"prompt_eval_count", 0}};
    return out->send(200, "application/json", dump_json(j));
  }
  const int64_t n_req = static_cast<int64_t>(spec.inputs.size());
  const int64_t limit = static_cast<int64_t>(ctx.max_num_seqs) + ctx.options.max_queue;
  // A batch of inputs larger than the queue is still one request: it is admitted alone.
  const int64_t before = ctx.in_flight.fetch_add(n_req);
  if (before > 0 && before + n_req > limit) {
    ctx.in_flight.fetch_sub(n_req);
    return send_error(*out,
                      overloaded("the server is overloaded (" + std::to_string(limit) +
                                 " requests running or queued); retry later"),
                      shape);
  }
  const std::string id = ctx.new_id(id_prefix);
  std::vector<std::string> ids;
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (size_t i = 0; i < spec.inputs.size(); ++i) {
    GenerateRequest g;
    g.request_id = id + "-" + std::to_string(i);
    g.prompt = spec.inputs[i];
    g.pooling = spec.params;
    auto s = ctx.engine->submit(std::move(g));
    if (!s.is_ok()) {
      for (const std::string& done : ids) ctx.engine->abort(done);
      ctx.in_flight.fetch_sub(n_req);
      return send_error(*out, bad_request(s.status().message(), "input"), shape);
    }
    ids.push_back(id + "-" + std::to_string(i));
    streams.push_back(std::move(s).value());
  }
  auto job = std::make_shared<PoolingJob>(ctx, std::move(spec), out);
  job->ctx_id_ = id;
  dispatch_job(ctx, job, std::move(ids), std::move(streams), route, *out);
}

}  // namespace

void handle_embeddings(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  submit_pooling(ctx, req, std::move(out), parse_openai_embeddings, ErrorShape::kOpenAI,
                 "/v1/embeddings", "embd-");
}

void handle_ollama_embed(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  submit_pooling(ctx, req, std::move(out), parse_ollama_embed, ErrorShape::kOllama, "/api/embed",
                 "embd-");
}

void handle_ollama_embeddings(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  submit_pooling(ctx, req, std::move(out), parse_ollama_embeddings, ErrorShape::kOllama,
                 "/api/embeddings", "embd-");
}

void handle_rerank(ServerContext& ctx, const HttpRequest& req, ResponderPtr out) {
  submit_pooling(ctx, req, std::move(out), parse_rerank, ErrorShape::kOpenAI, req.path.c_str(),
                 "rerank-");
}

}  // namespace loom::server
