// Speculative sampling's acceptance rule (Leviathan et al. 2023; Chen et al. 2023): a token d
// proposed by a draft distribution q is kept with probability min(1, p(d) / q(d)) under the
// target distribution p; when it is not, the token comes from the normalised positive part of
// p - q. Whatever q is, the emitted token is distributed exactly as p.
//
// For a point-mass proposal (n-gram lookup, a greedy draft) q(d) = 1, so d is kept with
// probability p(d) and the replacement comes from p without d: exactly what sampling x ~ p and
// keeping d when x == d gives, which is how the engine verifies (it draws from the request's
// own generator in the order plain decoding would, so a seeded request gives the same tokens
// with and without speculation). This general form is for proposers with a distribution.
#pragma once

#include <cstdint>
#include <span>

#include "sampling/rng.h"

namespace loom::spec {

struct Verdict {
  bool accepted = false;
  int32_t token = -1;  // the draft when accepted, else the replacement
};

// p and q: probability distributions over the same vocabulary (non-negative, summing to ~1).
Verdict verify_draft_token(std::span<const float> p, std::span<const float> q, int32_t draft,
                           Rng& rng);

}  // namespace loom::spec
