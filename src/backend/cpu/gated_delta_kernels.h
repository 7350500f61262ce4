// The inner products of the chunked Gated DeltaNet (backend/cpu/gated_deltanet.h), per ISA.
//
// Every output element is one fixed chain of operations whatever the number of rows, the row's
// place in a block or the vector lane it lands in: that is what makes the step's bits
// independent of how a prompt is split. The AVX2 and AVX-512 kernels use one fused multiply-add per
// term (a vector FMA equals the scalar fmaf of each lane); the scalar ones a multiply then an add
// (they only run on CPUs without FMA, where the compiler has no FMA to contract into).
#pragma once

#include <cstdint>

namespace loom::gdn {

struct Kernels {
  // A[r][d] = Σ_{i ascending} k[r·ld + i]·S[i·dv + d], and B likewise from q, for r < rows.
  void (*state_products)(const float* k, const float* q, int64_t ld, int rows, const float* S,
                         int64_t dk, int64_t dv, float* A, float* B);
  // out = gamma·base, then out += coef[j]·D[j·dv ..] for j = 0 .. m - 1 in order.
  void (*scaled_sum)(float gamma, const float* base, const float* coef, const float* D, int m,
                     int64_t dv, float* out);
  // The chunk's fold: per row i of S, S[i] = gamma·S[i], then S[i] += (e[j]·Kt[j·dk + i])·D[j]
  // for j = 0 .. m - 1 in order.
  void (*fold)(float gamma, const float* e, const float* Kt, const float* D, int m, int64_t dk,
               int64_t dv, float* S);
};

// The kernels of the active ISA (kernels::active_isa()): AVX-512 when d_v is a multiple of 16,
// AVX2 when d_k and d_v are multiples of 8, else scalar.
const Kernels& kernels_for(int64_t dk, int64_t dv);

namespace scalar {
extern const Kernels kKernels;
}
namespace avx2 {
extern const Kernels kKernels;
}
namespace avx512 {
extern const Kernels kKernels;
}

}  // namespace loom::gdn
