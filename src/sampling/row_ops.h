// Internal to src/sampling: passes over a whole logits row (max, softmax weights, counting),
// written with GCC/Clang vector extensions so they vectorize on any target (SSE2 baseline,
// AVX, NEON) without intrinsics. Plain scalar loops with float compares do not vectorize here:
// GCC's default -ftrapping-math forbids if-converting them, and std::exp is a libm call.
//
// exp(x) = 2^n · e^r with n = round(x / ln 2), |r| <= ln2 / 2, e^r by a degree-7 Taylor
// polynomial (truncation < 1e-8 relative); ~2 ulp overall. Results below e^-87 flush to 0 (no
// denormals): such weights are far below anything a sample or a logprob can resolve. Inputs
// are expected <= 0 (logit - max); inputs above 88 saturate.
#pragma once

#include <cstdint>

namespace loom::sampling_internal {

// Largest non-NaN value of x[0, n); -inf if none.
float row_max(const float* x, int32_t n);

// w[i] = exp((x[i] - shift) · scale), and 0 where that is < min_w or x[i] is -inf/NaN.
void exp_weights(const float* x, float* w, int32_t n, float shift, float scale, float min_w);

// Sum of w[0, n) in double (fixed order: deterministic).
double sum_weights(const float* w, int32_t n);

// Number of i with x[i] >= v (NaN entries never count).
int32_t count_at_least(const float* x, int32_t n, float v);

}  // namespace loom::sampling_internal
