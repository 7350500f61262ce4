// kRows16-packed Q8_0 / Q4_0 / MXFP4 / Q2_K..Q6_K / F16 / BF16 matrices (kernels/packed.h): the
// packed matmul agrees with the row-layout matmul and the reference within the int8-activation
// bound, and keeps batch invariance (a token's output bit-identical alone, in any batch, on 1 or 2
// threads). Q6_K, Q3_K and Q2_K also match their kernels' arithmetic redone in scalar code bit for
// bit (Q4_K: packed_q4_k_test.cpp).
#include "kernels/packed.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/matmul.h"
#include "kernels/quant.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"
#include "kernels/ref/ternary_ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

using Matrix = testing::QuantizedMatrix;

Matrix make_matrix(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  return testing::quantized_matrix(t, rows, cols, seed);
}

// Reference out[t][r] in double from the dequantized weights.
std::vector<double> reference(const TensorView& w, const std::vector<float>& x, int64_t nt) {
  const int64_t rows = w.rows(), cols = w.cols();
  std::vector<float> wr(cols);
  std::vector<double> out(nt * rows);
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(w.dtype, w.row(r), wr.data(), cols);
    for (int64_t t = 0; t < nt; ++t) {
      double s = 0;
      for (int64_t k = 0; k < cols; ++k) s += double(wr[k]) * x[t * cols + k];
      out[t * rows + r] = s;
    }
  }
  return out;
}

// The error of int8 activations relative to the largest output: the K-quant tiles (Q2_K to Q6_K)
// read them quantized per 256 columns (as the row kernels of every K-quant do, and llama.cpp),
// the others per 32; amax over 256 normal values is ~1.4x that over 32, and so is the step.
double int8_tolerance(Dtype t) {
  return cpu::reads_per_256(t) || is_ternary(t) ? 1.5e-2 : 1e-2;
}

class Packed : public ::testing::TestWithParam<Dtype> {
 protected:
  void SetUp() override {
    if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
    if (GetParam() == Dtype::kBF16 && !cpu_features().avx512bf16) GTEST_SKIP() << "no AVX512-BF16";
  }
};

TEST_P(Packed, MatchesReferenceAndRowLayout) {
  ThreadPool pool(2);
  for (int64_t rows : {16, 37, 301}) {  // whole groups, a padded last group
    const int64_t cols = 256;
    Matrix m = make_matrix(GetParam(), rows, cols, 5 + rows);
    if (!packable(m.view)) GTEST_SKIP() << dtype_name(GetParam()) << " is not packed on this CPU";
    const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
    EXPECT_EQ(p.view().layout, TensorLayout::kRows16);
    EXPECT_EQ(p.view().nbytes, (rows + 15) / 16 * PackedMatrix::group_bytes(GetParam(), cols));
    for (int64_t nt : {1, 5, 8, 19}) {
      const auto x = testing::random_normal(nt * cols, 9 + nt);
      std::vector<float> packed(nt * rows), plain(nt * rows);
      matmul(p.view(), x.data(), nt, packed.data(), &pool);
      matmul(m.view, x.data(), nt, plain.data(), &pool);
      const auto want = reference(m.view, x, nt);
      double worst = 0, worst_plain = 0, scale = 0;
      for (size_t i = 0; i < want.size(); ++i) {
        worst = std::max(worst, std::abs(packed[i] - want[i]));
        worst_plain = std::max(worst_plain, std::abs(plain[i] - want[i]));
        scale = std::max(scale, std::abs(want[i]));
      }
      EXPECT_LT(worst / scale, int8_tolerance(GetParam()))
          << rows << "x" << cols << " tokens " << nt;
      EXPECT_LT(worst, 2 * worst_plain + 1e-4 * scale) << rows << " rows, tokens " << nt;
    }
  }
}

