// Reference quantizers for the K-quant weight formats (internal to kernels/ref).
#pragma once

#include <cstdint>

#include "kernels/quant_blocks.h"

namespace loom::kernels::ref {

void quantize_q2_k(const float* x, BlockQ2_K* y, int64_t nb);
void quantize_q3_k(const float* x, BlockQ3_K* y, int64_t nb);
void quantize_q4_k(const float* x, BlockQ4_K* y, int64_t nb);
void quantize_q5_k(const float* x, BlockQ5_K* y, int64_t nb);
void quantize_q6_k(const float* x, BlockQ6_K* y, int64_t nb);

}  // namespace loom::kernels::ref
