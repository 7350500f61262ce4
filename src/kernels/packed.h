// Load-time repacking of Q8_0 / Q4_0 weight matrices for the AVX-512 VNNI kernels.
//
// Layout kRows16: rows in groups of 16 (the last group padded with zero rows). For group g and
// 32-column block b there is one record, records in (g, b) order so a group's weights stream
// sequentially:
//   16 fp16 scales (row 0..15), then K steps of 64 bytes: 4 bytes per row, row 0..15.
// Q8_0 (K = 8): step k holds elements 4k..4k+3 of each row as u8 = q + 128.
// Q4_0 (K = 4): step k holds the file's nibble bytes qs[4k..4k+3] of each row (low nibble:
// element 4k+i, high nibble: element 16+4k+i), values q in 0..15 standing for q - 8.
// One vpdpbusd then adds 4 elements of all 16 rows, each in its own int32 lane, so a row's
// whole block sums in one lane and is scaled once (instead of 8 lanes per row).
// F16: column k of group g is 16 fp16 values (rows 0..15), columns in order, so one
// vcvtph2ps + FMA against a broadcast activation adds one column to 16 row lanes (no
// horizontal sums, and every token of a tile reuses the converted column). BF16 (AVX512-BF16
// only): column pairs, each row's two values adjacent, for one vdpbf16ps lane per row against
// bf16-rounded activations.
#pragma once

#include <cstdint>
#include <memory>

#include "base/huge_buffer.h"
#include "format/tensor.h"

namespace loom::kernels {

constexpr int kPackRows = 16;

// Whether pack_rows16 applies: Q8_0/Q4_0/F16 (BF16 with AVX512-BF16) with columns a multiple
// of 32, and the CPU has AVX-512 VNNI.
bool packable(const TensorView& w);

// Owns a kernel-ready copy of a matrix; view() describes it (same dtype and shape).
class PackedMatrix {
 public:
  // The kRows16 layout (requires packable(w)).
  static PackedMatrix pack_rows16(const TensorView& w);
  // The same bytes (layout kRows) in 2 MiB-aligned, huge-page-backed memory. Decode streams
  // every weight once per token: from a file mapping's 4 KiB page-cache pages it measured
  // 2.5x slower (F16, 1 thread: 9 vs 22.6 tok/s) than from anonymous memory.
  static PackedMatrix copy_rows(const TensorView& w);
  const TensorView& view() const { return view_; }
  static uint64_t record_bytes(Dtype dtype);  // one (group, block) record

 private:
  static PackedMatrix allocate(uint64_t bytes);
  static PackedMatrix finish(PackedMatrix m, const TensorView& w, uint64_t bytes);
  HugeBuffer data_;
  TensorView view_;
};

}  // namespace loom::kernels
