// AMX tiles for kRows16-packed BF16 matrices (kernels/packed.h): every multiplication of a
// packed BF16 matrix on a CPU with AMX-BF16, decode and prefill alike.
//
// A group's packed BF16 columns come in pairs, 16 rows x 2 bf16 = 64 bytes a pair, so 16
// consecutive pairs (1 KiB) are an AMX B tile for 32 columns, and up to 16 tokens' bf16
// activations of those columns (64 bytes a row, x_stride apart) are the A tile. One TDPBF16PS
// adds the 32 columns' products to a tokens x 16 rows fp32 tile; the columns go in order, 32 at a
// time, into one accumulator tile per group, stored once at the end.
//
// The tile's arithmetic is not vdpbf16ps's (measured on random data: 43% of the outputs of one
// TDPBF16PS differ in their last bits from a chain of vdpbf16ps over the same pairs), so where
// AMX is on it computes every token count, a single token included. A tile's rows are computed
// independently of each other, so a token's result is the same alone or in any batch. Decode is
// memory-bound either way; prefill gets the tile unit's throughput (measured 1.67 T multiply-adds
// a second on one core, against ~0.2 T for vdpbf16ps).
#include <immintrin.h>

#include "base/status.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/cpu/packed_tile_util.h"
#include "kernels/packed.h"

namespace loom::kernels::cpu {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette = 1, start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t colsb[16] = {};
  uint8_t rows[16] = {};
};

// Tiles 0-1: the two groups' fp32 sums (tokens x 16 rows); 2 and 5: the activations (tokens x 32
// bf16) of an even and an odd chunk; 3-4 and 6-7: the two groups' weights (16 column pairs x 16
// rows) of those chunks. The configuration is per thread and stays loaded until a tile of
// another token count comes (only these kernels use tiles).
void configure_tiles(int n_tok) {
  thread_local int configured_tokens = 0;
  if (configured_tokens == n_tok) return;
  TileConfig c;
  for (int i = 0; i < 8; ++i) {
    c.rows[i] = i < 3 || i == 5 ? static_cast<uint8_t>(n_tok) : 16;
    c.colsb[i] = 64;
  }
  _tile_loadconfig(&c);
  configured_tokens = n_tok;
}

constexpr int kChunkBytes = 16 * 64;  // 16 column pairs of one group: 32 columns

// Group g's sums (tile g) to out: straight from the tile when all 16 rows exist, else through a
// buffer and masked stores.
void store_group(const PackedArgs& a, int g, int n_tok) {
  // The tile intrinsics take tile numbers as literals.
  auto store = [g](void* dst, long stride) {
    if (g == 0)
      _tile_stored(0, dst, stride);
    else
      _tile_stored(1, dst, stride);
  };
  const int n = a.n_rows - 16 * g;
  float* out = a.out + 16 * g;
  if (n >= 16) {
    store(out, static_cast<long>(a.out_stride * sizeof(float)));
    return;
  }
  alignas(64) float sums[16 * 16];
  store(sums, 64);
  for (int t = 0; t < n_tok; ++t)
    _mm512_mask_storeu_ps(out + t * a.out_stride, row_mask(n), _mm512_load_ps(sums + 16 * t));
}

template <int G>
void bf16_tile(const PackedArgs& a, int n_tok) {
  configure_tiles(n_tok);
  const int64_t chunks = a.cols / 32;
  const int64_t group_bytes = a.cols * kPackRows * 2;
  const uint8_t* w = a.w;
  const long x_stride = static_cast<long>(a.x_stride);
  const RecordPrefetch<kChunkBytes> prefetch_records(a);
  auto prefetch = [&](const uint8_t* chunk) {
    const uint8_t* rec[G];
    for (int g = 0; g < G; ++g) rec[g] = chunk + g * group_bytes;
    prefetch_records(rec);
  };
  // Chunks alternate between two sets of source tiles (2-4 and 5-7), so the next chunk's loads
  // need not wait for the products still reading the last one's; the sums take the chunks in
  // order either way.
  _tile_zero(0);
  if constexpr (G == 2) _tile_zero(1);
  int64_t c = 0;
  for (; c + 1 < chunks; c += 2) {
    const uint8_t* even = w + c * kChunkBytes;
    const uint8_t* odd = even + kChunkBytes;
    prefetch(even);
    _tile_loadd(2, a.x + c * 64, x_stride);
    _tile_loadd(3, even, 64);
    if constexpr (G == 2) _tile_loadd(4, even + group_bytes, 64);
    prefetch(odd);
    _tile_loadd(5, a.x + (c + 1) * 64, x_stride);
    _tile_loadd(6, odd, 64);
    if constexpr (G == 2) _tile_loadd(7, odd + group_bytes, 64);
    _tile_dpbf16ps(0, 2, 3);
    if constexpr (G == 2) _tile_dpbf16ps(1, 2, 4);
    _tile_dpbf16ps(0, 5, 6);
    if constexpr (G == 2) _tile_dpbf16ps(1, 5, 7);
  }
  if (c < chunks) {
    const uint8_t* last = w + c * kChunkBytes;
    prefetch(last);
    _tile_loadd(2, a.x + c * 64, x_stride);
    _tile_loadd(3, last, 64);
    _tile_dpbf16ps(0, 2, 3);
    if constexpr (G == 2) {
      _tile_loadd(4, last + group_bytes, 64);
      _tile_dpbf16ps(1, 2, 4);
    }
  }
  for (int g = 0; g < G; ++g) store_group(a, g, n_tok);
}

}  // namespace

void packed_tile_amx_bf16(const PackedArgs& a, int n_tok) {
  LOOM_CHECK(n_tok >= 1 && n_tok <= kAmxTileTokens);
  if (a.n_rows > 16)
    bf16_tile<2>(a, n_tok);
  else
    bf16_tile<1>(a, n_tok);
}

}  // namespace loom::kernels::cpu