TEST_P(Packed, TokenResultIndependentOfBatchAndThreads) {
  // > 64: the prefill loop order; > 2 * 516: token blocks, the last one partial (matmul.cpp).
  const int64_t rows = 301, cols = 512, nt = 1100;
  Matrix m = make_matrix(GetParam(), rows, cols, 77);
  const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
  const auto x = testing::random_normal(nt * cols, 78);
  ThreadPool one(1), two(2);
  std::vector<float> all(nt * rows), alone(rows);
  matmul(p.view(), x.data(), nt, all.data(), &two);
  for (int64_t t = 0; t < nt; ++t) {
    for (ThreadPool* pool : {&one, &two}) {
      matmul(p.view(), &x[t * cols], 1, alone.data(), pool);
      ASSERT_EQ(0, std::memcmp(alone.data(), &all[t * rows], rows * sizeof(float)))
          << "token " << t;
    }
  }
  // And inside a batch of a different size (the token at another tile position).
  std::vector<float> part(7 * rows);
  matmul(p.view(), &x[3 * cols], 7, part.data(), &one);
  EXPECT_EQ(0, std::memcmp(part.data(), &all[3 * rows], 7 * rows * sizeof(float)));
}

// Decode's one-token GEMV prefetches its weights or not by vendor (weight_prefetch_bytes: none
// on AMD, 16 KiB on Intel): both ways give the same bits, so whichever one a host does not
// take by default is run here too.
TEST_P(Packed, OneTokenResultIsTheSameWithAndWithoutWeightPrefetch) {
  const int64_t rows = 301, cols = 512;
  Matrix m = make_matrix(GetParam(), rows, cols, 91);
  if (!packable(m.view)) GTEST_SKIP() << dtype_name(GetParam()) << " is not packed on this CPU";
  const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
  const auto x = testing::random_normal(cols, 92);
  const int64_t before = weight_prefetch_bytes();
  ThreadPool pool(2);
  std::vector<float> with(rows), without(rows);
  set_weight_prefetch_bytes(cpu::kPrefetchAheadBytes);
  matmul(p.view(), x.data(), 1, with.data(), &pool);
  set_weight_prefetch_bytes(0);
  matmul(p.view(), x.data(), 1, without.data(), &pool);
  set_weight_prefetch_bytes(before);
  EXPECT_EQ(0, std::memcmp(with.data(), without.data(), rows * sizeof(float)));
  const auto want = reference(m.view, x, 1);
  double worst = 0, scale = 0;
  for (int64_t r = 0; r < rows; ++r) {
    worst = std::max(worst, std::abs(with[r] - want[r]));
    scale = std::max(scale, std::abs(want[r]));
  }
  EXPECT_LT(worst / scale, int8_tolerance(GetParam()));
}

TEST_P(Packed, MultiSharesActivationsAndMatchesSingleCalls) {
  ThreadPool pool(2);
  const int64_t cols = 256, nt = 11;  // one K-quant super-block
  Matrix a = make_matrix(GetParam(), 48, cols, 1), b = make_matrix(GetParam(), 21, cols, 2);
  const PackedMatrix pa = PackedMatrix::pack_rows16(a.view), pb = PackedMatrix::pack_rows16(b.view);
  const auto x = testing::random_normal(nt * cols, 3);
  std::vector<float> oa(nt * 48), ob(nt * 21), sa(nt * 48), sb(nt * 21), rb(nt * 21);
  const MatmulTarget targets[] = {{&pa.view(), oa.data()}, {&pb.view(), ob.data()}};
  matmul_multi(targets, 2, x.data(), nt, &pool);
  matmul(pa.view(), x.data(), nt, sa.data(), &pool);
  matmul(pb.view(), x.data(), nt, sb.data(), &pool);
  EXPECT_EQ(oa, sa);
  EXPECT_EQ(ob, sb);
  // A packed and a row-layout matrix together: each still gets its own result.
  const MatmulTarget mixed[] = {{&pa.view(), oa.data()}, {&b.view, ob.data()}};
  matmul_multi(mixed, 2, x.data(), nt, &pool);
  matmul(b.view, x.data(), nt, rb.data(), &pool);
  EXPECT_EQ(oa, sa);
  EXPECT_EQ(ob, rb);
}

