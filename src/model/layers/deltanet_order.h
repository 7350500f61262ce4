// The order of a Gated DeltaNet layer's value heads (DeltaNetConfig::v_heads_tiled, fused_ba):
// the Gated DeltaNet step takes them grouped by key head, b and a apart; a file may store them
// tiled (llama.cpp's qwen35) or b and a fused per key head (qwen3next's ssm_ba). These steps
// regroup one token's projections before the step and put its output back in the file's order
// before ssm_out (a quantized matrix's columns cannot be reordered at load), and regroup the
// layer's per-channel float weights once at load. Backend-neutral, one row at a time.
#pragma once

#include "model/config.h"
#include "model/weights.h"

namespace loom::layers {

// True when the file's order differs from the step's (something to regroup).
bool deltanet_needs_regroup(const DeltaNetConfig& d);

// "ssm_in": one row's projections in the step's order. qkv (conv_dim) and z (Hv·dv) in place;
// beta and alpha (Hv each) from ba (2·Hv, fused_ba) or in place. tmp: Hv·dv floats.
void deltanet_regroup_row(const DeltaNetConfig& d, float* qkv, float* z, const float* ba,
                          float* beta, float* alpha, float* tmp);

// "ssm_y": one row's step output (Hv·dv) back in the file's order of value heads, in place.
void deltanet_ungroup_output(const DeltaNetConfig& d, float* y, float* tmp);

// ssm_conv's value channels, ssm_a and ssm_dt in the step's order (once, at load).
void deltanet_regroup_weights(const DeltaNetConfig& d, LayerWeights& L);

}  // namespace loom::layers
