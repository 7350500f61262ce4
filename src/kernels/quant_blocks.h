// Quantized block layouts, byte for byte as ggml defines them (ggml-common.h), so GGUF tensor
// data can be read in place. Sizes must match the dtype table in src/format/dtype.cpp.
#pragma once

#include <cstdint>

namespace loom::kernels {

constexpr int kQK32 = 32;         // elements per block of the legacy formats (Q4_0 ... Q8_1)
constexpr int kQKK = 256;         // elements per K-quant super-block
constexpr int kKScaleBytes = 12;  // packed 6-bit scales/mins of Q4_K and Q5_K

// value = (q - 8) * d;  qs[j] holds element j (low nibble) and j + 16 (high nibble).
struct BlockQ4_0 {
  uint16_t d;  // fp16
  uint8_t qs[kQK32 / 2];
};
// MXFP4 (ggml's block_mxfp4): value = kMxfp4Values[q] * e8m0_half(e); qs[j] holds element j
// (low nibble) and j + 16 (high nibble), as Q4_0. The table is E2M1 doubled (so it is
// integer), and the scale halved to match: 2^(e - 128).
struct BlockMxfp4 {
  uint8_t e;  // E8M0: 2^(e - 127)
  uint8_t qs[kQK32 / 2];
};
inline constexpr int8_t kMxfp4Values[16] = {0, 1,  2,  3,  4,  6,  8,  12,
                                            0, -1, -2, -3, -4, -6, -8, -12};
// 2^(e - 128) exactly (subnormal for e < 2), as ggml's GGML_E8M0_TO_FP32_HALF.
inline float e8m0_half(uint8_t e) {
  const uint32_t bits = e < 2 ? 0x00200000u << e : static_cast<uint32_t>(e - 1) << 23;
  float f;
  __builtin_memcpy(&f, &bits, sizeof f);
  return f;
}

// value = q * d + m
struct BlockQ4_1 {
  uint16_t d;  // fp16
  uint16_t m;  // fp16
  uint8_t qs[kQK32 / 2];
};
// value = (q - 16) * d; bit 4 of element j is bit j of qh (read as little-endian uint32).
struct BlockQ5_0 {
  uint16_t d;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};
// value = q * d + m
struct BlockQ5_1 {
  uint16_t d;
  uint16_t m;
  uint8_t qh[4];
  uint8_t qs[kQK32 / 2];
};
// value = q * d
struct BlockQ8_0 {
  uint16_t d;
  int8_t qs[kQK32];
};
// Activation side of Q4_1/Q5_1 dot products: s = d * sum(qs).
struct BlockQ8_1 {
  uint16_t d;
  uint16_t s;
  int8_t qs[kQK32];
};

// IQ4_NL (ggml's block_iq4_nl): value = d * kIq4NlValues[q], the nibbles placed as Q4_0's
// (qs[j]: element j low, j + 16 high). The table is the format's: a non-uniform 4-bit grid.
struct BlockIq4Nl {
  uint16_t d;  // fp16
  uint8_t qs[kQK32 / 2];
};
inline constexpr int8_t kIq4NlValues[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                                            1,    13,   25,  38,  53,  69,  89,  113};
// IQ4_XS (block_iq4_xs): 8 sub-blocks of 32, each IQ4_NL's grid with the scale d * (ls - 32),
// ls 6 bits: the low 4 in scales_l (sub-block j: byte j / 2, nibble j % 2), the high 2 in
// scales_h (bits 2j, 2j + 1). Sub-block j's nibbles are qs[16j .. 16j + 15], placed as Q4_0's.
struct BlockIq4Xs {
  uint16_t d;  // fp16
  uint16_t scales_h;
  uint8_t scales_l[kQKK / 64];
  uint8_t qs[kQKK / 2];
};
// Sub-block j's signed scale ls - 32, in -32..31.
inline int iq4_xs_scale(const BlockIq4Xs& b, int j) {
  const int ls =
      ((b.scales_l[j / 2] >> (4 * (j % 2))) & 0xF) | (((b.scales_h >> (2 * j)) & 3) << 4);
  return ls - 32;
}

// 16 sub-blocks of 16: value = d * (scales & 15) * q - dmin * (scales >> 4), q in 0..3.
struct BlockQ2_K {
  uint8_t scales[kQKK / 16];
  uint8_t qs[kQKK / 4];
  uint16_t d;
  uint16_t dmin;
};
// 16 sub-blocks of 16 with 6-bit signed scales (packed in 12 bytes, offset 32); q in -4..3
// from 2 low bits (qs) and a high bit (hmask, set = no -4).
struct BlockQ3_K {
  uint8_t hmask[kQKK / 8];
  uint8_t qs[kQKK / 4];
  uint8_t scales[12];
  uint16_t d;
};
// 8 sub-blocks of 32 with 6-bit scales and mins: value = d * sc * q - dmin * m, q in 0..15.
struct BlockQ4_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qs[kQKK / 2];
};
// As Q4_K with a fifth bit per element in qh: q in 0..31.
struct BlockQ5_K {
  uint16_t d;
  uint16_t dmin;
  uint8_t scales[kKScaleBytes];
  uint8_t qh[kQKK / 8];
  uint8_t qs[kQKK / 2];
};
// 16 sub-blocks of 16 with int8 scales: value = d * scale * (q - 32), q in 0..63 from 4 low
// bits (ql) and 2 high bits (qh).
struct BlockQ6_K {
  uint8_t ql[kQKK / 2];
  uint8_t qh[kQKK / 4];
  int8_t scales[kQKK / 16];
  uint16_t d;
};
// Ternary super-blocks (llama.cpp's TQ1_0, TQ2_0): value = d * (t - 1), trit t in 0..2, d the
// block's largest magnitude. TQ2_0 keeps each trit in 2 bits: element 128h + 32l + m of the
// block in bits 2l of qs[32h + m]. TQ1_0 packs 5 trits a byte as the fraction t0/3 + t1/9 +
// ... of 256 (rounded up): trit n of byte b is floor(3 * (b * 3^n mod 256) / 256). Its qs
// hold elements 32n + m (byte m < 32) and 160 + 16n + m (byte 32 + m), qh elements 240 + 4n + j
// in their first 4 trits.
struct BlockTq1_0 {
  uint8_t qs[(kQKK - 4 * kQKK / 64) / 5];
  uint8_t qh[kQKK / 64];
  uint16_t d;
};
struct BlockTq2_0 {
  uint8_t qs[kQKK / 4];
  uint16_t d;
};
// Activation side of K-quant dot products: value = d * q; bsums = sums of 16 consecutive q.
struct BlockQ8_K {
  float d;
  int8_t qs[kQKK];
  int16_t bsums[kQKK / 16];
};

