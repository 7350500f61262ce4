// Sampler: one logits row + SamplingParams + the request's history and RNG → the next token
// and, when asked, its logprobs. One Sampler per engine thread: it owns scratch buffers that
// grow to the vocabulary size once and are reused, so steady-state calls do not allocate.
//
// Pipeline (vLLM v1's order, vllm/v1/sample/sampler.py):
//   1. logprobs, when requested, are taken from the RAW logits (log_softmax of the model's
//      output, before anything below — vLLM's default logprobs_mode "raw_logprobs");
//   2. allowed_token_ids: every other token → -inf; then the grammar's token bitmask
//      (structured outputs, src/structured): tokens whose bit is 0 → -inf;
//   3. suppressed ids (min_tokens: EOS / stop ids not yet allowed) → -inf;
//   4. logit_bias added;
//   5. penalties: repetition (prompt + output tokens: positive logit / r, negative × r), then
//      logit -= frequency × count + presence × [count > 0] (output tokens only);
//   6. greedy (temperature < kGreedyTemperature): argmax, ties → lowest id; no RNG draw.
//      Otherwise: temperature → min_p → top_k → top_p → one draw from the request's Rng.
//      min_p and top_k commute; min_p before top_p matters and follows vLLM (min_p is one of
//      vLLM's "argmax-invariant" processors, applied before its top-k/top-p sampler).
// Every random sample consumes exactly one Rng::uniform(), so a request's token stream
// depends only on its seed and its logits.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "base/status.h"
#include "sampling/penalty_state.h"
#include "sampling/rng.h"
#include "sampling/sampling_params.h"
#include "sampling/top_select.h"

namespace loom {

struct TokenLogprob {
  int32_t token;
  float logprob;
};

// Logprobs at one position (a sampled token, or a prompt token for prompt_logprobs).
struct PositionLogprobs {
  int32_t token = -1;  // the token described
  float logprob = 0;   // its log-softmax over the raw logits (-inf if its logit is -inf)
  // vLLM's rank: the number of tokens whose logit is >= this token's (1 = most likely; a tie
  // counts against it).
  int32_t rank = 0;
  // The `num_top` most likely tokens, logprob descending, ties → lower id. Their capacity is
  // kept between calls.
  std::vector<TokenLogprob> top;
};

struct SampleOutput {
  int32_t token = -1;
  bool has_logprobs = false;  // params.logprobs >= 0
  PositionLogprobs logprobs;  // valid when has_logprobs; top has params.logprobs entries
};

class Sampler {
 public:
  // Samples the next token from `logits` (one row, size = n_vocab; not modified).
  //   params:     validated SamplingParams (validate(n_vocab)); ranges are not re-checked,
  //               but out-of-vocabulary ids are still refused rather than written.
  //   penalties:  the request's history; may be null when !params.has_penalties().
  //   suppressed: ids that must not be sampled now (see min_tokens_suppressed_ids); may be
  //               empty. Ids outside the vocabulary are ignored.
  //   rng:        the request's (sequence's) generator; untouched when greedy.
  //   bitmask:    empty, or one bit per token (bit id % 32 of word id / 32): tokens whose bit
  //               is 0 cannot be sampled (a grammar's mask, see structured/matcher.h).
  // Errors: kInvalidArgument when no token is sampleable (every logit -inf/NaN after the
  // masks, e.g. allowed_token_ids ⊆ suppressed ids) or an id is outside the vocabulary.
  Status sample(std::span<const float> logits, const SamplingParams& params,
                const PenaltyState* penalties, std::span<const int32_t> suppressed, Rng& rng,
                SampleOutput* out, std::span<const uint32_t> bitmask = {});

  // sample() without the logprobs: the token alone, and when `probs` is given (the
  // vocabulary's size) the distribution it was drawn from, as distribution() gives it, from
  // the same pass (a sampling draft's proposal and its q).
  Status draw(std::span<const float> logits, const SamplingParams& params,
              const PenaltyState* penalties, std::span<const int32_t> suppressed, Rng& rng,
              int32_t* token, std::span<const uint32_t> bitmask = {}, std::span<float> probs = {});

