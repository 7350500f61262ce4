// quantize_row -> dequantize_row round trips on random data: relative RMS error per format
// within bounds typical of each bit width, plus degenerate inputs (zeros, constants).
#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "format/dtype.h"
#include "kernels/quant.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

struct Bound {
  Dtype t;
  double max_rel_rms;
};

double roundtrip_error(Dtype t, const std::vector<float>& x) {
  std::vector<uint8_t> q(*row_bytes(t, x.size()));
  std::vector<float> y(x.size());
  EXPECT_TRUE(quantize_row(t, x.data(), q.data(), x.size()).is_ok());
  dequantize_row(t, q.data(), y.data(), x.size());
  for (float v : y) EXPECT_TRUE(std::isfinite(v));
  return testing::rel_error(y.data(), x.data(), x.size());
}

TEST(QuantRoundTrip, ErrorBoundsOnGaussianData) {
  // Bounds ~1.25x the errors these algorithms reach on N(0, 1) data.
  const Bound bounds[] = {
      {Dtype::kF16, 2.7e-4}, {Dtype::kBF16, 2.1e-3},  {Dtype::kQ8_0, 0.007},
      {Dtype::kQ8_K, 0.009}, {Dtype::kQ4_0, 0.11},    {Dtype::kQ4_1, 0.10},
      {Dtype::kQ5_0, 0.055}, {Dtype::kQ5_1, 0.048},   {Dtype::kQ2_K, 0.375},
      {Dtype::kQ3_K, 0.19},  {Dtype::kQ4_K, 0.092},   {Dtype::kQ5_K, 0.046},
      {Dtype::kQ6_K, 0.023}, {Dtype::kIQ4_NL, 0.093}, {Dtype::kIQ4_XS, 0.094},
      {Dtype::kTQ1_0, 1.0},  {Dtype::kTQ2_0, 1.0},
  };
  const auto x = testing::random_normal(4096, 1234);
  for (const Bound& b : bounds) {
    const double err = roundtrip_error(b.t, x);
    EXPECT_LT(err, b.max_rel_rms) << dtype_name(b.t);
    EXPECT_GT(err, 0.0) << dtype_name(b.t);  // data is not representable exactly
    std::printf("%-5s rel rms error %.5f\n", std::string(dtype_name(b.t)).c_str(), err);
  }
}

TEST(QuantRoundTrip, ScaledAndShiftedData) {
  // Offsets exercise the min terms (Q4_1, Q5_1, Q2_K, Q4_K, Q5_K).
  auto x = testing::random_normal(2048, 99, 0.02f);
  for (float& v : x) v += 0.05f;
  for (Dtype t : {Dtype::kQ4_1, Dtype::kQ5_1, Dtype::kQ2_K, Dtype::kQ4_K, Dtype::kQ5_K,
                  Dtype::kQ8_0, Dtype::kQ6_K, Dtype::kQ3_K, Dtype::kIQ4_NL, Dtype::kIQ4_XS}) {
    EXPECT_LT(roundtrip_error(t, x), 0.5) << dtype_name(t);
  }
}

TEST(QuantRoundTrip, ZerosAndConstants) {
  for (Dtype t :
       {Dtype::kF16, Dtype::kBF16, Dtype::kQ8_0, Dtype::kQ8_K, Dtype::kQ4_0, Dtype::kQ4_1,
        Dtype::kQ5_0, Dtype::kQ5_1, Dtype::kQ2_K, Dtype::kQ3_K, Dtype::kQ4_K, Dtype::kQ5_K,
        Dtype::kQ6_K, Dtype::kIQ4_NL, Dtype::kIQ4_XS, Dtype::kTQ1_0, Dtype::kTQ2_0}) {
    std::vector<float> zeros(512, 0.0f), y(512);
    std::vector<uint8_t> q(*row_bytes(t, 512));
    ASSERT_TRUE(quantize_row(t, zeros.data(), q.data(), 512).is_ok());
    dequantize_row(t, q.data(), y.data(), 512);
    for (float v : y) ASSERT_EQ(v, 0.0f) << dtype_name(t);
    std::vector<float> c(512, -0.75f);
    ASSERT_TRUE(quantize_row(t, c.data(), q.data(), 512).is_ok());
    dequantize_row(t, q.data(), y.data(), 512);
    for (float v : y) ASSERT_NEAR(v, -0.75f, 0.75 * 0.1) << dtype_name(t);
  }
}

TEST(QuantRoundTrip, RejectsBadArguments) {
  std::vector<float> x(100, 1.0f);
  std::vector<uint8_t> q(1024);
  EXPECT_EQ(quantize_row(Dtype::kQ4_K, x.data(), q.data(), 100).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(quantize_row(Dtype::kQ8_1, x.data(), q.data(), 32).code(), StatusCode::kUnsupported);
  EXPECT_EQ(quantize_row(Dtype::kI32, x.data(), q.data(), 32).code(), StatusCode::kUnsupported);
}

}  // namespace
}  // namespace loom::kernels
