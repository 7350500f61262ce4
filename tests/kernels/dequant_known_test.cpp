// Dequantization of hand-built blocks against values worked out from the block layouts of
// ggml-common.h (element by element, indexing written independently of the dequantizers).
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "base/fp16.h"
#include "format/dtype.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"

namespace loom::kernels {
namespace {

constexpr uint16_t kHalfOne = 0x3C00, kHalfHalf = 0x3800, kHalfQuarter = 0x3400;
constexpr uint16_t kHalfMinusOne = 0xBC00;

TEST(DtypeTable, BlockSizesMatchStructs) {
  EXPECT_EQ(dtype_info(Dtype::kQ4_0).block_bytes, int64_t(sizeof(BlockQ4_0)));
  EXPECT_EQ(dtype_info(Dtype::kQ4_1).block_bytes, int64_t(sizeof(BlockQ4_1)));
  EXPECT_EQ(dtype_info(Dtype::kQ5_0).block_bytes, int64_t(sizeof(BlockQ5_0)));
  EXPECT_EQ(dtype_info(Dtype::kQ5_1).block_bytes, int64_t(sizeof(BlockQ5_1)));
  EXPECT_EQ(dtype_info(Dtype::kQ8_0).block_bytes, int64_t(sizeof(BlockQ8_0)));
  EXPECT_EQ(dtype_info(Dtype::kQ8_1).block_bytes, int64_t(sizeof(BlockQ8_1)));
  EXPECT_EQ(dtype_info(Dtype::kQ2_K).block_bytes, int64_t(sizeof(BlockQ2_K)));
  EXPECT_EQ(dtype_info(Dtype::kQ3_K).block_bytes, int64_t(sizeof(BlockQ3_K)));
  EXPECT_EQ(dtype_info(Dtype::kQ4_K).block_bytes, int64_t(sizeof(BlockQ4_K)));
  EXPECT_EQ(dtype_info(Dtype::kQ5_K).block_bytes, int64_t(sizeof(BlockQ5_K)));
  EXPECT_EQ(dtype_info(Dtype::kQ6_K).block_bytes, int64_t(sizeof(BlockQ6_K)));
  EXPECT_EQ(dtype_info(Dtype::kQ8_K).block_bytes, int64_t(sizeof(BlockQ8_K)));
  EXPECT_EQ(dtype_info(Dtype::kIQ4_NL).block_bytes, int64_t(sizeof(BlockIq4Nl)));
  EXPECT_EQ(dtype_info(Dtype::kIQ4_XS).block_bytes, int64_t(sizeof(BlockIq4Xs)));
  EXPECT_EQ(dtype_info(Dtype::kTQ1_0).block_bytes, int64_t(sizeof(BlockTq1_0)));
  EXPECT_EQ(dtype_info(Dtype::kTQ2_0).block_bytes, int64_t(sizeof(BlockTq2_0)));
}

template <typename Block>
std::vector<float> dq(Dtype t, const Block& b, int n) {
  std::vector<float> y(n);
  dequantize_row(t, &b, y.data(), n);
  return y;
}

TEST(DequantKnown, Q4_0) {
  BlockQ4_0 b;
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = dq(Dtype::kQ4_0, b, 32);
  EXPECT_EQ(y[0], -4.0f);
  EXPECT_EQ(y[16], 3.5f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], (j - 8) * 0.5f);
    EXPECT_EQ(y[16 + j], (7 - j) * 0.5f);
  }
}

// A trit pattern over a 256-element block with every trit value in every place: element k's
// trit is (k + k / 7) % 3.
int pattern_trit(int k) {
  return (k + k / 7) % 3;
}

TEST(DequantKnown, Tq2_0) {
  // 2 bits per element: element 128h + 32l + m in bits 2l..2l+1 of byte 32h + m.
  BlockTq2_0 b{};
  b.d = kHalfHalf;
  for (int k = 0; k < 256; ++k)
    b.qs[32 * (k / 128) + k % 32] |= static_cast<uint8_t>(pattern_trit(k) << (2 * ((k / 32) % 4)));
  auto y = dq(Dtype::kTQ2_0, b, 256);
  for (int k = 0; k < 256; ++k) EXPECT_EQ(y[k], 0.5f * (pattern_trit(k) - 1)) << k;
}

