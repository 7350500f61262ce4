// Sampler: logits processors (allowed ids, min_tokens suppression, logit_bias, penalties),
// greedy/random selection, raw logprobs. See sampler.h for the order and its vLLM origin.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

namespace loom {

using sampling_internal::Candidate;
using sampling_internal::select_top_k;
using sampling_internal::select_top_p;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

// expf of anything below this is 0 in float (the smallest denormal is ~1.4e-45 = e^-103.3):
// such tokens can never be drawn, so the sampler does not carry them as candidates.
constexpr float kUnderflowExponent = -104.0f;

std::string out_of_vocab(const char* what, int32_t id, int32_t n) {
  return std::string(what) + " token id " + std::to_string(id) + " is out of range [0, " +
         std::to_string(n) + ")";
}

}  // namespace

int32_t argmax_logits(const float* x, int32_t n) {
  int32_t best = -1;
  float best_v = kNegInf;
  for (int32_t i = 0; i < n; ++i) {
    if (x[i] > best_v) {  // strict: ties keep the lowest id; NaN never wins
      best_v = x[i];
      best = i;
    }
  }
  return best;
}

void min_tokens_suppressed_ids(const SamplingParams& params, std::span<const int32_t> eos_ids,
                               int64_t num_output_tokens, std::vector<int32_t>* out) {
  out->clear();
  if (num_output_tokens >= params.min_tokens) return;
  out->insert(out->end(), params.stop_token_ids.begin(), params.stop_token_ids.end());
  if (!params.ignore_eos) out->insert(out->end(), eos_ids.begin(), eos_ids.end());
}

Status Sampler::apply_processors(std::span<const float> logits, const SamplingParams& params,
                                 const PenaltyState* penalties,
                                 std::span<const int32_t> suppressed) {
  const int32_t n = static_cast<int32_t>(logits.size());
  work_.resize(n);  // no reallocation once grown to the vocabulary size
  if (!params.allowed_token_ids.empty()) {
    for (int32_t id : params.allowed_token_ids) {
      if (id < 0 || id >= n) return invalid_argument(out_of_vocab("allowed_token_ids", id, n));
    }
    std::fill(work_.begin(), work_.end(), kNegInf);
    for (int32_t id : params.allowed_token_ids) work_[id] = logits[id];
  } else {
    std::memcpy(work_.data(), logits.data(), sizeof(float) * n);
  }

  for (int32_t id : suppressed) {
    if (id >= 0 && id < n) work_[id] = kNegInf;
  }
  for (const auto& [id, bias] : params.logit_bias) {
    if (id < 0 || id >= n) return invalid_argument(out_of_vocab("logit_bias", id, n));
    work_[id] += bias;
  }

  if (penalties != nullptr && params.has_penalties()) {
    const float rep = params.repetition_penalty;
    const float freq = params.frequency_penalty;
    const float pres = params.presence_penalty;
    for (const PenaltyState::Entry& e : penalties->entries()) {
      if (!e.in_prompt && e.output_count == 0) continue;
      if (e.token < 0 || e.token >= n)
        return invalid_argument(out_of_vocab("prompt/output history", e.token, n));
      float l = work_[e.token];
      if (rep != 1.0f) l = l > 0.0f ? l / rep : l * rep;
      if (e.output_count > 0) {
        l -= freq * static_cast<float>(e.output_count);
        l -= pres;
      }
      work_[e.token] = l;
    }
  }
  return Status::ok();
}

