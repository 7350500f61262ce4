// The AVX-512 kernels behind matmul for kRows16-packed matrices (kernels/packed.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "format/dtype.h"

namespace loom::kernels::cpu {

// Tile: up to 2 groups (32 rows) x 6 tokens. Two groups share each activation broadcast: 20%
// faster than 1 x 8 (loom_kernels_bench, 1 thread: Q8_0 GEMM 467 -> 560 GFLOP/s, Q4_0 516 ->
// 600); 3 x 4, 4 x 3 and 2 x 8 measured no better or worse (register pressure).
constexpr int kPackedTileGroups = 2;
constexpr int kPackedTileTokens = 6;

// Activation row for the packed kernels (PackedActRow; value = d * q): int8 q[cols] | float
// d[cols/32] | then what the tiles would otherwise compute in scalar registers for every block
// and token (5% of a 16-token Q4_0 tile's time, paired runs): int32 -8 sum_q and -128 sum_q per
// 32 (where the Q4_0 and Q8_0 integer dots start), int32 -12 sum_q per 32 (MXFP4's). Same
// quantization as kQ8_32 (quantize_act_row_q8_32_avx512 with int_sums writes it). Then, where cols
// is a multiple of 256 and a K-quant tile of the call reads it (reads_per_256), the row quantized
// again with one scale per 256 (as llama.cpp's Q8_K, for the K-quant tiles, Q2_K to Q6_K: their
// sub-block scales then apply to exact integer dots, and one float epilogue per super-block
// replaces one per 32 or 16 columns): int8 q256[cols] | float d256[cols/256] | int16
// sum256_32[cols/32] | int16 sum256_16[cols/16] (the sums of each 32 and each 16 q256), in
// llama.cpp's Q8_K arithmetic (iscale = -127 / the value of largest magnitude, q = iscale * x
// rounded to nearest even, d = 1 / iscale), exactly the row kernels' kQ8_K activations.
size_t packed_act_row_bytes(int64_t cols);

// Where each array of a packed activation row starts: the one definition of the layout, for
// the tiles that read it (PackedActRow) and the quantizer that writes it (PackedActRowOut).
template <class Byte>  // const uint8_t or uint8_t
struct PackedActRowOf {
  template <class T>
  using P = std::conditional_t<std::is_const_v<Byte>, const T*, T*>;
  P<int8_t> q;
  P<float> d;
  P<int32_t> start_q4_0;   // -8 sum(q) per 32
  P<int32_t> start_q8_0;   // -128 sum(q) per 32
  P<int32_t> start_mxfp4;  // -12 sum(q) per 32
  P<int8_t> q256;          // cols % 256 == 0 only
  P<float> d256;
  P<int16_t> sum256_32;
  P<int16_t> sum256_16;
  PackedActRowOf(Byte* row, int64_t cols) {
    const int64_t nb = cols / 32;
    q = reinterpret_cast<P<int8_t>>(row);
    d = reinterpret_cast<P<float>>(row + cols);
    start_q4_0 = reinterpret_cast<P<int32_t>>(d + nb);
    start_q8_0 = start_q4_0 + nb;
    start_mxfp4 = start_q8_0 + nb;
    q256 = reinterpret_cast<P<int8_t>>(start_mxfp4 + nb);
    d256 = reinterpret_cast<P<float>>(q256 + cols);
    sum256_32 = reinterpret_cast<P<int16_t>>(d256 + cols / 256);
    sum256_16 = sum256_32 + cols / 32;
  }
};
using PackedActRow = PackedActRowOf<const uint8_t>;
using PackedActRowOut = PackedActRowOf<uint8_t>;

struct PackedArgs {
  const uint8_t* w;  // the group's record for block 0
  const uint8_t* x;  // first activation row
  size_t x_stride;   // bytes between activation rows
  int64_t cols;
  float* out;         // out[t * out_stride + r] for the group's rows r < n_rows
  size_t out_stride;  // floats
  int n_rows;         // rows that exist from the first group on: <= 16 one group, <= 32 two
                      // (the next group's records follow this group's)
  // Software prefetch of the weights from DRAM: for every record the tile reads, the bytes
  // [part, part + 1) / parts of the record prefetch_ahead bytes further on (0: none). One
  // token tile prefetches whole records kPrefetchAheadBytes ahead; n tiles over the same
  // groups (batched decode) each prefetch 1/n of the next groups' records, so the weights of
  // the next groups arrive while all n tiles compute (only the first one prefetching left
  // DRAM idle for the rest: 520 vs 840 GFLOP/s for Q8_0 x16 from DRAM or cache).
  int64_t prefetch_ahead = 0;
  int prefetch_part = 0, prefetch_parts = 1;
};

// The prefetch distance of a single token tile (weights streaming from DRAM).
constexpr int64_t kPrefetchAheadBytes = 16384;

// ceil(n_rows / 16) groups (<= kPackedTileGroups) x n_tok (1..packed_tile_tokens(dtype)) tokens;
// dtype kQ8_0, kQ4_0, kMXFP4, kIQ4_NL, kQ2_K .. kQ6_K or kIQ4_XS (activations:
// packed_act_row_bytes rows), kF16 (float rows) or kBF16 (bf16 rows). A row's arithmetic does
// not depend on the tile it is computed in.
// Where amx_enabled(), BF16 tiles run on AMX (packed_tile_amx_bf16) and take up to
// kAmxTileTokens tokens.
void packed_tile(Dtype dtype, const PackedArgs& a, int n_tok);

// The K-quant tiles on the per-256 activations (Q2_K to Q6_K) take up to this many tokens.
constexpr int kPackedPer256TileTokens = 3;
inline bool reads_per_256(Dtype t) {
  return t == Dtype::kQ2_K || t == Dtype::kQ3_K || t == Dtype::kQ4_K || t == Dtype::kQ5_K ||
         t == Dtype::kQ6_K;
}

// packed_tile for kQ2_K and kQ3_K (packed_kquant_low_avx512.cpp).
void packed_tile_q2_k_q3_k(Dtype dtype, const PackedArgs& a, int n_tok);

// packed_tile for kQ4_K and kQ5_K (packed_q4_k_q5_k_avx512.cpp).
void packed_tile_q4_k_q5_k(Dtype dtype, const PackedArgs& a, int n_tok);

// packed_tile for kQ6_K (packed_q6_k_avx512.cpp).
void packed_tile_q6_k(const PackedArgs& a, int n_tok);

// The most tokens packed_tile takes for dtype: kPackedTileTokens, kPackedPer256TileTokens for
// Q2_K to Q6_K, or kAmxTileTokens for BF16 on AMX.
int packed_tile_tokens(Dtype dtype);

// ceil(n_rows / 16) groups x n_tok (1..kAmxTileTokens) tokens of a packed BF16 matrix on AMX
// tiles (packed_amx.cpp; needs cpu_features().amx_bf16). Not the arithmetic of the vdpbf16ps
// tile: a process uses one or the other for all its BF16 tiles.
constexpr int kAmxTileTokens = 16;
void packed_tile_amx_bf16(const PackedArgs& a, int n_tok);

}  // namespace loom::kernels::cpu
