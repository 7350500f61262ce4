// ServerContext: what every route handler reads (options, the engine, tokenizer, chat template,
// metrics, dispatcher). Built by Server; immutable once `ready` is set, except the atomics.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "chat/output_format.h"
#include "chat/renderer.h"
#include "loom/engine.h"
#include "server/dispatcher.h"
#include "server/embeddings_api.h"
#include "server/metrics.h"
#include "server/responses_store.h"
#include "server/server.h"
#include "structured/matcher.h"

namespace loom::server {

struct ServerContext {
  ServerOptions options;
  std::string model_name;  // served name
  int64_t created = 0;     // unix time the server started (models' "created")

  std::atomic<bool> ready{false};
  std::unique_ptr<AsyncEngine> engine;   // set before ready
  const Tokenizer* tokenizer = nullptr;  // may be null (token-id prompts only)
  std::optional<chat::ChatRenderer> chat;
  // How the model writes tool calls and reasoning (--tool-call-parser / --reasoning-parser, else
  // detected from the chat template).
  chat::OutputFormat output_format;
  // Structured outputs: the vocabulary as the grammar engine sees it, and compiled grammars by
  // text (a repeated schema costs a lookup). Null without a tokenizer.
  std::shared_ptr<const structured::TokenVocab> token_vocab;
  std::unique_ptr<structured::GrammarCache> grammar_cache;
  int32_t max_model_len = 0;
  int32_t n_vocab = 0;
  int32_t block_size = 16;
  int32_t max_num_seqs = 0;
  // The task (--task, else from the model's pooling metadata) and how it pools and scores.
  PoolingSetup pooling;

  ServerMetrics metrics;
  std::unique_ptr<Dispatcher> dispatcher;
  std::atomic<int64_t> in_flight{0};  // engine requests submitted and not yet finished
  std::atomic<uint64_t> next_id{0};
  ResponsesStore responses;  // Responses API, store: true

  // "cmpl-" + 24 hex digits: unique per server, unguessable enough for logs.
  std::string new_id(const char* prefix);
};

}  // namespace loom::server
