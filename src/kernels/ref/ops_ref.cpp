// Scalar reference ops (double accumulation).
#include "kernels/ref/ops_ref.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "base/fp16.h"

namespace loom::kernels::ref {
namespace {

double load_one(Dtype dtype, const uint8_t* p, int64_t i) {
  switch (dtype) {
    case Dtype::kF16:
      return fp16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    case Dtype::kBF16:
      return bf16_to_f32(reinterpret_cast<const uint16_t*>(p)[i]);
    default:
      return reinterpret_cast<const float*>(p)[i];
  }
}

}  // namespace

void rms_norm(const float* x, const float* w, float* out, int64_t n, float eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  double scale = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) out[i] = static_cast<float>(x[i] * scale * w[i]);
}

void rope(float* x, int64_t n_heads, int64_t head_dim, int32_t pos, const float* inv_freq,
          bool neox) {
  const int64_t half = head_dim / 2;
  for (int64_t h = 0; h < n_heads; ++h) {
    float* v = x + h * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      double a = static_cast<double>(pos) * inv_freq[i];
      int64_t i0 = neox ? i : 2 * i;
      int64_t i1 = neox ? i + half : 2 * i + 1;
      double x0 = v[i0], x1 = v[i1];
      v[i0] = static_cast<float>(x0 * std::cos(a) - x1 * std::sin(a));
      v[i1] = static_cast<float>(x0 * std::sin(a) + x1 * std::cos(a));
    }
  }
}

void softmax(float* x, int64_t n) {
  double mx = -INFINITY;
  for (int64_t i = 0; i < n; ++i) mx = std::fmax(mx, x[i]);
  std::vector<double> e(n);
  double sum = 0;
  for (int64_t i = 0; i < n; ++i) sum += e[i] = std::exp(x[i] - mx);
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(e[i] / sum);
}

void silu_mul(const float* gate, const float* up, float* out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) {
    double g = gate[i];
    out[i] = static_cast<float>(g / (1.0 + std::exp(-g)) * up[i]);
  }
}

void gelu_tanh_mul(const float* gate, const float* up, float* out, int64_t n) {
  const double k = std::sqrt(2.0 / M_PI);
  for (int64_t i = 0; i < n; ++i) {
    const double x = gate[i];
    out[i] =
        static_cast<float>(0.5 * x * (1.0 + std::tanh(k * (x + 0.044715 * x * x * x))) * up[i]);
  }
}

void softcap(float* x, int64_t n, float cap) {
  for (int64_t i = 0; i < n; ++i) x[i] = static_cast<float>(cap * std::tanh(double(x[i]) / cap));
}

void rope_rotate_partial(float* x, int64_t n_heads, int64_t head_dim, int64_t n_rot,
                         const float* cs, const float* sn, bool neox) {
  // Pair i of each head: (i, i + n_rot/2) in the halves layout, (2i, 2i+1) interleaved.
  const int64_t half = n_rot / 2;
  for (int64_t h = 0; h < n_heads; ++h)
    for (int64_t i = 0; i < half; ++i) {
      float* v = x + h * head_dim;
      const int64_t a = neox ? i : 2 * i, b = neox ? i + half : 2 * i + 1;
      const double x0 = v[a], x1 = v[b];
      v[a] = static_cast<float>(x0 * cs[i] - x1 * sn[i]);
      v[b] = static_cast<float>(x0 * sn[i] + x1 * cs[i]);
    }
}

void attention(const float* q, const PagedHead& k, const PagedHead& v, int64_t head_dim,
               int32_t n_kv, float scale, float* out, int32_t kv_begin, float softcap, float sink) {
  const int32_t n = std::max(0, n_kv - kv_begin);
  std::vector<double> s(n);
  double mx = -INFINITY;
  for (int32_t j = 0; j < n; ++j) {
    double d = 0;
    for (int64_t i = 0; i < head_dim; ++i) d += q[i] * load_one(k.dtype, k.at(kv_begin + j, i), 0);
    s[j] = d * scale;
    if (softcap > 0) s[j] = softcap * std::tanh(s[j] / softcap);
    mx = std::fmax(mx, s[j]);
  }
  mx = std::fmax(mx, static_cast<double>(sink));  // a sink is one more softmax term, no value
  double sum = sink == -INFINITY ? 0.0 : std::exp(sink - mx);
  for (auto& x : s) sum += x = std::exp(x - mx);
  for (int64_t i = 0; i < head_dim; ++i) {
    double acc = 0;
    for (int32_t j = 0; j < n; ++j) acc += s[j] * load_one(v.dtype, v.at(kv_begin + j, i), 0);
    out[i] = n > 0 ? static_cast<float>(acc / sum) : 0.0f;
  }
}

}  // namespace loom::kernels::ref
