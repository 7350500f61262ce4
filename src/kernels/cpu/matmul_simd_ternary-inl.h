// Ternary weights (TQ1_0, TQ2_0) for the shared 256-bit kernels: included by matmul_avx2.cpp and
// matmul_avx512.cpp right after matmul_simd-inl.h, in the same LOOM_SIMD_NS. The trits t in
// 0..2 multiply the Q8_K activations as unsigned bytes; the value t - 1 takes the activations'
// sum off through the Q8_K block sums, in the float order of the packed Q2_K tile that runs a
// ternary matrix's copy (kernels/packed.h), exactly as dot_ternary in matmul_scalar.cpp: the
// same integers and floats on every ISA and layout.
#pragma once

#include <type_traits>

namespace loom::kernels::cpu::LOOM_SIMD_NS {
namespace {

// Trits of 32 TQ1_0 bytes: byte i's trit at the power of 3 in byte i of pow3 (1 .. 81), i.e.
// floor(3 * (v * pow3 mod 256) / 256), with 16-bit multiplies: each byte moved to the high half
// of its 16-bit lane, so that the product's high byte is (v * pow3) mod 256 and the high half
// of that times 3 is the trit.
inline __m256i tq1_trits(__m256i v, __m256i pow3) {
  const __m256i lo_byte = _mm256_set1_epi16(0x00FF), hi_byte = _mm256_set1_epi16(-256);
  const __m256i three = _mm256_set1_epi16(3);
  const __m256i even = _mm256_mullo_epi16(_mm256_slli_epi16(v, 8), _mm256_and_si256(pow3, lo_byte));
  const __m256i odd = _mm256_mullo_epi16(_mm256_and_si256(v, hi_byte), _mm256_srli_epi16(pow3, 8));
  return _mm256_or_si256(_mm256_mulhi_epu16(even, three),
                         _mm256_slli_epi16(_mm256_mulhi_epu16(odd, three), 8));
}

// One power of 3 in every byte, or p in the low 16 bytes and q in the high 16.
inline __m256i pow3_bytes(int p, int q) {
  return _mm256_set_m128i(_mm_set1_epi8(static_cast<char>(q)), _mm_set1_epi8(static_cast<char>(p)));
}

struct TernaryW {
  const uint8_t* blk;
  float d;
};

template <bool kOne>  // TQ1_0, else TQ2_0
struct Ternary {
  using Block = std::conditional_t<kOne, BlockTq1_0, BlockTq2_0>;
  static constexpr int kBlock = 256, kChunks = 4, kBlockBytes = sizeof(Block);
  using W = TernaryW;
  struct C {
    __m256i lo, hi;  // trits of elements 64c .. +31 and 64c+32 .. +63
  };
  using X = KX;
  using S = __m256i;
  using Acc = KAcc;
  static Acc zero_acc() { return {0.0f}; }
  static S zero_s() { return _mm256_setzero_si256(); }
  static W prep(const uint8_t* row, int64_t b) {
    const Block* blk = reinterpret_cast<const Block*>(row) + b;
    return {reinterpret_cast<const uint8_t*>(blk), half_to_float(blk->d)};
  }
  static C unpack(const W& w, const uint8_t*, int64_t, int c) {
    if constexpr (kOne) {
      const auto* blk = reinterpret_cast<const BlockTq1_0*>(w.blk);
      // Elements 0..159: trit n of qs[m], m < 32, at 32n + m.
      const __m256i q32 = load32(blk->qs);
      if (c < 2)
        return {tq1_trits(q32, pow3_bytes(c ? 9 : 1, c ? 9 : 1)),
                tq1_trits(q32, pow3_bytes(c ? 27 : 3, c ? 27 : 3))};
      // Elements 160..239: trit n of qs[32 + m], m < 16, at 160 + 16n + m (both halves the
      // same 16 bytes); 240..255: trit n of qh[j] at 240 + 4n + j.
      const __m256i q16 = _mm256_broadcastsi128_si256(
          _mm_loadu_si128(reinterpret_cast<const __m128i*>(blk->qs + 32)));
      if (c == 2) return {tq1_trits(q32, pow3_bytes(81, 81)), tq1_trits(q16, pow3_bytes(1, 3))};
      uint32_t qh;
      std::memcpy(&qh, blk->qh, 4);
      const __m128i h =
          _mm_shuffle_epi8(_mm_cvtsi32_si128(static_cast<int>(qh)),
                           _mm_set_epi8(3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0, 3, 2, 1, 0));
      const __m256i tail = _mm256_set_m128i(h, _mm256_castsi256_si128(q16));
      const __m256i tail_pow3 = _mm256_set_m128i(
          _mm_set_epi8(27, 27, 27, 27, 9, 9, 9, 9, 3, 3, 3, 3, 1, 1, 1, 1), _mm_set1_epi8(81));
      return {tq1_trits(q16, pow3_bytes(9, 27)), tq1_trits(tail, tail_pow3)};
    } else {
      // Element 128h + 32l + m in bits 2l of qs[32h + m]: chunk c is h = c / 2, l = 2 (c % 2) +
      // 0, 1.
      const auto* blk = reinterpret_cast<const BlockTq2_0*>(w.blk);
      const __m256i v = load32(blk->qs + 32 * (c / 2));
      const __m256i m = _mm256_set1_epi8(3);
      const int shift = 4 * (c % 2);
      return {_mm256_and_si256(_mm256_srli_epi16(v, shift), m),
              _mm256_and_si256(_mm256_srli_epi16(v, shift + 2), m)};
    }
  }
  static X load_x(const uint8_t* xrow, int64_t, int64_t b, int c) { return load_kx(xrow, b, c); }
  static void step(S& s, const W&, const C& wc, const X& x, int) {
    s = _mm256_add_epi32(s, dot_u8s8(wc.lo, x.lo));
    s = _mm256_add_epi32(s, dot_u8s8(wc.hi, x.hi));
  }
  static void end_block(Acc& acc, const S& s, const W& w, const uint8_t* xrow, int64_t, int64_t b) {
    const BlockQ8_K* x = q8k(xrow, b);
    int32_t isum, xsum;
    reduce2(s, _mm256_madd_epi16(load32(x->bsums), _mm256_set1_epi16(1)), &isum, &xsum);
    // d_x * (d * S - d * M), as dot_ternary in matmul_scalar.cpp and the packed Q2_K tile.
    const float v = fma1(static_cast<float>(isum), w.d, -(static_cast<float>(xsum) * w.d));
    acc.v = fma1(v, x->d, acc.v);
  }
  static float finish(const Acc& acc) { return acc.v; }
};

}  // namespace
}  // namespace loom::kernels::cpu::LOOM_SIMD_NS
