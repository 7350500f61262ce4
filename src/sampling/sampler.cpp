// Sampler: logits processors (allowed ids, min_tokens suppression, logit_bias, penalties),
// greedy/random selection, raw logprobs. See sampler.h for the order and its vLLM origin.
#include "sampling/sampler.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>

#include "sampling/row_ops.h"

namespace loom {

using sampling_internal::Candidate;
using sampling_internal::count_at_least;
using sampling_internal::exp_weights;
using sampling_internal::row_max;
using sampling_internal::select_top_k;
using sampling_internal::select_top_p;
using sampling_internal::sum_weights;
using sampling_internal::top_p_from_row;

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

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

void Sampler::ensure_scratch(size_t n) {
  if (scratch_f_.size() >= n) return;  // first call at this vocabulary size
  scratch_f_.resize(n);
  cand_.reserve(n + 2);  // top_p_from_row's spill slots
}

Status Sampler::apply_processors(std::span<const float> logits, const SamplingParams& params,
                                 const PenaltyState* penalties, std::span<const int32_t> suppressed,
                                 std::span<const uint32_t> bitmask) {
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
  if (!bitmask.empty()) {
    if (bitmask.size() * 32 < static_cast<size_t>(n))
      return invalid_argument("token bitmask has " + std::to_string(bitmask.size() * 32) +
                              " bits for a vocabulary of " + std::to_string(n));
    for (int32_t w = 0; w * 32 < n; ++w) {
      const uint32_t bits = bitmask[w];
      if (bits == ~0u) continue;  // most words of a permissive mask: nothing to clear
      const int32_t end = std::min(n, w * 32 + 32);
      for (int32_t id = w * 32; id < end; ++id)
        if (!((bits >> (id - w * 32)) & 1u)) work_[id] = kNegInf;
    }
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

namespace {

// Inverse CDF over weights w[0, n): the first i whose running sum exceeds u. Blocks of 64
// keep the serial running sum inside one block. -1 if rounding left u beyond the end.
template <typename WeightAt>
int32_t inverse_cdf(int32_t n, double u, WeightAt weight_at) {
  double cum = 0.0;
  for (int32_t b = 0; b < n; b += 64) {
    const int32_t e = std::min(n, b + 64);
    double block = 0.0;
    for (int32_t i = b; i < e; ++i) block += weight_at(i);
    if (cum + block > u) {
      for (int32_t i = b; i < e; ++i) {
        cum += weight_at(i);
        if (cum > u) return i;
      }
      return -1;
    }
    cum += block;
  }
  return -1;
}

// The last index with a nonzero weight (the rounding fallback of inverse_cdf).
template <typename WeightAt>
int32_t last_positive(int32_t n, WeightAt weight_at) {
  for (int32_t i = n - 1; i >= 0; --i) {
    if (weight_at(i) > 0.0f) return i;
  }
  return -1;
}

}  // namespace

Sampler::Weights Sampler::random_weights(const float* x, int32_t n, const SamplingParams& params) {
  const float max_v = row_max(x, n);
  if (!(max_v > kNegInf)) return {Weights::kNone};
  if (std::isinf(max_v)) return {Weights::kArgmax};  // +inf outweighs everything

  const float inv_t = 1.0f / params.temperature;
  // The most likely token has weight exp(0) = 1, so min_p's threshold min_p × p_max is min_p
  // in weight units. top_k and min_p commute (both keep a best-first prefix).
  const float min_w = params.min_p;

  if (params.top_k > 0 && params.top_k < n) {
    // Few candidates: select them, then work on the short list.
    select_top_k(x, n, params.top_k, /*skip_unsampleable=*/true, &cand_);
    auto end = std::remove_if(cand_.begin(), cand_.end(), [&](Candidate& c) {
      c.weight = std::exp((c.logit - max_v) * inv_t);
      return !(c.weight >= min_w) || c.weight == 0.0f;
    });
    cand_.erase(end, cand_.end());
    int32_t m = static_cast<int32_t>(cand_.size());
    if (params.top_p < 1.0f) {
      double total = 0.0;
      for (const Candidate& c : cand_) total += c.weight;
      m = select_top_p(cand_.data(), m, static_cast<double>(params.top_p) * total);
    }
    double total = 0.0;
    for (int32_t i = 0; i < m; ++i) total += cand_[i].weight;
    return {Weights::kListed, m, total};
  }

  // Whole vocabulary: vectorized weights (min_p folded in as zeros), no candidate list unless
  // top_p needs one.
  float* w = scratch_f_.data();
  exp_weights(x, w, n, max_v, inv_t, min_w);
  const double total = sum_weights(w, n);
  if (params.top_p < 1.0f) {
    const int32_t m = top_p_from_row(x, w, n, max_v, inv_t,
                                     static_cast<double>(params.top_p) * total, &cand_, &top_p_);
    double kept = 0.0;
    for (int32_t i = 0; i < m; ++i) kept += cand_[i].weight;
    return {Weights::kListed, m, kept};
  }
  return {Weights::kRow, n, total};
}

int32_t Sampler::pick(const Weights& ws, double u01, const float* x, int32_t n) {
  switch (ws.kind) {
    case Weights::kNone:
      return -1;
    case Weights::kArgmax:
      return argmax_logits(x, n);
    case Weights::kListed: {
      auto weight_at = [this](int32_t i) { return cand_[i].weight; };
      int32_t i = inverse_cdf(ws.m, u01 * ws.total, weight_at);
      if (i < 0) i = last_positive(ws.m, weight_at);
      return i < 0 ? -1 : cand_[i].id;
    }
    case Weights::kRow: {
      auto weight_at = [w = scratch_f_.data()](int32_t i) { return w[i]; };
      const int32_t i = inverse_cdf(n, u01 * ws.total, weight_at);
      return i < 0 ? last_positive(n, weight_at) : i;
    }
  }
  return -1;
}

bool Sampler::write_probabilities(const Weights& ws, const float* x, int32_t n,
                                  std::span<float> probs) {
  std::fill(probs.begin(), probs.end(), 0.0f);
  switch (ws.kind) {
    case Weights::kNone:
      return false;
    case Weights::kArgmax: {
      const int32_t t = argmax_logits(x, n);
      if (t < 0) return false;
      probs[t] = 1.0f;
      return true;
    }
    case Weights::kListed:
      if (!(ws.total > 0)) return false;
      for (int32_t i = 0; i < ws.m; ++i)
        probs[cand_[i].id] = static_cast<float>(cand_[i].weight / ws.total);
      return true;
    case Weights::kRow:
      if (!(ws.total > 0)) return false;
      for (int32_t i = 0; i < n; ++i) probs[i] = static_cast<float>(scratch_f_[i] / ws.total);
      return true;
  }
  return false;
}

Result<const float*> Sampler::processed(std::span<const float> logits, const SamplingParams& params,
                                        const PenaltyState* penalties,
                                        std::span<const int32_t> suppressed,
                                        std::span<const uint32_t> bitmask) {
  if (logits.empty()) return invalid_argument("cannot sample from an empty logits row");
  ensure_scratch(logits.size());
  if (params.allowed_token_ids.empty() && suppressed.empty() && params.logit_bias.empty() &&
      !(penalties != nullptr && params.has_penalties()) && bitmask.empty())
    return logits.data();
  LOOM_RETURN_IF_ERROR(apply_processors(logits, params, penalties, suppressed, bitmask));
  return static_cast<const float*>(work_.data());
}

Status Sampler::sample(std::span<const float> logits, const SamplingParams& params,
                       const PenaltyState* penalties, std::span<const int32_t> suppressed, Rng& rng,
                       SampleOutput* out, std::span<const uint32_t> bitmask) {
  int32_t token = -1;
  LOOM_RETURN_IF_ERROR(draw(logits, params, penalties, suppressed, rng, &token, bitmask));
  out->token = token;
  out->has_logprobs = params.logprobs >= 0;
  if (out->has_logprobs) logprobs(logits, token, params.logprobs, &out->logprobs);
  return Status::ok();
}

namespace {
constexpr const char* kNothingSampleable =
    "no token can be sampled: every logit is -inf or NaN after allowed_token_ids, the "
    "grammar's mask, min_tokens and logit_bias were applied";
}  // namespace

Status Sampler::draw(std::span<const float> logits, const SamplingParams& params,
                     const PenaltyState* penalties, std::span<const int32_t> suppressed, Rng& rng,
                     int32_t* token_out, std::span<const uint32_t> bitmask,
                     std::span<float> probs) {
  LOOM_ASSIGN_OR_RETURN(const float* x, processed(logits, params, penalties, suppressed, bitmask));
  const int32_t n = static_cast<int32_t>(logits.size());
  int32_t token = -1;
  if (params.is_greedy()) {
    token = argmax_logits(x, n);
    if (!probs.empty() && token >= 0) write_probabilities({Weights::kArgmax}, x, n, probs);
  } else {
    const double u01 = rng.uniform();  // exactly one draw per random sample, on every path
    const Weights ws = random_weights(x, n, params);
    token = pick(ws, u01, x, n);
    if (!probs.empty() && token >= 0 && !write_probabilities(ws, x, n, probs)) token = -1;
  }
  if (token < 0) return invalid_argument(kNothingSampleable);
  *token_out = token;
  return Status::ok();
}

Status Sampler::distribution(std::span<const float> logits, const SamplingParams& params,
                             const PenaltyState* penalties, std::span<const int32_t> suppressed,
                             std::vector<float>* probs, std::span<const uint32_t> bitmask) {
  LOOM_ASSIGN_OR_RETURN(const float* x, processed(logits, params, penalties, suppressed, bitmask));
  const int32_t n = static_cast<int32_t>(logits.size());
  probs->resize(logits.size());
  const Weights ws = params.is_greedy() ? Weights{Weights::kArgmax} : random_weights(x, n, params);
  if (!write_probabilities(ws, x, n, *probs)) return invalid_argument(kNothingSampleable);
  return Status::ok();
}

Result<std::span<const float>> Sampler::process(std::span<const float> logits,
                                                const SamplingParams& params,
                                                const PenaltyState* penalties,
                                                std::span<const int32_t> suppressed,
                                                std::span<const uint32_t> bitmask) {
  LOOM_RETURN_IF_ERROR(apply_processors(logits, params, penalties, suppressed, bitmask));
  return std::span<const float>(work_.data(), logits.size());
}

void Sampler::logprobs(std::span<const float> logits, int32_t token, int32_t num_top,
                       PositionLogprobs* out) {
  const int32_t n = static_cast<int32_t>(logits.size());
  const float* x = logits.data();
  num_top = std::clamp(num_top, 0, n);
  ensure_scratch(logits.size());

  const float max_v = row_max(x, n);
  const bool in_vocab = token >= 0 && token < n;
  const float token_v = in_vocab ? x[token] : std::numeric_limits<float>::quiet_NaN();

  // Vectorized float exponentials (~2 ulp each, -inf/NaN → 0) summed in double: ample for
  // the 1e-5 the API promises.
  float* e = scratch_f_.data();
  exp_weights(x, e, n, max_v, 1.0f, 0.0f);
  const double sum = sum_weights(e, n);
  const int32_t rank = in_vocab ? count_at_least(x, n, token_v) : 0;
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
