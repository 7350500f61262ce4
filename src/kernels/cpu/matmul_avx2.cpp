// AVX2 (+FMA, F16C) matmul kernels: the shared 256-bit kernels of matmul_simd-inl.h with
// u8 x s8 dot products done by maddubs + madd. Compiled with -mavx2 -mfma -mf16c; only reached
// when active_isa() allows AVX2.
#include <immintrin.h>

namespace loom::kernels::cpu::avx2 {
namespace {
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), _mm256_set1_epi16(1));
}
inline __m256i acc_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
  return _mm256_add_epi32(acc, _mm256_madd_epi16(_mm256_maddubs_epi16(u, s), sc16));
}
}  // namespace
}  // namespace loom::kernels::cpu::avx2

#define LOOM_SIMD_NS avx2
#include "kernels/cpu/matmul_simd-inl.h"
#include "kernels/cpu/matmul_simd_ternary-inl.h"

namespace loom::kernels::cpu {
namespace {
using namespace avx2;
// 16 ymm registers: 4x2 tiles of vector accumulators, 2x2 for K-quants (two vectors each).
constexpr MatmulKernel kF32{ActFormat::kF32, float_tile_dispatch<LoadF32, 4, 2>, 4, 2};
constexpr MatmulKernel kF16{ActFormat::kF32, float_tile_dispatch<LoadF16, 4, 2>, 4, 2};
constexpr MatmulKernel kBF16{ActFormat::kF32, float_tile_dispatch<LoadBF16, 4, 2>, 4, 2};
constexpr MatmulKernel kQ8_0{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackQ8_0>, 4, 2>, 4, 2};
constexpr MatmulKernel kQ4_0{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackQ4_0>, 4, 2>, 4, 2};
constexpr MatmulKernel kMxfp4{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackMxfp4>, 4, 2>, 4, 2};
constexpr MatmulKernel kIq4Nl{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackIq4Nl>, 4, 2>, 4, 2};
constexpr MatmulKernel kIq4Xs{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackIq4Xs>, 4, 2>, 4, 2};
constexpr MatmulKernel kQ5_0{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackQ5_0>, 4, 2>, 4, 2};
constexpr MatmulKernel kQ4_1{ActFormat::kQ8_32, tile_dispatch<Min32<UnpackQ4_1>, 4, 2>, 4, 2};
constexpr MatmulKernel kQ5_1{ActFormat::kQ8_32, tile_dispatch<Min32<UnpackQ5_1>, 4, 2>, 4, 2};
constexpr MatmulKernel kQ2_K{ActFormat::kQ8_K, tile_dispatch<KLow<false>, 2, 2>, 2, 2};
constexpr MatmulKernel kQ3_K{ActFormat::kQ8_K, tile_dispatch<KLow<true>, 2, 2>, 2, 2};
constexpr MatmulKernel kQ4_K{ActFormat::kQ8_K, tile_dispatch<KMins<false>, 2, 2>, 2, 2};
constexpr MatmulKernel kQ5_K{ActFormat::kQ8_K, tile_dispatch<KMins<true>, 2, 2>, 2, 2};
constexpr MatmulKernel kQ6_K{ActFormat::kQ8_K, tile_dispatch<Q6K, 2, 2>, 2, 2};
constexpr MatmulKernel kTq1_0{ActFormat::kQ8_K, tile_dispatch<Ternary<true>, 2, 2>, 2, 2};
constexpr MatmulKernel kTq2_0{ActFormat::kQ8_K, tile_dispatch<Ternary<false>, 2, 2>, 2, 2};
}  // namespace

const MatmulKernel* avx2_kernel(Dtype w) {
  switch (w) {
    case Dtype::kF32:
      return &kF32;
    case Dtype::kF16:
      return &kF16;
    case Dtype::kBF16:
      return &kBF16;
    case Dtype::kQ8_0:
      return &kQ8_0;
    case Dtype::kQ4_0:
      return &kQ4_0;
    case Dtype::kMXFP4:
      return &kMxfp4;
    case Dtype::kIQ4_NL:
      return &kIq4Nl;
    case Dtype::kIQ4_XS:
      return &kIq4Xs;
    case Dtype::kQ5_0:
      return &kQ5_0;
    case Dtype::kQ4_1:
      return &kQ4_1;
    case Dtype::kQ5_1:
      return &kQ5_1;
    case Dtype::kTQ1_0:
      return &kTq1_0;
    case Dtype::kTQ2_0:
      return &kTq2_0;
    case Dtype::kQ2_K:
      return &kQ2_K;
    case Dtype::kQ3_K:
      return &kQ3_K;
    case Dtype::kQ4_K:
      return &kQ4_K;
    case Dtype::kQ5_K:
      return &kQ5_K;
    case Dtype::kQ6_K:
      return &kQ6_K;
    default:
      return nullptr;
  }
}

}  // namespace loom::kernels::cpu
