#include "model/layers/deltanet_order.h"

#include <algorithm>
#include <cstring>

namespace loom::layers {
namespace {

// Tiled → grouped: grouped head g·r + i (key head g) is tiled head i·Hk + g. Blocks of u
// floats each (d_v for rows of values, 1 for a per-head scalar), in place through tmp.
void untile(const DeltaNetConfig& d, float* x, int64_t u, float* tmp) {
  const int64_t Hk = d.n_k_heads, r = d.n_v_heads / d.n_k_heads;
  std::memcpy(tmp, x, sizeof(float) * d.n_v_heads * u);
  for (int64_t g = 0; g < Hk; ++g)
    for (int64_t i = 0; i < r; ++i)
      std::memcpy(x + (g * r + i) * u, tmp + (i * Hk + g) * u, sizeof(float) * u);
}

void tile(const DeltaNetConfig& d, float* x, int64_t u, float* tmp) {
  const int64_t Hk = d.n_k_heads, r = d.n_v_heads / d.n_k_heads;
  std::memcpy(tmp, x, sizeof(float) * d.n_v_heads * u);
  for (int64_t g = 0; g < Hk; ++g)
    for (int64_t i = 0; i < r; ++i)
      std::memcpy(x + (i * Hk + g) * u, tmp + (g * r + i) * u, sizeof(float) * u);
}

bool tiled(const DeltaNetConfig& d) {
  return d.v_heads_tiled && d.n_v_heads != d.n_k_heads;
}

}  // namespace

bool deltanet_needs_regroup(const DeltaNetConfig& d) {
  return d.fused_ba || tiled(d);
}

void deltanet_regroup_row(const DeltaNetConfig& d, float* qkv, float* z, const float* ba,
                          float* beta, float* alpha, float* tmp) {
  const int64_t r = d.n_v_heads / d.n_k_heads;
  if (d.fused_ba)  // per key head g: its value heads' b, then their a
    for (int64_t g = 0; g < d.n_k_heads; ++g) {
      std::copy_n(ba + g * 2 * r, r, beta + g * r);
      std::copy_n(ba + g * 2 * r + r, r, alpha + g * r);
    }
  if (!tiled(d)) return;
  untile(d, qkv + 2 * int64_t{d.n_k_heads} * d.d_k, d.d_v, tmp);
  untile(d, z, d.d_v, tmp);
  untile(d, beta, 1, tmp);
  untile(d, alpha, 1, tmp);
}

void deltanet_ungroup_output(const DeltaNetConfig& d, float* y, float* tmp) {
  if (tiled(d)) tile(d, y, d.d_v, tmp);
}

void deltanet_regroup_weights(const DeltaNetConfig& d, LayerWeights& L) {
  if (!tiled(d)) return;
  const int64_t K = d.conv_kernel, Z = int64_t{d.n_v_heads} * d.d_v;
  std::vector<float> tmp(Z * K);
  // ssm_conv is (C, K): a value head's channels are d_v rows of K taps.
  if (!L.ssm_conv.empty())
    untile(d, &L.ssm_conv[2 * int64_t{d.n_k_heads} * d.d_k * K], d.d_v * K, tmp.data());
  if (!L.ssm_a.empty()) untile(d, L.ssm_a.data(), 1, tmp.data());
  if (!L.ssm_dt.empty()) untile(d, L.ssm_dt.data(), 1, tmp.data());
}

}  // namespace loom::layers
