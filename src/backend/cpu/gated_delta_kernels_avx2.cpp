// The AVX2 + FMA Gated DeltaNet kernels (backend/cpu/gated_delta_kernels.h): d_k and d_v
// multiples of 8. Each output element is one chain of fused multiply-adds in a fixed order,
// whichever block of rows or columns computes it.
#include <immintrin.h>

#include "backend/cpu/gated_delta_kernels.h"

namespace loom::gdn {
namespace avx2 {
namespace {

// R rows (k and q) times S over NV vectors of 8 columns starting at column d: 2·R·NV
// accumulators, one load of S per vector and row of S, one broadcast per row.
template <int R, int NV>
inline void products_block(const float* k, const float* q, int64_t ld, const float* S, int64_t dk,
                           int64_t dv, int64_t d, float* A, float* B) {
  __m256 a[R][NV], b[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = b[r][v] = _mm256_setzero_ps();
  for (int64_t i = 0; i < dk; ++i) {
    __m256 s[NV];
    for (int v = 0; v < NV; ++v) s[v] = _mm256_loadu_ps(S + i * dv + d + 8 * v);
    for (int r = 0; r < R; ++r) {
      const __m256 kr = _mm256_broadcast_ss(k + r * ld + i);
      const __m256 qr = _mm256_broadcast_ss(q + r * ld + i);
      for (int v = 0; v < NV; ++v) {
        a[r][v] = _mm256_fmadd_ps(kr, s[v], a[r][v]);
        b[r][v] = _mm256_fmadd_ps(qr, s[v], b[r][v]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      _mm256_storeu_ps(A + r * dv + d + 8 * v, a[r][v]);
      _mm256_storeu_ps(B + r * dv + d + 8 * v, b[r][v]);
    }
}

template <int R>
void products_rows(const float* k, const float* q, int64_t ld, const float* S, int64_t dk,
                   int64_t dv, float* A, float* B) {
  int64_t d = 0;
  for (; d + 16 <= dv; d += 16) products_block<R, 2>(k, q, ld, S, dk, dv, d, A, B);
  if (d < dv) products_block<R, 1>(k, q, ld, S, dk, dv, d, A, B);
}

void state_products(const float* k, const float* q, int64_t ld, int rows, const float* S,
                    int64_t dk, int64_t dv, float* A, float* B) {
  int r = 0;
  for (; r + 3 <= rows; r += 3)
    products_rows<3>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
  if (rows - r == 2)
    products_rows<2>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
  if (rows - r == 1)
    products_rows<1>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
}

void scaled_sum(float gamma, const float* base, const float* coef, const float* D, int m,
                int64_t dv, float* out) {
  const __m256 g = _mm256_set1_ps(gamma);
  for (int64_t d = 0; d < dv; d += 8) {
    __m256 acc = _mm256_mul_ps(g, _mm256_loadu_ps(base + d));
    for (int j = 0; j < m; ++j)
      acc = _mm256_fmadd_ps(_mm256_set1_ps(coef[j]), _mm256_loadu_ps(D + j * dv + d), acc);
    _mm256_storeu_ps(out + d, acc);
  }
}

void fold(float gamma, const float* e, const float* Kt, const float* D, int m, int64_t dk,
          int64_t dv, float* S) {
  const __m256 g = _mm256_set1_ps(gamma);
  for (int64_t i = 0; i < dk; ++i) {
    float c[16];
    for (int j = 0; j < m; ++j) c[j] = e[j] * Kt[j * dk + i];
    float* s = S + i * dv;
    for (int64_t d = 0; d < dv; d += 8) {
      __m256 acc = _mm256_mul_ps(g, _mm256_loadu_ps(s + d));
      for (int j = 0; j < m; ++j)
        acc = _mm256_fmadd_ps(_mm256_set1_ps(c[j]), _mm256_loadu_ps(D + j * dv + d), acc);
      _mm256_storeu_ps(s + d, acc);
    }
  }
}

}  // namespace

const Kernels kKernels = {state_products, scaled_sum, fold};

}  // namespace avx2
}  // namespace loom::gdn