// A prefill call of several token blocks (matmul.cpp: kPrefillTokenBlock) over two matrices
// at once: every token's rows are what calls of 100 tokens (one block each) give.
TEST(PackedMixed, MultiCallOverManyTokenBlocksMatchesSmallCalls) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  ThreadPool pool(2);
  const int64_t cols = 256, nt = 1100, rows_a = 70, rows_b = 45;
  Matrix a = make_matrix(Dtype::kQ8_0, rows_a, cols, 31),
         b = make_matrix(Dtype::kQ4_0, rows_b, cols, 32);
  const PackedMatrix pa = PackedMatrix::pack_rows16(a.view), pb = PackedMatrix::pack_rows16(b.view);
  const auto x = testing::random_normal(nt * cols, 33);
  std::vector<float> oa(nt * rows_a), ob(nt * rows_b), sa(nt * rows_a), sb(nt * rows_b);
  const MatmulTarget targets[] = {{&pa.view(), oa.data()}, {&pb.view(), ob.data()}};
  matmul_multi(targets, 2, x.data(), nt, &pool);
  for (int64_t t0 = 0; t0 < nt; t0 += 100) {
    matmul(pa.view(), &x[t0 * cols], 100, &sa[t0 * rows_a], &pool);
    matmul(pb.view(), &x[t0 * cols], 100, &sb[t0 * rows_b], &pool);
  }
  EXPECT_EQ(oa, sa);
  EXPECT_EQ(ob, sb);
}

// Two packed matrices of (possibly) different dtypes in one matmul_multi call: each gets what
// a call of its own gives.
void expect_multi_matches_single_calls(Dtype ta, int64_t rows_a, Dtype tb, int64_t rows_b,
                                       int64_t cols, int64_t nt, uint32_t seed) {
  ThreadPool pool(2);
  Matrix a = make_matrix(ta, rows_a, cols, seed), b = make_matrix(tb, rows_b, cols, seed + 1);
  const PackedMatrix pa = PackedMatrix::pack_rows16(a.view), pb = PackedMatrix::pack_rows16(b.view);
  const auto x = testing::random_normal(nt * cols, seed + 2);
  std::vector<float> oa(nt * rows_a), ob(nt * rows_b), sa(nt * rows_a), sb(nt * rows_b);
  const MatmulTarget targets[] = {{&pa.view(), oa.data()}, {&pb.view(), ob.data()}};
  matmul_multi(targets, 2, x.data(), nt, &pool);
  matmul(pa.view(), x.data(), nt, sa.data(), &pool);
  matmul(pb.view(), x.data(), nt, sb.data(), &pool);
  EXPECT_EQ(oa, sa) << dtype_name(ta);
  EXPECT_EQ(ob, sb) << dtype_name(tb);
}

TEST(PackedMixed, F16AndQ8_0InOneMultiCallEachGetTheirOwnResult) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  expect_multi_matches_single_calls(Dtype::kF16, 40, Dtype::kQ8_0, 33, 256, 9, 11);
}

// A Q4_K_M layer: q/k in Q4_K and v in Q6_K share one activation quantization.
TEST(PackedMixed, Q4_KAndQ6_KInOneMultiCallEachGetTheirOwnResult) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  expect_multi_matches_single_calls(Dtype::kQ4_K, 50, Dtype::kQ6_K, 24, 512, 13, 21);
}

// gpt-oss's experts: MXFP4 with Q8_0 (its other matrices) in one call.
TEST(PackedMixed, Mxfp4AndQ8_0InOneMultiCallEachGetTheirOwnResult) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  expect_multi_matches_single_calls(Dtype::kMXFP4, 45, Dtype::kQ8_0, 32, 256, 14, 31);
}

// MXFP4 blocks drawn directly (random codes, every nibble value, and exponents uniform in
// [e_lo, e_hi]), not through the quantizer, so every scale a file can hold is reached: the
// subnormal ones (e = 0, 1), the ordinary ones, and large ones whose sums stay finite.
Matrix random_mxfp4(int64_t rows, int64_t cols, int e_lo, int e_hi, uint32_t seed) {
  Matrix m;
  m.bytes.resize(rows * cols / 32 * sizeof(BlockMxfp4));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> code(0, 255), e(e_lo, e_hi);
  auto* blocks = reinterpret_cast<BlockMxfp4*>(m.bytes.data());
  for (int64_t i = 0; i < rows * cols / 32; ++i) {
    blocks[i].e = static_cast<uint8_t>(e(rng));
    for (uint8_t& q : blocks[i].qs) q = static_cast<uint8_t>(code(rng));
  }
  testing::view_bytes(m, Dtype::kMXFP4, rows, cols);
  return m;
}

