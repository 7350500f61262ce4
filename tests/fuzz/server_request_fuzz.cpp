// Fuzz target: the request bodies of every generation and tokenizer route, parsed and validated
// exactly as the routes do (the parse functions themselves, no HTTP), on a context built as
// Server::set_engine builds it: the synth:tiny model, a real chat template (Qwen3: tools and
// reasoning), structured outputs. Input: byte 0 picks the route, the rest is the body.
// Whatever the body, the answer is a parsed request or a 4xx naming the problem.
#include <memory>
#include <string>

#include "chat/output_format.h"
#include "fuzz_target.h"
#include "loom/engine.h"
#include "model/model.h"
#include "server/anthropic_messages.h"
#include "server/http_request.h"
#include "server/ollama_api.h"
#include "server/openai_request.h"
#include "server/responder.h"
#include "server/responses_api.h"
#include "server/routes.h"
#include "server/server_context.h"

namespace {

using loom::server::ServerContext;

std::string read_text(const std::string& path) {
  FILE* f = std::fopen(path.c_str(), "rb");
  LOOM_FUZZ_CHECK(f != nullptr, path.c_str());
  std::string s;
  char buf[4096];
  for (size_t n; (n = std::fread(buf, 1, sizeof buf, f)) > 0;) s.append(buf, n);
  std::fclose(f);
  return s;
}

ServerContext& context() {
  static ServerContext* ctx = [] {
    auto* c = new ServerContext;  // lives for the process (an engine thread runs in it)
    c->model_name = "tiny-test";
    c->options.max_n = 8;
    loom::EngineConfig ec;
    ec.max_model_len = 256;
    ec.max_num_seqs = 4;
    ec.n_threads = 1;
    auto engine = loom::Engine::load("synth:tiny", ec);
    LOOM_FUZZ_CHECK(engine.is_ok(), "synth:tiny loads");
    const loom::Tokenizer* tok = (*engine)->tokenizer();
    const std::string source =
        read_text(loom::fuzz::test_data("chat_templates/Qwen-Qwen3-0.6B.jinja"));
    auto chat = loom::chat::ChatRenderer::create(source, tok);
    LOOM_FUZZ_CHECK(chat.is_ok(), "the Qwen3 template parses");
    c->chat.emplace(std::move(chat).value());
    c->output_format.tools = loom::chat::detect_tool_call_format(source);
    c->output_format.reasoning = loom::chat::detect_reasoning_format(source);
    c->n_vocab = (*engine)->model().config().n_vocab;
    c->token_vocab = loom::structured::TokenVocab::from_tokenizer(*tok, c->n_vocab);
    c->grammar_cache = std::make_unique<loom::structured::GrammarCache>(16);
    c->max_model_len = ec.max_model_len;
    c->max_num_seqs = ec.max_num_seqs;
    c->tokenizer = tok;
    c->engine = std::make_unique<loom::AsyncEngine>(std::move(engine).value());
    c->ready.store(true);
    return c;
  }();
  return *ctx;
}

// Keeps what a handler answers (the tokenizer routes answer synchronously).
class RecordingResponder : public loom::server::Responder {
 public:
  int status = 0;
  void send(int s, std::string, std::string) override { status = s; }
  void send_with_headers(int s, std::string, std::string, std::string) override { status = s; }
  void begin_stream(std::string) override { status = 200; }
  void write(std::string) override {}
  void end_stream() override {}
  size_t pending_bytes() const override { return 0; }
  bool closed() const override { return false; }
  void on_disconnect(std::function<void()>) override {}
};

void check_error(const std::optional<loom::server::ApiError>& e) {
  if (!e) return;
  LOOM_FUZZ_CHECK(e->status >= 400 && e->status < 500, "a bad request is a 4xx");
  LOOM_FUZZ_CHECK(!e->message.empty(), "an error says what is wrong");
}

}  // namespace

LOOM_FUZZ_INIT(context)

LOOM_FUZZ_TARGET(server_request) {
  namespace srv = loom::server;
  loom::fuzz::Input in(data, size);
  const uint8_t route = in.byte();
  ServerContext& ctx = context();
  srv::HttpRequest req;
  req.method = "POST";
  req.body = std::string(in.rest());
  if (route % 9 >= 7) {  // the tokenizer routes: handlers that answer at once
    auto out = std::make_shared<RecordingResponder>();
    if (route % 9 == 7) {
      req.path = "/tokenize";
      srv::handle_tokenize(ctx, req, out);
    } else {
      req.path = "/detokenize";
      srv::handle_detokenize(ctx, req, out);
    }
    LOOM_FUZZ_CHECK(out->status == 200 || (out->status >= 400 && out->status < 500),
                    "the tokenizer routes answer 200 or 4xx");
    return;
  }
  srv::Json body;
  if (auto e = srv::parse_json_object(req.body, &body)) return check_error(e);
  srv::GenerationSpec spec;
  bool load_only = false;
  switch (route % 9) {
    case 0:
      return check_error(srv::parse_chat_request(ctx, body, &spec));
    case 1:
      return check_error(srv::parse_completion_request(ctx, body, &spec));
    case 2:
      return check_error(srv::parse_anthropic_request(ctx, body, &spec));
    case 3: {
      auto out = std::make_shared<RecordingResponder>();
      req.path = "/v1/messages/count_tokens";
      srv::handle_count_tokens(ctx, req, out);
      LOOM_FUZZ_CHECK(out->status == 200 || (out->status >= 400 && out->status < 500),
                      "count_tokens answers 200 or 4xx");
      return;
    }
    case 4:
      return check_error(srv::parse_responses_request(ctx, ctx.responses, body, &spec));
    case 5:
      return check_error(srv::parse_ollama_chat(ctx, body, &spec, &load_only));
    default:
      return check_error(srv::parse_ollama_generate(ctx, body, &spec, &load_only));
  }
}
