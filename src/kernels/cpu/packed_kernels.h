// The AVX-512 kernels behind matmul for kRows16-packed matrices (kernels/packed.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/dtype.h"

namespace loom::kernels::cpu {

constexpr int kPackedTileTokens = 8;

// Activation row for the packed kernels: int8 q[cols] | float d[cols/32] | int32 sum_q[cols/32]
// (value = d * q). Same quantization as kQ8_32 (quantize_act_row_q8_32_avx512 writes it).
size_t packed_act_row_bytes(int64_t cols);

struct PackedArgs {
  const uint8_t* w;   // the group's record for block 0
  const uint8_t* x;   // first activation row
  size_t x_stride;    // bytes between activation rows
  int64_t cols;
  float* out;         // out[t * out_stride + r] for the group's rows r < n_rows
  size_t out_stride;  // floats
  int n_rows;         // rows of the group that exist (the last group may be padded), <= 16
  bool prefetch;      // first pass over the weights: prefetch ahead
};

// One group of 16 rows x n_tok (1..kPackedTileTokens) tokens; dtype kQ8_0 or kQ4_0.
void packed_tile(Dtype dtype, const PackedArgs& a, int n_tok);

}  // namespace loom::kernels::cpu