// Per row and token, against the dequantized reference in double: the error must lie within
// what the int8 activations allow, sum over blocks of (amax_b / 254) * sum_b |w| (each x off
// by at most half its block's step amax / 127), plus float rounding. And against the row
// layout's kernel, which sees the same int8 activations: only the float order differs.
TEST(PackedMxfp4, EveryExponentRangeDecodeAndPrefillMatchReference) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  ThreadPool pool(2);
  struct Range {
    int lo, hi;
  };
  // Subnormal scales 2^-128 and 2^-127; tiny; gpt-oss's own (around 2^-8 .. 2^0); large
  // (2^100: values to 12 * 2^100, sums of 320 still finite).
  for (const Range r : {Range{0, 1}, Range{2, 24}, Range{118, 130}, Range{200, 228}}) {
    const int64_t rows = 83, cols = 320;  // a padded last group; 10 blocks
    const Matrix m = random_mxfp4(rows, cols, r.lo, r.hi, 3 + r.lo);
    ASSERT_TRUE(packable(m.view));
    const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
    EXPECT_EQ(p.view().nbytes, m.view.nbytes + (96 - 83) * cols / 32 * 17);  // 17 bytes a block
    std::vector<float> wr(rows * cols);
    for (int64_t row = 0; row < rows; ++row)
      ref::dequantize_row(Dtype::kMXFP4, m.view.row(row), &wr[row * cols], cols);
    for (int64_t nt : {1, 3, 6, 7, 70}) {  // decode, token tiles, the prefill loop order (> 64)
      const auto x = testing::random_normal(nt * cols, 50 + nt);
      std::vector<float> got(nt * rows, -1.0f), plain(nt * rows, -2.0f);
      matmul(p.view(), x.data(), nt, got.data(), &pool);
      matmul(m.view, x.data(), nt, plain.data(), &pool);
      double worst = 0, worst_plain = 0;  // as fractions of the bound, of sum |w x|
      for (int64_t t = 0; t < nt; ++t)
        for (int64_t row = 0; row < rows; ++row) {
          const float* xt = &x[t * cols];
          const float* w = &wr[row * cols];
          double want = 0, mag = 0, bound = 0;
          for (int64_t b = 0; b < cols / 32; ++b) {
            double amax = 0, wsum = 0;
            for (int64_t k = 32 * b; k < 32 * b + 32; ++k) {
              want += double(w[k]) * xt[k];
              mag += std::abs(double(w[k]) * xt[k]);
              amax = std::max(amax, std::abs(double(xt[k])));
              wsum += std::abs(double(w[k]));
            }
            bound += amax / 254 * wsum;
          }
          ASSERT_GT(mag, 0.0);
          const float g = got[t * rows + row];
          ASSERT_TRUE(std::isfinite(g)) << "e " << r.lo << " row " << row;
          worst = std::max(worst, std::abs(g - want) / (bound + 1e-5 * mag));
          worst_plain = std::max(worst_plain, std::abs(g - plain[t * rows + row]) / mag);
        }
      // A wrong scale, nibble or offset is off by O(1) of sum |w x|, far past the bound.
      EXPECT_LT(worst, 1.0) << "exponents " << r.lo << ".." << r.hi << " tokens " << nt;
      // Float order only (measured <= 2e-7).
      EXPECT_LT(worst_plain, 1e-5) << "exponents " << r.lo << ".." << r.hi << " tokens " << nt;
      if (nt == 70)
        std::printf(
            "  exponents %d..%d: worst %.3g of the int8 bound, %.3g of sum |w x| from the "
            "row layout\n",
            r.lo, r.hi, worst, worst_plain);
    }
  }
}

// Q6_K blocks drawn directly: random ql / qh bytes (every q in 0..63), int8 scales over their
// whole range, d of either sign.
Matrix random_q6_k(int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  m.bytes.resize(rows * cols / kQKK * sizeof(BlockQ6_K));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> d(0.0f, 0.01f);
  auto* blocks = reinterpret_cast<BlockQ6_K*>(m.bytes.data());
  for (int64_t i = 0; i < rows * cols / kQKK; ++i) {
    for (uint8_t& q : blocks[i].ql) q = static_cast<uint8_t>(byte(rng));
    for (uint8_t& q : blocks[i].qh) q = static_cast<uint8_t>(byte(rng));
    for (int8_t& sc : blocks[i].scales) sc = static_cast<int8_t>(byte(rng) - 128);
    blocks[i].d = f32_to_fp16(d(rng));
  }
  testing::view_bytes(m, Dtype::kQ6_K, rows, cols);
  return m;
}

