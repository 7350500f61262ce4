// "ffn_moe" routing: which experts a token goes to and with what weight, from its router
// logits. Two scorings (MoeConfig):
//  - softmax (Qwen, Mixtral, gpt-oss): softmax over every expert, the n_expert_used largest
//    probabilities, renormalized to sum to 1 where the architecture does (norm_topk).
//    Mixtral's "softmax over the top-k logits" is the same numbers.
//  - sigmoid (DeepSeek-V3): each expert's score is sigmoid(logit); choosing uses score + bias
//    (the correction bias, exp_probs_b) among the experts of the topk_group groups whose two
//    best biased scores sum highest; the weights are the chosen experts' unbiased scores,
//    divided by their sum where norm_topk.
// Either way the weights are then multiplied by weights_scale. Ties go to the lower index
// (expert or group).
#pragma once

#include <cstdint>

#include "model/config.h"

namespace loom::layers {

// logits: n_expert floats. score_bias: n_expert floats or nullptr (none). ids / weights:
// n_expert_used entries, by decreasing choice score.
void route_token(const MoeConfig& m, const float* logits, int32_t* ids, float* weights,
                 const float* score_bias = nullptr);

}  // namespace loom::layers
