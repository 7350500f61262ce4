// Row-wide passes with GCC vector extensions (8 floats per step; the compiler maps them onto
// whatever SIMD width the target has). Scalar tails go through the same vector code on a
// padded copy so that every element sees exactly the same arithmetic.
#include "sampling/row_ops.h"

#include <cstring>
#include <limits>

namespace loom::sampling_internal {
namespace {

typedef float V8f __attribute__((vector_size(16)));
typedef int32_t V8i __attribute__((vector_size(16)));
constexpr int kLanes = 4;
constexpr float kNegInf = -std::numeric_limits<float>::infinity();

inline V8f splat(float v) { return V8f{} + v; }
inline V8i splat_i(int32_t v) { return V8i{} + v; }
inline V8f load(const float* p) {
  V8f v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
inline void store(float* p, V8f v) { std::memcpy(p, &v, sizeof v); }
inline V8f load_tail(const float* p, int32_t m, float pad) {
  V8f v = splat(pad);
  std::memcpy(&v, p, sizeof(float) * m);
  return v;
}
// mask lanes are all-ones or all-zeros (results of vector compares)
inline V8f select(V8i mask, V8f a, V8f b) {
  return reinterpret_cast<V8f>((reinterpret_cast<V8i>(a) & mask) |
                               (reinterpret_cast<V8i>(b) & ~mask));
}

inline V8f exp_v(V8f x) {
  const V8f lo = splat(-87.0f), hi = splat(88.0f);
  const V8i ok = x >= lo;  // false for NaN and for x < -87
  V8f xc = select(x < lo, lo, select(x > hi, hi, x));
  xc = select(ok, xc, lo);  // NaN lanes: compute something harmless, masked below
  const V8f magic = splat(12582912.0f);  // 1.5 · 2^23: adding it rounds to an integer
  const V8f t = xc * splat(1.44269504088896341f) + magic;
  const V8f n = t - magic;
  const V8i ni = reinterpret_cast<V8i>(t) - reinterpret_cast<V8i>(magic);
  // ln 2 split in two so that n · ln2_hi is exact.
  const V8f r = (xc - n * splat(0.693145751953125f)) - n * splat(1.428606765330187e-06f);
  V8f p = splat(1.0f / 5040.0f);
  p = p * r + splat(1.0f / 720.0f);
  p = p * r + splat(1.0f / 120.0f);
  p = p * r + splat(1.0f / 24.0f);
  p = p * r + splat(1.0f / 6.0f);
  p = p * r + splat(0.5f);
  p = p * r + splat(1.0f);
  p = p * r + splat(1.0f);
  const V8f scale = reinterpret_cast<V8f>((ni + splat_i(127)) << 23);
  return reinterpret_cast<V8f>(reinterpret_cast<V8i>(p * scale) & ok);
}

inline V8f weights_v(V8f x, float shift, float scale, float min_w) {
  V8f w = exp_v((x - splat(shift)) * splat(scale));
  return reinterpret_cast<V8f>(reinterpret_cast<V8i>(w) & (w >= splat(min_w)));
}

}  // namespace

float row_max(const float* x, int32_t n) {
  V8f m = splat(kNegInf);
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    V8f v = load(x + i);
    m = select(v > m, v, m);  // NaN compares false: ignored
  }
  if (i < n) {
    V8f v = load_tail(x + i, n - i, kNegInf);
    m = select(v > m, v, m);
  }
  float r = kNegInf;
  for (int k = 0; k < kLanes; ++k) r = m[k] > r ? m[k] : r;
  return r;
}

void exp_weights(const float* x, float* w, int32_t n, float shift, float scale, float min_w) {
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) store(w + i, weights_v(load(x + i), shift, scale, min_w));
  if (i < n) {
    V8f v = weights_v(load_tail(x + i, n - i, kNegInf), shift, scale, min_w);
    std::memcpy(w + i, &v, sizeof(float) * (n - i));
  }
}

double sum_weights(const float* w, int32_t n) {
  double s0 = 0, s1 = 0, s2 = 0, s3 = 0;  // four chains so the adds pipeline
  int32_t i = 0;
  for (; i + 4 <= n; i += 4) {
    s0 += w[i];
    s1 += w[i + 1];
    s2 += w[i + 2];
    s3 += w[i + 3];
  }
  for (; i < n; ++i) s0 += w[i];
  return (s0 + s1) + (s2 + s3);
}

int32_t count_at_least(const float* x, int32_t n, float v) {
  V8i acc = splat_i(0);
  const V8f vv = splat(v);
  int32_t i = 0;
  for (; i + kLanes <= n; i += kLanes) acc -= (load(x + i) >= vv);  // true = -1
  int32_t c = 0;
  for (int k = 0; k < kLanes; ++k) c += acc[k];
  for (; i < n; ++i) c += x[i] >= v;
  return c;
}

}  // namespace loom::sampling_internal
