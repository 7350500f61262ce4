// Reference ternary conversion (llama.cpp's TQ1_0 and TQ2_0; the layouts: kernels/
// quant_blocks.h): the ground truth the matmul kernels are tested against.
#pragma once

#include <cstdint>

#include "format/dtype.h"
#include "kernels/quant_blocks.h"

namespace loom::kernels::ref {

// Trit n (0..4) of a TQ1_0 byte: the byte is a base-3 fraction of 256, so multiplying by 3^n
// (mod 256) shifts trit n to the top, and 3 * byte / 256 reads it.
inline int tq1_trit(uint8_t b, int n) {
  static constexpr uint8_t kPow3[5] = {1, 3, 9, 27, 81};
  const uint8_t shifted = static_cast<uint8_t>(b * kPow3[n]);
  return (shifted * 3) >> 8;
}
// The trit of element k (0..255) of a TQ1_0 / TQ2_0 block.
int tq1_0_trit(const BlockTq1_0& b, int k);
int tq2_0_trit(const BlockTq2_0& b, int k);

void dequantize_tq1_0(const BlockTq1_0* b, float* y, int64_t nb);
void dequantize_tq2_0(const BlockTq2_0* b, float* y, int64_t nb);
// Per block: d = the largest magnitude, each trit x / d rounded half away from zero, plus 1.
void quantize_tq1_0(const float* x, BlockTq1_0* y, int64_t nb);
void quantize_tq2_0(const float* x, BlockTq2_0* y, int64_t nb);

// A ternary row (TQ1_0 or TQ2_0, nb blocks) as Q2_K blocks with the same values exactly:
// Q2_K's 2-bit q in TQ2_0's very places, every sub-block's scale and min 1 and dmin = d, so
// d * 1 * q - d * 1 = d * (q - 1). (The packed kernels read ternary matrices this way.)
void ternary_to_q2_k(Dtype t, const void* src, BlockQ2_K* dst, int64_t nb);

// A TQ1_0 row (nb blocks) as TQ2_0 blocks with the same trits and scale (lossless: the row
// kernels read TQ2_0's 2-bit trits with two shifts and masks per 64, TQ1_0's base-3 bytes
// with eight ops per 32).
void tq1_0_to_tq2_0(const BlockTq1_0* src, BlockTq2_0* dst, int64_t nb);

}  // namespace loom::kernels::ref
