// Server: threads, life cycle and engine hand-over (see server.h).
#include "server/server.h"

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>
#include <thread>

#include "base/log.h"
#include "engine/memory_plan.h"
#include "format/gguf.h"
#include "loom/tokenizer.h"
#include "model/model.h"
#include "server/http_connection.h"
#include "server/router.h"
#include "server/server_context.h"

namespace loom::server {

std::string ServerContext::new_id(const char* prefix) {
  static thread_local std::mt19937_64 rng(std::random_device{}() ^
                                          std::hash<std::thread::id>{}(std::this_thread::get_id()));
  char buf[40];
  std::snprintf(buf, sizeof buf, "%016llx%08llx", static_cast<unsigned long long>(rng()),
                static_cast<unsigned long long>(next_id.fetch_add(1) & 0xffffffffu));
  return std::string(prefix) + buf;
}

struct ServerState {
  boost::asio::io_context io;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work;
  ServerContext ctx;
  std::shared_ptr<Listener> listener;
  std::vector<std::thread> threads;
  std::mutex stop_mu;
  bool stopped = false;
};

Server::Server(std::unique_ptr<ServerState> state) : state_(std::move(state)) {}

Server::~Server() {
  stop();
}

Result<std::unique_ptr<Server>> Server::start(const ServerOptions& options) {
  auto st = std::make_unique<ServerState>();
  ServerContext& ctx = st->ctx;
  ctx.options = options;
  ctx.model_name = !options.served_model_name.empty() ? options.served_model_name
                   : !options.model_path.empty()      ? options.model_path
                                                      : "loom";
  ctx.created = static_cast<int64_t>(std::time(nullptr));
  HttpLimits limits;
  limits.max_body_bytes = options.max_body_bytes;
  limits.idle_timeout_s = options.idle_timeout_s;
  limits.log_errors = options.log_requests;
  ServerState* raw = st.get();
  LOOM_ASSIGN_OR_RETURN(
      st->listener,
      Listener::create(
          st->io, options.host, options.port, limits,
          [raw](const HttpRequest& req, std::shared_ptr<Responder> out) {
            route_request(raw->ctx, req, std::move(out));
          },
          [raw](const HttpRequest& req) { return cors_headers(raw->ctx.options.cors, req); }));
  st->work.emplace(st->io.get_executor());
  st->listener->run();
  const int n = std::max(1, options.io_threads);
  for (int i = 0; i < n; ++i) st->threads.emplace_back([raw] { raw->io.run(); });
  return std::unique_ptr<Server>(new Server(std::move(st)));
}

namespace {

// --tool-call-parser / --reasoning-parser, else what the chat template shows.
Status resolve_output_format(ServerContext& ctx) {
  const std::string& source = ctx.chat->source();
  chat::OutputFormat& f = ctx.output_format;
  const std::string& tp = ctx.options.tool_call_parser;
  if (tp.empty()) {
    f.tools = chat::detect_tool_call_format(source);
  } else if (tp == "none") {
    f.tools = chat::ToolCallFormat::kNone;
  } else {
    auto t = chat::tool_call_format_from_name(tp);
    if (!t.is_ok()) return invalid_argument("--tool-call-parser: " + t.status().message());
    f.tools = *t;
  }
  const std::string& rp = ctx.options.reasoning_parser;
  if (rp.empty()) {
    f.reasoning = chat::detect_reasoning_format(source);
  } else if (rp == "none") {
    f.reasoning = chat::ReasoningFormat::kNone;
  } else {
    auto r = chat::reasoning_format_from_name(rp);
    if (!r.is_ok()) return invalid_argument("--reasoning-parser: " + r.status().message());
    f.reasoning = *r;
  }
  LOOM_LOG_INFO("tool calls: %s, reasoning: %s", chat::tool_call_format_name(f.tools),
                chat::reasoning_format_name(f.reasoning));
  return Status::ok();
}

}  // namespace

Status Server::set_engine(std::unique_ptr<Engine> engine, const std::string& model_chat_template) {
  ServerContext& ctx = state_->ctx;
  if (ctx.ready.load()) return invalid_argument("the server already has an engine");
  const Tokenizer* tok = engine->tokenizer();
  if (!ctx.options.chat_template.empty()) {
    auto r = chat::ChatRenderer::create(ctx.options.chat_template, tok);
    if (!r.is_ok()) return invalid_argument("--chat-template: " + r.status().message());
    ctx.chat.emplace(std::move(r).value());
  } else if (!model_chat_template.empty()) {
    auto r = chat::ChatRenderer::create(model_chat_template, tok);
    if (r.is_ok()) {
      ctx.chat.emplace(std::move(r).value());
    } else {
      LOOM_LOG_WARN("the model's chat template does not parse (%s); using the ChatML fallback",
                    r.status().message().c_str());
    }
  }
  if (!ctx.chat) {
    if (model_chat_template.empty())
      LOOM_LOG_INFO("the model has no chat template; chat requests use the ChatML fallback");
    auto r = chat::ChatRenderer::create("", tok);
    if (!r.is_ok()) return internal_error("fallback chat template: " + r.status().message());
    ctx.chat.emplace(std::move(r).value());
  }
  LOOM_RETURN_IF_ERROR(resolve_output_format(ctx));
  LOOM_ASSIGN_OR_RETURN(ctx.pooling,
                        resolve_pooling_setup(ctx.options.task, engine->model().config(), tok));
  // Embedding and scoring run prompts only: proposals would never be verified, and the
  // spec_decode metrics would report a speculation that does not happen.
  if (ctx.pooling.task != ServerTask::kGenerate && engine->config().speculative.enabled())
    return invalid_argument(
        "speculative decoding (--speculative-config, --draft-max, --model-draft) applies to "
        "generation only, and this server's task is " +
        std::string(server_task_name(ctx.pooling.task)) + ": drop the speculative flag");
  if (ctx.pooling.task != ServerTask::kGenerate)
    LOOM_LOG_INFO("task %s: %s", std::string(server_task_name(ctx.pooling.task)).c_str(),
                  ctx.pooling.task == ServerTask::kEmbed ? "/v1/embeddings and /api/embed"
                  : ctx.pooling.rerank_classify ? "/v1/rerank, scored by the classifier head"
                                                : "/v1/rerank, scored by the yes/no logits");
  if (tok) {
    ctx.token_vocab =
        structured::TokenVocab::from_tokenizer(*tok, engine->model().config().n_vocab);
    ctx.grammar_cache = std::make_unique<structured::GrammarCache>();
  }
  const EngineConfig& ec = engine->config();
  ctx.max_model_len = ec.max_model_len;
  ctx.n_vocab = engine->model().config().n_vocab;
  ctx.block_size = ec.block_size;
  ctx.max_num_seqs = ec.max_num_seqs;
  ctx.tokenizer = tok;
  ctx.engine = std::make_unique<AsyncEngine>(std::move(engine));
  ctx.dispatcher =
      std::make_unique<Dispatcher>(ctx.engine.get(), &ctx.metrics,
                                   ctx.options.max_pending_stream_bytes, ctx.options.log_requests);
  const EngineMetrics m = ctx.engine->metrics();
  LOOM_LOG_INFO("KV cache: %d blocks of %d tokens = %lld tokens; max_model_len %d, max_num_seqs %d",
                m.num_kv_blocks, ec.block_size,
                static_cast<long long>(m.num_kv_blocks) * ec.block_size, ec.max_model_len,
                ec.max_num_seqs);
  ctx.ready.store(true);
  LOOM_LOG_INFO("serving '%s' at %s (OpenAI: %s/v1, health: %s/health)", ctx.model_name.c_str(),
                url().c_str(), url().c_str(), url().c_str());
  return Status::ok();
}

namespace {

// The chat template a model file carries: GGUF tokenizer.chat_template, or the HF
// tokenizer_config.json "chat_template" (a string, or a list of {name, template} where
// "default" is the one to use).
std::string model_chat_template(const std::string& spec) {
  std::error_code ec;
  if (spec.rfind("synth:", 0) == 0) return "";
  if (std::filesystem::is_directory(spec, ec)) {
    std::ifstream f(std::filesystem::path(spec) / "tokenizer_config.json");
    if (!f) return "";
    std::stringstream ss;
    ss << f.rdbuf();
    auto j = nlohmann::json::parse(ss.str(), nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) return "";
    auto t = j.find("chat_template");
    if (t == j.end()) return "";
    if (t->is_string()) return t->get<std::string>();
    if (t->is_array())
      for (const auto& e : *t)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") &&
            e["template"].is_string())
          return e["template"].get<std::string>();
    return "";
  }
  auto file = GgufFile::open(spec);
  if (!file.is_ok()) return "";
  return file->get_string("tokenizer.chat_template").value_or("");
}

}  // namespace