TEST(DequantKnown, Tq1_0) {
  // 5 trits per byte as a base-3 fraction of 256, the first trit most significant and the
  // byte rounded up: byte = ceil(256 * (t0 t1 t2 t3 t4)_3 / 243). Bytes 0..31 hold elements
  // 32n + m (trit n of byte m), bytes 32..47 elements 160 + 16n + m, and the 4 qh bytes
  // elements 240 + 4n + j in their first 4 trits (the fifth 0).
  auto pack = [](const int(&t)[5]) {
    const int v = (((t[0] * 3 + t[1]) * 3 + t[2]) * 3 + t[3]) * 3 + t[4];
    return static_cast<uint8_t>((256 * v + 242) / 243);
  };
  BlockTq1_0 b{};
  b.d = kHalfMinusOne;
  for (int m = 0; m < 32; ++m) {
    int t[5];
    for (int n = 0; n < 5; ++n) t[n] = pattern_trit(32 * n + m);
    b.qs[m] = pack(t);
  }
  for (int m = 0; m < 16; ++m) {
    int t[5];
    for (int n = 0; n < 5; ++n) t[n] = pattern_trit(160 + 16 * n + m);
    b.qs[32 + m] = pack(t);
  }
  for (int j = 0; j < 4; ++j) {
    int t[5] = {0, 0, 0, 0, 0};
    for (int n = 0; n < 4; ++n) t[n] = pattern_trit(240 + 4 * n + j);
    b.qh[j] = pack(t);
  }
  EXPECT_EQ(b.qs[0], 15);  // trits 0 0 1 1 2 = 9 + 3 + 2 = 14: ceil(256 * 14 / 243) = 15
  auto y = dq(Dtype::kTQ1_0, b, 256);
  for (int k = 0; k < 256; ++k) EXPECT_EQ(y[k], -1.0f * (pattern_trit(k) - 1)) << k;
}

// IQ4_NL's grid, written out from the format's definition (ggml-common.h kvalues_iq4nl).
constexpr float kGrid[16] = {-127, -104, -83, -65, -49, -35, -22, -10,
                             1,    13,   25,  38,  53,  69,  89,  113};

TEST(DequantKnown, Iq4Nl) {
  BlockIq4Nl b;
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = dq(Dtype::kIQ4_NL, b, 32);
  EXPECT_EQ(y[0], -63.5f);
  EXPECT_EQ(y[15], 56.5f);
  EXPECT_EQ(y[16], 56.5f);
  EXPECT_EQ(y[31], -63.5f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], kGrid[j] * 0.5f);
    EXPECT_EQ(y[16 + j], kGrid[15 - j] * 0.5f);
  }
}

TEST(DequantKnown, Iq4Xs) {
  BlockIq4Xs b;
  b.d = kHalfQuarter;
  // Sub-block j's 6-bit ls: low 4 bits from scales_l[j / 2] (nibble j % 2), high 2 from
  // scales_h bits 2j..2j+1. Scales ls - 32 chosen: 10, -11, 0, -32, 31, 1, -1, 5.
  const int want_scale[8] = {10, -11, 0, -32, 31, 1, -1, 5};
  b.scales_h = 0;
  for (int j = 0; j < 4; ++j) b.scales_l[j] = 0;
  for (int j = 0; j < 8; ++j) {
    const int ls = want_scale[j] + 32;
    b.scales_l[j / 2] |= static_cast<uint8_t>((ls & 15) << (4 * (j % 2)));
    b.scales_h |= static_cast<uint16_t>((ls >> 4) << (2 * j));
  }
  EXPECT_EQ(b.scales_l[0], 0x5A);  // ls 42 = 0b10'1010 and 21 = 0b01'0101
  EXPECT_EQ(b.scales_h & 0xF, 0b0110);
  for (int i = 0; i < 128; ++i) b.qs[i] = static_cast<uint8_t>((i % 16) | ((i * 7 % 16) << 4));
  auto y = dq(Dtype::kIQ4_XS, b, 256);
  EXPECT_EQ(y[0], 0.25f * 10 * -127);
  EXPECT_EQ(y[32 + 16 + 1], 0.25f * -11 * kGrid[7]);  // sub-block 1, byte 17: high nibble 7
  for (int j = 0; j < 8; ++j)
    for (int k = 0; k < 16; ++k) {
      const int byte = 16 * j + k;
      EXPECT_EQ(y[32 * j + k], 0.25f * want_scale[j] * kGrid[byte % 16]) << j << " " << k;
      EXPECT_EQ(y[32 * j + 16 + k], 0.25f * want_scale[j] * kGrid[byte * 7 % 16]) << j << " " << k;
    }
}

