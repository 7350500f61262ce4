// Speculative sampling's acceptance rule (Leviathan et al. 2023; Chen et al. 2023): a token d
// proposed by a draft distribution q is kept with probability min(1, p(d) / q(d)) under the
// target distribution p; when it is not, the token comes from the normalised positive part of
// p - q. Whatever q is, the emitted token is distributed exactly as p.
//
// For a point-mass proposal (n-gram lookup; a draft model's or MTP module's for a greedy or
// seeded request) q(d) = 1, so d is kept with probability p(d) and the replacement comes from
// p without d: exactly what sampling x ~ p and keeping d when x == d gives, which is how the
// engine verifies those (it draws from the request's own generator in the order plain
// decoding would, so a seeded request gives the same tokens with and without speculation,
// whatever was proposed).
//
// A draft model or MTP module samples the proposals of a sampling request without a seed from
// its own distribution q (spec/sampled_proposal.h), and the engine verifies those with this
// rule: a draft close to the target keeps most of them (all, when q = p) where a point mass
// keeps each with probability p(d) only. Their tokens depend on what was proposed, which
// depends on the step times (the back-off) and the other requests (the token budget), so a
// request with a seed keeps the point-mass rule: reproducible, at a lower acceptance. The draft
// draws d from the request's generator as plain decoding draws that position's token, and the
// rule's own draws come from a second generator (Request::accept_rng): where q = p (the target
// as its own draft) every proposal is kept and the tokens are the ones plain decoding draws.
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
// The rule's type: the engine's is verify_draft_token (a test may give it a broken one, to show
// that its statistical test can fail).
using AcceptanceRule = Verdict (*)(std::span<const float> p, std::span<const float> q,
                                   int32_t draft, Rng& rng);

}  // namespace loom::spec
