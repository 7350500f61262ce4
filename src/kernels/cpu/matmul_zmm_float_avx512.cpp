// AVX-512 matmul kernels for float weights on full 512-bit registers:
//   F16:  each 16-weight vector converted once (vcvtph2ps) and FMA'd against R x T f32
//         activations; activations stay f32, so results are as accurate as the 256-bit kernel.
//   BF16: vdpbf16ps (32 bf16 products per instruction) against activations rounded to bf16
//         (ActFormat::kBF16, as llama.cpp does for BF16 weights); only with AVX512-BF16.
//
// Tile: R weight rows x T tokens of zmm accumulators (4 x 6 = 24 of the 32 registers, plus R
// weight vectors and one activation vector). Each weight vector is loaded (and converted) once
// per tile and each activation vector once per row group, so a step issues R + T loads for
// R * T FMAs.
//
// Batch invariance: every output owns one accumulator that sees the same sequence of
// operations (one FMA / dot per step of k, the last step masked with zeros past cols, then a
// fixed-order 16-lane sum) whatever the tile shape or the row's place in it.
#include <immintrin.h>

#include <array>
#include <cstdint>
#include <utility>

#include "kernels/cpu/matmul_kernels.h"

// GCC 12 warns about the undefined upper halves of _mm512_cast* inside its own headers.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace loom::kernels::cpu {
namespace {

// Fixed-order horizontal sum of 16 floats.
inline float hsum16(__m512 v) {
  const __m256 h = _mm256_add_ps(_mm512_castps512_ps256(v), _mm512_extractf32x8_ps(v, 1));
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(h), _mm256_extractf128_ps(h, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Same distance as the other kernels (see matmul_zmm_avx512.cpp).
constexpr int64_t kPrefetchBytes = 16384;

// F16 weights, f32 activations: 16 elements per step.
struct F16Step {
  static constexpr int kStep = 16;
  using W = __m512;
  using X = __m512;
  static W load_w(const uint8_t* row, int64_t k, __mmask32 m) {
    return _mm512_cvtph_ps(_mm256_maskz_loadu_epi16(static_cast<__mmask16>(m), row + 2 * k));
  }
  static X load_x(const uint8_t* xrow, int64_t k, __mmask32 m) {
    return _mm512_maskz_loadu_ps(static_cast<__mmask16>(m),
                                 reinterpret_cast<const float*>(xrow) + k);
  }
  static __m512 step(__m512 acc, W w, X x) { return _mm512_fmadd_ps(w, x, acc); }
  static constexpr int kWeightBytes = 2;
};

// BF16 weights, bf16 activations: 32 elements (16 pairs) per step.
struct BF16Step {
  static constexpr int kStep = 32;
  using W = __m512i;
  using X = __m512i;
  static W load_w(const uint8_t* row, int64_t k, __mmask32 m) {
    return _mm512_maskz_loadu_epi16(m, row + 2 * k);
  }
  static X load_x(const uint8_t* xrow, int64_t k, __mmask32 m) {
    return _mm512_maskz_loadu_epi16(m, xrow + 2 * k);
  }
  static __m512 step(__m512 acc, W w, X x) {
    return _mm512_dpbf16_ps(acc, reinterpret_cast<__m512bh&>(x), reinterpret_cast<__m512bh&>(w));
  }
  static constexpr int kWeightBytes = 2;
};

// The "#pragma GCC unroll" lines matter: without them GCC 12 unrolls the 4 x 6 loops too late
// to keep acc[][] in registers and stores all 24 accumulators to the stack every step (F16
// GEMM 49 vs 88 GFLOP/s for the 256-bit kernel; this is likely why an earlier 512-bit attempt
// measured slower). 4 x 4 tiles did not need it.
template <class S, int R, int T>
void float_tile(const TileArgs& a) {
  __m512 acc[R][T];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) acc[r][t] = _mm512_setzero_ps();
  constexpr __mmask32 kAll = S::kStep == 32 ? ~__mmask32{0} : __mmask32{0xFFFF};
  // One loop with the tail mask computed per step: a separate tail (or a lambda shared by
  // both) made GCC keep the accumulators in memory, storing all R x T of them every step.
  for (int64_t k = 0; k < a.cols; k += S::kStep) {
    const int64_t left = a.cols - k;
    const __mmask32 m = left >= S::kStep ? kAll : static_cast<__mmask32>((uint64_t{1} << left) - 1);
    // Weight rows stream from DRAM in decode: one line per row every 64 bytes.
    if (a.prefetch && (k * S::kWeightBytes) % 64 == 0)
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r)
        _mm_prefetch(reinterpret_cast<const char*>(a.w + r * a.w_stride + k * S::kWeightBytes +
                                                   kPrefetchBytes),
                     _MM_HINT_T0);
    typename S::W w[R];
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) w[r] = S::load_w(a.w + r * a.w_stride, k, m);
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) {
      const typename S::X x = S::load_x(a.x + t * a.x_stride, k, m);
#pragma GCC unroll 8
      for (int r = 0; r < R; ++r) acc[r][t] = S::step(acc[r][t], w[r], x);
    }
  }
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r)
#pragma GCC unroll 8
    for (int t = 0; t < T; ++t) a.out[t * a.out_stride + r] = hsum16(acc[r][t]);
}

template <class S, int R, int T>
void float_dispatch(const TileArgs& a, int n_rows, int n_tok) {
  using Fn = void (*)(const TileArgs&);
  static constexpr auto table = []<size_t... I>(std::index_sequence<I...>) {
    return std::array<Fn, R * T>{&float_tile<S, I / T + 1, I % T + 1>...};
  }
  (std::make_index_sequence<R * T>{});
  table[(n_rows - 1) * T + (n_tok - 1)](a);
}

constexpr MatmulKernel kF16{ActFormat::kF32, float_dispatch<F16Step, 4, 6>, 4, 6};
constexpr MatmulKernel kBF16{ActFormat::kBF16, float_dispatch<BF16Step, 4, 6>, 4, 6};

}  // namespace

// 512-bit float-weight kernels; nullptr for other dtypes (and BF16 without AVX512-BF16).
const MatmulKernel* avx512_zmm_float_kernel(Dtype w) {
  switch (w) {
    case Dtype::kF16:
      return &kF16;
    case Dtype::kBF16:
      return cpu_features().avx512bf16 ? &kBF16 : nullptr;
    default:
      return nullptr;
  }
}

}  // namespace loom::kernels::cpu
