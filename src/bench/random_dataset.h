// The "random" dataset of `loom bench serve`: prompts of random token ids with requested
// lengths. When the server has /tokenize and /detokenize (vLLM's or llama.cpp's shape), the
// ids are turned into text and re-aligned through the server's own tokenizer until the text
// encodes to the requested length, so every server is measured on prompts of the same size.
// Without them, completions prompts go as token-id lists (OpenAI's `prompt: [ids]`).
#pragma once

#include <cstdint>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/http_client.h"

namespace loom::bench {

// The server's tokenizer over HTTP, in whichever shape it speaks.
class ServerTokenizer {
 public:
  // Null (not an error) when the server has no usable /tokenize + /detokenize.
  static std::unique_ptr<ServerTokenizer> probe(const BaseUrl& url, const std::string& model, const HttpOptions& http);

  Result<std::vector<int32_t>> tokenize(const std::string& text);
  Result<std::string> detokenize(const std::vector<int32_t>& ids);
  // The first id /detokenize refuses (or decodes to nothing), found by bisection: the usable
  // vocabulary size. Errors when every probed id is accepted.
  Result<int32_t> find_vocab_size();

 private:
  enum class Style { kVllm, kLlamaCpp };
  ServerTokenizer(BaseUrl url, std::string model, HttpOptions http, Style style)
      : url_(std::move(url)), model_(std::move(model)), http_(std::move(http)), style_(style) {}
  Result<HttpResponse> detokenize_raw(const std::vector<int32_t>& ids);

  BaseUrl url_;
  std::string model_;
  HttpOptions http_;
  Style style_;
};

struct RandomPrompt {
  bool is_text = false;        // text (aligned) or token ids
  std::string text;
  std::vector<int32_t> ids;
  int64_t prompt_len = 0;      // tokens the prompt should encode to
  int32_t output_len = 0;      // max tokens to request
};

struct RandomDatasetOptions {
  int32_t num_prompts = 0;
  int32_t input_len = 0;
  int32_t output_len = 0;
  double range_ratio = 0;      // lengths uniform in [len*(1-r), len*(1+r)]
  int32_t prefix_len = 0;      // shared prefix tokens, identical in every prompt
  uint64_t seed = 0;           // prompt bodies and lengths
  uint64_t prefix_seed = 0;    // the shared prefix
  int32_t vocab_size = 0;      // ids are drawn from [0, vocab_size)
  bool need_text = false;      // the endpoint cannot take token ids (chat)
};

// tokenizer may be null (then prompts are ids, or plain words when need_text).
Result<std::vector<RandomPrompt>> make_random_prompts(const RandomDatasetOptions& o, ServerTokenizer* tokenizer);

// Inclusive [lo, hi] range of lengths vLLM draws from for `len` and `ratio`.
std::pair<int32_t, int32_t> length_range(int32_t len, double ratio);

}  // namespace loom::bench
