// Repacking of weight matrices into the kRows16 layout (see packed.h).
#include "kernels/packed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <type_traits>
#include <vector>

#include "base/status.h"
#include "kernels/cpu/isa.h"
#include "kernels/quant_blocks.h"
#include "kernels/ref/ternary_ref.h"

namespace loom::kernels {

bool packable(const TensorView& w) {
  return w.layout == TensorLayout::kRows &&
         (w.dtype == Dtype::kQ8_0 || w.dtype == Dtype::kQ4_0 || w.dtype == Dtype::kMXFP4 ||
          w.dtype == Dtype::kIQ4_NL || w.dtype == Dtype::kF16 || w.dtype == Dtype::kQ2_K ||
          w.dtype == Dtype::kQ3_K || w.dtype == Dtype::kQ4_K || w.dtype == Dtype::kQ5_K ||
          w.dtype == Dtype::kQ6_K || w.dtype == Dtype::kIQ4_XS || is_ternary(w.dtype) ||
          (w.dtype == Dtype::kBF16 && cpu_features().avx512bf16)) &&
         w.n_dims == 2 && w.cols() % 32 == 0 && active_isa() == Isa::kAvx512;
}

uint64_t PackedMatrix::group_bytes(Dtype dtype, int64_t cols) {
  switch (dtype) {
    case Dtype::kF16:
    case Dtype::kBF16:
      return static_cast<uint64_t>(cols) * kPackRows * 2;
    case Dtype::kQ8_0:
      return static_cast<uint64_t>(cols / 32) * (kPackRows * 2 + 8 * 64);
    case Dtype::kQ4_0:
    case Dtype::kIQ4_NL:
      return static_cast<uint64_t>(cols / 32) * (kPackRows * 2 + 4 * 64);
    case Dtype::kMXFP4:
      return static_cast<uint64_t>(cols / 32) * (kPackRows + 4 * 64);
    case Dtype::kQ4_K:
      return static_cast<uint64_t>(cols / 256) * kPackedQ4KBytes;
    case Dtype::kQ5_K:
      return static_cast<uint64_t>(cols / 256) * kPackedQ5KBytes;
    case Dtype::kQ6_K:
      return static_cast<uint64_t>(cols / 256) * kPackedQ6KBytes;
    case Dtype::kQ2_K:
    case Dtype::kTQ1_0:  // packed as Q2_K (pack_rows16)
    case Dtype::kTQ2_0:
      return static_cast<uint64_t>(cols / 256) * kPackedQ2KBytes;
    case Dtype::kQ3_K:
      return static_cast<uint64_t>(cols / 256) * kPackedQ3KBytes;
    case Dtype::kIQ4_XS:
      return static_cast<uint64_t>(cols / 256) * kPackedIq4XsBytes;
    default:
      LOOM_CHECK(false && "not a packed type");
      return 0;
  }
}

namespace {

// F16: column k of group g is the 16 fp16 values of rows 16g..16g+15 at (g * cols + k) * 16.
void pack_f16(const TensorView& w, int64_t groups, uint16_t* out) {
  const int64_t rows = w.rows(), cols = w.cols();
  for (int64_t g = 0; g < groups; ++g)
    for (int r = 0; r < kPackRows; ++r) {
      const int64_t row = g * kPackRows + r;
      const auto* src = row < rows ? reinterpret_cast<const uint16_t*>(w.row(row)) : nullptr;
      for (int64_t k = 0; k < cols; ++k) out[(g * cols + k) * kPackRows + r] = src ? src[k] : 0;
    }
}

// BF16: column pair (2p, 2p+1) of group g is 16 rows x 2 values at (g * cols + 2p) * 16, row
// r's pair at 2r (one vdpbf16ps lane per row).
void pack_bf16(const TensorView& w, int64_t groups, uint16_t* out) {
  const int64_t rows = w.rows(), cols = w.cols();
  for (int64_t g = 0; g < groups; ++g)
    for (int r = 0; r < kPackRows; ++r) {
      const int64_t row = g * kPackRows + r;
      const auto* src = row < rows ? reinterpret_cast<const uint16_t*>(w.row(row)) : nullptr;
      for (int64_t k = 0; k < cols; ++k)
        out[(g * cols + (k & ~int64_t{1})) * kPackRows + 2 * r + (k & 1)] = src ? src[k] : 0;
    }
}

// The 256-column super-block packers' common walk: every record of every group zeroed, then
// fill(rec, r, blk) for each of its rows r that exists, blk that row's block in the file.
// Padding rows stay zero (d = 0: they add nothing).
template <class Block, int kRec, class Fill>
void for_each_super_block_row(const TensorView& w, int64_t groups, uint8_t* out, Fill&& fill) {
  const int64_t rows = w.rows(), nsb = w.cols() / kQKK;
  for (int64_t g = 0; g < groups; ++g)
    for (int64_t s = 0; s < nsb; ++s) {
      uint8_t* rec = out + (g * nsb + s) * kRec;
      std::memset(rec, 0, kRec);
      for (int r = 0; r < kPackRows && g * kPackRows + r < rows; ++r)
        fill(rec, r, reinterpret_cast<const Block*>(w.row(g * kPackRows + r))[s]);
    }
}

// Q4_K and Q5_K (Block: BlockQ4_K or BlockQ5_K, the same up to qh): see packed.h. Padding
// rows are all zero (d = dmin = 0: they add nothing).
template <class Block>
void pack_q4_k_q5_k(const TensorView& w, int64_t groups, uint8_t* out) {
  constexpr bool kQ5 = std::is_same_v<Block, BlockQ5_K>;
  constexpr int kRec = kQ5 ? kPackedQ5KBytes : kPackedQ4KBytes;
  for_each_super_block_row<Block, kRec>(w, groups, out, [&](uint8_t* rec, int r, const Block& blk) {
    auto* d = reinterpret_cast<uint16_t*>(rec);
    d[r] = blk.d;
    d[kPackRows + r] = blk.dmin;
    for (int j = 0; j < 8; ++j)
      k_scale_min(j, blk.scales, &rec[64 + 16 * j + r], &rec[192 + 16 * j + r]);
    for (int p = 0; p < 4; ++p)
      for (int k = 0; k < 8; ++k)
        std::memcpy(&rec[320 + 512 * p + 64 * k + 4 * r], &blk.qs[32 * p + 4 * k], 4);
    if constexpr (kQ5) {
      // Bit 4 of element l of sub-block j is bit j of qh[l].
      auto* high = rec + kPackedQ4KBytes;
      for (int j = 0; j < 8; ++j)
        for (int l = 0; l < 32; ++l)
          if ((blk.qh[l] >> j) & 1) {
            const int bit = 4 * r + l % 4;  // in word 8j + l / 4
            high[8 * (8 * j + l / 4) + bit / 8] |= static_cast<uint8_t>(1u << (bit % 8));
          }
    }
  });
}

// Element n (0..255) of a Q6_K block as q in 0..63 (the layout of ref dq_q6_k).
uint8_t q6_k_value(const BlockQ6_K& b, int n) {
  const int half = n / 128, quadrant = (n % 128) / 32, l = n % 32;
  const uint8_t* ql = b.ql + 64 * half + (quadrant & 1) * 32;
  const int low = quadrant < 2 ? ql[l] & 0xF : ql[l] >> 4;
  const int high = (b.qh[32 * half + l] >> (2 * quadrant)) & 3;
  return static_cast<uint8_t>(low | (high << 4));
}

// The bytes s0, s1, s2 that decode (packed.h) to q0..q3 (each 0..63). Bit by bit the decode is
// triangular: s0 bits 0-5 are q0; q1 then gives s1 bits 0-3, q2 s2 bits 0-1, q3 s2 bits 2-7,
// q2 s1 bits 4-7 and q1 s0 bits 6-7.
void q6_k_encode(const uint8_t (&q)[4], uint8_t (&s)[3]) {
  const int s1_low = (q[1] ^ (q[0] >> 2)) & 15;
  const int s2 = (q[3] << 2) | ((q[2] ^ (s1_low >> 2)) & 3);
  const int s1 = s1_low | (((q[2] ^ s2) & 0x3C) << 2);
  const int s0 = q[0] | (((q[1] ^ s1) & 0x30) << 2);
  s[0] = static_cast<uint8_t>(s0);
  s[1] = static_cast<uint8_t>(s1);
  s[2] = static_cast<uint8_t>(s2);
}

// Q6_K: see packed.h. Padding rows are zero (d = 0).
void pack_q6_k(const TensorView& w, int64_t groups, uint8_t* out) {
  for_each_super_block_row<BlockQ6_K, kPackedQ6KBytes>(
      w, groups, out, [&](uint8_t* rec, int r, const BlockQ6_K& blk) {
        auto* d = reinterpret_cast<uint16_t*>(rec);
        d[r] = blk.d;
        for (int j = 0; j < 16; ++j) rec[32 + 16 * j + r] = static_cast<uint8_t>(blk.scales[j]);
        for (int j = 0; j < 16; ++j)
          for (int i = 0; i < 4; ++i) {
            uint8_t q[4], v[3];
            for (int k = 0; k < 4; ++k) q[k] = q6_k_value(blk, 16 * j + 4 * k + i);
            q6_k_encode(q, v);
            for (int m = 0; m < 3; ++m) rec[288 + 192 * j + 64 * m + 4 * r + i] = v[m];
          }
      });
}

// The 2 bits of element n (0..255) of a Q2_K block, or the low 2 bits of a Q3_K one: sub-block
// j = n / 16 sits in qs[32 (j / 8) + 16 (j % 2) + n % 16] at bit 2 ((j / 2) % 4) (ref dq_q2_k).
uint8_t k_low2(const uint8_t* qs, int n) {
  const int j = n / 16;
  return (qs[32 * (j / 8) + 16 * (j % 2) + n % 16] >> (2 * ((j / 2) % 4))) & 3;
}

// Element n (0..255) of a Q3_K block as q in 0..7 (low 2 bits + 4 * its hmask bit, standing
// for q - 4; ref dq_q3_k).
uint8_t q3_k_value(const BlockQ3_K& b, int n) {
  const int j = n / 16;
  return static_cast<uint8_t>(k_low2(b.qs, n) | ((b.hmask[16 * (j % 2) + n % 16] >> (j / 2)) & 1)
                                                    << 2);
}

// The bytes a, b, c that decode (packed.h) to the 8 slots q[0..7] (each 0..7).
void q3_k_encode(const uint8_t (&q)[8], uint8_t (&v)[3]) {
  v[0] = static_cast<uint8_t>(q[0] | q[1] << 3 | (q[6] & 3) << 6);
  v[1] = static_cast<uint8_t>(q[2] | q[3] << 3 | (q[6] >> 2) << 6 | (q[7] >> 2) << 7);
  v[2] = static_cast<uint8_t>(q[4] | q[5] << 3 | (q[7] & 3) << 6);
}

// Q2_K and Q3_K (Block: BlockQ2_K or BlockQ3_K): see packed.h. Padding rows are zero (d = dmin
// = 0: they add nothing).
template <class Block>
void pack_q2_k_q3_k(const TensorView& w, int64_t groups, uint8_t* out) {
  constexpr bool kQ3 = std::is_same_v<Block, BlockQ3_K>;
  constexpr int kRec = kQ3 ? kPackedQ3KBytes : kPackedQ2KBytes;
  constexpr int kScales = kQ3 ? 32 : 64, kQ = kScales + 16 * kPackRows;
  for_each_super_block_row<Block, kRec>(w, groups, out, [&](uint8_t* rec, int r, const Block& blk) {
    auto* d = reinterpret_cast<uint16_t*>(rec);
    d[r] = blk.d;
    int8_t sc[16];
    if constexpr (kQ3)
      q3k_scales(blk.scales, sc);
    else
      d[kPackRows + r] = blk.dmin;
    for (int j = 0; j < 16; ++j)
      rec[kScales + 32 * (j / 2) + 2 * r + j % 2] =
          kQ3 ? static_cast<uint8_t>(sc[j]) : blk.scales[j];
    if constexpr (kQ3) {
      // Slots 0-3: sub-block 2p + 1's steps, 4-7: sub-block 2p's.
      for (int p = 0; p < 8; ++p)
        for (int i = 0; i < 4; ++i) {
          uint8_t q[8], v[3];
          for (int k = 0; k < 4; ++k) {
            q[k] = q3_k_value(blk, 16 * (2 * p + 1) + 4 * k + i);
            q[4 + k] = q3_k_value(blk, 16 * (2 * p) + 4 * k + i);
          }
          q3_k_encode(q, v);
          for (int m = 0; m < 3; ++m) rec[kQ + 192 * p + 64 * m + 4 * r + i] = v[m];
        }
    } else {
      for (int n = 0; n < kQKK; ++n) {
        const int j = n / 16, k = n % 16 / 4, i = n % 4;
        rec[kQ + 64 * j + 4 * r + i] |= static_cast<uint8_t>(k_low2(blk.qs, n) << (2 * k));
      }
    }
  });
}

// IQ4_XS: see packed.h. Padding rows are zero (d = 0).
void pack_iq4_xs(const TensorView& w, int64_t groups, uint8_t* out) {
  for_each_super_block_row<BlockIq4Xs, kPackedIq4XsBytes>(
      w, groups, out, [&](uint8_t* rec, int r, const BlockIq4Xs& blk) {
        auto* d = reinterpret_cast<uint16_t*>(rec);
        d[r] = blk.d;
        for (int j = 0; j < 8; ++j) {
          rec[32 + 16 * j + r] = static_cast<uint8_t>(static_cast<int8_t>(iq4_xs_scale(blk, j)));
          for (int k = 0; k < 4; ++k)
            for (int i = 0; i < 4; ++i)
              rec[160 + 256 * j + 64 * k + 4 * r + i] = blk.qs[16 * j + 4 * k + i];
        }
      });
}

}  // namespace

PackedMatrix PackedMatrix::finish(PackedMatrix m, const TensorView& w, uint64_t bytes) {
  m.view_ = w;
  m.view_.layout = TensorLayout::kRows16;
  m.view_.data = m.ptr_;
  m.view_.nbytes = bytes;
  return m;
}

PackedMatrix PackedMatrix::allocate(uint64_t bytes, uint8_t* dst) {
  PackedMatrix m;
  if (!dst) {
    m.data_ = allocate_huge(bytes, /*commit=*/false);  // written right away by the caller
    dst = m.data_.get();
  }
  m.ptr_ = dst;
  return m;
}

PackedMatrix PackedMatrix::copy_rows(const TensorView& w, uint8_t* dst) {
  LOOM_CHECK(w.layout == TensorLayout::kRows);
  if (w.dtype == Dtype::kTQ1_0) {  // as TQ2_0 (copied_bytes)
    const int64_t nb = w.cols() / kQKK;
    PackedMatrix m = allocate(copied_bytes(w), dst);
    auto* out = reinterpret_cast<BlockTq2_0*>(m.ptr_);
    for (int64_t r = 0; r < w.rows(); ++r)
      ref::tq1_0_to_tq2_0(reinterpret_cast<const BlockTq1_0*>(w.row(r)), out + r * nb, nb);
    m.view_ = w;
    m.view_.dtype = Dtype::kTQ2_0;
    m.view_.data = m.ptr_;
    m.view_.nbytes = copied_bytes(w);
    return m;
  }
  PackedMatrix m = allocate(w.nbytes, dst);
  std::memcpy(m.ptr_, w.data, w.nbytes);
  m.view_ = w;
  m.view_.data = m.ptr_;
  return m;
}

uint64_t PackedMatrix::copied_bytes(const TensorView& w) {
  if (w.dtype != Dtype::kTQ1_0) return w.nbytes;
  return static_cast<uint64_t>(w.rows()) * (w.cols() / kQKK) * sizeof(BlockTq2_0);
}

uint64_t PackedMatrix::packed_bytes(const TensorView& w) {
  if (!packable(w)) return copied_bytes(w);
  const int64_t groups = (w.rows() + kPackRows - 1) / kPackRows;
  return group_bytes(w.dtype, w.cols()) * groups;
}

PackedMatrix PackedMatrix::pack_rows16(const TensorView& w, uint8_t* dst) {
  LOOM_CHECK(packable(w));
  const int64_t rows = w.rows();
  const int64_t nb = w.cols() / 32;
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  const uint64_t bytes = group_bytes(w.dtype, w.cols()) * groups;
  const uint64_t rec = group_bytes(w.dtype, w.cols()) / nb;  // Q8_0/Q4_0/MXFP4: per 32 columns
  PackedMatrix m = allocate(bytes, dst);
  const bool q8 = w.dtype == Dtype::kQ8_0;
  if (w.dtype == Dtype::kF16 || w.dtype == Dtype::kBF16) {
    auto* out = reinterpret_cast<uint16_t*>(m.ptr_);
    w.dtype == Dtype::kF16 ? pack_f16(w, groups, out) : pack_bf16(w, groups, out);
    return finish(std::move(m), w, bytes);
  }
  if (is_ternary(w.dtype)) {
    // The rows as Q2_K blocks with the same values (ref::ternary_to_q2_k), packed as Q2_K: the
    // copy is a Q2_K matrix, and runs the Q2_K tiles.
    const int64_t nsb = w.cols() / kQKK;
    std::vector<BlockQ2_K> q2(static_cast<size_t>(rows * nsb));
    for (int64_t r = 0; r < rows; ++r) ref::ternary_to_q2_k(w.dtype, w.row(r), &q2[r * nsb], nsb);
    TensorView v = w;
    v.dtype = Dtype::kQ2_K;
    v.data = q2.data();
    v.nbytes = q2.size() * sizeof(BlockQ2_K);
    pack_q2_k_q3_k<BlockQ2_K>(v, groups, m.ptr_);
    return finish(std::move(m), v, bytes);
  }
  if (packed_super_blocks(w.dtype)) {
    if (w.dtype == Dtype::kQ4_K) pack_q4_k_q5_k<BlockQ4_K>(w, groups, m.ptr_);
    if (w.dtype == Dtype::kQ5_K) pack_q4_k_q5_k<BlockQ5_K>(w, groups, m.ptr_);
    if (w.dtype == Dtype::kQ6_K) pack_q6_k(w, groups, m.ptr_);
    if (w.dtype == Dtype::kQ2_K) pack_q2_k_q3_k<BlockQ2_K>(w, groups, m.ptr_);
    if (w.dtype == Dtype::kQ3_K) pack_q2_k_q3_k<BlockQ3_K>(w, groups, m.ptr_);
    if (w.dtype == Dtype::kIQ4_XS) pack_iq4_xs(w, groups, m.ptr_);
    return finish(std::move(m), w, bytes);
  }
  const bool mxfp4 = w.dtype == Dtype::kMXFP4;
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = m.ptr_ + (g * nb + b) * rec;
      uint16_t* scales = reinterpret_cast<uint16_t*>(out);
      uint8_t* quants = out + kPackRows * (mxfp4 ? 1 : 2);
      for (int r = 0; r < kPackRows; ++r) {
        const int64_t row = g * kPackRows + r;
        const bool pad = row >= rows;
        if (q8) {
          const BlockQ8_0* blk = pad ? nullptr : reinterpret_cast<const BlockQ8_0*>(w.row(row)) + b;
          scales[r] = pad ? 0 : blk->d;
          for (int k = 0; k < 8; ++k)
            for (int i = 0; i < 4; ++i)
              quants[k * 64 + r * 4 + i] =
                  pad ? 0x80 : static_cast<uint8_t>(blk->qs[4 * k + i] ^ 0x80);
        } else if (mxfp4) {
          // Padding rows: exponent 0 and code 0 (the value 0), so they add exactly nothing.
          const auto* blk = pad ? nullptr : reinterpret_cast<const BlockMxfp4*>(w.row(row)) + b;
          out[r] = pad ? 0 : blk->e;
          for (int k = 0; k < 4; ++k)
            for (int i = 0; i < 4; ++i) quants[k * 64 + r * 4 + i] = pad ? 0 : blk->qs[4 * k + i];
        } else {  // Q4_0 or IQ4_NL: the same bytes (BlockIq4Nl is BlockQ4_0's layout)
          const BlockQ4_0* blk = pad ? nullptr : reinterpret_cast<const BlockQ4_0*>(w.row(row)) + b;
          scales[r] = pad ? 0 : blk->d;
          for (int k = 0; k < 4; ++k)
            for (int i = 0; i < 4; ++i)
              quants[k * 64 + r * 4 + i] = pad ? 0x88 : blk->qs[4 * k + i];
        }
      }
    }
  }
  return finish(std::move(m), w, bytes);
}

}  // namespace loom::kernels
