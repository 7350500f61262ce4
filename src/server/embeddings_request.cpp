// Parsing of /v1/embeddings, /api/embed and /v1/rerank requests, and the server's pooling
// setup (see embeddings_api.h).
#include <algorithm>
#include <cmath>
#include <cstring>

#include "engine/pooling.h"
#include "loom/tokenizer.h"
#include "model/model.h"
#include "model/pooling_config.h"
#include "server/embeddings_api.h"
#include "server/ollama_api.h"
#include "server/openai_request.h"
#include "server/server_context.h"

namespace loom::server {

const char* const kQwen3RerankTemplate =
    "<|im_start|>system\nJudge whether the Document meets the requirements based on the Query "
    "and the Instruct provided. Note that the answer can only be \"yes\" or \"no\".<|im_end|>\n"
    "<|im_start|>user\n<Instruct>: Given a web search query, retrieve relevant passages that "
    "answer the query\n<Query>: {query}\n<Document>: {document}<|im_end|>\n"
    "<|im_start|>assistant\n<think>\n\n</think>\n\n";

namespace {

// OpenAI's limit on inputs per /v1/embeddings request; documents per rerank request likewise.
constexpr size_t kMaxInputs = 2048;

std::optional<ApiError> check_fields(const Json& body, std::initializer_list<const char*> known,
                                     const char* api) {
  for (const auto& [k, v] : body.items()) {
    bool ok = false;
    for (const char* n : known) ok = ok || k == n;
    if (!ok) return bad_request("field \"" + k + "\" is not supported by loom's " + api, k);
  }
  return std::nullopt;
}

// The task a route needs; the server's other tasks get a 400 that says how to start one.
std::optional<ApiError> check_task(const ServerContext& ctx, ServerTask need, const char* route) {
  const ServerTask have = ctx.pooling.task;
  if (have == need) return std::nullopt;
  std::string msg = std::string(route) + " needs a server started with --task " +
                    std::string(server_task_name(need)) + "; this one runs task " +
                    std::string(server_task_name(have));
  if (have == ServerTask::kGenerate && need == ServerTask::kEmbed)
    msg +=
        " (the model's metadata names no pooling: it is a generative model; `loom serve "
        "--task embed` pools its last-token hidden states anyway)";
  else if (have == ServerTask::kGenerate && need == ServerTask::kRerank)
    msg +=
        " (the model's metadata names no pooling: it is a generative model; serve a reranker "
        "such as Qwen3-Reranker, or a model with a classifier head, with `loom serve --task "
        "rerank`)";
  ApiError e = bad_request(std::move(msg), "model");
  return e;
}

std::vector<int32_t> encode(const ServerContext& ctx, const std::string& text) {
  return ctx.tokenizer->encode(text, /*add_special=*/true, /*parse_special=*/true);
}

// input: a string, a list of strings, a list of token ids, or a list of such lists.
std::optional<ApiError> read_inputs(const ServerContext& ctx, const Json& input, bool allow_ids,
                                    std::vector<std::vector<int32_t>>* out) {
  auto need_tokenizer = [&]() -> std::optional<ApiError> {
    if (!ctx.tokenizer)
      return bad_request("this model has no tokenizer: send the input as token ids", "input");
    return std::nullopt;
  };
  const char* shapes = allow_ids ? "a string, a list of strings, a list of token ids or a list of "
                                   "token id lists"
                                 : "a string or a list of strings";
  if (input.is_string()) {
    if (auto e = need_tokenizer()) return e;
    out->push_back(encode(ctx, input.get<std::string>()));
  } else if (input.is_array()) {
    if (input.empty()) return bad_request("input must not be an empty list", "input");
    if (input.size() > kMaxInputs)
      return bad_request("at most " + std::to_string(kMaxInputs) + " inputs per request (got " +
                             std::to_string(input.size()) + ")",
                         "input");
    auto ids_of = [&](const Json& list, std::vector<int32_t>* ids) -> std::optional<ApiError> {
      for (const Json& t : list) {
        int64_t v = 0;
        if (!json_to_int(t, 0, ctx.n_vocab - 1, &v))
          return bad_request(
              "input: token ids must be integers in [0, " + std::to_string(ctx.n_vocab) + ")",
              "input");
        ids->push_back(static_cast<int32_t>(v));
      }
      return std::nullopt;
    };
    const Json& first = input[0];
    if (first.is_string()) {
      if (auto e = need_tokenizer()) return e;
      for (const Json& s : input) {
        if (!s.is_string())
          return bad_request("input: a list of strings must hold only strings", "input");
        out->push_back(encode(ctx, s.get<std::string>()));
      }
    } else if (allow_ids && first.is_array()) {
      for (const Json& ids : input) {
        if (!ids.is_array())
          return bad_request("input: a list of token id lists must hold only lists", "input");
        out->emplace_back();
        if (auto e = ids_of(ids, &out->back())) return e;
      }
    } else if (allow_ids && first.is_number()) {
      out->emplace_back();
      if (auto e = ids_of(input, &out->back())) return e;
    } else {
      return bad_request(
          std::string("input must be ") + shapes + "; found a list of " + json_type_name(first),
          "input");
    }
  } else {
    return bad_request(std::string("input must be ") + shapes + "; got " + json_type_name(input),
                       "input");
  }
  for (size_t i = 0; i < out->size(); ++i)
    if ((*out)[i].empty())
      return bad_request("input[" + std::to_string(i) + "] is empty (no tokens)", "input");
  return std::nullopt;
}

// Longest input against the server's limits; `truncate` (Ollama) cuts instead.
std::optional<ApiError> check_lengths(const ServerContext& ctx, bool truncate,
                                      std::vector<std::vector<int32_t>>* inputs,
                                      const char* param) {
  int64_t limit = ctx.max_model_len;
  const char* what = "max_model_len";
  if (ctx.options.max_prompt_tokens > 0 && ctx.options.max_prompt_tokens < limit) {
    limit = ctx.options.max_prompt_tokens;
    what = "the server's --max-prompt-tokens";
  }
  for (size_t i = 0; i < inputs->size(); ++i) {
    std::vector<int32_t>& in = (*inputs)[i];
    if (static_cast<int64_t>(in.size()) <= limit) continue;
    if (truncate) {
      in.resize(static_cast<size_t>(limit));
      continue;
    }
    return bad_request(std::string(param) + "[" + std::to_string(i) + "] has " +
                           std::to_string(in.size()) + " tokens, over " + what + " (" +
                           std::to_string(limit) + ")",
                       param);
  }
  return std::nullopt;
}

std::optional<ApiError> read_dimensions(const ServerContext& ctx, FieldReader& r,
                                        PoolingJobSpec* spec) {
  const int32_t E = ctx.engine->engine().model().config().n_embd;
  if (auto d = r.opt_int("dimensions", INT32_MIN, INT32_MAX)) {
    if (*d < 1 || *d > E)
      return bad_request("dimensions must be in [1, " + std::to_string(E) +
                             "] (the model's embedding size); got " + std::to_string(*d),
                         "dimensions");
    spec->dimensions = static_cast<int32_t>(*d);
  }
  return r.error();
}

}  // namespace

std::string_view server_task_name(ServerTask t) {
  switch (t) {
    case ServerTask::kEmbed:
      return "embed";
    case ServerTask::kRerank:
      return "rerank";
    case ServerTask::kGenerate:
      break;
  }
  return "generate";
}

Result<PoolingSetup> resolve_pooling_setup(const std::string& task, const ModelConfig& c,
                                           const Tokenizer* tok) {
  PoolingSetup s;
  const PoolingType p = c.pooling;
  if (task.empty()) {
    s.task = p == PoolingType::kRank          ? ServerTask::kRerank
             : p == PoolingType::kUnspecified ? ServerTask::kGenerate
                                              : ServerTask::kEmbed;
  } else if (task == "generate") {
    s.task = ServerTask::kGenerate;
  } else if (task == "embed") {
    s.task = ServerTask::kEmbed;
  } else if (task == "rerank") {
    s.task = ServerTask::kRerank;
  } else {
    return invalid_argument("--task: unknown task '" + task + "' (generate, embed, rerank)");
  }
  // Embeddings pool as the model says; a model that says nothing (or "none": per-token
  // output, which no embeddings API returns) pools its last token, as vLLM does for decoders.
  s.mode = p == PoolingType::kMean  ? PoolingParams::Mode::kMean
           : p == PoolingType::kCls ? PoolingParams::Mode::kCls
                                    : PoolingParams::Mode::kLast;
  if (s.task != ServerTask::kRerank) return s;
  s.rerank_template = c.rerank_template.empty() ? kQwen3RerankTemplate : c.rerank_template;
  if (c.n_cls_out > 0) {
    if (c.n_cls_out > 2)
      return invalid_argument("--task rerank: the classifier head has " +
                              std::to_string(c.n_cls_out) +
                              " outputs; loom scores with one (sigmoid) or two (yes/no softmax)");
    s.rerank_classify = true;
    s.rerank_outputs = c.n_cls_out;
    return s;
  }
  // A Qwen3-Reranker as a causal LM: the LM head's "yes" and "no" logits.
  if (!tok)
    return invalid_argument(
        "--task rerank: the model has no classifier head and no tokenizer to "
        "find its \"yes\" and \"no\" tokens in");
  const std::optional<int32_t> yes = tok->find_token("yes"), no = tok->find_token("no");
  if (!yes || !no)
    return invalid_argument(
        "--task rerank: the model has no classifier head (cls.output.weight) "
        "and its vocabulary has no \"yes\" / \"no\" tokens to score with");
  s.rerank_tokens = {*yes, *no};
  return s;
}

double rerank_score(const PoolingSetup& s, const std::vector<float>& v) {
  if (v.size() == 1) return 1.0 / (1.0 + std::exp(-static_cast<double>(v[0])));
  if (v.size() < 2) return 0.0;
  return 1.0 / (1.0 + std::exp(static_cast<double>(v[1]) - v[0]));
}

std::vector<float> truncate_embedding(const std::vector<float>& v, int32_t n) {
  std::vector<float> out(v.begin(), v.begin() + std::min<size_t>(v.size(), n));
  l2_normalize(out);
  return out;
}

std::string base64_floats(const std::vector<float>& v) {
  static const char kAlphabet[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::vector<uint8_t> bytes(v.size() * 4);
  for (size_t i = 0; i < v.size(); ++i) {
    uint32_t u;
    std::memcpy(&u, &v[i], 4);
    for (int b = 0; b < 4; ++b) bytes[i * 4 + b] = static_cast<uint8_t>(u >> (8 * b));  // LE
  }
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const uint32_t n = (uint32_t{bytes[i]} << 16) |
                       (i + 1 < bytes.size() ? uint32_t{bytes[i + 1]} << 8 : 0) |
                       (i + 2 < bytes.size() ? uint32_t{bytes[i + 2]} : 0);
    out += kAlphabet[(n >> 18) & 63];
    out += kAlphabet[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kAlphabet[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kAlphabet[n & 63] : '=';
  }
  return out;
}

std::optional<ApiError> parse_openai_embeddings(const ServerContext& ctx, const Json& body,
                                                PoolingJobSpec* spec) {
  if (auto e = check_fields(body, {"input", "model", "encoding_format", "dimensions", "user"},
                            "embeddings API"))
    return e;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  if (auto e = check_task(ctx, ServerTask::kEmbed, "/v1/embeddings")) return e;
  spec->api = PoolingJobSpec::Api::kOpenAIEmbeddings;
  const Json* input = r.raw("input");
  if (!input) return bad_request("input is required", "input");
  if (auto fmt = r.opt_string("encoding_format")) {
    if (*fmt == "base64")
      spec->base64 = true;
    else if (*fmt != "float")
      return bad_request("encoding_format must be \"float\" or \"base64\"; got \"" + *fmt + "\"",
                         "encoding_format");
  }
  r.opt_string("user");  // for abuse monitoring at OpenAI; nothing to do with it here
  if (auto e = read_dimensions(ctx, r, spec)) return e;
  if (!r.ok()) return r.error();
  if (auto e = read_inputs(ctx, *input, /*allow_ids=*/true, &spec->inputs)) return e;
  if (auto e = check_lengths(ctx, /*truncate=*/false, &spec->inputs, "input")) return e;
  spec->params.mode = ctx.pooling.mode;
  spec->params.normalize = true;
  return std::nullopt;
}

namespace {

// What /api/embed and /api/embeddings share: model (required, as Ollama requires it),
// keep_alive, options (num_ctx only) and the embedding task.
std::optional<ApiError> read_ollama_common(const ServerContext& ctx, const Json& body,
                                           const char* route, FieldReader& r, PoolingJobSpec* spec,
                                           std::optional<int64_t>* num_ctx) {
  if (auto e = require_ollama_model(body)) return e;
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  if (auto e = check_task(ctx, ServerTask::kEmbed, route)) return e;
  if (auto e = check_keep_alive(r.raw("keep_alive"))) return e;
  if (const Json* o = r.opt_object("options")) {
    // Only num_ctx bears on embeddings (it bounds truncation); sampling options do not apply.
    for (const auto& [k, v] : o->items())
      if (k != "num_ctx")
        return bad_request("options." + k + " is not supported for embeddings (only num_ctx)",
                           "options");
    if (o->contains("num_ctx")) {
      int64_t n = 0;
      if (!json_to_int((*o)["num_ctx"], 1, INT32_MAX, &n))
        return bad_request("options.num_ctx must be a positive integer", "options");
      *num_ctx = n;
    }
  }
  return r.error();
}

// options.num_ctx bounds each input (cut when truncate, else a 400), then the server's limits.
std::optional<ApiError> fit_inputs(const ServerContext& ctx, std::optional<int64_t> num_ctx,
                                   bool truncate, const char* param, PoolingJobSpec* spec) {
  if (num_ctx) {
    for (auto& in : spec->inputs) {
      if (static_cast<int64_t>(in.size()) <= *num_ctx) continue;
      if (!truncate)
        return bad_request(std::string("an input is longer than options.num_ctx and truncate is "
                                       "false"),
                           param);
      in.resize(static_cast<size_t>(*num_ctx));
    }
  }
  return check_lengths(ctx, truncate, &spec->inputs, param);
}

}  // namespace

std::optional<ApiError> parse_ollama_embed(const ServerContext& ctx, const Json& body,
                                           PoolingJobSpec* spec) {
  if (auto e =
          check_fields(body, {"model", "input", "truncate", "options", "keep_alive", "dimensions"},
                       "Ollama API"))
    return e;
  FieldReader r(body);
  spec->api = PoolingJobSpec::Api::kOllamaEmbed;
  std::optional<int64_t> num_ctx;
  if (auto e = read_ollama_common(ctx, body, "/api/embed", r, spec, &num_ctx)) return e;
  const Json* input = r.raw("input");
  const bool truncate = r.opt_bool("truncate").value_or(true);
  if (auto e = read_dimensions(ctx, r, spec)) return e;
  if (!r.ok()) return r.error();
  // Ollama answers an empty input with no embeddings (a request that only loads the model).
  if (!input || (input->is_string() && input->get<std::string>().empty()) ||
      (input->is_array() && input->empty()))
    return std::nullopt;
  if (auto e = read_inputs(ctx, *input, /*allow_ids=*/false, &spec->inputs)) return e;
  if (auto e = fit_inputs(ctx, num_ctx, truncate, "input", spec)) return e;
  spec->params.mode = ctx.pooling.mode;
  spec->params.normalize = true;
  return std::nullopt;
}

std::optional<ApiError> parse_ollama_embeddings(const ServerContext& ctx, const Json& body,
                                                PoolingJobSpec* spec) {
  if (auto e = check_fields(body, {"model", "prompt", "options", "keep_alive"}, "Ollama API"))
    return e;
  FieldReader r(body);
  spec->api = PoolingJobSpec::Api::kOllamaEmbeddings;
  std::optional<int64_t> num_ctx;
  if (auto e = read_ollama_common(ctx, body, "/api/embeddings", r, spec, &num_ctx)) return e;
  auto prompt = r.opt_string("prompt");
  if (!r.ok()) return r.error();
  if (!prompt || prompt->empty()) return std::nullopt;  // load only, as Ollama answers it
  if (!ctx.tokenizer) return bad_request("this model has no tokenizer", "prompt");
  spec->inputs.push_back(encode(ctx, *prompt));
  if (auto e = fit_inputs(ctx, num_ctx, /*truncate=*/false, "prompt", spec)) return e;
  spec->params.mode = ctx.pooling.mode;
  spec->params.normalize = false;  // the legacy route returns the raw pooled vector
  return std::nullopt;
}

std::optional<ApiError> parse_rerank(const ServerContext& ctx, const Json& body,
                                     PoolingJobSpec* spec) {
  if (auto e = check_fields(body, {"model", "query", "documents", "top_n", "return_documents"},
                            "rerank API"))
    return e;
  FieldReader r(body);
  if (auto e = check_model(ctx, r, &spec->model)) return e;
  if (auto e = check_task(ctx, ServerTask::kRerank, "/v1/rerank")) return e;
  spec->api = PoolingJobSpec::Api::kRerank;
  auto query = r.opt_string("query");
  if (!r.ok()) return r.error();
  if (!query) return bad_request("query is required", "query");
  const Json* docs = r.raw("documents");
  if (!docs) return bad_request("documents is required", "documents");
  if (!docs->is_array() || docs->empty())
    return bad_request("documents must be a non-empty list of strings or {\"text\": ...} objects",
                       "documents");
  if (docs->size() > kMaxInputs)
    return bad_request("at most " + std::to_string(kMaxInputs) + " documents per request",
                       "documents");
  for (size_t i = 0; i < docs->size(); ++i) {
    const Json& d = (*docs)[i];
    const std::string w = "documents[" + std::to_string(i) + "]";
    if (d.is_string()) {
      spec->documents.push_back(d.get<std::string>());
    } else if (d.is_object()) {
      for (const auto& [k, v] : d.items())
        if (k != "text")
          return bad_request(w + "." + k + " is not supported (only text)", "documents");
      if (!d.contains("text") || !d["text"].is_string())
        return bad_request(w + ".text must be a string", "documents");
      spec->documents.push_back(d["text"].get<std::string>());
    } else {
      return bad_request(w + " must be a string or {\"text\": ...}; got " + json_type_name(d),
                         "documents");
    }
  }
  if (auto n = r.opt_int("top_n", 1, INT32_MAX)) spec->top_n = static_cast<int32_t>(*n);
  spec->return_documents = r.opt_bool("return_documents").value_or(true);
  if (!r.ok()) return r.error();
  if (!ctx.tokenizer)
    return bad_request("this model has no tokenizer to format the rerank prompt with", "query");
  // The reranker's prompt per document, {query} and {document} filled in.
  const std::string& tmpl = ctx.pooling.rerank_template;
  for (const std::string& doc : spec->documents) {
    std::string text;
    for (size_t i = 0; i < tmpl.size();) {
      if (tmpl.compare(i, 7, "{query}") == 0) {
        text += *query;
        i += 7;
      } else if (tmpl.compare(i, 10, "{document}") == 0) {
        text += doc;
        i += 10;
      } else {
        text += tmpl[i++];
      }
    }
    spec->inputs.push_back(
        ctx.tokenizer->encode(text, /*add_special=*/false, /*parse_special=*/true));
  }
  if (auto e = check_lengths(ctx, /*truncate=*/false, &spec->inputs, "documents")) return e;
  spec->params.mode = PoolingParams::Mode::kLast;
  spec->params.normalize = false;
  spec->params.classify = ctx.pooling.rerank_classify;
  spec->params.logit_tokens = ctx.pooling.rerank_tokens;
  return std::nullopt;
}

}  // namespace loom::server
