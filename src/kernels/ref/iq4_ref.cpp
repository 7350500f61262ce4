#include "kernels/ref/iq4_ref.h"

#include <algorithm>
#include <cmath>

#include "base/fp16.h"

namespace loom::kernels::ref {

void dequantize_iq4_nl(const BlockIq4Nl* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      y[j] = d * kIq4NlValues[b[i].qs[j] & 0x0F];
      y[j + kQK32 / 2] = d * kIq4NlValues[b[i].qs[j] >> 4];
    }
  }
}

void dequantize_iq4_xs(const BlockIq4Xs* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQKK / kQK32; ++j, y += kQK32) {
      const float dl = d * static_cast<float>(iq4_xs_scale(b[i], j));
      const uint8_t* qs = b[i].qs + 16 * j;
      for (int k = 0; k < 16; ++k) {
        y[k] = dl * kIq4NlValues[qs[k] & 0x0F];
        y[k + 16] = dl * kIq4NlValues[qs[k] >> 4];
      }
    }
  }
}

namespace {

// The grid index nearest to v, by table: every midpoint between neighbouring grid values is a
// multiple of 1/2, so the nearest index is constant on each [k/2, (k+1)/2) (a midpoint itself
// goes up). Quantizing a model calls this ~30 times per weight: a search branched too much.
class NearestIndex {
 public:
  NearestIndex() {
    for (int k = 0; k < kSpan; ++k) {
      const float v = (k - kSpan / 2) * 0.5f + 0.25f;  // inside [k/2, (k+1)/2)
      int best = 0;
      for (int i = 1; i < 16; ++i)
        if (std::fabs(v - kIq4NlValues[i]) < std::fabs(v - kIq4NlValues[best])) best = i;
      table_[k] = static_cast<uint8_t>(best);
    }
  }
  int operator()(float v) const {
    float h = 2.0f * v;
    h = h >= -kSpan / 2.0f ? std::min(h, kSpan / 2.0f - 1.0f) : -kSpan / 2.0f;  // NaN: the low end
    return table_[static_cast<int>(std::floor(h)) + kSpan / 2];
  }

 private:
  static constexpr int kSpan = 2 * 2 * 160;  // half-units over [-160, 160): past the grid's ends
  uint8_t table_[kSpan];
};
const NearestIndex nearest_index;

// Nibbles of 32 values against scale d (0: all index 8, the grid's value nearest zero).
void pick_indices(const float* x, float d, uint8_t* qs) {
  const float id = d != 0.0f ? 1.0f / d : 0.0f;
  for (int j = 0; j < kQK32 / 2; ++j)
    qs[j] = static_cast<uint8_t>(nearest_index(x[j] * id) | nearest_index(x[j + 16] * id) << 4);
}

// The scale of least squared error for 32 values among candidates amax / 127 * (0.82 ..
// 1.18), both signs (the grid is not symmetric): each candidate's indices fixed, the best
// scale for them is s = sum(x v) / sum(v v), leaving the error sum(x x) - s * sum(x v), so
// the candidate with the largest sum(x v)^2 / sum(v v) wins, and its s is the result.
float best_scale(const float* x) {
  float amax = 0.0f;
  for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
  if (amax == 0.0f) return 0.0f;
  float best_d = 0.0f;
  double best_gain = -1.0;
  for (int sign : {1, -1})
    for (int step = -6; step <= 6; ++step) {
      const float id = sign * 127.0f / (amax * (1.0f + 0.03f * static_cast<float>(step)));
      double xv = 0, vv = 0;
      for (int j = 0; j < kQK32; ++j) {
        const float v = kIq4NlValues[nearest_index(x[j] * id)];
        xv += static_cast<double>(x[j]) * v;
        vv += static_cast<double>(v) * v;
      }
      const double gain = xv * xv / vv;  // vv > 0: no grid value is 0
      if (gain > best_gain) {
        best_gain = gain;
        best_d = static_cast<float>(xv / vv);
      }
    }
  return best_d;
}

}  // namespace

void quantize_iq4_nl(const float* x, BlockIq4Nl* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    y[i].d = f32_to_fp16(best_scale(x));
    pick_indices(x, fp16_to_f32(y[i].d), y[i].qs);
  }
}

void quantize_iq4_xs(const float* x, BlockIq4Xs* y, int64_t nb) {
  constexpr int kSub = kQKK / kQK32;
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float scales[kSub], big = 0.0f;
    for (int j = 0; j < kSub; ++j) {
      scales[j] = best_scale(x + kQK32 * j);
      if (std::fabs(scales[j]) > std::fabs(big)) big = scales[j];
    }
    BlockIq4Xs& b = y[i];
    b.d = f32_to_fp16(big / -32.0f);
    const float d = fp16_to_f32(b.d);
    b.scales_h = 0;
    std::fill_n(b.scales_l, kQKK / 64, uint8_t{0});
    for (int j = 0; j < kSub; ++j) {
      const int l =
          d != 0.0f ? std::clamp(static_cast<int>(std::lround(scales[j] / d)), -32, 31) : 0;
      const int ls = l + 32;
      b.scales_l[j / 2] |= static_cast<uint8_t>((ls & 0xF) << (4 * (j % 2)));
      b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
      pick_indices(x + kQK32 * j, d * static_cast<float>(iq4_xs_scale(b, j)), b.qs + 16 * j);
    }
  }
}

}  // namespace loom::kernels::ref
