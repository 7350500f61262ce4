// The compute roofline: how many 512-bit vpdpbusd (64 int8 products), FMA (16 float) and
// vdpbf16ps (32 bf16 products) instructions per second all pool threads issue, 12 independent
// chains each (enough to cover the latency). Kinds 3-6 mix one other instruction into every 4
// vpdpbusd (an FMA, a multiply, a convert and an add, an add), as a quantized tile's per-block
// scale work does: the vpdpbusd rate left shows which of them compete for its pipes.
// The rates move with what shares the cores (one core here read 4.4-7.0 G vpdpbusd/s within a
// minute): compare rows of one run.
#include "peak_bench.h"

#include <immintrin.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "kernels/cpu/isa.h"

namespace loom::bench {
namespace {

template <int kKind>
__attribute__((target("avx512f,avx512vnni,avx512bf16"))) double peak_chains(int64_t iters) {
  __m512i a[12];
  __m512 f[12];
  for (int i = 0; i < 12; ++i) {
    a[i] = _mm512_set1_epi32(i);
    f[i] = _mm512_set1_ps(0.001f * i);
  }
  const __m512i w = _mm512_set1_epi8(3), x = _mm512_set1_epi8(5);
  const __m512 fw = _mm512_set1_ps(0.999f), fx = _mm512_set1_ps(0.001f);
  for (int64_t it = 0; it < iters; ++it)
#pragma GCC unroll 12
    for (int i = 0; i < 12; ++i) {
      if constexpr (kKind == 0) a[i] = _mm512_dpbusd_epi32(a[i], w, x);
      if constexpr (kKind == 1) f[i] = _mm512_fmadd_ps(f[i], fw, fx);
      if constexpr (kKind == 2)
        f[i] = _mm512_dpbf16_ps(f[i], reinterpret_cast<const __m512bh&>(w),
                                reinterpret_cast<const __m512bh&>(x));
      if constexpr (kKind >= 3) {
        a[i] = _mm512_dpbusd_epi32(a[i], w, x);
        if (i % 4 == 0) {
          if constexpr (kKind == 3) f[i] = _mm512_fmadd_ps(f[i], fw, fx);
          if constexpr (kKind == 4) f[i] = _mm512_mul_ps(f[i], fw);
          if constexpr (kKind == 5) f[i] = _mm512_add_ps(f[i], _mm512_cvtepi32_ps(a[i]));
          if constexpr (kKind == 6) f[i] = _mm512_add_ps(f[i], fx);
        }
      }
    }
  double sink = 0;
  for (int i = 0; i < 12; ++i) sink += _mm512_reduce_add_epi32(a[i]) + _mm512_reduce_add_ps(f[i]);
  return sink;
}

}  // namespace

void print_peak(ThreadPool& pool) {
  if (kernels::active_isa() != kernels::Isa::kAvx512) return;
  const bool bf16 = kernels::cpu_features().avx512bf16;
  struct Kind {
    const char* name;
    double ops_per_instr;  // int8 or float operations (multiply and add)
    double (*fn)(int64_t);
  };
  const Kind kinds[] = {{"vpdpbusd (int8)", 128, peak_chains<0>},
                        {"vfmadd (f32)", 32, peak_chains<1>},
                        {"vdpbf16ps (bf16)", 64, peak_chains<2>},
                        {"vpdpbusd, +1 FMA per 4", 128, peak_chains<3>},
                        {"vpdpbusd, +1 mul per 4", 128, peak_chains<4>},
                        {"vpdpbusd, +1 cvt+add per 4", 128, peak_chains<5>},
                        {"vpdpbusd, +1 add per 4", 128, peak_chains<6>}};
  constexpr int64_t kIters = 20000000;
  for (const Kind& k : kinds) {
    if (k.fn == peak_chains<2> && !bf16) continue;
    std::vector<double> sink(pool.size());  // the chains' results, so none is optimized away
    const auto t0 = std::chrono::steady_clock::now();
    pool.parallel_for(pool.size(), [&](int64_t task, int) { sink[task] = k.fn(kIters); });
    const double t = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    volatile double keep = sink[0];
    (void)keep;
    // Counted: the 12 chains' instructions (for kinds 3-6, the vpdpbusd alone).
    const double instr = 12.0 * kIters * pool.size();
    std::printf("peak  %-26s %6.2f G instr/s  %7.1f GOP/s (%d threads)\n", k.name, instr / t / 1e9,
                instr * k.ops_per_instr / t / 1e9, pool.size());
  }
}

}  // namespace loom::bench
