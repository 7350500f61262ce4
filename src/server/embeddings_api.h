// Embedding and rerank routes on the same engine as generation (a pooling request is
// scheduled, batched and chunked like any other; see PoolingParams in include/loom/engine.h):
//   POST /v1/embeddings          OpenAI: input string | strings | token ids | lists of ids,
//                                encoding_format float | base64, dimensions, user
//   POST /v1/rerank (/rerank, /v2/rerank)  Jina / Cohere shape, as vLLM and llama-server:
//                                query, documents (strings or {"text"}), top_n,
//                                return_documents; results sorted by relevance_score
//   POST /api/embed              Ollama: input string | strings, truncate, dimensions,
//                                options, keep_alive
//   POST /api/embeddings         Ollama's legacy route: prompt → {"embedding": [...]}
// What a route may do depends on the server's task (`loom serve --task`, else the model's
// pooling metadata): embed serves the embedding routes, rerank /v1/rerank, generate neither
// (a 400 that says how to start an embedding server). Every unknown field is a 400 naming it.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "loom/engine.h"
#include "model/config.h"
#include "server/api_error.h"
#include "server/json_fields.h"

namespace loom {
class Tokenizer;
}

namespace loom::server {

struct ServerContext;

enum class ServerTask { kGenerate, kEmbed, kRerank };
std::string_view server_task_name(ServerTask t);  // "generate", "embed", "rerank"

// How the server pools and scores, fixed when the engine is set (resolve_pooling_setup).
struct PoolingSetup {
  ServerTask task = ServerTask::kGenerate;
  PoolingParams::Mode mode = PoolingParams::Mode::kLast;  // embeddings
  // Rerank: the classifier head (cls.output, 1 or 2 outputs), else these LM-head logits
  // ("yes", "no"); the prompt with {query} and {document}.
  bool rerank_classify = false;
  int32_t rerank_outputs = 0;  // classifier outputs (1: sigmoid of it; 2: softmax, first)
  std::vector<int32_t> rerank_tokens;
  std::string rerank_template;
};

// The Qwen3-Reranker prompt (its model card's; llama.cpp's converter stores the same text as
// tokenizer.chat_template.rerank), used when the model carries none.
extern const char* const kQwen3RerankTemplate;

// task: "" (from the model: pooling_type rank → rerank, another pooling type → embed, none →
// generate), "generate", "embed" or "rerank". Errors name --task: an unknown task, a rerank
// server whose model has neither a classifier head nor "yes"/"no" tokens, a classifier head of
// more than two outputs.
Result<PoolingSetup> resolve_pooling_setup(const std::string& task, const ModelConfig& config,
                                           const Tokenizer* tokenizer);

// The relevance score of a rerank request's pooled output (classifier outputs or the yes/no
// logits): sigmoid(yes - no), i.e. the softmax's first entry; one output: its sigmoid.
double rerank_score(const PoolingSetup& setup, const std::vector<float>& pooled);

// One request of any of the three routes, parsed and validated.
struct PoolingJobSpec {
  // kOllamaEmbeddings: Ollama's legacy /api/embeddings ({"embedding": [...]}, not normalised).
  enum class Api { kOpenAIEmbeddings, kOllamaEmbed, kOllamaEmbeddings, kRerank };
  Api api = Api::kOpenAIEmbeddings;
  std::string model;
  std::vector<std::vector<int32_t>> inputs;  // one engine request each
  PoolingParams params;
  int32_t dimensions = 0;  // > 0: the first `dimensions` values, renormalised
  bool base64 = false;     // OpenAI encoding_format "base64"
  // Rerank.
  std::vector<std::string> documents;
  int32_t top_n = 0;  // 0: all
  bool return_documents = false;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
};

std::optional<ApiError> parse_openai_embeddings(const ServerContext& ctx, const Json& body,
                                                PoolingJobSpec* spec);
std::optional<ApiError> parse_ollama_embed(const ServerContext& ctx, const Json& body,
                                           PoolingJobSpec* spec);
// Ollama's legacy /api/embeddings: {"model", "prompt", "options"?, "keep_alive"?}. An empty
// prompt (like /api/embed's empty input) only asks for the model to be loaded: no inputs.
std::optional<ApiError> parse_ollama_embeddings(const ServerContext& ctx, const Json& body,
                                                PoolingJobSpec* spec);
std::optional<ApiError> parse_rerank(const ServerContext& ctx, const Json& body,
                                     PoolingJobSpec* spec);

// The first n values of v, L2-normalised again (Matryoshka truncation).
std::vector<float> truncate_embedding(const std::vector<float>& v, int32_t n);
// Little-endian float32 bytes in base64 (OpenAI's encoding_format "base64").
std::string base64_floats(const std::vector<float>& v);

}  // namespace loom::server
