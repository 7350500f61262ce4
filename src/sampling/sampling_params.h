// SamplingParams: how one request turns logits into tokens, with vLLM's field names, defaults
// and validation ranges (vllm/sampling_params.py). Server routes fill it from OpenAI/Anthropic
// JSON, the engine hands it to the Sampler every step. Nothing here knows about models or
// engines; `validate` only needs the vocabulary size.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "base/status.h"

namespace loom {

namespace structured {
class CompiledGrammar;  // src/structured/matcher.h
}

// Temperatures below this are greedy (vLLM's _SAMPLING_EPS): dividing logits by ~0 would only
// produce infinities, and the limit of softmax(l / T) as T → 0 is the argmax anyway.
inline constexpr float kGreedyTemperature = 1e-5f;

// Default cap on `logprobs` / `prompt_logprobs` (vLLM's --max-logprobs default; also the
// OpenAI API's limit for top_logprobs).
inline constexpr int32_t kDefaultMaxLogprobs = 20;

// Absolute bound on a logit_bias value (OpenAI and vLLM: [-100, 100]).
inline constexpr float kMaxLogitBias = 100.0f;

struct SamplingParams {
  // ---- Sampling distribution. Applied in vLLM v1's order, see sampler.h. ----

  // Softmax temperature, >= 0. Logits are divided by it before top-k/top-p/min-p.
  // Below kGreedyTemperature (so 0) the sampler is greedy: argmax, ties → lowest token id,
  // and top_k / top_p / min_p / seed have no effect.
  float temperature = 1.0f;
  // Keep only the `top_k` most likely tokens. 0 or -1 = off (vLLM accepts both); a value
  // >= the vocabulary size is also off. Ties at the boundary are broken by lowest token id.
  int32_t top_k = 0;
  // Nucleus sampling: keep the smallest set of most likely tokens whose probability mass
  // (after temperature, top-k and min-p) reaches top_p. In (0, 1]; 1 = off.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p × (probability of the most likely token).
  // In [0, 1]; 0 = off.
  float min_p = 0.0f;

  // ---- Penalties (vLLM semantics), applied to logits before temperature. ----

  // Tokens that occur in the prompt or in the output so far: a positive logit is divided by
  // it, a negative one multiplied (> 1 discourages repetition). > 0; 1 = off.
  float repetition_penalty = 1.0f;
  // Subtracted once from the logit of every token that occurs in the OUTPUT so far (the prompt
  // does not count). In [-2, 2]; 0 = off.
  float presence_penalty = 0.0f;
  // Subtracted count times from the logit of a token that occurs count times in the OUTPUT so
  // far. In [-2, 2]; 0 = off.
  float frequency_penalty = 0.0f;

  // (token id, bias) pairs added to the logits before penalties (OpenAI's logit_bias). Ids
  // must be in [0, n_vocab) and unique, biases in [-100, 100]. -100 effectively bans a token,
  // +100 effectively forces it.
  std::vector<std::pair<int32_t, float>> logit_bias;
  // If non-empty, only these token ids can be sampled (vLLM's allowed_token_ids); every other
  // logit becomes -inf. Ids must be in [0, n_vocab).
  std::vector<int32_t> allowed_token_ids;

  // Seed of the request's random generator. Same seed + same logits = same tokens, whatever
  // else shares the batch. nullopt = seeded from std::random_device.
  std::optional<uint64_t> seed;

  // ---- Length and stopping (enforced by the engine / output processor, not the sampler). ----

  // Number of output sequences to generate for the prompt (>= 1). Sequence i uses the random
  // stream (seed, i), see Rng.
  int32_t n = 1;
  // Maximum number of generated tokens per sequence (>= 1). The engine also stops at the
  // model's context length.
  int32_t max_tokens = 16;
  // EOS and stop_token_ids cannot be sampled before this many tokens were generated (in
  // [0, max_tokens]); see min_tokens_suppressed_ids() in sampler.h.
  int32_t min_tokens = 0;
  // Keep generating after the model's EOS token (EOS is then an ordinary token).
  bool ignore_eos = false;
  // Stop when the detokenized output contains one of these strings (non-empty). The string
  // itself is cut from the output unless include_stop_str_in_output.
  std::vector<std::string> stop;
  // Stop after sampling one of these token ids (each in [0, n_vocab)). The token is not
  // returned as text (it is still counted in usage), like vLLM.
  std::vector<int32_t> stop_token_ids;
  bool include_stop_str_in_output = false;

  // ---- Structured output. ----

  // Constrained generation (src/structured): every sampled token keeps the output a prefix of
  // a sentence of this grammar, EOS is allowed exactly when the grammar can end, and the
  // sequence finishes ("stop") as soon as nothing but the end can follow. Compiled for the
  // model's vocabulary (the engine checks its size). null = free text.
  std::shared_ptr<const structured::CompiledGrammar> grammar;

  // ---- Output shaping. ----

  // -1: no logprobs. 0: the sampled token's logprob only. k > 0: also the k most likely
  // tokens. Values are the log-softmax of the RAW model logits, before penalties, bias,
  // temperature and filtering (vLLM's default logprobs_mode "raw_logprobs").
  int32_t logprobs = -1;
  // Same as logprobs, for every prompt position (the prompt's first token has none).
  int32_t prompt_logprobs = -1;
  // Detokenizer options (vLLM defaults).
  bool skip_special_tokens = true;
  // Control tokens whose text skip_special_tokens keeps: a chat output parser's markers
  // (chat::parser_markers), which some vocabularies make control tokens.
  std::vector<std::string> kept_special_tokens;
  bool spaces_between_special_tokens = true;

  // True when sampling is an argmax (temperature below kGreedyTemperature).
  bool is_greedy() const { return temperature < kGreedyTemperature; }
  // True when any of repetition/presence/frequency penalty is active: only then does the
  // engine need to keep a PenaltyState for the request.
  bool has_penalties() const {
    return repetition_penalty != 1.0f || presence_penalty != 0.0f || frequency_penalty != 0.0f;
  }

  // Checks every field against the ranges above for a model with `n_vocab` tokens. The
  // message names the field, the allowed range and the value received, e.g.
  // "top_p must be in (0, 1], got 1.5".
  Status validate(int32_t n_vocab, int32_t max_logprobs = kDefaultMaxLogprobs) const;
};

}  // namespace loom
