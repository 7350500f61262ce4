// What the packed tiles of every instruction set share (packed_avx512.cpp,
// packed_kquant_low_avx512.cpp, packed_amx.cpp): their software prefetch of the weights, the
// mask of a group's rows that exist, activation broadcasts and output stores.
#pragma once

#include <immintrin.h>

#include <cstdint>

#include "kernels/cpu/packed_kernels.h"

namespace loom::kernels::cpu {

// Weights are prefetched into L2, not L1 (_MM_HINT_T1): on the Intel host (2 vCPUs) one token's
// GEMV from DRAM measured Q4_K 22.5 -> 26-27.8 GB/s, Q4_0 24-25 -> 28-30, Q8_0 29 -> 30-31
// (loom_kernels_bench with LOOM_BENCH_COLD=1, alternating), x16 3-6% faster; whole models
// (bench model tg128) llama-0.5b Q4_0 +17-25%, qwen3moe-2b Q4_K_M +18%, Q8_0 +5%. Our reading:
// an L1 prefetch holds one of the core's few L1 fill buffers until its line arrives, which
// leaves too few for the lines in flight at DRAM latency; an L2 prefetch does not, and the
// tile's loads then hit L2. (The F16 tile keeps L1 prefetches, one line per column step: its
// one-token GEMV measured 35.5 -> 32-34 GB/s with L2 ones.) On the AMD EPYC (Zen 4) host a
// one-token GEMV reads faster with no software prefetch at all (weight_prefetch_bytes, isa.h).
[[gnu::always_inline]] inline void prefetch_weight_line(const void* p) {
  _mm_prefetch(static_cast<const char*>(p), _MM_HINT_T1);
}

// The prefetches of a tile (PackedArgs::prefetch_ahead) for records of kRec bytes: its share
// [lo, hi) of each record, in whole lines. The whole record (one token tile, decode's GEMV)
// takes an unrolled loop: a runtime-bounded one cost single-sequence decode ~5%.
template <int kRec>
struct RecordPrefetch {
  int64_t ahead;
  int lo = 0, hi = kRec;
  explicit RecordPrefetch(const PackedArgs& a) : ahead(a.prefetch_ahead) {
    if (a.prefetch_parts > 1) {
      lo = kRec * a.prefetch_part / a.prefetch_parts / 64 * 64;
      if (a.prefetch_part + 1 < a.prefetch_parts)
        hi = kRec * (a.prefetch_part + 1) / a.prefetch_parts / 64 * 64;
    }
  }
  // Always inlined: a call inside a tile makes every zmm accumulator spill around it.
  template <int G>
  [[gnu::always_inline]] void operator()(const uint8_t* const (&rec)[G]) const {
    if (ahead == 0) return;
    if (lo == 0 && hi == kRec) {
      for (int g = 0; g < G; ++g)
        for (int off = 0; off < kRec; off += 64) line(rec[g] + off);
      return;
    }
    for (int g = 0; g < G; ++g)
      for (int off = lo; off < hi; off += 64) line(rec[g] + off);
  }
  // Part i of kParts of the same lines, for the K-quant records (2-4 KiB) to spread over their
  // sub-blocks: their prefetches in one burst at the record's start measured x16 from DRAM
  // 12-15% slower (Q4_K / Q6_K, loom_kernels_bench with LOOM_BENCH_COLD=1, alternating).
  template <int G, int kParts>
  [[gnu::always_inline]] void part(const uint8_t* const (&rec)[G], int i) const {
    if (ahead != 0) lines_of_part<G, kParts>(rec, lo, hi, i);
  }
  // Whether this tile prefetches whole records (one token tile over its groups: decode).
  bool whole() const { return ahead != 0 && lo == 0 && hi == kRec; }
  // part() of a tile known to prefetch whole records: the bounds are constants, and with i a
  // constant in an unrolled loop so are the lines.
  template <int G, int kParts>
  [[gnu::always_inline]] void whole_part(const uint8_t* const (&rec)[G], int i) const {
    lines_of_part<G, kParts>(rec, 0, kRec, i);
  }
  template <int G, int kParts>
  [[gnu::always_inline]] void lines_of_part(const uint8_t* const (&rec)[G], int from, int to,
                                            int i) const {
    const int b = from + (to - from) * i / kParts / 64 * 64;
    const int e = i + 1 == kParts ? to : from + (to - from) * (i + 1) / kParts / 64 * 64;
    for (int g = 0; g < G; ++g)
      for (int off = b; off < e; off += 64) line(rec[g] + off);
  }
  [[gnu::always_inline]] void line(const uint8_t* p) const { prefetch_weight_line(p + ahead); }
};

// The per-256 activations of a tile's T tokens (PackedActRow): int8 values, one scale per 256
// columns, the int16 sums of each 32 and each 16 values.
template <int T>
struct Per256Rows {
  const int8_t* q[T];
  const float* d[T];
  const int16_t* sum32[T];
  const int16_t* sum16[T];
  explicit Per256Rows(const PackedArgs& a) {
    for (int t = 0; t < T; ++t) {
      const PackedActRow row(a.x + t * a.x_stride, a.cols);
      q[t] = row.q256;
      d[t] = row.d256;
      sum32[t] = row.sum256_32;
      sum16[t] = row.sum256_16;
    }
  }
};

// The lanes of a group's 16 rows that exist: n of them (n >= 16: all).
inline __mmask16 row_mask(int n) {
  return n >= 16 ? static_cast<__mmask16>(0xFFFF) : static_cast<__mmask16>((1u << n) - 1);
}

// Four int8 activations broadcast to every 32-bit lane (one vpdpbusd step of all 16 rows).
inline __m512i bcast4(const int8_t* p) {
  int32_t v;
  __builtin_memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

// Token t's outputs of a tile's G groups: the rows that exist (n_rows from the first group on).
template <int G>
inline void store_rows(const PackedArgs& a, int t, const __m512 (&acc)[G]) {
  for (int g = 0; g < G; ++g)
    _mm512_mask_storeu_ps(a.out + t * a.out_stride + 16 * g, row_mask(a.n_rows - 16 * g), acc[g]);
}

// A per-256 tile (the K-quants') for a call's shape: Tile::run<G, T>(a) with G = 1 or 2 groups
// by a.n_rows and T = n_tok tokens (1..kPackedPer256TileTokens).
template <class Tile, int G>
void run_per256_tokens(const PackedArgs& a, int n_tok) {
  static_assert(kPackedPer256TileTokens == 3, "cases below");
  switch (n_tok) {
    case 1:
      return Tile::template run<G, 1>(a);
    case 2:
      return Tile::template run<G, 2>(a);
    default:
      return Tile::template run<G, 3>(a);
  }
}
template <class Tile>
void run_per256_tile(const PackedArgs& a, int n_tok) {
  static_assert(kPackedTileGroups == 2, "one or two groups below");
  if (a.n_rows > 16)
    run_per256_tokens<Tile, 2>(a, n_tok);
  else
    run_per256_tokens<Tile, 1>(a, n_tok);
}

}  // namespace loom::kernels::cpu