// The packed Q6_K kernel's arithmetic in scalar code, which fixes it bit for bit: against the
// activations quantized per 256 columns, per super-block the exact integer
// S = sum_j sc_j * (sum_{c in j} q_c x_c - 32 * sum_{c in j} x_c) over its 16-column
// sub-blocks j, then acc = fma(S, d * d_x, acc), super-blocks in order. q comes from the
// reference dequantizer (each block with d = 1 and all scales 1 gives q - 32 exactly).
std::vector<float> q6_k_packed_arithmetic(const Matrix& m, const std::vector<float>& x,
                                          int64_t nt) {
  const int64_t rows = m.view.rows(), cols = m.view.cols(), nsb = cols / kQKK;
  std::vector<int> q(rows * cols);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < nsb; ++s) {
      BlockQ6_K unit = reinterpret_cast<const BlockQ6_K*>(m.view.row(r))[s];
      unit.d = f32_to_fp16(1.0f);
      for (int8_t& sc : unit.scales) sc = 1;
      float w[kQKK];
      ref::dequantize_row(Dtype::kQ6_K, &unit, w, kQKK);
      for (int n = 0; n < kQKK; ++n) q[r * cols + s * kQKK + n] = static_cast<int>(w[n]) + 32;
    }
  std::vector<uint8_t> act(cpu::packed_act_row_bytes(cols));
  std::vector<float> out(nt * rows);
  for (int64_t t = 0; t < nt; ++t) {
    cpu::quantize_act_row_q8_32_avx512(&x[t * cols], cols, act.data(), false, /*int_sums=*/true);
    const cpu::PackedActRow xa(act.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      const auto* blk = reinterpret_cast<const BlockQ6_K*>(m.view.row(r));
      float acc = 0.0f;
      for (int64_t s = 0; s < nsb; ++s) {
        int32_t sum = 0;
        for (int j = 0; j < 16; ++j) {
          const int64_t c0 = kQKK * s + 16 * j;
          int32_t dot = -32 * xa.sum256_16[c0 / 16];
          for (int64_t c = c0; c < c0 + 16; ++c) dot += q[r * cols + c] * xa.q256[c];
          sum += blk[s].scales[j] * dot;
        }
        acc = std::fma(float(sum), fp16_to_f32(blk[s].d) * xa.d256[s], acc);
      }
      out[t * rows + r] = acc;
    }
  }
  return out;
}

// Bit-exact against that arithmetic: one and two groups (a padded last one), 1..6 tokens
// (every tile width and more), several tiles and the prefill loop order (> 64 tokens), 1 and 2
// threads.
TEST(PackedQ6_K, EveryTileShapeMatchesTheScalarArithmeticBitForBit) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  ThreadPool one(1), two(2);
  for (int64_t rows : {1, 16, 29, 32, 50}) {
    for (int64_t cols : {256, 768}) {
      const Matrix m = random_q6_k(rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      ASSERT_TRUE(packable(m.view));
      const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
      EXPECT_EQ(p.view().nbytes, (rows + 15) / 16 * (cols / 256) * uint64_t{kPackedQ6KBytes});
      for (int64_t nt : {1, 2, 3, 4, 5, 6, 13, 70}) {
        const auto x = testing::random_normal(nt * cols, 40 + static_cast<uint32_t>(nt));
        const auto want = q6_k_packed_arithmetic(m, x, nt);
        for (ThreadPool* pool : {&one, &two}) {
          std::vector<float> got(nt * rows, -1.0f);
          matmul(p.view(), x.data(), nt, got.data(), pool);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
              << rows << "x" << cols << " tokens " << nt << " threads " << pool->size();
        }
      }
    }
  }
}