TEST(DequantKnown, Q4_1) {
  BlockQ4_1 b;
  b.d = kHalfHalf;
  b.m = kHalfMinusOne;
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = dq(Dtype::kQ4_1, b, 32);
  EXPECT_EQ(y[0], -1.0f);
  EXPECT_EQ(y[16], 6.5f);
  for (int j = 0; j < 16; ++j) {
    EXPECT_EQ(y[j], j * 0.5f - 1.0f);
    EXPECT_EQ(y[16 + j], (15 - j) * 0.5f - 1.0f);
  }
}

TEST(DequantKnown, Q5_0AndQ5_1) {
  BlockQ5_0 b;
  b.d = kHalfOne;
  const uint32_t qh = 0xAAAA5555u;
  std::memcpy(b.qh, &qh, 4);
  for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
  auto y = dq(Dtype::kQ5_0, b, 32);
  EXPECT_EQ(y[0], 0.0f);    // 0 | 16 - 16
  EXPECT_EQ(y[1], -15.0f);  // 1 - 16
  EXPECT_EQ(y[16], -1.0f);  // 15 - 16 (bit 16 clear)
  EXPECT_EQ(y[17], 14.0f);  // 14 | 16 - 16
  for (int e = 0; e < 32; ++e) {
    const int nib = e < 16 ? e : 15 - (e - 16);
    EXPECT_EQ(y[e], float((nib | int(((qh >> e) & 1) << 4)) - 16)) << e;
  }
  BlockQ5_1 c;
  c.d = kHalfQuarter;
  c.m = kHalfOne;
  std::memcpy(c.qh, &qh, 4);
  std::memcpy(c.qs, b.qs, 16);
  auto z = dq(Dtype::kQ5_1, c, 32);
  for (int e = 0; e < 32; ++e) {
    const int nib = e < 16 ? e : 15 - (e - 16);
    EXPECT_EQ(z[e], float(nib | int(((qh >> e) & 1) << 4)) * 0.25f + 1.0f) << e;
  }
}

TEST(DequantKnown, Q8_0) {
  BlockQ8_0 b;
  b.d = kHalfQuarter;
  for (int j = 0; j < 32; ++j) b.qs[j] = static_cast<int8_t>(j * 8 - 128);
  auto y = dq(Dtype::kQ8_0, b, 32);
  EXPECT_EQ(y[0], -32.0f);
  EXPECT_EQ(y[31], 30.0f);
  for (int j = 0; j < 32; ++j) EXPECT_EQ(y[j], (j * 8 - 128) * 0.25f);
}

TEST(DequantKnown, Q2_K) {
  BlockQ2_K b;
  b.d = kHalfOne;
  b.dmin = kHalfHalf;
  for (int j = 0; j < 16; ++j)
    b.scales[j] = static_cast<uint8_t>((j & 0xF) | (((j + 1) & 0xF) << 4));
  std::memset(b.qs, 0xE4, sizeof(b.qs));  // 2-bit fields 0,1,2,3 from the low bits up
  auto y = dq(Dtype::kQ2_K, b, 256);
  EXPECT_EQ(y[0], -0.5f);    // sub-block 0: 0 * 0 - 0.5 * 1
  EXPECT_EQ(y[40], 0.5f);    // sub-block 2, field 1: 2 * 1 - 0.5 * 3
  EXPECT_EQ(y[255], 45.0f);  // sub-block 15, field 3: 15 * 3 - 0.5 * 0
  for (int e = 0; e < 256; ++e) {
    const int j = e / 16;
    const int q = (e % 128) / 32;
    EXPECT_EQ(y[e], float(j * q) - 0.5f * ((j + 1) & 0xF)) << e;
  }
}