  // Steps 2-5 only: the logits the distribution is built from, before temperature and the
  // top-k / top-p / min-p cuts (a rejection test's p needs those too: spec/rejection.h), e.g.
  // for debugging. The view stays valid until the next call on this Sampler. Same errors as
  // sample().
  Result<std::span<const float>> process(std::span<const float> logits,
                                         const SamplingParams& params,
                                         const PenaltyState* penalties,
                                         std::span<const int32_t> suppressed,
                                         std::span<const uint32_t> bitmask = {});

  // The distribution sample() draws from (steps 2-6) as probabilities over the vocabulary in
  // *probs (resized to it; the tokens temperature, min_p, top_k and top_p leave out get 0);
  // greedy: all of it on the argmax. A speculative verify's target distribution p and a
  // sampling draft's q (spec/rejection.h). Same errors as sample().
  Status distribution(std::span<const float> logits, const SamplingParams& params,
                      const PenaltyState* penalties, std::span<const int32_t> suppressed,
                      std::vector<float>* probs, std::span<const uint32_t> bitmask = {});

  // Raw logprobs of `token` and the `num_top` most likely tokens (clamped to the vocabulary)
  // of one logits row: the prompt_logprobs path and step 1 above.
  void logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                PositionLogprobs* out);

 private:
  // Grows the scratch buffers to a vocabulary of n (once per vocabulary size).
  void ensure_scratch(size_t n);
  // Copies logits into work_ and applies steps 2-5; fails if an id is outside the vocabulary.
  Status apply_processors(std::span<const float> logits, const SamplingParams& params,
                          const PenaltyState* penalties, std::span<const int32_t> suppressed,
                          std::span<const uint32_t> bitmask);
  // Step 6's random branch up to its draw: the tokens it may draw and their weights, either
  // the first m entries of cand_ (a top-k or top-p cut) or all n with scratch_f_'s weights;
  // total: their sum. kArgmax: a +inf logit wins outright; kNone: nothing is sampleable.
  struct Weights {
    enum Kind { kNone, kArgmax, kListed, kRow } kind;
    int32_t m = 0;
    double total = 0.0;
  };
  Weights random_weights(const float* x, int32_t n, const SamplingParams& params);
  // The token random_weights' candidates give the uniform u01 (inverse CDF in their order).
  int32_t pick(const Weights& ws, double u01, const float* x, int32_t n);
  // Their probabilities over the vocabulary (n = probs.size(); the rest 0); false when none.
  bool write_probabilities(const Weights& ws, const float* x, int32_t n, std::span<float> probs);
  // Steps 2-5 into work_ when any applies, else the logits themselves.
  Result<const float*> processed(std::span<const float> logits, const SamplingParams& params,
                                 const PenaltyState* penalties, std::span<const int32_t> suppressed,
                                 std::span<const uint32_t> bitmask);

  std::vector<float> work_;                         // (n_vocab) processed logits
  std::vector<float> scratch_f_;                    // (n_vocab) exp weights
  std::vector<sampling_internal::Candidate> cand_;  // (<= n_vocab) sampling candidates
  sampling_internal::TopPScratch top_p_;
};

// Index of the largest finite-or-+inf entry of x[0, n), ties → lowest index; -1 if every
// entry is -inf or NaN. The greedy sampler.
int32_t argmax_logits(const float* x, int32_t n);

// The ids that min_tokens forbids now: empty once num_output_tokens >= params.min_tokens;
// before that, params.stop_token_ids plus `eos_ids` (unless params.ignore_eos, as vLLM).
// Clears *out first; reuses its capacity.
void min_tokens_suppressed_ids(const SamplingParams& params, std::span<const int32_t> eos_ids,
                               int64_t num_output_tokens, std::vector<int32_t>* out);

}  // namespace loom
