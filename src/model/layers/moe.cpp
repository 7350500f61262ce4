#include "model/layers/moe.h"

#include <algorithm>
#include <cmath>

namespace loom::layers {

void route_token(const MoeConfig& m, const float* logits, int32_t* ids, float* weights) {
  const int32_t n = m.n_expert, k = m.n_expert_used;
  // Top-k by logit (the softmax keeps the order): a partial selection, lower index first on
  // ties, O(n * k) for the small k routers use.
  for (int32_t s = 0; s < k; ++s) {
    int32_t best = -1;
    for (int32_t e = 0; e < n; ++e) {
      bool taken = false;
      for (int32_t t = 0; t < s && !taken; ++t) taken = ids[t] == e;
      if (!taken && (best < 0 || logits[e] > logits[best])) best = e;
    }
    ids[s] = best;
  }
  float mx = logits[ids[0]];
  double sum_all = 0;
  for (int32_t e = 0; e < n; ++e) sum_all += std::exp(static_cast<double>(logits[e] - mx));
  double sum_top = 0;
  for (int32_t s = 0; s < k; ++s) sum_top += std::exp(static_cast<double>(logits[ids[s]] - mx));
  const double denom = m.norm_topk ? sum_top : sum_all;
  for (int32_t s = 0; s < k; ++s)
    weights[s] = static_cast<float>(std::exp(static_cast<double>(logits[ids[s]] - mx)) / denom);
}

}  // namespace loom::layers
