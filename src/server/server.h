// loom's HTTP server: the AsyncEngine behind OpenAI-compatible (/v1/completions,
// /v1/chat/completions, /v1/models), Anthropic (/v1/messages) and vLLM-style (/tokenize,
// /detokenize, /health, /metrics) routes, so OpenAI clients and vLLM-aware routers work
// unchanged. See docs/server.md for the routes, flags and threading.
//
// Life cycle: start() binds and serves at once (/health answers 503 "loading"); set_engine()
// (or load()) makes it ready. Tests start it in-process on port 0.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/status.h"
#include "loom/engine.h"
#include "server/cors.h"

namespace loom::server {

struct ServerOptions {
  std::string host = "127.0.0.1";
  uint16_t port = 8000;           // 0 = an ephemeral port (see Server::port())
  std::string served_model_name;  // "" = model_path
  std::string model_path;         // reported as the model's "root"
  std::string api_key;            // "" = no authentication
  int32_t max_logprobs = kDefaultMaxLogprobs;
  // Requests allowed to wait beyond the running ones (max_num_seqs); more get 503.
  int32_t max_queue = 1024;
  // Chat template source text; "" = the model's (set_engine's argument), then the fallback.
  std::string chat_template;
  // Tool-call and reasoning formats by vLLM's names (hermes, llama3_json, mistral, deepseek_v3,
  // qwen3_coder; deepseek_r1, qwen3); "" = detected from the chat template; "none" = off.
  std::string tool_call_parser;
  std::string reasoning_parser;
  int io_threads = 4;
  size_t max_body_bytes = 8u << 20;  // larger bodies get 413
  // Per-stream bytes queued for a slow reader before its request is aborted.
  size_t max_pending_stream_bytes = 8u << 20;
  int idle_timeout_s = 60;  // see HttpLimits::idle_timeout_s
  // Per-request limits (each a `loom serve` flag): a request over one is a 400 naming it.
  int32_t max_prompt_tokens = 0;  // 0: whatever leaves room in max_model_len
  int32_t max_n = 128;
  int32_t max_stop = 32;          // stop strings, and stop token ids
  int32_t max_stop_bytes = 1024;  // one stop string
  int32_t max_tools = 256;
  // The grammar a request's schema, regex, grammar or tools compile to (GBNF text).
  size_t max_grammar_bytes = 1u << 20;
  // Responses API: finished responses kept for previous_response_id and GET (store: true),
  // least recently used dropped first; 0 refuses store: true.
  int32_t max_stored_responses = 1024;
  // One info line per finished generation request (vLLM's --disable-log-requests turns it off).
  bool log_requests = true;
  // The web chat page at / and /webui/* (webui_routes.cpp); --no-webui turns it off (/webui/*
  // 404, / a plain-text liveness answer).
  bool webui = true;
  // What the server does with the model (vLLM's --task): "generate", "embed" (/v1/embeddings,
  // /api/embed) or "rerank" (/v1/rerank); "" = from the model's pooling metadata
  // ({arch}.pooling_type, sentence-transformers modules, a reranker's name).
  std::string task;
  // Cross-origin requests (vLLM's --allowed-origins / -methods / -headers, --allow-credentials):
  // every origin by default.
  CorsPolicy cors;
};

struct ServerState;

class Server {
 public:
  // Binds host:port and starts the I/O threads. Errors: the address cannot be bound.
  static Result<std::unique_ptr<Server>> start(const ServerOptions& options);
  ~Server();  // stop()
  Server(const Server&) = delete;
  Server& operator=(const Server&) = delete;

  // Hands the server its engine (it then owns it, behind an AsyncEngine) and marks it ready.
  // model_chat_template: the model's own template (GGUF tokenizer.chat_template), used when
  // options.chat_template is empty. Errors: a template that does not parse.
  Status set_engine(std::unique_ptr<Engine> engine, const std::string& model_chat_template = "");
  // Engine::load + the GGUF's chat template + set_engine.
  Status load(const std::string& model_spec, const EngineConfig& config);

  uint16_t port() const;
  std::string url() const;  // http://host:port
  bool ready() const;
  // Null until ready. Tests read metrics and check_kv_drained() through it.
  AsyncEngine* engine();
  // Stops accepting, closes connections, aborts their requests, joins all threads.
  void stop();

 private:
  explicit Server(std::unique_ptr<ServerState> state);
  std::unique_ptr<ServerState> state_;
};

}  // namespace loom::server
