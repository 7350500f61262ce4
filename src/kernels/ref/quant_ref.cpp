// Reference quantizers for the plain and 32-element block formats (F16, BF16, Q4_0, Q4_1,
// Q5_0, Q5_1, Q8_0) and the Q8_K activation format, following ggml's reference algorithms.
// K-quant weight formats are in quant_ref_k.cpp.
#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/iq4_ref.h"
#include "kernels/ref/mxfp4_ref.h"
#include "kernels/ref/quant_ref_k.h"
#include "kernels/ref/ref.h"
#include "kernels/ref/ternary_ref.h"

namespace loom::kernels::ref {

int nearest_int(float v) {
  // Adding 1.5 * 2^23 puts the rounded integer in the low mantissa bits.
  float f = v + 12582912.f;
  int32_t i;
  std::memcpy(&i, &f, 4);
  return (i & 0x007fffff) - 0x00400000;
}

namespace {

// Value of largest magnitude (with its sign) of x[0..n).
float signed_absmax(const float* x, int n, float* amax_out) {
  float amax = 0.0f, max = 0.0f;
  for (int j = 0; j < n; ++j) {
    if (amax < std::fabs(x[j])) {
      amax = std::fabs(x[j]);
      max = x[j];
    }
  }
  *amax_out = amax;
  return max;
}

void q_q4_0(const float* x, BlockQ4_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    float amax;
    const float max = signed_absmax(x, kQK32, &amax);
    const float d = max / -8;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t q0 = std::min<int>(15, static_cast<int8_t>(x[j] * id + 8.5f));
      const uint8_t q1 = std::min<int>(15, static_cast<int8_t>(x[j + 16] * id + 8.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void q_q4_1(const float* x, BlockQ4_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQK32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 15;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(min);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t q0 = std::min<int>(15, static_cast<int8_t>((x[j] - min) * id + 0.5f));
      const uint8_t q1 = std::min<int>(15, static_cast<int8_t>((x[j + 16] - min) * id + 0.5f));
      y[i].qs[j] = static_cast<uint8_t>(q0 | (q1 << 4));
    }
  }
}

void q_q5_0(const float* x, BlockQ5_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    float amax;
    const float max = signed_absmax(x, kQK32, &amax);
    const float d = max / -16;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    uint32_t qh = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t q0 = std::min<int>(31, static_cast<int8_t>(x[j] * id + 16.5f));
      const uint8_t q1 = std::min<int>(31, static_cast<int8_t>(x[j + 16] * id + 16.5f));
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10u) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void q_q5_1(const float* x, BlockQ5_1* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    float min = x[0], max = x[0];
    for (int j = 1; j < kQK32; ++j) {
      min = std::min(min, x[j]);
      max = std::max(max, x[j]);
    }
    const float d = (max - min) / 31;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    y[i].m = f32_to_fp16(min);
    uint32_t qh = 0;
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t q0 = static_cast<int8_t>((x[j] - min) * id + 0.5f);
      const uint8_t q1 = static_cast<int8_t>((x[j + 16] - min) * id + 0.5f);
      y[i].qs[j] = static_cast<uint8_t>((q0 & 0x0F) | ((q1 & 0x0F) << 4));
      qh |= static_cast<uint32_t>((q0 & 0x10u) >> 4) << j;
      qh |= static_cast<uint32_t>((q1 & 0x10u) >> 4) << (j + 16);
    }
    std::memcpy(y[i].qh, &qh, 4);
  }
}

void q_q8_0(const float* x, BlockQ8_0* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQK32) {
    float amax = 0.0f;
    for (int j = 0; j < kQK32; ++j) amax = std::max(amax, std::fabs(x[j]));
    const float d = amax / 127;
    const float id = d ? 1.0f / d : 0.0f;
    y[i].d = f32_to_fp16(d);
    for (int j = 0; j < kQK32; ++j) y[i].qs[j] = static_cast<int8_t>(std::round(x[j] * id));
  }
}

void q_q8_k(const float* x, BlockQ8_K* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    float amax;
    const float max = signed_absmax(x, kQKK, &amax);
    if (amax == 0.0f) {
      std::memset(&y[i], 0, sizeof(BlockQ8_K));
      continue;
    }
    // -127 (not -128) keeps every quant in [-127, 127], which the sign tricks of the SIMD
    // dot products rely on.
    const float iscale = -127.f / max;
    for (int j = 0; j < kQKK; ++j)
      y[i].qs[j] = static_cast<int8_t>(std::min(127, nearest_int(iscale * x[j])));
    for (int j = 0; j < kQKK / 16; ++j) {
      int sum = 0;
      for (int l = 0; l < 16; ++l) sum += y[i].qs[16 * j + l];
      y[i].bsums[j] = static_cast<int16_t>(sum);
    }
    y[i].d = 1 / iscale;
  }
}

}  // namespace

bool can_quantize(Dtype t) {
  return t != Dtype::kQ8_1 && can_dequantize(t);
}

void quantize_row(Dtype t, const float* src, void* dst, int64_t n) {
  const int64_t nb = n / dtype_info(t).block_size;
  LOOM_CHECK(nb * dtype_info(t).block_size == n);
  switch (t) {
    case Dtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case Dtype::kF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_fp16(src[i]);
      return;
    }
    case Dtype::kBF16: {
      auto* h = static_cast<uint16_t*>(dst);
      for (int64_t i = 0; i < n; ++i) h[i] = f32_to_bf16(src[i]);
      return;
    }
    case Dtype::kQ4_0:
      return q_q4_0(src, static_cast<BlockQ4_0*>(dst), nb);
    case Dtype::kQ4_1:
      return q_q4_1(src, static_cast<BlockQ4_1*>(dst), nb);
    case Dtype::kQ5_0:
      return q_q5_0(src, static_cast<BlockQ5_0*>(dst), nb);
    case Dtype::kQ5_1:
      return q_q5_1(src, static_cast<BlockQ5_1*>(dst), nb);
    case Dtype::kQ8_0:
      return q_q8_0(src, static_cast<BlockQ8_0*>(dst), nb);
    case Dtype::kQ8_K:
      return q_q8_k(src, static_cast<BlockQ8_K*>(dst), nb);
    case Dtype::kQ2_K:
      return quantize_q2_k(src, static_cast<BlockQ2_K*>(dst), nb);
    case Dtype::kQ3_K:
      return quantize_q3_k(src, static_cast<BlockQ3_K*>(dst), nb);
    case Dtype::kQ4_K:
      return quantize_q4_k(src, static_cast<BlockQ4_K*>(dst), nb);
    case Dtype::kQ5_K:
      return quantize_q5_k(src, static_cast<BlockQ5_K*>(dst), nb);
    case Dtype::kQ6_K:
      return quantize_q6_k(src, static_cast<BlockQ6_K*>(dst), nb);
    case Dtype::kMXFP4:
      return quantize_mxfp4(src, static_cast<BlockMxfp4*>(dst), nb);
    case Dtype::kIQ4_NL:
      return quantize_iq4_nl(src, static_cast<BlockIq4Nl*>(dst), nb);
    case Dtype::kIQ4_XS:
      return quantize_iq4_xs(src, static_cast<BlockIq4Xs*>(dst), nb);
    case Dtype::kTQ1_0:
      return quantize_tq1_0(src, static_cast<BlockTq1_0*>(dst), nb);
    case Dtype::kTQ2_0:
      return quantize_tq2_0(src, static_cast<BlockTq2_0*>(dst), nb);
    default:
      LOOM_CHECK(false && "dtype has no quantizer");
  }
}

}  // namespace loom::kernels::ref
