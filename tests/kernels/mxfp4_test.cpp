// MXFP4 as ggml defines it (ggml-common.h block_mxfp4, ggml-quants.c): 32 E2M1 values sharing
// an E8M0 exponent; the low nibbles of qs are elements 0-15, the high ones 16-31.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>

#include "format/dtype.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"

namespace loom::kernels {
namespace {

// E2M1's eight magnitudes (sign bit 3): 0, 0.5, 1, 1.5, 2, 3, 4, 6.
float e2m1(int code) {
  static const float kMag[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
  return (code & 8 ? -1.0f : 1.0f) * kMag[code & 7];
}

TEST(Mxfp4, TypeTableMatchesGgml) {
  auto info = dtype_info(39);  // GGML_TYPE_MXFP4
  ASSERT_TRUE(info.has_value());
  EXPECT_EQ(info->dtype, Dtype::kMXFP4);
  EXPECT_EQ(info->block_size, 32);
  EXPECT_EQ(info->block_bytes, 17);
  EXPECT_EQ(*parse_dtype("MXFP4"), Dtype::kMXFP4);
}

// Every code in both nibbles, at scales 2^-3, 2^0, 2^5 and a subnormal one (e = 1).
TEST(Mxfp4, DequantizesKnownBlocks) {
  for (int e : {124, 127, 132, 1}) {
    BlockMxfp4 b;
    b.e = static_cast<uint8_t>(e);
    for (int j = 0; j < 16; ++j) b.qs[j] = static_cast<uint8_t>(j | ((15 - j) << 4));
    float y[32];
    dequantize_row(Dtype::kMXFP4, &b, y, 32);
    const double scale = std::ldexp(1.0, e - 127);
    for (int j = 0; j < 16; ++j) {
      EXPECT_EQ(y[j], static_cast<float>(e2m1(j) * scale)) << "e " << e << " j " << j;
      EXPECT_EQ(y[j + 16], static_cast<float>(e2m1(15 - j) * scale)) << "e " << e << " j " << j;
    }
  }
}

// The quantizer: exponent floor(log2(amax)) - 2 (so amax / 2^e lies in [4, 8)), each value the
// nearest E2M1 value times 2^e (values past 6 · 2^e saturate). Checked by brute force.
TEST(Mxfp4, QuantizesToNearestValueOnRandomData) {
  std::mt19937 rng(7);
  std::normal_distribution<float> n(0.0f, 1.0f);
  std::vector<float> x(32 * 64);
  for (size_t i = 0; i < x.size(); ++i)
    x[i] = n(rng) * std::ldexp(1.0f, static_cast<int>(i / 256) - 4);
  std::vector<uint8_t> q(*row_bytes(Dtype::kMXFP4, static_cast<int64_t>(x.size())));
  ASSERT_TRUE(
      quantize_row(Dtype::kMXFP4, x.data(), q.data(), static_cast<int64_t>(x.size())).is_ok());
  std::vector<float> y(x.size());
  dequantize_row(Dtype::kMXFP4, q.data(), y.data(), static_cast<int64_t>(x.size()));
  for (size_t blk = 0; blk < x.size() / 32; ++blk) {
    float amax = 0;
    for (int j = 0; j < 32; ++j) amax = std::max(amax, std::fabs(x[blk * 32 + j]));
    const int e = static_cast<int>(std::floor(std::log2(amax))) - 2;
    EXPECT_EQ(q[blk * 17], e + 127) << "block " << blk;
    for (int j = 0; j < 32; ++j) {
      const float v = x[blk * 32 + j];
      float best = INFINITY;
      for (int c = 0; c < 16; ++c)
        best = std::min(best, std::fabs(e2m1(c) * std::ldexp(1.0f, e) - v));
      EXPECT_NEAR(std::fabs(y[blk * 32 + j] - v), best, 1e-6f * amax) << blk << " " << j;
    }
  }
}

TEST(Mxfp4, ZeroBlockAndBadLength) {
  std::vector<float> z(64, 0.0f), y(64, 1.0f);
  std::vector<uint8_t> q(34);
  ASSERT_TRUE(quantize_row(Dtype::kMXFP4, z.data(), q.data(), 64).is_ok());
  dequantize_row(Dtype::kMXFP4, q.data(), y.data(), 64);
  for (float v : y) EXPECT_EQ(v, 0.0f);
  EXPECT_FALSE(quantize_row(Dtype::kMXFP4, z.data(), q.data(), 48).is_ok());
}

}  // namespace
}  // namespace loom::kernels