int32_t Sampler::sample_random(const float* x, int32_t n, const SamplingParams& params, Rng& rng) {
  const double u01 = rng.uniform();  // exactly one draw per random sample, on every path

  float max_v = kNegInf;
  for (int32_t i = 0; i < n; ++i) max_v = x[i] > max_v ? x[i] : max_v;
  if (!(max_v > kNegInf)) return -1;
  if (std::isinf(max_v)) return argmax_logits(x, n);  // +inf outweighs everything

  const float temperature = params.temperature;
  const float inv_t = 1.0f / temperature;
  const bool use_top_k = params.top_k > 0 && params.top_k < n;
  if (use_top_k) {
    select_top_k(x, n, params.top_k, /*skip_unsampleable=*/true, &cand_);
  } else {
    cand_.clear();
    const float cutoff = max_v + kUnderflowExponent * temperature;
    for (int32_t i = 0; i < n; ++i) {
      if (x[i] >= cutoff) cand_.push_back({x[i], 0.0f, i});  // excludes -inf and NaN
    }
  }

  double total = 0.0;
  for (Candidate& c : cand_) {
    c.weight = std::exp((c.logit - max_v) * inv_t);
    total += c.weight;
  }
  // The most likely token has weight exp(0) = 1, so min_p's threshold min_p × p_max is min_p
  // in weight units.
  if (params.min_p > 0.0f) {
    const float min_p = params.min_p;
    auto end = std::remove_if(cand_.begin(), cand_.end(),
                              [min_p](const Candidate& c) { return c.weight < min_p; });
    cand_.erase(end, cand_.end());
    total = 0.0;
    for (const Candidate& c : cand_) total += c.weight;
  }
  if (params.top_p < 1.0f) {
    int32_t k = select_top_p(cand_.data(), static_cast<int32_t>(cand_.size()),
                             static_cast<double>(params.top_p) * total);
    cand_.resize(k);
    total = 0.0;
    for (const Candidate& c : cand_) total += c.weight;
  }
  if (cand_.empty()) return -1;  // unreachable: the max token survives every filter

  const double u = u01 * total;
  double cum = 0.0;
  for (const Candidate& c : cand_) {
    cum += c.weight;
    if (cum > u) return c.id;
  }
  // Rounding left u at the very end: take the last token that has any weight.
  for (auto it = cand_.rbegin(); it != cand_.rend(); ++it) {
    if (it->weight > 0.0f) return it->id;
  }
  return cand_.front().id;
}

Status Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                       const PenaltyState* penalties, std::span<const int32_t> suppressed,
                       Rng& rng, SampleOutput* out) {
  const int32_t n = static_cast<int32_t>(logits.size());
  if (n <= 0) return invalid_argument("cannot sample from an empty logits row");

  const float* x = logits.data();
  const bool penalize = penalties != nullptr && params.has_penalties();
  if (!params.allowed_token_ids.empty() || !suppressed.empty() || !params.logit_bias.empty() ||
      penalize) {
    LOOM_RETURN_IF_ERROR(apply_processors(logits, params, penalties, suppressed));
    x = work_.data();
  }

  const int32_t token = params.is_greedy() ? argmax_logits(x, n) : sample_random(x, n, params, rng);
  if (token < 0)
    return invalid_argument(
        "no token can be sampled: every logit is -inf or NaN after allowed_token_ids, "
        "min_tokens and logit_bias were applied");
  out->token = token;
  out->has_logprobs = params.logprobs >= 0;
  if (out->has_logprobs) logprobs(logits, token, params.logprobs, &out->logprobs);
  return Status::ok();
}

Result<std::span<const float>> Sampler::process(std::span<const float> logits,
                                                const SamplingParams& params,
                                                const PenaltyState* penalties,
                                                std::span<const int32_t> suppressed) {
  LOOM_RETURN_IF_ERROR(apply_processors(logits, params, penalties, suppressed));
  return std::span<const float>(work_.data(), logits.size());
}

void Sampler::logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                       PositionLogprobs* out) {
  const int32_t n = static_cast<int32_t>(logits.size());
  const float* x = logits.data();
  num_top = std::clamp(num_top, 0, n);

  float max_v = kNegInf;
  for (int32_t i = 0; i < n; ++i) max_v = x[i] > max_v ? x[i] : max_v;
  const bool in_vocab = token >= 0 && token < n;
  const float token_v = in_vocab ? x[token] : std::numeric_limits<float>::quiet_NaN();

  // Float exponentials (relative error ~1e-7 each), double sum and log: ample for the 1e-5
  // the API promises, at a fraction of the cost of double exp over 152k entries.
  double sum = 0.0;
  int32_t rank = 0;
  for (int32_t i = 0; i < n; ++i) {
    const float v = x[i];
    if (v > kNegInf) sum += std::exp(v - max_v);
    rank += v >= token_v;
  }
  const double lse = static_cast<double>(max_v) + std::log(sum);
  auto logprob_of = [lse](float v) -> float {
    return v > kNegInf ? static_cast<float>(static_cast<double>(v) - lse) : kNegInf;
  };

  out->token = token;
  out->logprob = in_vocab ? logprob_of(token_v) : std::numeric_limits<float>::quiet_NaN();
  out->rank = in_vocab ? rank : 0;
  select_top_k(x, n, num_top, /*skip_unsampleable=*/false, &cand_);
  out->top.clear();
  for (const Candidate& c : cand_) out->top.push_back({c.id, logprob_of(c.logit)});
}

}  // namespace loom
