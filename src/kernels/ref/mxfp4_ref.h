// Reference MXFP4 conversion (ggml's dequantize_row_mxfp4 / quantize_row_mxfp4_ref): the
// ground truth the matmul kernels and loom quantize / convert are tested against.
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace loom::kernels::ref {

void dequantize_mxfp4(const BlockMxfp4* b, float* y, int64_t nb);
// Per block: the shared exponent e = floor(log2(amax)) - 2 + 127 (0 for an all-zero block),
// so the largest magnitude lands in [4, 8) · 2^(e-127)... of E2M1's range [0, 6]; each value
// takes the table entry nearest to x / 2^(e-128) (first on ties, both signs searched).
void quantize_mxfp4(const float* x, BlockMxfp4* y, int64_t nb);

}  // namespace loom::kernels::ref
