// SamplingParams::validate: ranges follow vllm/sampling_params.py so that a request vLLM
// accepts is accepted here and a request it rejects is rejected with a similar message.
#include "sampling/sampling_params.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace loom {
namespace {

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

Status bad(const std::string& what, double got) {
  return invalid_argument(what + ", got " + num(got));
}

}  // namespace

Status SamplingParams::validate(int32_t n_vocab, int32_t max_logprobs) const {
  if (n_vocab <= 0) return internal_error("SamplingParams::validate: n_vocab must be positive");
  // NaN fails every comparison below, so each check is written as "!(ok)".
  if (!(temperature >= 0.0f) || !std::isfinite(temperature))
    return bad("temperature must be a finite number >= 0 (0 means greedy)", temperature);
  if (top_k < -1)
    return bad("top_k must be -1 or 0 (disabled) or >= 1", top_k);
  if (!(top_p > 0.0f && top_p <= 1.0f)) return bad("top_p must be in (0, 1]", top_p);
  if (!(min_p >= 0.0f && min_p <= 1.0f)) return bad("min_p must be in [0, 1]", min_p);
  if (!(repetition_penalty > 0.0f) || !std::isfinite(repetition_penalty))
    return bad("repetition_penalty must be a finite number > 0 (1 = off)", repetition_penalty);
  if (!(presence_penalty >= -2.0f && presence_penalty <= 2.0f))
    return bad("presence_penalty must be in [-2, 2]", presence_penalty);
  if (!(frequency_penalty >= -2.0f && frequency_penalty <= 2.0f))
    return bad("frequency_penalty must be in [-2, 2]", frequency_penalty);

  for (const auto& [id, bias] : logit_bias) {
    if (id < 0 || id >= n_vocab)
      return invalid_argument("logit_bias token id " + std::to_string(id) + " is out of range [0, " +
                              std::to_string(n_vocab) + ")");
    if (!(bias >= -kMaxLogitBias && bias <= kMaxLogitBias))
      return bad("logit_bias value for token " + std::to_string(id) + " must be in [-100, 100]",
                 bias);
  }
  if (logit_bias.size() > 1) {
    std::vector<int32_t> ids;
    ids.reserve(logit_bias.size());
    for (const auto& e : logit_bias) ids.push_back(e.first);
    std::sort(ids.begin(), ids.end());
    auto dup = std::adjacent_find(ids.begin(), ids.end());
    if (dup != ids.end())
      return invalid_argument("logit_bias lists token id " + std::to_string(*dup) + " twice");
  }
  for (int32_t id : allowed_token_ids) {
    if (id < 0 || id >= n_vocab)
      return invalid_argument("allowed_token_ids contains " + std::to_string(id) +
                              ", out of range [0, " + std::to_string(n_vocab) + ")");
  }

  if (n < 1) return bad("n must be >= 1", n);
  if (max_tokens < 1) return bad("max_tokens must be >= 1", max_tokens);
  if (min_tokens < 0) return bad("min_tokens must be >= 0", min_tokens);
  if (min_tokens > max_tokens)
    return invalid_argument("min_tokens must be <= max_tokens (" + std::to_string(max_tokens) +
                            "), got " + std::to_string(min_tokens));
  for (const std::string& s : stop) {
    if (s.empty()) return invalid_argument("stop cannot contain an empty string");
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0 || id >= n_vocab)
      return invalid_argument("stop_token_ids contains " + std::to_string(id) +
                              ", out of range [0, " + std::to_string(n_vocab) + ")");
  }

  int32_t max_lp = std::min(max_logprobs, n_vocab);
  if (logprobs < -1 || logprobs > max_lp)
    return invalid_argument("logprobs must be -1 (none) or in [0, " + std::to_string(max_lp) +
                            "], got " + std::to_string(logprobs));
  if (prompt_logprobs < -1 || prompt_logprobs > max_lp)
    return invalid_argument("prompt_logprobs must be -1 (none) or in [0, " +
                            std::to_string(max_lp) + "], got " + std::to_string(prompt_logprobs));
  return Status::ok();
}

}  // namespace loom
