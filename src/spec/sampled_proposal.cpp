#include "spec/sampled_proposal.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

namespace loom::spec {

namespace {

// The proposer's best token (the first on ties; token 0 for a row with nothing finite).
int32_t best_token(std::span<const float> logits) {
  return std::max(argmax_logits(logits.data(), static_cast<int32_t>(logits.size())), 0);
}

}  // namespace

int32_t propose_from_logits(Sampler& sampler, std::span<const float> logits,
                            const SamplingParams* sampling, Rng* rng, std::span<float> q_row) {
  if (!sampling) return best_token(logits);
  std::fill(q_row.begin() + static_cast<std::ptrdiff_t>(logits.size()), q_row.end(), 0.0f);
  int32_t token = -1;
  if (sampler.draw(logits, *sampling, nullptr, {}, *rng, &token, {}, q_row.first(logits.size()))
          .is_ok())
    return token;
  const int32_t best = best_token(logits);
  std::fill(q_row.begin(), q_row.end(), 0.0f);
  q_row[best] = 1.0f;
  return best;
}

float draft_confidence(std::span<const float> logits) {
  // The kConfidenceTopK largest logits, kept sorted in decreasing order (NaN never enters).
  std::array<float, kConfidenceTopK> top;
  size_t n = 0;
  for (const float l : logits) {
    if (!(l > -INFINITY)) continue;
    if (n < top.size())
      top[n++] = l;
    else if (l > top[n - 1])
      top[n - 1] = l;
    else
      continue;
    for (size_t i = n - 1; i > 0 && top[i - 1] < top[i]; --i) std::swap(top[i - 1], top[i]);
  }
  if (n == 0) return 0.0f;
  if (top[0] == INFINITY) return 1.0f;
  double sum = 0;
  for (size_t i = 0; i < n; ++i) sum += std::exp(static_cast<double>(top[i] - top[0]));
  return static_cast<float>(1.0 / sum);
}

bool Proposer::unsure(std::span<const float> logits) const {
  return p_min_ > 0.0f && draft_confidence(logits) < p_min_;
}

}  // namespace loom::spec
