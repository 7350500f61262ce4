// Reference IQ4_NL / IQ4_XS conversion: dequantization as ggml's dequantize_row_iq4_nl /
// _iq4_xs (same float expressions), and loom's own quantizers, the ground truth the matmul
// kernels and loom quantize / synth are tested against.
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace loom::kernels::ref {

void dequantize_iq4_nl(const BlockIq4Nl* b, float* y, int64_t nb);
void dequantize_iq4_xs(const BlockIq4Xs* b, float* y, int64_t nb);

// Per 32 values: the scale d (fp16) of least squared error over a sweep of candidates around
// amax / 127 (each value taking its nearest grid entry, d then refit by least squares), the
// indices chosen again against the stored fp16 d.
void quantize_iq4_nl(const float* x, BlockIq4Nl* y, int64_t nb);
// Per 256: each sub-block's best scale as IQ4_NL's, then d = (the largest in magnitude) / -32
// and ls - 32 = round(scale / d) in -32..31; the indices chosen against d * (ls - 32) as stored.
void quantize_iq4_xs(const float* x, BlockIq4Xs* y, int64_t nb);

}  // namespace loom::kernels::ref
