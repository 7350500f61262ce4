#include "spec/rejection.h"

#include <algorithm>

namespace loom::spec {

Verdict verify_draft_token(std::span<const float> p, std::span<const float> q, int32_t draft,
                           Rng& rng) {
  const double pd = p[static_cast<size_t>(draft)], qd = q[static_cast<size_t>(draft)];
  // q(d) = 0 (a draft the proposal could not have drawn): p / q is infinite where p(d) > 0;
  // where p(d) = 0 too the target cannot emit d, and the draft is replaced.
  if (qd <= 0.0 ? pd > 0.0 : rng.uniform() * qd < pd) return {true, draft};
  // Rejected: sample from max(0, p - q), normalised.
  double total = 0.0;
  for (size_t i = 0; i < p.size(); ++i) total += std::max(0.0, double{p[i]} - double{q[i]});
  double u = rng.uniform() * total;
  int32_t last = -1;
  for (size_t i = 0; i < p.size(); ++i) {
    const double w = std::max(0.0, double{p[i]} - double{q[i]});
    if (w <= 0.0) continue;
    last = static_cast<int32_t>(i);
    if (u < w) return {false, last};
    u -= w;
  }
  // Rounding left u past the last weight (or p == q, where a rejection has probability 0).
  return {false, last >= 0 ? last : draft};
}

}  // namespace loom::spec
