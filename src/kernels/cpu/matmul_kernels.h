// The per-(weight dtype, ISA) matmul micro-kernels behind kernels::matmul, and the table that
// picks one. A kernel computes a tile of up to tile_rows weight rows x tile_tokens tokens.
//
// Batch invariance contract: the arithmetic producing out[t][r] (operations and their order)
// must be the same for every tile shape (n_rows, n_tok) a kernel accepts, so a token's result
// does not depend on how many other tokens share its tile.
#pragma once

#include <cstddef>
#include <cstdint>

#include "format/dtype.h"
#include "kernels/cpu/act_quant.h"
#include "kernels/cpu/isa.h"

namespace loom::kernels::cpu {

struct TileArgs {
  const uint8_t* w;       // first weight row of the tile
  size_t w_stride;        // bytes between weight rows
  const uint8_t* x;       // first activation row (format per the kernel's ActFormat)
  size_t x_stride;        // bytes between activation rows
  float* out;             // out[t * out_stride + r]
  size_t out_stride;      // floats
  int64_t cols;           // elements per row (multiple of the dtype's block size)
  bool prefetch = false;  // first pass over these weight rows: prefetch them from DRAM
};

// Computes the n_rows x n_tok tile (1 <= n_rows <= tile_rows, 1 <= n_tok <= tile_tokens).
using TileFn = void (*)(const TileArgs& a, int n_rows, int n_tok);

struct MatmulKernel {
  ActFormat act;
  TileFn tile;
  int tile_rows;
  int tile_tokens;
};

// nullptr when the ISA has no fast path for the dtype.
const MatmulKernel* scalar_kernel(Dtype w);  // generic: every matmul dtype
const MatmulKernel* avx2_kernel(Dtype w);
const MatmulKernel* avx512_kernel(Dtype w);      // prefers avx512_zmm_kernel
const MatmulKernel* avx512_zmm_kernel(Dtype w);  // 512-bit kernels (matmul_zmm_avx512.cpp)

// kQ8_32 (as_unsigned: kQ8_32U) activation row, byte-identical to quantize_act_row
// (act_quant_avx512.cpp; AVX-512 only). int_sums: the packed kernels' row instead
// (PackedActRow in packed_kernels.h: the same q and d, then the formats' dot starts and d * sum
// per block in place of d * sum, and with per_256, where the K-quant tiles read it, the per-256
// quantization).
void quantize_act_row_q8_32_avx512(const float* x, int64_t cols, uint8_t* dst, bool as_unsigned,
                                   bool int_sums = false, bool per_256 = true);

// n floats to f16 (or bf16) K/V storage, as store_kv (kv_convert_avx512.cpp; AVX-512 only).
void store_kv_half_avx512(bool bf16, const float* src, uint16_t* dst, int64_t n);
// The other way (load_kv), and the dot product / y += a·x of vec_dot / vec_axpy.
void load_kv_half_avx512(bool bf16, const uint16_t* src, float* dst, int64_t n);
float dot_f32_avx512(const float* a, const float* b, int64_t n);
void axpy_f32_avx512(float a, const float* x, float* y, int64_t n);

// out = silu(gate) * up, as kernels::silu_mul (elementwise_avx512.cpp; AVX-512 only).
void silu_mul_avx512(const float* gate, const float* up, float* out, int64_t n);
// kernels::gelu_tanh_mul and kernels::softcap (activation.h), with tanh_ps
// (elementwise_avx512.cpp).
void gelu_tanh_mul_avx512(const float* gate, const float* up, float* out, int64_t n);
void softcap_avx512(float* x, int64_t n, float cap);
// kernels::rope_rotate for head_dim a multiple of 32, rounded as its scalar loop (each product
// rounded, then their sum or difference: no FMA), so both give the same bits
// (elementwise_avx512.cpp).
void rope_rotate_avx512(float* x, int64_t n_heads, int64_t head_dim, const float* cs,
                        const float* sn, bool neox);

// Best kernel for (dtype, isa): the ISA's fast path, else the next lower ISA's, else scalar.
const MatmulKernel* find_kernel(Dtype w, Isa isa);

}  // namespace loom::kernels::cpu
