// AVX2 matmul kernels (placeholder table until the fast paths land).
#include "kernels/cpu/matmul_kernels.h"

namespace loom::kernels::cpu {
const MatmulKernel* avx2_kernel(Dtype) { return nullptr; }
}  // namespace loom::kernels::cpu
