// Run-time CPU feature detection and the ISA the kernels dispatch to.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace loom::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };  // kAvx512 = F+BW+VL+DQ+VNNI

// Raw detection results (each already requires OS support for the register state).
struct CpuFeatures {
  bool avx2 = false;  // with FMA, F16C and BMI2
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;  // reported; kernels do not require it
  // AMX-TILE + AMX-BF16 with the tile state enabled by the OS and granted to this process
  // (Linux: arch_prctl ARCH_REQ_XCOMP_PERM), so tile instructions will not fault.
  bool amx_bf16 = false;
  bool amd = false;  // vendor AuthenticAMD or HygonGenuine (Zen cores)
};
const CpuFeatures& cpu_features();

std::string_view isa_name(Isa isa);
Isa best_isa();                     // what this CPU supports
std::vector<Isa> available_isas();  // every ISA this CPU can run, scalar first
Isa active_isa();              // what kernels use now (best by default, LOOM_ISA env overrides)
void set_active_isa(Isa isa);  // tests force each ISA in turn

// Whether packed BF16 matrices are multiplied with AMX tiles (kernels/cpu/packed_amx.cpp): the
// CPU and OS allow it, the active ISA is AVX-512, and it is not switched off (LOOM_AMX=0, or
// set_amx_enabled(false) in tests and benchmarks that compare both paths). Switch it only
// while no matmul runs: a token's bits depend on it.
bool amx_enabled();
void set_amx_enabled(bool on);

// Bytes ahead of the tile that a one-token GEMV over a packed matrix (decode) prefetches its
// weight stream from DRAM (software prefetch into L2; 0: none, the hardware prefetchers
// alone; tiles of more tokens always prefetch kPrefetchAheadBytes). Measured per vendor: on
// the Intel host 16 KiB read a one-token GEMV 3-25% faster (Q8_0 least, Q4_K most;
// packed_tile_util.h); on the AMD EPYC (Zen 4) host it read 8-32% slower than none, whose
// GEMV reads at ~99% of a plain streaming read (35 / 58 GB/s in the host's slow / fast
// minutes; docs/benchmarks.md). So: kPrefetchAheadBytes on Intel, 0 on AMD.
// LOOM_WEIGHT_PREFETCH=BYTES overrides (at start), set_weight_prefetch_bytes too (benchmarks
// comparing both; only while no matmul runs).
int64_t weight_prefetch_bytes();
void set_weight_prefetch_bytes(int64_t bytes);

// What --version, /version and the benchmarks print: the active ISA, "+amx" when amx_enabled().
std::string kernels_name();

}  // namespace loom::kernels
