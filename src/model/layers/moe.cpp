#include "model/layers/moe.h"

#include <algorithm>
#include <cmath>
#include <vector>

namespace loom::layers {
namespace {

// ids[0, k) = the k largest of score[0, n) where eligible (nullptr: all), by decreasing score,
// lower index first on ties: a partial selection, O(n * k) for the small k routers use.
void top_k(const float* score, int32_t n, int32_t k, const bool* eligible, int32_t* ids) {
  for (int32_t s = 0; s < k; ++s) {
    int32_t best = -1;
    for (int32_t e = 0; e < n; ++e) {
      if (eligible && !eligible[e]) continue;
      bool taken = false;
      for (int32_t t = 0; t < s && !taken; ++t) taken = ids[t] == e;
      if (!taken && (best < 0 || score[e] > score[best])) best = e;
    }
    ids[s] = best;
  }
}

void route_sigmoid(const MoeConfig& m, const float* logits, int32_t* ids, float* weights,
                   const float* bias) {
  const int32_t n = m.n_expert, k = m.n_expert_used;
  thread_local std::vector<float> score, choice, group_score;
  thread_local std::vector<int32_t> groups;
  thread_local std::vector<char> eligible;
  score.resize(n);
  choice.resize(n);
  for (int32_t e = 0; e < n; ++e) {
    score[e] = static_cast<float>(1.0 / (1.0 + std::exp(-static_cast<double>(logits[e]))));
    choice[e] = bias ? score[e] + bias[e] : score[e];
  }
  if (m.n_group > 1 && m.topk_group < m.n_group) {
    // A group's score: the sum of its two best biased scores (its only one, in groups of 1).
    const int32_t per = n / m.n_group;
    group_score.resize(m.n_group);
    for (int32_t g = 0; g < m.n_group; ++g) {
      const float* c = &choice[g * per];
      int32_t best[2] = {0, -1};
      top_k(c, per, std::min(per, 2), nullptr, best);
      group_score[g] = c[best[0]] + (per > 1 ? c[best[1]] : 0.0f);
    }
    groups.resize(m.topk_group);
    top_k(group_score.data(), m.n_group, m.topk_group, nullptr, groups.data());
    eligible.assign(n, 0);
    for (int32_t g : groups) std::fill(&eligible[g * per], &eligible[(g + 1) * per], 1);
    // transformers' DeepseekV3 (and vLLM's grouped_topk) zero the other groups' scores rather
    // than leave them out: where fewer than k chosen experts score above 0 (a negative
    // correction bias), experts of other groups are picked.
    for (int32_t e = 0; e < n; ++e)
      if (!eligible[e]) choice[e] = 0.0f;
  }
  top_k(choice.data(), n, k, nullptr, ids);
  double sum = 0;
  for (int32_t s = 0; s < k; ++s) sum += score[ids[s]];
  // transformers' DeepseekV3MoE adds 1e-20 to the denominator.
  const double denom = m.norm_topk ? sum + 1e-20 : 1.0;
  for (int32_t s = 0; s < k; ++s)
    weights[s] = static_cast<float>(score[ids[s]] / denom * m.weights_scale);
}

}  // namespace

void route_token(const MoeConfig& m, const float* logits, int32_t* ids, float* weights,
                 const float* score_bias) {
  if (m.sigmoid_scores) {
    route_sigmoid(m, logits, ids, weights, score_bias);
    return;
  }
  const int32_t n = m.n_expert, k = m.n_expert_used;
  top_k(logits, n, k, nullptr, ids);
  float mx = logits[ids[0]];
  double sum_all = 0;
  for (int32_t e = 0; e < n; ++e) sum_all += std::exp(static_cast<double>(logits[e] - mx));
  double sum_top = 0;
  for (int32_t s = 0; s < k; ++s) sum_top += std::exp(static_cast<double>(logits[ids[s]] - mx));
  const double denom = m.norm_topk ? sum_top : sum_all;
  for (int32_t s = 0; s < k; ++s)
    weights[s] = static_cast<float>(std::exp(static_cast<double>(logits[ids[s]] - mx)) / denom *
                                    m.weights_scale);
}

}  // namespace loom::layers
