// The AVX-512 Gated DeltaNet kernels (backend/cpu/gated_delta_kernels.h): the AVX2 ones over
// 16-float vectors, d_v a multiple of 16; with 32 registers a block is 4 rows by 2 vectors.
// Each output element is one chain of fused multiply-adds in a fixed order, whichever block of
// rows or columns computes it.
#include <immintrin.h>

#include "backend/cpu/gated_delta_kernels.h"

namespace loom::gdn {
namespace avx512 {
namespace {

// R rows (k and q) times S over NV vectors of 8 columns starting at column d: 2·R·NV
// accumulators, one load of S per vector and row of S, one broadcast per row.
template <int R, int NV>
inline void products_block(const float* k, const float* q, int64_t ld, const float* S, int64_t dk,
                           int64_t dv, int64_t d, float* A, float* B) {
  __m512 a[R][NV], b[R][NV];
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) a[r][v] = b[r][v] = _mm512_setzero_ps();
  for (int64_t i = 0; i < dk; ++i) {
    __m512 s[NV];
    for (int v = 0; v < NV; ++v) s[v] = _mm512_loadu_ps(S + i * dv + d + 16 * v);
    for (int r = 0; r < R; ++r) {
      const __m512 kr = _mm512_set1_ps(k[r * ld + i]);
      const __m512 qr = _mm512_set1_ps(q[r * ld + i]);
      for (int v = 0; v < NV; ++v) {
        a[r][v] = _mm512_fmadd_ps(kr, s[v], a[r][v]);
        b[r][v] = _mm512_fmadd_ps(qr, s[v], b[r][v]);
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int v = 0; v < NV; ++v) {
      _mm512_storeu_ps(A + r * dv + d + 16 * v, a[r][v]);
      _mm512_storeu_ps(B + r * dv + d + 16 * v, b[r][v]);
    }
}

// Columns in blocks of NV vectors, then what is left one vector at a time.
template <int R, int NV>
void products_rows(const float* k, const float* q, int64_t ld, const float* S, int64_t dk,
                   int64_t dv, float* A, float* B) {
  int64_t d = 0;
  for (; d + 16 * NV <= dv; d += 16 * NV) products_block<R, NV>(k, q, ld, S, dk, dv, d, A, B);
  for (; d < dv; d += 16) products_block<R, 1>(k, q, ld, S, dk, dv, d, A, B);
}

void state_products(const float* k, const float* q, int64_t ld, int rows, const float* S,
                    int64_t dk, int64_t dv, float* A, float* B) {
  // Blocks of 4 rows by 2 vectors (16 accumulators), then 3, 2 or 1 rows; a lone row takes 4
  // vectors so that enough independent FMA chains hide their latency (decode).
  int r = 0;
  for (; rows - r >= 4; r += 4)
    products_rows<4, 2>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
  if (rows - r == 3)
    products_rows<3, 2>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
  if (rows - r == 2)
    products_rows<2, 2>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
  if (rows - r == 1)
    products_rows<1, 4>(k + r * ld, q + r * ld, ld, S, dk, dv, A + r * dv, B + r * dv);
}

// out[d .. d + 8·NV) = gamma·base, then + coef[j]·D[j] for j in order: NV independent chains.
template <int NV>
inline void scaled_sum_block(__m512 g, const float* base, const float* coef, const float* D, int m,
                             int64_t dv, int64_t d, float* out) {
  __m512 acc[NV];
  for (int v = 0; v < NV; ++v) acc[v] = _mm512_mul_ps(g, _mm512_loadu_ps(base + d + 16 * v));
  for (int j = 0; j < m; ++j) {
    const __m512 c = _mm512_set1_ps(coef[j]);
    for (int v = 0; v < NV; ++v)
      acc[v] = _mm512_fmadd_ps(c, _mm512_loadu_ps(D + j * dv + d + 16 * v), acc[v]);
  }
  for (int v = 0; v < NV; ++v) _mm512_storeu_ps(out + d + 16 * v, acc[v]);
}

void scaled_sum(float gamma, const float* base, const float* coef, const float* D, int m,
                int64_t dv, float* out) {
  const __m512 g = _mm512_set1_ps(gamma);
  int64_t d = 0;
  for (; d + 128 <= dv; d += 128) scaled_sum_block<8>(g, base, coef, D, m, dv, d, out);
  for (; d < dv; d += 16) scaled_sum_block<1>(g, base, coef, D, m, dv, d, out);
}

void fold(float gamma, const float* e, const float* Kt, const float* D, int m, int64_t dk,
          int64_t dv, float* S) {
  const __m512 g = _mm512_set1_ps(gamma);
  float c[16];
  for (int64_t i = 0; i < dk; ++i) {
    for (int j = 0; j < m; ++j) c[j] = e[j] * Kt[j * dk + i];
    float* s = S + i * dv;
    int64_t d = 0;
    for (; d + 128 <= dv; d += 128) scaled_sum_block<8>(g, s, c, D, m, dv, d, s);
    for (; d < dv; d += 16) scaled_sum_block<1>(g, s, c, D, m, dv, d, s);
  }
}

}  // namespace

const Kernels kKernels = {state_products, scaled_sum, fold};

}  // namespace avx512
}  // namespace loom::gdn
