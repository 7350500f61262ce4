// Reference dequantization for every block format. The float expressions mirror ggml's
// reference dequantizers term for term (same operand order, no fused multiply-add: this file is
// built for baseline x86-64), so results are bit-identical to ggml's.
#include <cstring>

#include "base/fp16.h"
#include "base/status.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/iq4_ref.h"
#include "kernels/ref/mxfp4_ref.h"
#include "kernels/ref/ref.h"
#include "kernels/ref/ternary_ref.h"

namespace loom::kernels::ref {
namespace {

void dq_q4_0(const BlockQ4_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const int x0 = (b[i].qs[j] & 0x0F) - 8;
      const int x1 = (b[i].qs[j] >> 4) - 8;
      y[j] = x0 * d;
      y[j + kQK32 / 2] = x1 * d;
    }
  }
}

void dq_q4_1(const BlockQ4_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    const float m = fp16_to_f32(b[i].m);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const int x0 = b[i].qs[j] & 0x0F;
      const int x1 = b[i].qs[j] >> 4;
      y[j] = x0 * d + m;
      y[j + kQK32 / 2] = x1 * d + m;
    }
  }
}

void dq_q5_0(const BlockQ5_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t h0 = ((qh >> j) << 4) & 0x10;
      const uint8_t h1 = (qh >> (j + 12)) & 0x10;
      const int x0 = ((b[i].qs[j] & 0x0F) | h0) - 16;
      const int x1 = ((b[i].qs[j] >> 4) | h1) - 16;
      y[j] = x0 * d;
      y[j + kQK32 / 2] = x1 * d;
    }
  }
}

void dq_q5_1(const BlockQ5_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    const float m = fp16_to_f32(b[i].m);
    uint32_t qh;
    std::memcpy(&qh, b[i].qh, 4);
    for (int j = 0; j < kQK32 / 2; ++j) {
      const uint8_t h0 = ((qh >> j) << 4) & 0x10;
      const uint8_t h1 = (qh >> (j + 12)) & 0x10;
      const int x0 = (b[i].qs[j] & 0x0F) | h0;
      const int x1 = (b[i].qs[j] >> 4) | h1;
      y[j] = x0 * d + m;
      y[j + kQK32 / 2] = x1 * d + m;
    }
  }
}

void dq_q8_0(const BlockQ8_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK32; ++j) y[j] = b[i].qs[j] * d;
  }
}

void dq_q8_1(const BlockQ8_1* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQK32) {
    const float d = fp16_to_f32(b[i].d);
    for (int j = 0; j < kQK32; ++j) y[j] = b[i].qs[j] * d;
  }
}

void dq_q2_k(const BlockQ2_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    int is = 0;
    for (int n = 0; n < kQKK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2) {
        for (int half = 0; half < 2; ++half) {
          const uint8_t sc = b[i].scales[is++];
          const float dl = d * (sc & 0xF);
          const float ml = dmin * (sc >> 4);
          for (int l = 0; l < 16; ++l)
            *y++ = dl * static_cast<int8_t>((q[l + 16 * half] >> shift) & 3) - ml;
        }
      }
    }
  }
}

void dq_q3_k(const BlockQ3_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d_all = fp16_to_f32(b[i].d);
    int8_t scales[16];
    q3k_scales(b[i].scales, scales);
    const uint8_t* q = b[i].qs;
    const uint8_t* hm = b[i].hmask;
    uint8_t m = 1;
    int is = 0;
    for (int n = 0; n < kQKK; n += 128, q += 32) {
      for (int shift = 0; shift < 8; shift += 2, m <<= 1) {
        for (int half = 0; half < 2; ++half) {
          const float dl = d_all * scales[is++];
          for (int l = 16 * half; l < 16 * half + 16; ++l)
            *y++ = dl * (static_cast<int8_t>((q[l] >> shift) & 3) - ((hm[l] & m) ? 0 : 4));
        }
      }
    }
  }
}

void dq_q4_k(const BlockQ4_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* q = b[i].qs;
    for (int j = 0; j < 8; j += 2, q += 32) {
      uint8_t sc, m;
      k_scale_min(j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      k_scale_min(j + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * (q[l] & 0xF) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * (q[l] >> 4) - m2;
    }
  }
}

void dq_q5_k(const BlockQ5_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const float dmin = fp16_to_f32(b[i].dmin);
    const uint8_t* ql = b[i].qs;
    const uint8_t* qh = b[i].qh;
    uint8_t u1 = 1, u2 = 2;
    for (int j = 0; j < 8; j += 2, ql += 32, u1 <<= 2, u2 <<= 2) {
      uint8_t sc, m;
      k_scale_min(j, b[i].scales, &sc, &m);
      const float d1 = d * sc, m1 = dmin * m;
      k_scale_min(j + 1, b[i].scales, &sc, &m);
      const float d2 = d * sc, m2 = dmin * m;
      for (int l = 0; l < 32; ++l) *y++ = d1 * ((ql[l] & 0xF) + (qh[l] & u1 ? 16 : 0)) - m1;
      for (int l = 0; l < 32; ++l) *y++ = d2 * ((ql[l] >> 4) + (qh[l] & u2 ? 16 : 0)) - m2;
    }
  }
}

