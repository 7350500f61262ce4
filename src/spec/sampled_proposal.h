// A proposal from a proposer's logits row (draft model, MTP module): its best token, or for a
// sampling request (DraftSeq::sampling) a token drawn from the row's distribution under the
// request's parameters, as the target's sampler draws (one draw of the request's generator),
// with that distribution q recorded for the verify's rejection rule (spec/rejection.h).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sampling/sampler.h"
#include "spec/proposer.h"

namespace loom::spec {

// A proposal from `logits` (the proposer's row over the tokens it may propose, at most the
// target's n_vocab): the best token when `sampling` is null; else drawn with `rng`, and q_row
// (the target's n_vocab floats) receives q, 0 past the row. Where the request's parameters
// cannot apply to the row (an allowed or biased id past it) the proposal is the best token and
// q its point mass: the rule keeps the target's distribution whatever q is.
int32_t propose_from_logits(Sampler& sampler, std::span<const float> logits,
                            const SamplingParams* sampling, Rng* rng, std::span<float> q_row);

// How sure the proposer is at this row, for llama-server's --spec-draft-p-min: the probability
// of its best token under its own softmax over its kConfidenceTopK best logits (llama.cpp's
// draft sampler: top-k 10 at temperature 1), whatever was proposed from the row. 0 for a row
// with nothing finite.
constexpr int32_t kConfidenceTopK = 10;
float draft_confidence(std::span<const float> logits);

}  // namespace loom::spec
