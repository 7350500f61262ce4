// Run-time CPU feature detection and the ISA the kernels dispatch to.
#pragma once

#include <string_view>
#include <vector>

namespace loom::kernels {

enum class Isa { kScalar = 0, kAvx2 = 1, kAvx512 = 2 };  // kAvx512 = F+BW+VL+DQ+VNNI

std::string_view isa_name(Isa isa);
Isa best_isa();                    // what this CPU supports
std::vector<Isa> available_isas(); // every ISA this CPU can run, scalar first
Isa active_isa();                  // what kernels use now (best by default, LOOM_ISA env overrides)
void set_active_isa(Isa isa);      // tests force each ISA in turn

}  // namespace loom::kernels
