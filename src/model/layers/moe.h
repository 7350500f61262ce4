// "ffn_moe" routing: which experts a token goes to and with what weight, from its router
// logits. Softmax over every expert, the n_expert_used largest probabilities (ties: the lower
// expert index first), renormalized to sum to 1 where the architecture does (MoeConfig::
// norm_topk). Mixtral's "softmax over the top-k logits" is the same numbers.
#pragma once

#include <cstdint>

#include "model/config.h"

namespace loom::layers {

// logits: n_expert floats. ids / weights: n_expert_used entries, by decreasing weight.
void route_token(const MoeConfig& m, const float* logits, int32_t* ids, float* weights);

}  // namespace loom::layers