Status Server::load(const std::string& model_spec, const EngineConfig& config) {
  auto t0 = std::chrono::steady_clock::now();
  LOOM_ASSIGN_OR_RETURN(auto engine, load_engine(model_spec, config, LogLevel::kInfo));
  const ModelConfig& mc = engine->model().config();
  LOOM_LOG_INFO("loaded %s (%s, %d layers, vocab %d%s) in %.2f s", model_spec.c_str(),
                mc.arch.c_str(), mc.n_layer, mc.n_vocab,
                engine->tokenizer() ? "" : ", no tokenizer",
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  return set_engine(std::move(engine), model_chat_template(model_spec));
}

uint16_t Server::port() const {
  return state_->listener->port();
}

std::string Server::url() const {
  return "http://" + state_->ctx.options.host + ":" + std::to_string(port());
}

bool Server::ready() const {
  return state_->ctx.ready.load();
}

AsyncEngine* Server::engine() {
  return state_->ctx.ready.load() ? state_->ctx.engine.get() : nullptr;
}

void Server::stop() {
  std::lock_guard<std::mutex> lock(state_->stop_mu);
  if (state_->stopped) return;
  state_->stopped = true;
  ServerState& s = *state_;
  s.listener->close();
  // I/O threads first, so no handler is still using the engine; then the jobs (they abort
  // their requests; their last writes are dropped with the sockets), then the engine thread.
  s.work.reset();
  s.io.stop();
  for (auto& t : s.threads) t.join();
  s.ctx.ready.store(false);
  if (s.ctx.dispatcher) s.ctx.dispatcher->stop();
  s.ctx.dispatcher.reset();
  s.ctx.engine.reset();
  s.threads.clear();
}

}  // namespace loom::server
