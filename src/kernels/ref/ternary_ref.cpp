#include "kernels/ref/ternary_ref.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/fp16.h"

namespace loom::kernels::ref {

int tq1_0_trit(const BlockTq1_0& b, int k) {
  if (k < 160) return tq1_trit(b.qs[k % 32], k / 32);
  if (k < 240) return tq1_trit(b.qs[32 + (k - 160) % 16], (k - 160) / 16);
  return tq1_trit(b.qh[(k - 240) % 4], (k - 240) / 4);
}

int tq2_0_trit(const BlockTq2_0& b, int k) {
  return (b.qs[32 * (k / 128) + k % 32] >> (2 * ((k / 32) % 4))) & 3;
}

void dequantize_tq1_0(const BlockTq1_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_f32(b[i].d);
    for (int k = 0; k < kQKK; ++k) y[k] = static_cast<float>(tq1_0_trit(b[i], k) - 1) * d;
  }
}

void dequantize_tq2_0(const BlockTq2_0* b, float* y, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i, y += kQKK) {
    const float d = fp16_to_f32(b[i].d);
    for (int k = 0; k < kQKK; ++k) y[k] = static_cast<float>(tq2_0_trit(b[i], k) - 1) * d;
  }
}

namespace {

// The block's scale (its largest magnitude, stored as fp16) and each element's trit.
uint16_t ternary_trits(const float* x, int* t) {
  float amax = 0.0f;
  for (int k = 0; k < kQKK; ++k) amax = std::max(amax, std::fabs(x[k]));
  const float id = amax > 0.0f ? 1.0f / amax : 0.0f;
  for (int k = 0; k < kQKK; ++k) t[k] = static_cast<int>(std::lround(x[k] * id)) + 1;
  return f32_to_fp16(amax);
}

// n trits, first the most significant, as a TQ1_0 byte: their base-3 number over 3^5 of 256,
// rounded up (so that tq1_trit reads each back exactly).
uint8_t pack_trits(const int* t, int n, int stride) {
  int v = 0;
  for (int j = 0; j < n; ++j) v = 3 * v + t[j * stride];
  for (int j = n; j < 5; ++j) v *= 3;
  return static_cast<uint8_t>((v * 256 + 242) / 243);
}

}  // namespace

void quantize_tq1_0(const float* x, BlockTq1_0* y, int64_t nb) {
  int t[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    y[i].d = ternary_trits(x, t);
    for (int m = 0; m < 32; ++m) y[i].qs[m] = pack_trits(t + m, 5, 32);
    for (int m = 0; m < 16; ++m) y[i].qs[32 + m] = pack_trits(t + 160 + m, 5, 16);
    for (int j = 0; j < 4; ++j) y[i].qh[j] = pack_trits(t + 240 + j, 4, 4);
  }
}

void quantize_tq2_0(const float* x, BlockTq2_0* y, int64_t nb) {
  int t[kQKK];
  for (int64_t i = 0; i < nb; ++i, x += kQKK) {
    y[i].d = ternary_trits(x, t);
    for (int h = 0; h < 2; ++h)
      for (int m = 0; m < 32; ++m) {
        int q = 0;
        for (int l = 0; l < 4; ++l) q |= t[128 * h + 32 * l + m] << (2 * l);
        y[i].qs[32 * h + m] = static_cast<uint8_t>(q);
      }
  }
}

namespace {

// The trits of a TQ1_0 block into 64 bytes of 2-bit trits in TQ2_0's (and Q2_K's) places:
// element 128h + 32l + m in bits 2l of qs[32h + m]. Byte by byte (tq1_0_trit's places), not
// element by element: loading converts every ternary matrix so.
void tq1_0_trits_2bit(const BlockTq1_0& b, uint8_t* qs) {
  std::memset(qs, 0, kQKK / 4);
  auto put = [&](int k, int trit) {
    qs[32 * (k / 128) + k % 32] |= static_cast<uint8_t>(trit << (2 * ((k / 32) % 4)));
  };
  for (int n = 0; n < 5; ++n) {
    for (int m = 0; m < 32; ++m) put(32 * n + m, tq1_trit(b.qs[m], n));
    for (int m = 0; m < 16; ++m) put(160 + 16 * n + m, tq1_trit(b.qs[32 + m], n));
  }
  for (int n = 0; n < 4; ++n)
    for (int j = 0; j < 4; ++j) put(240 + 4 * n + j, tq1_trit(b.qh[j], n));
}

}  // namespace

void tq1_0_to_tq2_0(const BlockTq1_0* src, BlockTq2_0* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    dst[i].d = src[i].d;
    tq1_0_trits_2bit(src[i], dst[i].qs);
  }
}

void ternary_to_q2_k(Dtype t, const void* src, BlockQ2_K* dst, int64_t nb) {
  for (int64_t i = 0; i < nb; ++i) {
    BlockQ2_K& q = dst[i];
    std::memset(q.scales, 0x11, sizeof q.scales);  // scale 1 (low nibble), min 1 (high)
    if (t == Dtype::kTQ2_0) {
      const BlockTq2_0& b = static_cast<const BlockTq2_0*>(src)[i];
      q.d = q.dmin = b.d;
      std::memcpy(q.qs, b.qs, sizeof q.qs);
      continue;
    }
    const BlockTq1_0& b = static_cast<const BlockTq1_0*>(src)[i];
    q.d = q.dmin = b.d;
    tq1_0_trits_2bit(b, q.qs);
  }
}

}  // namespace loom::kernels::ref
