// Run-time CPU feature detection and the ISA the kernels dispatch to.
#pragma once

#include <string_view>
#include <cstdint>
#include <vector>

namespace loom::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };  // kAvx512 = F+BW+VL+DQ+VNNI

// Raw detection results (each already requires OS support for the register state).
struct CpuFeatures {
  bool avx2 = false;  // with FMA, F16C and BMI2
  bool avx512f = false, avx512bw = false, avx512vl = false, avx512dq = false;
  bool avx512vnni = false;
  bool avx512bf16 = false;  // reported; kernels do not require it
};
const CpuFeatures& cpu_features();

std::string_view isa_name(Isa isa);
Isa best_isa();                    // what this CPU supports
std::vector<Isa> available_isas(); // every ISA this CPU can run, scalar first
Isa active_isa();                  // what kernels use now (best by default, LOOM_ISA env overrides)
void set_active_isa(Isa isa);      // tests force each ISA in turn

}  // namespace loom::kernels