void dq_q6_k(const BlockQ6_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    const float d = fp16_to_f32(b[i].d);
    const uint8_t* ql = b[i].ql;
    const uint8_t* qh = b[i].qh;
    const int8_t* sc = b[i].scales;
    for (int n = 0; n < kQKK; n += 128, y += 128, ql += 64, qh += 32, sc += 8) {
      for (int l = 0; l < 32; ++l) {
        const int is = l / 16;
        const int8_t q1 = static_cast<int8_t>((ql[l] & 0xF) | (((qh[l] >> 0) & 3) << 4)) - 32;
        const int8_t q2 = static_cast<int8_t>((ql[l + 32] & 0xF) | (((qh[l] >> 2) & 3) << 4)) - 32;
        const int8_t q3 = static_cast<int8_t>((ql[l] >> 4) | (((qh[l] >> 4) & 3) << 4)) - 32;
        const int8_t q4 = static_cast<int8_t>((ql[l + 32] >> 4) | (((qh[l] >> 6) & 3) << 4)) - 32;
        y[l + 0] = d * sc[is + 0] * q1;
        y[l + 32] = d * sc[is + 2] * q2;
        y[l + 64] = d * sc[is + 4] * q3;
        y[l + 96] = d * sc[is + 6] * q4;
      }
    }
  }
}

void dq_q8_k(const BlockQ8_K* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i)
    for (int j = 0; j < kQKK; ++j) *y++ = b[i].d * b[i].qs[j];
}

}  // namespace

bool can_dequantize(Dtype t) {
  switch (t) {
    case Dtype::kF32:
    case Dtype::kF16:
    case Dtype::kBF16:
    case Dtype::kQ4_0:
    case Dtype::kQ4_1:
    case Dtype::kQ5_0:
    case Dtype::kQ5_1:
    case Dtype::kQ8_0:
    case Dtype::kQ8_1:
    case Dtype::kQ2_K:
    case Dtype::kQ3_K:
    case Dtype::kQ4_K:
    case Dtype::kQ5_K:
    case Dtype::kQ6_K:
    case Dtype::kQ8_K:
    case Dtype::kMXFP4:
    case Dtype::kIQ4_NL:
    case Dtype::kIQ4_XS:
    case Dtype::kTQ1_0:
    case Dtype::kTQ2_0:
      return true;
    default:
      return false;
  }
}

void dequantize_row(Dtype t, const void* src, float* dst, int64_t n) {
  const int64_t nb = n / dtype_info(t).block_size;
  LOOM_CHECK(nb * dtype_info(t).block_size == n);
  switch (t) {
    case Dtype::kF32:
      std::memcpy(dst, src, n * sizeof(float));
      return;
    case Dtype::kF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = fp16_to_f32(h[i]);
      return;
    }
    case Dtype::kBF16: {
      const auto* h = static_cast<const uint16_t*>(src);
      for (int64_t i = 0; i < n; ++i) dst[i] = bf16_to_f32(h[i]);
      return;
    }
    case Dtype::kQ4_0:
      return dq_q4_0(static_cast<const BlockQ4_0*>(src), dst, nb);
    case Dtype::kQ4_1:
      return dq_q4_1(static_cast<const BlockQ4_1*>(src), dst, nb);
    case Dtype::kQ5_0:
      return dq_q5_0(static_cast<const BlockQ5_0*>(src), dst, nb);
    case Dtype::kQ5_1:
      return dq_q5_1(static_cast<const BlockQ5_1*>(src), dst, nb);
    case Dtype::kQ8_0:
      return dq_q8_0(static_cast<const BlockQ8_0*>(src), dst, nb);
    case Dtype::kQ8_1:
      return dq_q8_1(static_cast<const BlockQ8_1*>(src), dst, nb);
    case Dtype::kQ2_K:
      return dq_q2_k(static_cast<const BlockQ2_K*>(src), dst, nb);
    case Dtype::kQ3_K:
      return dq_q3_k(static_cast<const BlockQ3_K*>(src), dst, nb);
    case Dtype::kQ4_K:
      return dq_q4_k(static_cast<const BlockQ4_K*>(src), dst, nb);
    case Dtype::kQ5_K:
      return dq_q5_k(static_cast<const BlockQ5_K*>(src), dst, nb);
    case Dtype::kQ6_K:
      return dq_q6_k(static_cast<const BlockQ6_K*>(src), dst, nb);
    case Dtype::kQ8_K:
      return dq_q8_k(static_cast<const BlockQ8_K*>(src), dst, nb);
    case Dtype::kMXFP4:
      return dequantize_mxfp4(static_cast<const BlockMxfp4*>(src), dst, nb);
    case Dtype::kIQ4_NL:
      return dequantize_iq4_nl(static_cast<const BlockIq4Nl*>(src), dst, nb);
    case Dtype::kIQ4_XS:
      return dequantize_iq4_xs(static_cast<const BlockIq4Xs*>(src), dst, nb);
    case Dtype::kTQ1_0:
      return dequantize_tq1_0(static_cast<const BlockTq1_0*>(src), dst, nb);
    case Dtype::kTQ2_0:
      return dequantize_tq2_0(static_cast<const BlockTq2_0*>(src), dst, nb);
    default:
      LOOM_CHECK(false && "dtype has no dequantizer");
  }
}

}  // namespace loom::kernels::ref
