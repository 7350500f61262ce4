// Helpers shared by the sampling tests: random logits and an independent, sort-based reference
// of the filtered sampling distribution, computed in double.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "sampling/sampling_params.h"

namespace loom::test {

inline std::vector<float> random_logits(int32_t n, uint64_t seed, float scale = 2.0f,
                                        float shift = 0.0f) {
  std::mt19937_64 gen(seed);
  std::normal_distribution<float> dist(shift, scale);
  std::vector<float> v(n);
  for (float& x : v) x = dist(gen);
  return v;
}

// Probabilities after temperature → min_p → top_k → top_p, straight from the definitions
// (full sort by logit desc / id asc, softmax in double). Logits must be finite.
inline std::vector<double> reference_distribution(const std::vector<float>& logits,
                                                  const SamplingParams& p) {
  const int32_t n = static_cast<int32_t>(logits.size());
  std::vector<int32_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::vector<double> prob(n, 0.0);
  double mx = logits[order[0]];
  double z = 0;
  for (int32_t i = 0; i < n; ++i) z += std::exp((logits[i] - mx) / p.temperature);
  for (int32_t i = 0; i < n; ++i) prob[i] = std::exp((logits[i] - mx) / p.temperature) / z;

  std::vector<bool> keep(n, true);
  if (p.min_p > 0) {
    double pmax = prob[order[0]];
    for (int32_t i = 0; i < n; ++i) keep[i] = prob[i] >= p.min_p * pmax;
  }
  if (p.top_k > 0) {
    for (int32_t r = p.top_k; r < n; ++r) keep[order[r]] = false;
  }
  auto renorm = [&] {
    double s = 0;
    for (int32_t i = 0; i < n; ++i) s += keep[i] ? prob[i] : 0.0;
    for (int32_t i = 0; i < n; ++i) prob[i] = keep[i] ? prob[i] / s : 0.0;
  };
  renorm();
  if (p.top_p < 1.0f) {
    double above = 0;
    for (int32_t r = 0; r < n; ++r) {
      int32_t id = order[r];
      if (!keep[id]) continue;
      if (above >= p.top_p) keep[id] = false;  // the mass before it already reached top_p
      above += prob[id];
    }
    renorm();
  }
  return prob;
}

}  // namespace loom::test
