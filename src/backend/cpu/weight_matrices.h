// The weight matrices of a model that the CPU backend gives kernel-ready copies
// (backend/cpu/weight_copies.cpp), for the code that walks them.
#pragma once

#include "model/weights.h"

namespace loom {

// The matrices that get kernel-ready copies (a MoE layer has no dense FFN, a dense one no
// router): every view f is called with.
template <class L, class F>
void for_each_matrix(L& layer, F&& f) {
  for (auto* w :
       {&layer.wq,           &layer.wk,     &layer.wv,       &layer.wo,           &layer.w_gate,
        &layer.w_up,         &layer.w_down, &layer.router,   &layer.w_gate_shexp, &layer.w_up_shexp,
        &layer.w_down_shexp, &layer.wq_a,   &layer.wq_b,     &layer.wkv_a,        &layer.ssm_qkv,
        &layer.ssm_z,        &layer.ssm_ba, &layer.ssm_beta, &layer.ssm_alpha,    &layer.ssm_out})
    if (w->data) f(*w);
  for (auto* experts : {&layer.gate_exp, &layer.up_exp, &layer.down_exp, &layer.k_b, &layer.v_b})
    for (auto& w : *experts) f(w);
}

template <class W, class F>
void for_each_repacked(W& weights, F&& f, bool with_output = true) {
  for (auto& L : weights.layers) for_each_matrix(L, f);
  if (with_output) f(weights.output);
}

}  // namespace loom
