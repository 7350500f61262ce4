// On-the-fly quantization of activation rows for the integer dot products of matmul.
// Every token row is quantized on its own, so a token's quantized activations (and with them
// its matmul result) do not depend on the other tokens of the batch.
#pragma once

#include <cstddef>
#include <cstdint>

namespace loom::kernels::cpu {

enum class ActFormat {
  kF32,     // raw floats (F32/F16/BF16 weights)
  kQ8_32,   // 32-element blocks, int8 + float scale: row = qs[cols] | d[nb] | s[nb]
  kQ8_K,    // BlockQ8_K per 256 elements (K-quant weights)
  kQ8_32U,  // as kQ8_32 with qs stored as q + 128 (u8), for vpdpbusd against signed weights
  kBF16,    // bf16 (round to nearest even), for vdpbf16ps against BF16 weights: row = bf16[cols]
};

// Layout of one kQ8_32 row: qs, then the per-block scale d (value = d * q), then s = d * sum(q).
struct ActQ8_32Row {
  const int8_t* qs;
  const float* d;
  const float* s;
};
inline ActQ8_32Row act_q8_32_row(const uint8_t* row, int64_t cols) {
  const int8_t* qs = reinterpret_cast<const int8_t*>(row);
  const float* d = reinterpret_cast<const float*>(row + cols);
  return {qs, d, d + cols / 32};
}

// Bytes per quantized row (a multiple of 64, so every row starts cache-line aligned).
size_t act_row_bytes(ActFormat f, int64_t cols);
// cols must be a multiple of the format's block size (32 or 256).
void quantize_act_row(ActFormat f, const float* x, int64_t cols, uint8_t* dst);

}  // namespace loom::kernels::cpu