// Q2_K / Q3_K blocks drawn directly: random bytes for the q, high bits and scales (every 2-bit
// and 3-bit q, every 4-bit scale and min, every 6-bit Q3_K scale), d and dmin of either sign.
Matrix random_q2_k_q3_k(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  const size_t block = t == Dtype::kQ3_K ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  m.bytes.resize(rows * cols / kQKK * block);
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> d(0.0f, 0.01f);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
  for (int64_t i = 0; i < rows * cols / kQKK; ++i) {
    uint8_t* blk = m.bytes.data() + i * block;
    if (t == Dtype::kQ3_K) {
      reinterpret_cast<BlockQ3_K*>(blk)->d = f32_to_fp16(d(rng));
    } else {
      reinterpret_cast<BlockQ2_K*>(blk)->d = f32_to_fp16(d(rng));
      reinterpret_cast<BlockQ2_K*>(blk)->dmin = f32_to_fp16(d(rng));
    }
  }
  testing::view_bytes(m, t, rows, cols);
  return m;
}

// A block's integers, all read back through the reference dequantizer (so the packing's reading
// of the bit layout is checked against it): q (Q3_K: q - 4) per element, the scale (Q3_K: sc -
// 32) and min per 16-column sub-block.
struct LowKBlock {
  int q[kQKK], sc[16], m[16];
  float d, dmin;
};
LowKBlock low_k_block(Dtype t, const uint8_t* src) {
  LowKBlock out{};
  float w[kQKK];
  if (t == Dtype::kQ3_K) {
    BlockQ3_K b = *reinterpret_cast<const BlockQ3_K*>(src);
    out.d = fp16_to_f32(b.d);
    b.d = f32_to_fp16(1.0f);
    BlockQ3_K unit = b;  // every scale 33: sc - 32 = 1
    std::memset(unit.scales, 0x11, 8);
    std::memset(unit.scales + 8, 0xAA, 4);
    ref::dequantize_row(t, &unit, w, kQKK);
    for (int n = 0; n < kQKK; ++n) out.q[n] = static_cast<int>(w[n]);
    BlockQ3_K minus4 = b;  // every q - 4 = -4
    std::memset(minus4.qs, 0, sizeof minus4.qs);
    std::memset(minus4.hmask, 0, sizeof minus4.hmask);
    ref::dequantize_row(t, &minus4, w, kQKK);
    for (int j = 0; j < 16; ++j) out.sc[j] = static_cast<int>(w[16 * j]) / -4;
  } else {
    BlockQ2_K b = *reinterpret_cast<const BlockQ2_K*>(src);
    out.d = fp16_to_f32(b.d);
    out.dmin = fp16_to_f32(b.dmin);
    b.d = f32_to_fp16(1.0f);
    b.dmin = 0;
    BlockQ2_K unit = b;  // every scale 1, min 0
    std::memset(unit.scales, 1, sizeof unit.scales);
    ref::dequantize_row(t, &unit, w, kQKK);
    for (int n = 0; n < kQKK; ++n) out.q[n] = static_cast<int>(w[n]);
    BlockQ2_K ones = b;  // every q 1: w = sc (d = 1, dmin = 0), then -m (d = 0, dmin = 1)
    std::memset(ones.qs, 0x55, sizeof ones.qs);
    ref::dequantize_row(t, &ones, w, kQKK);
    for (int j = 0; j < 16; ++j) out.sc[j] = static_cast<int>(w[16 * j]);
    ones.d = 0;
    ones.dmin = f32_to_fp16(1.0f);
    ref::dequantize_row(t, &ones, w, kQKK);
    for (int j = 0; j < 16; ++j) out.m[j] = static_cast<int>(-w[16 * j]);
  }
  return out;
}