static_assert(sizeof(BlockQ4_0) == 18);
static_assert(sizeof(BlockMxfp4) == 17);
static_assert(sizeof(BlockIq4Nl) == 18);
static_assert(sizeof(BlockIq4Xs) == 136);
static_assert(sizeof(BlockQ4_1) == 20);
static_assert(sizeof(BlockQ5_0) == 22);
static_assert(sizeof(BlockQ5_1) == 24);
static_assert(sizeof(BlockQ8_0) == 34);
static_assert(sizeof(BlockQ8_1) == 36);
static_assert(sizeof(BlockQ2_K) == 84);
static_assert(sizeof(BlockQ3_K) == 110);
static_assert(sizeof(BlockQ4_K) == 144);
static_assert(sizeof(BlockQ5_K) == 176);
static_assert(sizeof(BlockQ6_K) == 210);
static_assert(sizeof(BlockQ8_K) == 292);
static_assert(sizeof(BlockTq1_0) == 54);
static_assert(sizeof(BlockTq2_0) == 66);

// Unpacks the 6-bit scale and min of sub-block j (0..7) of a Q4_K/Q5_K block.
inline void k_scale_min(int j, const uint8_t* q, uint8_t* sc, uint8_t* m) {
  if (j < 4) {
    *sc = q[j] & 63;
    *m = q[j + 4] & 63;
  } else {
    *sc = static_cast<uint8_t>((q[j + 4] & 0xF) | ((q[j - 4] >> 6) << 4));
    *m = static_cast<uint8_t>((q[j + 4] >> 4) | ((q[j] >> 6) << 4));
  }
}

// Unpacks the 16 signed 6-bit scales of a Q3_K block (already minus 32).
inline void q3k_scales(const uint8_t* packed, int8_t out[16]) {
  for (int j = 0; j < 16; ++j) {
    int low = j < 8 ? (packed[j] & 0xF) : (packed[j - 8] >> 4);
    int high = (packed[8 + j % 4] >> (2 * (j / 4))) & 3;
    out[j] = static_cast<int8_t>((low | (high << 4)) - 32);
  }
}

}  // namespace loom::kernels