TEST(DequantKnown, Q3_K) {
  BlockQ3_K b;
  b.d = kHalfHalf;
  int raw[16];
  std::memset(b.scales, 0, 12);
  for (int j = 0; j < 16; ++j) {
    raw[j] = (j * 4 + 1) & 63;
    if (j < 8)
      b.scales[j] |= raw[j] & 0xF;
    else
      b.scales[j - 8] |= (raw[j] & 0xF) << 4;
    b.scales[8 + j % 4] |= (raw[j] >> 4) << (2 * (j / 4));
  }
  std::memset(b.qs, 0xE4, sizeof(b.qs));
  for (int l = 0; l < 32; ++l) b.hmask[l] = l < 16 ? 0x0F : 0xF0;
  auto y = dq(Dtype::kQ3_K, b, 256);
  // element 0: scale 1-32=-31, q = 0 with high bit set (hmask[0] bit 0) -> 0
  EXPECT_EQ(y[0], 0.0f);
  // element 16: scale 5-32=-27, hmask[16] bit 0 clear -> q = 0 - 4 -> 0.5*-27*-4 = 54
  EXPECT_EQ(y[16], 54.0f);
  for (int e = 0; e < 256; ++e) {
    const int j = e / 16, l = e % 32;
    const int q = (e % 128) / 32;
    const bool high = (b.hmask[l] >> (e / 32)) & 1;
    EXPECT_EQ(y[e], 0.5f * float(raw[j] - 32) * float(q - (high ? 0 : 4))) << e;
  }
}

// Packs 6-bit (scale, min) pairs the way Q4_K/Q5_K store them.
void pack_k_scales(const int sc[8], const int mn[8], uint8_t out[12]) {
  std::memset(out, 0, 12);
  for (int j = 0; j < 4; ++j) {
    out[j] = static_cast<uint8_t>(sc[j] | ((sc[j + 4] >> 4) << 6));
    out[j + 4] = static_cast<uint8_t>(mn[j] | ((mn[j + 4] >> 4) << 6));
    out[j + 8] = static_cast<uint8_t>((sc[j + 4] & 0xF) | ((mn[j + 4] & 0xF) << 4));
  }
}

TEST(DequantKnown, Q4_K) {
  BlockQ4_K b;
  b.d = kHalfOne;
  b.dmin = kHalfQuarter;
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = 8 * j + 3;
    mn[j] = 63 - 7 * j;
  }
  pack_k_scales(sc, mn, b.scales);
  for (int l = 0; l < 128; ++l) b.qs[l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
  auto y = dq(Dtype::kQ4_K, b, 256);
  EXPECT_EQ(y[0], -15.75f);  // 3 * 0 - 0.25 * 63
  EXPECT_EQ(y[255], -3.5f);  // sub-block 7: high nibble of qs[127] is 0; 59 * 0 - 0.25 * 14
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int q = j % 2 == 0 ? l % 16 : 15 - l % 16;
    EXPECT_EQ(y[e], float(sc[j]) * float(q) - 0.25f * float(mn[j])) << e;
  }
}

TEST(DequantKnown, Q5_K) {
  BlockQ5_K b;
  b.d = kHalfHalf;
  b.dmin = kHalfOne;
  int sc[8], mn[8];
  for (int j = 0; j < 8; ++j) {
    sc[j] = 63 - 5 * j;
    mn[j] = 9 * j;
  }
  pack_k_scales(sc, mn, b.scales);
  for (int l = 0; l < 128; ++l) b.qs[l] = static_cast<uint8_t>((l % 16) | ((15 - l % 16) << 4));
  for (int l = 0; l < 32; ++l) b.qh[l] = static_cast<uint8_t>(l * 7);
  auto y = dq(Dtype::kQ5_K, b, 256);
  EXPECT_EQ(y[0], 0.0f);  // 0.5 * 63 * 0 - 0
  for (int e = 0; e < 256; ++e) {
    const int j = e / 32, l = e % 32;
    const int q = (j % 2 == 0 ? l % 16 : 15 - l % 16) | (((b.qh[l] >> j) & 1) << 4);
    EXPECT_EQ(y[e], 0.5f * float(sc[j]) * float(q) - float(mn[j])) << e;
  }
}