// The packed Q2_K / Q3_K kernels' arithmetic in scalar code (packed_kquant_low_avx512.cpp),
// which fixes it bit for bit: per super-block s the exact integer S = sum_j sc_j D_j (D: the dot
// of q, Q3_K's q - 4, with the activations quantized per 256), then Q3_K:
// acc = fma(S, d * d_x, acc); Q2_K: with M = sum_j m_j sum_j(x),
// acc = fma(fma(S, d, -(M * dmin)), d_x, acc).
std::vector<float> low_k_packed_arithmetic(const Matrix& m, const std::vector<float>& x,
                                           int64_t nt) {
  const Dtype t = m.view.dtype;
  const int64_t rows = m.view.rows(), cols = m.view.cols(), nsb = cols / kQKK;
  const size_t block = t == Dtype::kQ3_K ? sizeof(BlockQ3_K) : sizeof(BlockQ2_K);
  std::vector<LowKBlock> blocks(rows * nsb);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < nsb; ++s)
      blocks[r * nsb + s] = low_k_block(t, static_cast<const uint8_t*>(m.view.row(r)) + s * block);
  std::vector<uint8_t> act(cpu::packed_act_row_bytes(cols));
  std::vector<float> out(nt * rows);
  for (int64_t tok = 0; tok < nt; ++tok) {
    cpu::quantize_act_row_q8_32_avx512(&x[tok * cols], cols, act.data(), false, true);
    const cpu::PackedActRow xa(act.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t s = 0; s < nsb; ++s) {
        const LowKBlock& b = blocks[r * nsb + s];
        int32_t sum = 0, min = 0;
        for (int j = 0; j < 16; ++j) {
          int32_t dot = 0;
          for (int l = 0; l < 16; ++l) dot += b.q[16 * j + l] * xa.q256[kQKK * s + 16 * j + l];
          sum += b.sc[j] * dot;
          min += b.m[j] * xa.sum256_16[16 * s + j];
        }
        const float dx = xa.d256[s];
        if (t == Dtype::kQ3_K)
          acc = std::fma(float(sum), b.d * dx, acc);
        else
          acc = std::fma(std::fma(float(sum), b.d, -(float(min) * b.dmin)), dx, acc);
      }
      out[tok * rows + r] = acc;
    }
  }
  return out;
}

// Bit-exact against that arithmetic: one and two groups (a padded last one), 1..6 tokens
// (every tile width, and tiles of 3 + 3), several tiles and the prefill loop order (> 64
// tokens), 1 and 2 threads. And within the error bound of int8 activations with one scale per
// 256 of the reference in double (as MXFP4's test, per 32).
TEST(PackedQ2_KQ3_K, EveryTileShapeMatchesTheScalarArithmeticBitForBit) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  ThreadPool one(1), two(2);
  for (Dtype type : {Dtype::kQ3_K, Dtype::kQ2_K}) {
    for (int64_t rows : {1, 16, 29, 32, 50}) {
      for (int64_t cols : {256, 768}) {
        const Matrix m = random_q2_k_q3_k(type, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
        ASSERT_TRUE(packable(m.view));
        const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
        const uint64_t rec = type == Dtype::kQ3_K ? kPackedQ3KBytes : kPackedQ2KBytes;
        EXPECT_EQ(p.view().nbytes, (rows + 15) / 16 * (cols / 256) * rec);
        for (int64_t nt : {1, 2, 3, 4, 5, 6, 13, 70}) {
          const auto x = testing::random_normal(nt * cols, 40 + static_cast<uint32_t>(nt));
          const auto want = low_k_packed_arithmetic(m, x, nt);
          for (ThreadPool* pool : {&one, &two}) {
            std::vector<float> got(nt * rows, -1.0f);
            matmul(p.view(), x.data(), nt, got.data(), pool);
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
                << dtype_name(type) << " " << rows << "x" << cols << " tokens " << nt << " threads "
                << pool->size();
          }
          if (nt > 6) continue;
          EXPECT_LT(testing::worst_of_int8_bound(m.view, x, nt, want.data(), 256), 1.0)
              << dtype_name(type) << " " << rows << "x" << cols;
        }
      }
    }
  }
}

