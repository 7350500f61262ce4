#include "kernels/ref/mxfp4_ref.h"

#include <algorithm>
#include <cmath>

namespace loom::kernels::ref {

void dequantize_mxfp4(const BlockMxfp4* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = e8m0_half(b[i].e);
    for (int j = 0; j < kQK32 / 2; ++j) {
      y[j] = kMxfp4Values[b[i].qs[j] & 0x0F] * d;
      y[j + kQK32 / 2] = kMxfp4Values[b[i].qs[j] >> 4] * d;
    }
  }
}

namespace {
int nearest_value(float x, float d) {
  int best = 0;
  float best_err = std::fabs(kMxfp4Values[0] * d - x);
  for (int i = 1; i < 16; ++i) {
    const float err = std::fabs(kMxfp4Values[i] * d - x);
    if (err < best_err) {
      best = i;
      best_err = err;
    }
  }
  return best;
}
}  // namespace

void quantize_mxfp4(const float* x, BlockMxfp4* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    float amax = 0.0f;
    for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const uint8_t e = amax > 0.0f ? static_cast<uint8_t>(std::floor(std::log2(amax)) - 2 + 127) : 0;
    const float d = e8m0_half(e);
    y[i].e = e;
    for (int j = 0; j < kQK32 / 2; ++j)
      y[i].qs[j] =
          static_cast<uint8_t>(nearest_value(x[j], d) | (nearest_value(x[j + kQK32 / 2], d) << 4));
  }
}

}  // namespace loom::kernels::ref
