// Repacking of Q8_0 / Q4_0 matrices into the kRows16 layout (see packed.h).
#include "kernels/packed.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "base/status.h"
#include "kernels/cpu/isa.h"
#include "kernels/quant_blocks.h"

namespace loom::kernels {

bool packable(const TensorView& w) {
  return w.layout == TensorLayout::kRows &&
         (w.dtype == Dtype::kQ8_0 || w.dtype == Dtype::kQ4_0 || w.dtype == Dtype::kF16 ||
          (w.dtype == Dtype::kBF16 && cpu_features().avx512bf16)) &&
         w.n_dims == 2 && w.cols() % 32 == 0 && best_isa() == Isa::kAvx512;
}

uint64_t PackedMatrix::record_bytes(Dtype dtype) {
  if (dtype == Dtype::kF16 || dtype == Dtype::kBF16)
    return 32 * kPackRows * 2;  // 32 cols x 16 rows
  return kPackRows * 2 + (dtype == Dtype::kQ8_0 ? 8 : 4) * 64;
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

}  // namespace

PackedMatrix PackedMatrix::finish(PackedMatrix m, const TensorView& w, uint64_t bytes) {
  m.view_ = w;
  m.view_.layout = TensorLayout::kRows16;
  m.view_.data = m.data_.get();
  m.view_.nbytes = bytes;
  return m;
}

PackedMatrix PackedMatrix::allocate(uint64_t bytes) {
  PackedMatrix m;
  m.data_ = allocate_huge(bytes, /*commit=*/false);  // written right away by the caller
  return m;
}

PackedMatrix PackedMatrix::copy_rows(const TensorView& w) {
  LOOM_CHECK(w.layout == TensorLayout::kRows);
  PackedMatrix m = allocate(w.nbytes);
  std::memcpy(m.data_.get(), w.data, w.nbytes);
  m.view_ = w;
  m.view_.data = m.data_.get();
  return m;
}

PackedMatrix PackedMatrix::pack_rows16(const TensorView& w) {
  LOOM_CHECK(packable(w));
  const int64_t rows = w.rows();
  const int64_t nb = w.cols() / 32;
  const int64_t groups = (rows + kPackRows - 1) / kPackRows;
  const uint64_t rec = record_bytes(w.dtype);
  const uint64_t bytes = rec * static_cast<uint64_t>(nb) * groups;
  PackedMatrix m = allocate(bytes);
  const bool q8 = w.dtype == Dtype::kQ8_0;
  if (w.dtype == Dtype::kF16 || w.dtype == Dtype::kBF16) {
    auto* out = reinterpret_cast<uint16_t*>(m.data_.get());
    w.dtype == Dtype::kF16 ? pack_f16(w, groups, out) : pack_bf16(w, groups, out);
    return finish(std::move(m), w, bytes);
  }
  for (int64_t g = 0; g < groups; ++g) {
    for (int64_t b = 0; b < nb; ++b) {
      uint8_t* out = m.data_.get() + (g * nb + b) * rec;
      uint16_t* scales = reinterpret_cast<uint16_t*>(out);
      uint8_t* quants = out + kPackRows * 2;
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
        } else {
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
