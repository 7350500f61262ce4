// Load-time repacking of weight matrices for the AVX-512 (VNNI, BF16) kernels.
//
// Layout kRows16: rows in groups of 16 (the last group padded with zero rows). For group g and
// 32-column block b there is one record, records in (g, b) order so a group's weights stream
// sequentially:
//   16 fp16 scales (row 0..15), then K steps of 64 bytes: 4 bytes per row, row 0..15.
// Q8_0 (K = 8): step k holds elements 4k..4k+3 of each row as u8 = q + 128.
// Q4_0 (K = 4): step k holds the file's nibble bytes qs[4k..4k+3] of each row (low nibble:
// element 4k+i, high nibble: element 16+4k+i), values q in 0..15 standing for q - 8.
// MXFP4 (K = 4): the 16 scales are the file's E8M0 bytes (row 0..15; 16 bytes, not 32), then
// the steps exactly as Q4_0's; the nibbles index E2M1 doubled (kMxfp4Values), which the kernel
// maps with one byte shuffle to u8 value + 12 in 0..24. 272 bytes per record, 17 per row and
// block: the copy is exactly as large as the file's blocks (decode streams it once a token).
// One vpdpbusd then adds 4 elements of all 16 rows, each in its own int32 lane, so a row's
// whole block sums in one lane and is scaled once (instead of 8 lanes per row).
// F16: column k of group g is 16 fp16 values (rows 0..15), columns in order, so one
// vcvtph2ps + FMA against a broadcast activation adds one column to 16 row lanes (no
// horizontal sums, and every token of a tile reuses the converted column). BF16 (AVX512-BF16
// only): column pairs, each row's two values adjacent, for one vdpbf16ps lane per row against
// bf16-rounded activations.
// Q4_K (records per 256-column super-block, 2368 bytes): 16 fp16 d, 16 fp16 dmin, the 6-bit
// scales as bytes [sub-block 0..7][row 0..15], the mins likewise, then for each pair of
// sub-blocks (2p, 2p+1) 8 steps of 64 bytes: step k holds the file's bytes qs[32p + 4k..+3] of
// each row (low nibble: element 4k+i of sub-block 2p, high nibble: of sub-block 2p+1).
// Q5_K (2880 bytes): the Q4_K record of its low 4 bits, then for sub-block j and step k a
// 64-bit mask (word 8j + k) whose bit 4r + i is bit 4 of element 4k + i of row r.
// Q6_K (3360 bytes: exactly the file's 210 bytes per row and super-block): 16 fp16 d, the int8
// scales [sub-block 0..15][row 0..15], then per 16-column sub-block j three 64-byte vectors s0,
// s1, s2 at 288 + 192j + 64m. Their bytes 4r + i hold the four q (0..63, standing for q - 32)
// of row r's elements 16j + 4k + i, k = 0..3 (step k), as
//   q_0 = s0 & 63,  q_1 = (s0 >> 2 ^ s1) & 63,  q_2 = (s1 >> 2 ^ s2) & 63,  q_3 = s2 >> 2
// (shifts of the byte; pack_q6_k solves these for s). A sub-block's 4 steps decode in 3 loads
// and 7 ops (3 shifts, 2 ands, 2 vpternlog (a ^ b) & c); low nibbles plus a 2-bit plane take 9
// or more, as zeroing bits 6-7 and placing the 2-bit field need two masks, one more than a
// vpternlog has. Decode streams 23% fewer bytes than with the previous layout's byte per q
// (4384 bytes, 8.56 bits a weight).
// Q2_K (1344 bytes: exactly the file's 84 bytes per row and super-block): 16 fp16 d, 16 fp16
// dmin, the file's scale bytes (sc | m << 4) as [pair p][row r][j % 2] for sub-block j = 2p or
// 2p + 1 (64 + 32p + 2r + j % 2: one load gives a row's pair as int16s), then per 16-column
// sub-block j a 64-byte plane at 320 + 64j whose byte 4r + i holds in bits 2k..2k+1 the q (0..3)
// of row r's element 16j + 4k + i (step k: one shift and one and).
// Q3_K (1824 bytes, the file's 1760 plus 64: the scales a byte each): 16 fp16 d, the signed
// scales sc - 32 as int8 [pair p][row r][j % 2] at 32 + 32p + 2r + j % 2, then per pair of
// sub-blocks three 64-byte vectors a, b, c at 288 + 192p + 64m. Their bytes 4r + i hold 8 slots,
// each a q in 0..7 (low 2 bits + 4 * hmask bit, standing for q - 4): slot k (0..3) is row r's
// element 16(2p + 1) + 4k + i, slot 4 + k its element 32p + 4k + i (the odd sub-block first: the
// kernel shifts its dot into the high half), as
//   0: a & 7, 1: a >> 3 & 7, 2: b & 7, 3: b >> 3 & 7, 4: c & 7, 5: c >> 3 & 7,
//   6: (a >> 6 | (b >> 6 & 1) << 2), 7: (c >> 6 | (b >> 7) << 2)
// (shifts of the byte; the kernel's 16-bit shifts bring the next byte's bits only above bit 2, or
// above bit 1 in slots 6 and 7, whose select and mask drop them). 17 ops for 8 steps, against 31
// with a 2-bit plane and a mask of high bits per step (a masked add each).
// IQ4_NL: exactly Q4_0's record (the file's block is Q4_0's bytes); the nibbles index the
// format's grid kIq4NlValues, which the kernel maps with one byte shuffle to u8 value + 128.
// IQ4_XS (records per 256-column super-block, 2208 bytes; the file's 136 per row and
// super-block are 2176): 16 fp16 d, the sub-block scales ls - 32 as int8 [sub-block 0..7][row
// 0..15], then for sub-block j 4 steps of 64 bytes at 160 + 256j + 64k, step k holding the
// file's bytes qs[16j + 4k..+3] of each row (as an IQ4_NL block's steps).
#pragma once

