// `loom_kernels_bench peak`: the compute roofline of this machine's cores (peak_bench.cpp).
#pragma once

#include "base/thread_pool.h"

namespace loom::bench {

// Prints how many vpdpbusd, FMA and vdpbf16ps instructions per second all pool threads issue,
// and the vpdpbusd rate left when other instructions are mixed in. AVX-512 only.
void print_peak(ThreadPool& pool);

}  // namespace loom::bench
