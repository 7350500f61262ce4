#include "spec/sampled_proposal.h"

#include <algorithm>

namespace loom::spec {

int32_t best_token(std::span<const float> logits) {
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

int32_t propose_from_logits(Sampler& sampler, std::span<const float> logits,
                            const SamplingParams* sampling, Rng* rng, float* q_row,
                            std::vector<float>& scratch) {
  const int32_t best = best_token(logits);
  if (!sampling) return best;
  int32_t token = -1;
  if (!sampler.distribution(logits, *sampling, nullptr, {}, &scratch).is_ok() ||
      !sampler.draw(logits, *sampling, nullptr, {}, *rng, &token).is_ok()) {
    q_row[best] = 1.0f;
    return best;
  }
  std::copy(scratch.begin(), scratch.end(), q_row);
  return token;
}

}  // namespace loom::spec
