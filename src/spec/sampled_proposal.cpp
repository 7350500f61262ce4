#include "spec/sampled_proposal.h"

#include <algorithm>

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

}  // namespace loom::spec