#include <cstdint>
#include <memory>

#include "base/huge_buffer.h"
#include "format/tensor.h"

namespace loom::kernels {

constexpr int kPackRows = 16;
constexpr int kPackedQ4KBytes = 64 + 2 * 8 * kPackRows + 4 * 8 * 64;  // one Q4_K record: 2368
constexpr int kPackedQ5KBytes = kPackedQ4KBytes + 64 * 8;             // one Q5_K record: 2880
constexpr int kPackedQ6KBytes = 32 + 16 * kPackRows + 16 * 3 * 64;    // one Q6_K record: 3360
constexpr int kPackedIq4XsBytes = 32 + 8 * kPackRows + 8 * 4 * 64;    // one IQ4_XS record: 2208

constexpr int kPackedQ2KBytes = 64 + 16 * kPackRows + 16 * 64;            // one Q2_K record: 1344
constexpr int kPackedQ3KBytes = 32 + 16 * kPackRows + 16 * 64 + 16 * 32;  // one Q3_K record: 1824

// Whether pack_rows16 applies: Q8_0/Q4_0/MXFP4/IQ4_NL/F16 (BF16 with AVX512-BF16) with columns
// a multiple of 32, Q2_K..Q6_K, IQ4_XS and TQ1_0 / TQ2_0 (multiples of 256 by their format), and
// the kernels run AVX-512 VNNI (active_isa: LOOM_ISA=avx2 on such a CPU keeps the file's row layout
// and the AVX2 kernels, as an AVX2 CPU would).
bool packable(const TensorView& w);

// TQ1_0 / TQ2_0: packed as the Q2_K matrix with the same values (ref::ternary_to_q2_k): the
// copy's view says kQ2_K, and its bytes are Q2_K's (2.625 bits a weight against 1.69 / 2.06):
// its tile runs 3-7x faster than the ternary row kernels, and decode reads at memory speed.
inline bool is_ternary(Dtype t) {
  return t == Dtype::kTQ1_0 || t == Dtype::kTQ2_0;
}

// Whether t's kRows16 records are 256-column super-blocks (Q2_K .. Q6_K, IQ4_XS) rather than
// 32-column blocks or float columns.
inline bool packed_super_blocks(Dtype t) {
  return t == Dtype::kQ2_K || t == Dtype::kQ3_K || t == Dtype::kQ4_K || t == Dtype::kQ5_K ||
         t == Dtype::kQ6_K || t == Dtype::kIQ4_XS;
}

// A kernel-ready copy of a matrix; view() describes it (same dtype and shape). It owns its
// memory, or (`dst` given) is written into packed_bytes(w) bytes its caller owns: one
// huge-page arena for all of a model's matrices, so that thousands of expert matrices of a
// few hundred KiB share huge pages instead of each holding its own 2 MiB ones (or streaming
// from 4 KiB pages: qwen3moe-2b Q4_K_M decode 24% slower).
class PackedMatrix {
 public:
  // The kRows16 layout (requires packable(w)).
  static PackedMatrix pack_rows16(const TensorView& w, uint8_t* dst = nullptr);
  // The same bytes (layout kRows) in anonymous huge-page-backed memory. Decode streams
  // every weight once per token: from a file mapping's 4 KiB page-cache pages it measured
  // 2.5x slower (F16, 1 thread: 9 vs 22.6 tok/s) than from anonymous memory.
  // TQ1_0 is the exception: its copy is TQ2_0 with the same trits (ref::tq1_0_to_tq2_0; the
  // view says kTQ2_0), whose row kernels unpack 2-bit trits far faster than base-3 bytes.
  static PackedMatrix copy_rows(const TensorView& w, uint8_t* dst = nullptr);
  static uint64_t copied_bytes(const TensorView& w);  // copy_rows's bytes
  // Bytes of w's copy: pack_rows16's when packable(w), else copy_rows's.
  static uint64_t packed_bytes(const TensorView& w);
  const TensorView& view() const { return view_; }
  // Bytes of one 16-row group of a packed matrix with `cols` columns.
  static uint64_t group_bytes(Dtype dtype, int64_t cols);

 private:
  // Memory for `bytes`: dst, or a buffer of its own.
  static PackedMatrix allocate(uint64_t bytes, uint8_t* dst);
  static PackedMatrix finish(PackedMatrix m, const TensorView& w, uint64_t bytes);
  HugeBuffer data_;         // owned memory (empty when written into a caller's)
  uint8_t* ptr_ = nullptr;  // where the copy is
  TensorView view_;
};

}  // namespace loom::kernels
