// The packed Q4_K and Q5_K tile (packed_q4_k_q5_k_avx512.cpp) on the per-256 activations: the
// packed row's second quantization against a scalar one, the tile's arithmetic redone in scalar
// code bit for bit for every tile shape, and its error against the reference in double within
// the bound of int8 activations with one scale per 256.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <type_traits>
#include <vector>

#include "base/fp16.h"
#include "base/thread_pool.h"
#include "kernels/cpu/isa.h"
#include "kernels/cpu/matmul_kernels.h"
#include "kernels/cpu/packed_kernels.h"
#include "kernels/matmul.h"
#include "kernels/packed.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ref.h"
#include "test_util.h"

namespace loom::kernels {
namespace {

using Matrix = testing::QuantizedMatrix;

// Q4_K or Q5_K blocks drawn directly: random nibbles, high bits and scale bytes (every 6-bit
// scale and min), d and dmin of either sign.
template <class Block>
Matrix random_blocks(Dtype t, int64_t rows, int64_t cols, uint32_t seed) {
  Matrix m;
  m.bytes.resize(rows * cols / kQKK * sizeof(Block));
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> byte(0, 255);
  std::normal_distribution<float> d(0.0f, 0.01f);
  for (uint8_t& b : m.bytes) b = static_cast<uint8_t>(byte(rng));
  auto* blocks = reinterpret_cast<Block*>(m.bytes.data());
  for (int64_t i = 0; i < rows * cols / kQKK; ++i) {
    blocks[i].d = f32_to_fp16(d(rng));
    blocks[i].dmin = f32_to_fp16(d(rng));
  }
  testing::view_bytes(m, t, rows, cols);
  return m;
}

// A block's integers, read back through the reference dequantizer (so the packing's reading of
// the bit layout is checked against it): q per element, sc and m per 32-column sub-block.
struct KBlock {
  int q[kQKK], sc[8], m[8];
  float d, dmin;
};
template <class Block>
KBlock k_block(Dtype t, const Block& b) {
  KBlock out{};
  out.d = fp16_to_f32(b.d);
  out.dmin = fp16_to_f32(b.dmin);
  float w[kQKK];
  Block unit = b;  // d = 1, dmin = 0, every scale 1: w = q
  unit.d = f32_to_fp16(1.0f);
  unit.dmin = 0;
  const uint8_t ones[12] = {1, 1, 1, 1, 0, 0, 0, 0, 1, 1, 1, 1};
  std::memcpy(unit.scales, ones, sizeof ones);
  ref::dequantize_row(t, &unit, w, kQKK);
  for (int n = 0; n < kQKK; ++n) out.q[n] = static_cast<int>(w[n]);
  Block q1 = b;  // every q 1: w = sc (d = 1, dmin = 0), then -m (d = 0, dmin = 1)
  std::memset(q1.qs, 0x11, sizeof q1.qs);
  if constexpr (std::is_same_v<Block, BlockQ5_K>) std::memset(q1.qh, 0, sizeof q1.qh);
  q1.d = f32_to_fp16(1.0f);
  q1.dmin = 0;
  ref::dequantize_row(t, &q1, w, kQKK);
  for (int j = 0; j < 8; ++j) out.sc[j] = static_cast<int>(w[32 * j]);
  q1.d = 0;
  q1.dmin = f32_to_fp16(1.0f);
  ref::dequantize_row(t, &q1, w, kQKK);
  for (int j = 0; j < 8; ++j) out.m[j] = static_cast<int>(-w[32 * j]);
  return out;
}

// The tile's arithmetic in scalar code: per super-block the exact integers
// S = sum_j sc_j * dot_j(q, x256) and M = sum_j m_j * sum_j(x256), then
// acc = fma(fma(S, d, -(M * dmin)), d_x256, acc), super-blocks in order.
template <class Block>
std::vector<float> k_packed_arithmetic(const Matrix& m, const std::vector<float>& x, int64_t nt) {
  const int64_t rows = m.view.rows(), cols = m.view.cols(), nsb = cols / kQKK;
  std::vector<KBlock> blocks(rows * nsb);
  for (int64_t r = 0; r < rows; ++r)
    for (int64_t s = 0; s < nsb; ++s)
      blocks[r * nsb + s] = k_block(m.view.dtype, reinterpret_cast<const Block*>(m.view.row(r))[s]);
  std::vector<uint8_t> act(cpu::packed_act_row_bytes(cols));
  std::vector<float> out(nt * rows);
  for (int64_t tok = 0; tok < nt; ++tok) {
    cpu::quantize_act_row_q8_32_avx512(&x[tok * cols], cols, act.data(), false, true);
    const cpu::PackedActRow xa(act.data(), cols);
    for (int64_t r = 0; r < rows; ++r) {
      float acc = 0.0f;
      for (int64_t s = 0; s < nsb; ++s) {
        const KBlock& b = blocks[r * nsb + s];
        int32_t sum = 0, min = 0;
        for (int j = 0; j < 8; ++j) {
          int32_t dot = 0;
          for (int l = 0; l < 32; ++l) dot += b.q[32 * j + l] * xa.q256[kQKK * s + 32 * j + l];
          sum += b.sc[j] * dot;
          min += b.m[j] * xa.sum256_32[8 * s + j];
        }
        acc = std::fma(std::fma(float(sum), b.d, -(float(min) * b.dmin)), xa.d256[s], acc);
      }
      out[tok * rows + r] = acc;
    }
  }
  return out;
}

class PackedQ4_K : public ::testing::Test {
 protected:
  void SetUp() override {
    if (best_isa() != Isa::kAvx512) GTEST_SKIP() << "packing needs AVX-512 VNNI";
  }
};

// The per-256 quantization written beside the per-32 one is llama.cpp's Q8_K as the reference
// quantizer has it (ref::quantize_row(kQ8_K): the row kernels' activations): the same d, q and
// sums of each 16, and sums of each 32 from those, on rows with outliers of either sign (where
// one scale per 256 and per 32 differ most), a tie of magnitudes, a zero block and a row whose
// columns are zero.
TEST_F(PackedQ4_K, PerSuperBlockActivationsAreLlamaCppsQ8_K) {
  const int64_t cols = 1024;
  auto x = testing::random_normal(cols, 3);
  x[5] = 40.0f;
  x[300] = -17.5f;
  x[700] = 9.25f;  // block 2: the first of a tie of magnitudes gives the sign
  x[701] = -9.25f;
  for (int64_t k = 768; k < 1024; ++k) x[k] = 0.0f;
  std::vector<uint8_t> act(cpu::packed_act_row_bytes(cols));
  cpu::quantize_act_row_q8_32_avx512(x.data(), cols, act.data(), false, true);
  const cpu::PackedActRow row(act.data(), cols);
  std::vector<BlockQ8_K> want(cols / kQKK);
  ref::quantize_row(Dtype::kQ8_K, x.data(), want.data(), cols);
  for (int64_t b = 0; b < cols / 256; ++b) {
    EXPECT_EQ(row.d256[b], want[b].d) << b;
    for (int k = 0; k < 256; ++k) ASSERT_EQ(row.q256[256 * b + k], want[b].qs[k]) << b << " " << k;
    for (int j = 0; j < 16; ++j) EXPECT_EQ(row.sum256_16[16 * b + j], want[b].bsums[j]) << b;
    for (int j = 0; j < 8; ++j)
      EXPECT_EQ(row.sum256_32[8 * b + j],
                row.sum256_16[16 * b + 2 * j] + row.sum256_16[16 * b + 2 * j + 1])
          << b << " " << j;
  }
  EXPECT_LT(row.d256[0], 0.0f);  // its largest value is positive: iscale = -127 / 40
  EXPECT_EQ(row.d256[3], 0.0f);
}

// Bit-exact against that arithmetic: one and two groups (a padded last one), 1..7 tokens (every
// tile width, and tiles of 3 + 3 + 1), the prefill loop order (> 64 tokens), 1 and 2 threads.
// And within the error bound of per-256 int8 activations of the reference in double.
template <class Block>
void expect_every_tile_shape_matches_the_scalar_arithmetic(Dtype t) {
  ThreadPool one(1), two(2);
  for (int64_t rows : {1, 16, 29, 32, 50}) {
    for (int64_t cols : {256, 768}) {
      const Matrix m = random_blocks<Block>(t, rows, cols, static_cast<uint32_t>(rows * 7 + cols));
      ASSERT_TRUE(packable(m.view));
      const PackedMatrix p = PackedMatrix::pack_rows16(m.view);
      for (int64_t nt : {1, 2, 3, 4, 5, 6, 7, 13, 70}) {
        const auto x = testing::random_normal(nt * cols, 40 + static_cast<uint32_t>(nt));
        const auto want = k_packed_arithmetic<Block>(m, x, nt);
        for (ThreadPool* pool : {&one, &two}) {
          std::vector<float> got(nt * rows, -1.0f);
          matmul(p.view(), x.data(), nt, got.data(), pool);
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), want.size() * sizeof(float)))
              << rows << "x" << cols << " tokens " << nt << " threads " << pool->size();
        }
        if (nt > 7) continue;
        EXPECT_LT(testing::worst_of_int8_bound(m.view, x, nt, want.data(), 256), 1.0)
            << rows << "x" << cols << " tokens " << nt;
      }
    }
  }
}

TEST_F(PackedQ4_K, EveryTileShapeMatchesTheScalarArithmeticBitForBit) {
  expect_every_tile_shape_matches_the_scalar_arithmetic<BlockQ4_K>(Dtype::kQ4_K);
}

// Q5_K: the same tile with bit 4 of each q from the record's masks.
TEST_F(PackedQ4_K, Q5_KEveryTileShapeMatchesTheScalarArithmeticBitForBit) {
  expect_every_tile_shape_matches_the_scalar_arithmetic<BlockQ5_K>(Dtype::kQ5_K);
}

}  // namespace
}  // namespace loom::kernels
