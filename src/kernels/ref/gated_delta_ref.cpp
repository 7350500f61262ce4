// The Gated DeltaNet recurrence, written as directly as the math (kernels/ref/gated_delta_ref.h).
#include "kernels/ref/gated_delta_ref.h"

#include <cmath>
#include <vector>

namespace loom::kernels::ref {
namespace {

double silu(double x) {
  return x / (1.0 + std::exp(-x));
}
double sigmoid(double x) {
  return 1.0 / (1.0 + std::exp(-x));
}
double softplus(double x) {
  return x > 20.0 ? x : std::log1p(std::exp(x));
}

// x *= rsqrt(sum x² + 1e-6) (HF's l2norm), then *= scale.
void l2_normalise(double* x, int64_t n, double scale) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double f = scale / std::sqrt(ss + 1e-6);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

}  // namespace

void gated_delta_net(const GatedDeltaParams& p, int64_t n, const float* qkv, const float* z,
                     const float* b, const float* a_in, float* out, float* state_out) {
  const int64_t Hk = p.n_k_heads, Hv = p.n_v_heads, dk = p.d_k, dv = p.d_v, K = p.conv_kernel;
  const int64_t C = p.conv_dim(), group = Hv / Hk;
  std::vector<double> S(Hv * dk * dv, 0.0), x(C), kv(dv), o(dv);
  for (int64_t t = 0; t < n; ++t) {
    // 1. Causal depthwise convolution over the inputs (zeros before position 0), then SiLU.
    for (int64_t c = 0; c < C; ++c) {
      double y = 0;
      for (int64_t j = 0; j < K; ++j) {
        const int64_t src = t - K + 1 + j;
        if (src >= 0) y += static_cast<double>(p.conv[c * K + j]) * qkv[src * C + c];
      }
      x[c] = silu(y);
    }
    // 2. q and k heads L2-normalised, q scaled by 1/sqrt(dk).
    double* q = x.data();
    double* k = x.data() + Hk * dk;
    const double* v = x.data() + 2 * Hk * dk;
    for (int64_t h = 0; h < Hk; ++h) {
      l2_normalise(q + h * dk, dk, 1.0 / std::sqrt(static_cast<double>(dk)));
      l2_normalise(k + h * dk, dk, 1.0);
    }
    for (int64_t h = 0; h < Hv; ++h) {
      const double* qh = q + (h / group) * dk;
      const double* kh = k + (h / group) * dk;
      const double* vh = v + h * dv;
      // 3. beta and the decay.
      const double beta = sigmoid(b[t * Hv + h]);
      const double g = p.a[h] * softplus(static_cast<double>(a_in[t * Hv + h]) + p.dt[h]);
      // 4. S = S·exp(g); kv = S^T k; delta = (v - kv)·beta; S += k ⊗ delta; o = S^T q.
      double* Sh = &S[h * dk * dv];
      const double decay = std::exp(g);
      for (int64_t i = 0; i < dk * dv; ++i) Sh[i] *= decay;
      for (int64_t d = 0; d < dv; ++d) {
        kv[d] = 0;
        for (int64_t i = 0; i < dk; ++i) kv[d] += Sh[i * dv + d] * kh[i];
      }
      for (int64_t i = 0; i < dk; ++i)
        for (int64_t d = 0; d < dv; ++d) Sh[i * dv + d] += kh[i] * (vh[d] - kv[d]) * beta;
      for (int64_t d = 0; d < dv; ++d) {
        o[d] = 0;
        for (int64_t i = 0; i < dk; ++i) o[d] += Sh[i * dv + d] * qh[i];
      }
      // 5. Gated RMSNorm over the head: rmsnorm(o) · norm · SiLU(z).
      double ss = 0;
      for (int64_t d = 0; d < dv; ++d) ss += o[d] * o[d];
      const double r = 1.0 / std::sqrt(ss / dv + p.eps);
      for (int64_t d = 0; d < dv; ++d)
        out[(t * Hv + h) * dv + d] =
            static_cast<float>(o[d] * r * p.norm[d] * silu(z[(t * Hv + h) * dv + d]));
    }
  }
  if (state_out)
    for (int64_t i = 0; i < Hv * dk * dv; ++i) state_out[i] = static_cast<float>(S[i]);
}

}  // namespace loom::kernels::ref