// TQ1_0 / TQ2_0 are packed as the Q2_K matrix with the same values (packed.h): the copy says
// Q2_K, its values are the ternary ones exactly, and the Q2_K tile gives the row kernels'
// floats bit for bit (both take Q2_K's two FMAs per super-block) for decode, verify and
// prefill-sized calls.
TEST(PackedTernary, IsTheSameValuesAsQ2_KAndTheRowKernelsResultsBitForBit) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  ThreadPool pool(2);
  for (Dtype t : {Dtype::kTQ1_0, Dtype::kTQ2_0}) {
    SCOPED_TRACE(std::string(dtype_name(t)));
    const int64_t rows = 45, cols = 768;
    Matrix m = make_matrix(t, rows, cols, 61);
    std::vector<BlockQ2_K> q2(3);
    std::vector<float> want(cols), got(cols);
    for (int64_t r = 0; r < rows; ++r) {
      ref::ternary_to_q2_k(t, m.view.row(r), q2.data(), 3);
      ref::dequantize_row(t, m.view.row(r), want.data(), cols);
      ref::dequantize_row(Dtype::kQ2_K, q2.data(), got.data(), cols);
      ASSERT_EQ(0, std::memcmp(want.data(), got.data(), cols * sizeof(float))) << "row " << r;
    }
    const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
    EXPECT_EQ(p.view().dtype, Dtype::kQ2_K);
    EXPECT_EQ(p.view().nbytes, 3 * PackedMatrix::group_bytes(Dtype::kQ2_K, cols));
    for (int64_t nt : {1, 5, 70}) {
      const auto x = testing::random_normal(nt * cols, 62 + nt);
      std::vector<float> packed(nt * rows), plain(nt * rows);
      matmul(p.view(), x.data(), nt, packed.data(), &pool);
      matmul(m.view, x.data(), nt, plain.data(), &pool);
      EXPECT_EQ(0, std::memcmp(packed.data(), plain.data(), packed.size() * sizeof(float)))
          << nt << " tokens";
    }
  }
}

// Without packing (AVX2, LOOM_ISA=avx2), a TQ1_0 matrix's copy is TQ2_0 with the same trits:
// the same values, and the TQ2_0 row kernels give the TQ1_0 ones' floats bit for bit.
TEST(PackedTernary, Tq1_0CopiedAsTq2_0KeepsValuesAndResults) {
  ThreadPool pool(2);
  const int64_t rows = 19, cols = 512;
  Matrix m = make_matrix(Dtype::kTQ1_0, rows, cols, 71);
  const PackedMatrix c = PackedMatrix::copy_rows(m.view);
  ASSERT_EQ(c.view().dtype, Dtype::kTQ2_0);
  EXPECT_EQ(c.view().nbytes, PackedMatrix::copied_bytes(m.view));
  EXPECT_EQ(c.view().nbytes, static_cast<uint64_t>(rows * 2 * sizeof(BlockTq2_0)));
  std::vector<float> want(cols), got(cols);
  for (int64_t r = 0; r < rows; ++r) {
    ref::dequantize_row(Dtype::kTQ1_0, m.view.row(r), want.data(), cols);
    ref::dequantize_row(Dtype::kTQ2_0, c.view().row(r), got.data(), cols);
    ASSERT_EQ(0, std::memcmp(want.data(), got.data(), cols * sizeof(float))) << "row " << r;
  }
  for (int64_t nt : {1, 6}) {
    const auto x = testing::random_normal(nt * cols, 72 + nt);
    std::vector<float> copied(nt * rows), original(nt * rows);
    matmul(c.view(), x.data(), nt, copied.data(), &pool);
    matmul(m.view, x.data(), nt, original.data(), &pool);
    EXPECT_EQ(0, std::memcmp(copied.data(), original.data(), copied.size() * sizeof(float)))
        << nt << " tokens";
  }
}

// A Q3_K_M layer: Q3_K, Q4_K, Q5_K and Q6_K matrices share one activation quantization.
TEST(PackedMixed, Q3_KAndQ5_KInOneMultiCallEachGetTheirOwnResult) {
  if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  expect_multi_matches_single_calls(Dtype::kQ3_K, 50, Dtype::kQ5_K, 24, 512, 13, 41);
  expect_multi_matches_single_calls(Dtype::kQ2_K, 37, Dtype::kQ3_K, 64, 512, 7, 51);
}

INSTANTIATE_TEST_SUITE_P(Q8_0Q4_0F16, Packed,
                         ::testing::Values(Dtype::kQ8_0, Dtype::kQ4_0, Dtype::kMXFP4, Dtype::kQ4_K,
                                           Dtype::kQ5_K, Dtype::kQ6_K, Dtype::kQ2_K, Dtype::kQ3_K,
                                           Dtype::kIQ4_NL, Dtype::kIQ4_XS, Dtype::kF16,
                                           Dtype::kBF16, Dtype::kTQ1_0, Dtype::kTQ2_0),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace loom::kernels