TEST(DequantKnown, Q6_K) {
  BlockQ6_K b;
  b.d = kHalfHalf;
  for (int j = 0; j < 16; ++j) b.scales[j] = static_cast<int8_t>(j - 8);
  for (int i = 0; i < 128; ++i) b.ql[i] = static_cast<uint8_t>(i * 13 + 5);
  for (int i = 0; i < 64; ++i) b.qh[i] = static_cast<uint8_t>(i * 37);
  auto y = dq(Dtype::kQ6_K, b, 256);
  // element 0: ql[0]=5 low nibble 5, qh[0]=0 -> 5 - 32 = -27; 0.5 * -8 * -27 = 108
  EXPECT_EQ(y[0], 108.0f);
  for (int e = 0; e < 256; ++e) {
    const int g = e / 128, r = e % 128, p = r / 32, l = r % 32;
    const uint8_t lo = b.ql[64 * g + l + 32 * (p % 2)];
    const int q = ((p < 2 ? lo & 0xF : lo >> 4) | (((b.qh[32 * g + l] >> (2 * p)) & 3) << 4)) - 32;
    EXPECT_EQ(y[e], 0.5f * float(b.scales[e / 16]) * float(q)) << e;
  }
}

TEST(DequantKnown, Q8_K) {
  BlockQ8_K b{};
  b.d = 0.125f;
  for (int j = 0; j < 256; ++j) b.qs[j] = static_cast<int8_t>(j - 128);
  auto y = dq(Dtype::kQ8_K, b, 256);
  for (int j = 0; j < 256; ++j) EXPECT_EQ(y[j], (j - 128) * 0.125f);
}

TEST(Fp16, KnownConversions) {
  EXPECT_EQ(f32_to_fp16(1.0f), 0x3C00);
  EXPECT_EQ(f32_to_fp16(-2.0f), 0xC000);
  EXPECT_EQ(f32_to_fp16(65504.0f), 0x7BFF);
  EXPECT_EQ(f32_to_fp16(1e6f), 0x7C00);
  EXPECT_EQ(f32_to_fp16(5.960464477539063e-08f), 0x0001);  // smallest subnormal
  EXPECT_EQ(f32_to_fp16(1.0f + 1.0f / 2048), 0x3C00);      // tie -> even
  EXPECT_EQ(f32_to_fp16(1.0f + 3.0f / 2048), 0x3C02);      // tie -> even (up)
  EXPECT_EQ(fp16_to_f32(0x0001), 5.960464477539063e-08f);
  EXPECT_EQ(fp16_to_f32(0xFBFF), -65504.0f);
  EXPECT_EQ(f32_to_bf16(1.0f), 0x3F80);
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F808000u)), 0x3F80);  // tie -> even
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F818000u)), 0x3F82);  // tie -> even (up)
  EXPECT_EQ(f32_to_bf16(bits_to_f32(0x3F808001u)), 0x3F81);
  EXPECT_EQ(bf16_to_f32(0xC040), -3.0f);
}

TEST(Fp16, EveryHalfRoundTripsThroughRows) {
  std::vector<uint16_t> h, back(65536);
  std::vector<float> f(65536);
  for (uint32_t i = 0; i < 65536; ++i) h.push_back(static_cast<uint16_t>(i));
  for (Dtype t : {Dtype::kF16, Dtype::kBF16}) {
    dequantize_row(t, h.data(), f.data(), 65536);
    ASSERT_TRUE(quantize_row(t, f.data(), back.data(), 65536).is_ok());
    for (uint32_t i = 0; i < 65536; ++i) {
      const bool nan = t == Dtype::kF16 ? ((i & 0x7C00) == 0x7C00 && (i & 0x3FF))
                                        : ((i & 0x7F80) == 0x7F80 && (i & 0x7F));
      if (nan) {
        EXPECT_TRUE(std::isnan(f[i]));
        continue;
      }
      ASSERT_EQ(back[i], i) << dtype_name(t) << " " << i;
    }
  }
}

}  // namespace
}  // namespace loom::kernels
