// `loom serve`: the OpenAI / Anthropic / vLLM-compatible HTTP server (src/server), with
// vLLM's flag spelling. The socket is bound before the model loads, so /health answers 503
// during loading and 200 once ready. Stops on SIGINT / SIGTERM.
#include <CLI/CLI.hpp>
#include <csignal>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <tuple>

#include "base/log.h"
#include "chat/output_format.h"
#include "cli/commands.h"
#include "cli/demo_model.h"
#include "cli/engine_flags.h"
#include "hub/hf_option.h"
#include "server/cors.h"
#include "server/server.h"

namespace loom::cli {
namespace {

int cmd_serve(int argc, char** argv) {
  CLI::App app{"Serve a model over HTTP (OpenAI, Anthropic and vLLM APIs)", "loom serve"};
  std::string model;
  server::ServerOptions so;
  std::string chat_template_file;
  int port = 8000;
  app.add_option("-m,--model", model,
                 "GGUF file, Hugging Face directory or synth:PRESET[:TYPE] (optional; default: "
                 "the random-weight demo model " +
                     std::string(kDemoModel) + ")");
  std::string hf_repo;
  hub::add_hf_option(app, &hf_repo);
  app.add_option("--host", so.host, "address to listen on")->capture_default_str();
  app.add_option("--port", port, "port (0 = any free port)")
      ->check(CLI::Range(0, 65535))
      ->capture_default_str();
  app.add_option("--served-model-name", so.served_model_name,
                 "model name in the API (default: --model)");
  app.add_option("--api-key", so.api_key,
                 "require this key (Authorization: Bearer KEY or x-api-key)");
  EngineFlags engine_flags;
  engine_flags.add_to(app);
  bool dry_run = false;
  app.add_flag("--dry-run", dry_run,
               "print the memory plan (as `loom plan` does) and exit: 0 when it fits, 1 if not");
  app.add_option("--max-logprobs", so.max_logprobs, "largest logprobs / top_logprobs accepted")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-queue", so.max_queue,
                 "requests allowed to wait beyond --max-num-seqs (more get 503)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--chat-template", chat_template_file,
                 "Jinja chat template file (default: the model's)");
  app.add_option("--tool-call-parser", so.tool_call_parser,
                 "tool-call format: " + chat::tool_call_format_names() +
                     " (default: detected from the chat template)");
  app.add_option("--reasoning-parser", so.reasoning_parser,
                 "reasoning format: " + chat::reasoning_format_names() +
                     " (default: detected from the chat template)");
  bool no_log_requests = false;
  app.add_flag("--disable-log-requests", no_log_requests,
               "no info line per finished request (id, route, status, tokens, TTFT, time) or "
               "error response");
  app.add_option("--max-request-body", so.max_body_bytes, "largest request body in bytes (413)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 34))
      ->capture_default_str();
  app.add_option("--max-stream-buffer", so.max_pending_stream_bytes,
                 "bytes a stream may queue for a client that stops reading before its request "
                 "is aborted")
      ->check(CLI::Range(size_t{4096}, size_t{1} << 34))
      ->capture_default_str();
  app.add_option("--idle-timeout", so.idle_timeout_s,
                 "seconds a connection may wait before sending a whole request (0 = no limit)")
      ->check(CLI::Range(0, 86400))
      ->capture_default_str();
  app.add_option("--max-prompt-tokens", so.max_prompt_tokens,
                 "longest prompt in tokens (0 = what leaves room in --max-model-len)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--max-n", so.max_n, "largest n (samples per request)")
      ->check(CLI::Range(1, 128))
      ->capture_default_str();
  app.add_option("--max-stop", so.max_stop, "most stop strings plus stop token ids per request")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-stop-bytes", so.max_stop_bytes, "longest stop string in bytes")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-tools", so.max_tools, "most tools per request")
      ->check(CLI::Range(0, 1 << 20))
      ->capture_default_str();
  app.add_option("--max-grammar-bytes", so.max_grammar_bytes,
                 "largest grammar a request's schema, regex, grammar or tools compile to (bytes)")
      ->check(CLI::Range(size_t{1024}, size_t{1} << 30))
      ->capture_default_str();
  app.add_option("--max-stored-responses", so.max_stored_responses,
                 "Responses API: most responses kept for previous_response_id (store: true), "
                 "least recently used dropped first; 0 refuses store")
      ->check(CLI::Range(0, 1 << 24))
      ->capture_default_str();
  bool no_webui = false;
  app.add_flag(
      "--no-webui", no_webui,
      "no web chat page at / (then / answers \"loom is running\" in plain text, as Ollama's root)");
  app.add_option("--task", so.task,
                 "generate (chat and completions), embed (/v1/embeddings, /api/embed) or rerank "
                 "(/v1/rerank); default: from the model's pooling metadata")
      ->check(CLI::IsMember({"generate", "embed", "rerank"}));
  app.add_option("--io-threads", so.io_threads, "HTTP I/O threads")
      ->check(CLI::Range(1, 256))
      ->capture_default_str();
  // CORS, as vLLM spells it: JSON lists of strings.
  std::string allowed_origins = R"(["*"])", allowed_methods = R"(["*"])",
              allowed_headers = R"(["*"])";
  app.add_option("--allowed-origins", allowed_origins,
                 "CORS: origins allowed to call the API from a browser (JSON list)")
      ->capture_default_str();
  app.add_option("--allowed-methods", allowed_methods,
                 "CORS: methods a cross-origin request may use (JSON list)")
      ->capture_default_str();
  app.add_option("--allowed-headers", allowed_headers,
                 "CORS: headers a cross-origin request may send (JSON list)")
      ->capture_default_str();
  app.add_flag("--allow-credentials", so.cors.allow_credentials,
               "CORS: allow credentials (cookies, Authorization) on cross-origin requests");
  CLI11_PARSE(app, argc, argv);
  for (auto [flag, text, list] :
       {std::tuple{"--allowed-origins", &allowed_origins, &so.cors.allowed_origins},
        std::tuple{"--allowed-methods", &allowed_methods, &so.cors.allowed_methods},
        std::tuple{"--allowed-headers", &allowed_headers, &so.cors.allowed_headers}}) {
    auto parsed = server::parse_cors_list(flag, *text);
    if (!parsed.is_ok()) {
      std::fprintf(stderr, "loom serve: %s\n", parsed.status().message().c_str());
      return 1;
    }
    *list = std::move(parsed).value();
  }
  // Before the model loads (minutes for a large one): a misspelt name fails at once.
  if (!so.tool_call_parser.empty()) {
    if (auto t = chat::tool_call_format_from_name(so.tool_call_parser); !t.is_ok()) {
      std::fprintf(stderr, "loom serve: --tool-call-parser: %s\n", t.status().message().c_str());
      return 1;
    }
  }
  if (!so.reasoning_parser.empty()) {
    if (auto r = chat::reasoning_format_from_name(so.reasoning_parser); !r.is_ok()) {
      std::fprintf(stderr, "loom serve: --reasoning-parser: %s\n", r.status().message().c_str());
      return 1;
    }
  }
  if (Status st = engine_flags.apply(); !st.is_ok()) {
    std::fprintf(stderr, "loom serve: %s\n", st.message().c_str());
    return 1;
  }
  const EngineConfig& ec = engine_flags.config;
  if (Status st = hub::resolve_hf_option(hf_repo, &model, false); !st.is_ok()) {
    std::fprintf(stderr, "loom serve: %s\n", st.message().c_str());
    return 1;
  }
  // Clients name the model as it was asked for (the repository), not by its cache path.
  if (!hf_repo.empty() && so.served_model_name.empty()) so.served_model_name = hf_repo;
  use_demo_model_if_empty(model, "serve");
  if (dry_run) return print_memory_plan(model, ec, /*json=*/false, "serve");
  so.log_requests = !no_log_requests;
  so.webui = !no_webui;
  so.port = static_cast<uint16_t>(port);
  so.model_path = model;
  if (!chat_template_file.empty()) {
    std::ifstream f(chat_template_file, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "loom serve: cannot read --chat-template %s\n",
                   chat_template_file.c_str());
      return 1;
    }
    std::stringstream ss;
    ss << f.rdbuf();
    so.chat_template = ss.str();
    if (so.chat_template.empty()) {
      std::fprintf(stderr, "loom serve: --chat-template %s is empty\n", chat_template_file.c_str());
      return 1;
    }
  }

  // Block the stop signals in every thread; this one waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = server::Server::start(so);
  if (!server.is_ok()) {
    std::fprintf(stderr, "loom serve: %s\n", server.status().message().c_str());
    return 1;
  }
  LOOM_LOG_INFO("listening on %s; loading %s ...", (*server)->url().c_str(), model.c_str());
  if (Status st = (*server)->load(model, ec); !st.is_ok()) {
    std::fprintf(stderr, "loom serve: %s\n", st.message().c_str());
    return 1;
  }
  int sig = 0;
  sigwait(&signals, &sig);
  LOOM_LOG_INFO("signal %d: shutting down", sig);
  (*server)->stop();
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("serve", "serve a model over HTTP (OpenAI / Anthropic / vLLM APIs)",
                      cmd_serve);

}  // namespace loom::cli
