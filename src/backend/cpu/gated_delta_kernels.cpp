// The scalar Gated DeltaNet kernels, and the choice of ISA (backend/cpu/gated_delta_kernels.h).
#include "backend/cpu/gated_delta_kernels.h"

#include "kernels/cpu/isa.h"

namespace loom::gdn {
namespace scalar {
namespace {

void state_products(const float* k, const float* q, int64_t ld, int rows, const float* S,
                    int64_t dk, int64_t dv, float* A, float* B) {
  for (int r = 0; r < rows; ++r) {
    float* a = A + r * dv;
    float* b = B + r * dv;
    for (int64_t d = 0; d < dv; ++d) a[d] = b[d] = 0.0f;
    for (int64_t i = 0; i < dk; ++i) {
      const float ki = k[r * ld + i], qi = q[r * ld + i];
      const float* s = S + i * dv;
      for (int64_t d = 0; d < dv; ++d) {
        a[d] += ki * s[d];
        b[d] += qi * s[d];
      }
    }
  }
}

void scaled_sum(float gamma, const float* base, const float* coef, const float* D, int m,
                int64_t dv, float* out) {
  for (int64_t d = 0; d < dv; ++d) out[d] = gamma * base[d];
  for (int j = 0; j < m; ++j)
    for (int64_t d = 0; d < dv; ++d) out[d] += coef[j] * D[j * dv + d];
}

void fold(float gamma, const float* e, const float* Kt, const float* D, int m, int64_t dk,
          int64_t dv, float* S) {
  for (int64_t i = 0; i < dk; ++i) {
    float* s = S + i * dv;
    for (int64_t d = 0; d < dv; ++d) s[d] *= gamma;
    for (int j = 0; j < m; ++j) {
      const float c = e[j] * Kt[j * dk + i];
      for (int64_t d = 0; d < dv; ++d) s[d] += c * D[j * dv + d];
    }
  }
}

}  // namespace

const Kernels kKernels = {state_products, scaled_sum, fold};

}  // namespace scalar

const Kernels& kernels_for(int64_t dk, int64_t dv) {
  const kernels::Isa isa = kernels::active_isa();
  if (isa >= kernels::Isa::kAvx512 && dv % 16 == 0) return avx512::kKernels;
  if (isa >= kernels::Isa::kAvx2 && dk % 8 == 0 && dv % 8 == 0) return avx2::kKernels;
  return scalar::kKernels;
}

}  // namespace loom::gdn
