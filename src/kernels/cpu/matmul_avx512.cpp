// AVX-512 matmul kernels: the shared 256-bit kernels of matmul_simd-inl.h (EVEX-encoded, 32
// registers) with u8 x s8 dot products on VNNI (vpdpbusd, vpdpwssd), behind the 512-bit kernels
// of matmul_zmm_*avx512.cpp where a dtype has one. Compiled with the AVX-512 flags; only reached
// when active_isa() is kAvx512.
#include <immintrin.h>

namespace loom::kernels::cpu::avx512 {
namespace {
inline __m256i dot_u8s8(__m256i u, __m256i s) {
  return _mm256_dpbusd_epi32(_mm256_setzero_si256(), u, s);
}
inline __m256i acc_u8s8_scaled(__m256i acc, __m256i u, __m256i s, __m256i sc16) {
  return _mm256_dpwssd_epi32(acc, _mm256_maddubs_epi16(u, s), sc16);
}
}  // namespace
}  // namespace loom::kernels::cpu::avx512

#define LOOM_SIMD_NS avx512
#include "kernels/cpu/matmul_simd-inl.h"
#include "kernels/cpu/matmul_simd_ternary-inl.h"

namespace loom::kernels::cpu {

// 512-bit kernels for float weights (matmul_zmm_float_avx512.cpp) and K-quants
// (matmul_zmm_kquant_avx512.cpp).
const MatmulKernel* avx512_zmm_float_kernel(Dtype w);
const MatmulKernel* avx512_zmm_kquant_kernel(Dtype w);

namespace {
using namespace avx512;
// 32 ymm registers: 4x4 tiles of vector accumulators. F16 and the K-quants always take the
// 512-bit kernels; BF16 takes them only with AVX512-BF16.
constexpr MatmulKernel kF32{ActFormat::kF32, float_tile_dispatch<LoadF32, 4, 4>, 4, 4};
constexpr MatmulKernel kBF16{ActFormat::kF32, float_tile_dispatch<LoadBF16, 4, 4>, 4, 4};
constexpr MatmulKernel kQ8_0{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackQ8_0>, 4, 4>, 4, 4};
constexpr MatmulKernel kQ4_0{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackQ4_0>, 4, 4>, 4, 4};
constexpr MatmulKernel kMxfp4{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackMxfp4>, 4, 4>, 4, 4};
constexpr MatmulKernel kIq4Nl{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackIq4Nl>, 4, 4>, 4, 4};
constexpr MatmulKernel kIq4Xs{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackIq4Xs>, 4, 4>, 4, 4};
constexpr MatmulKernel kQ5_0{ActFormat::kQ8_32, tile_dispatch<Signed32<UnpackQ5_0>, 4, 4>, 4, 4};
constexpr MatmulKernel kQ4_1{ActFormat::kQ8_32, tile_dispatch<Min32<UnpackQ4_1>, 4, 4>, 4, 4};
constexpr MatmulKernel kQ5_1{ActFormat::kQ8_32, tile_dispatch<Min32<UnpackQ5_1>, 4, 4>, 4, 4};
constexpr MatmulKernel kQ2_K{ActFormat::kQ8_K, tile_dispatch<KLow<false>, 4, 4>, 4, 4};
constexpr MatmulKernel kQ3_K{ActFormat::kQ8_K, tile_dispatch<KLow<true>, 4, 4>, 4, 4};
constexpr MatmulKernel kTq1_0{ActFormat::kQ8_K, tile_dispatch<Ternary<true>, 4, 4>, 4, 4};
constexpr MatmulKernel kTq2_0{ActFormat::kQ8_K, tile_dispatch<Ternary<false>, 4, 4>, 4, 4};
}  // namespace

const MatmulKernel* avx512_kernel(Dtype w) {
  if (const MatmulKernel* k = avx512_zmm_kernel(w)) return k;
  if (const MatmulKernel* k = avx512_zmm_float_kernel(w)) return k;
  if (const MatmulKernel* k = avx512_zmm_kquant_kernel(w)) return k;
  switch (w) {
    case Dtype::kF32:
      return &kF32;
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
    default:
      return nullptr;
  }
}

}  // namespace loom::kernels::cpu
