// CPU feature detection (CPUID + XGETBV: the OS must also save the wider registers) and the
// process-wide active ISA, overridable with LOOM_ISA=scalar|avx2|avx512.
#include "kernels/cpu/isa.h"

#include <cpuid.h>

#include <atomic>
#include <cstdlib>
#include <cstring>
#include <string>
#ifdef __linux__
#include <sys/syscall.h>
#include <unistd.h>
#endif

#include "base/log.h"
#include "base/status.h"
#include "kernels/cpu/packed_kernels.h"

namespace loom::kernels {
namespace {

uint64_t xgetbv0() {
  uint32_t eax, edx;
  __asm__ volatile("xgetbv" : "=a"(eax), "=d"(edx) : "c"(0));
  return (static_cast<uint64_t>(edx) << 32) | eax;
}

// Linux keeps the 8 KiB AMX tile data state off until a process asks for it; without the
// grant the first tile instruction faults.
bool request_amx_tile_state() {
#ifdef __linux__
  constexpr int kArchReqXcompPerm = 0x1023, kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
#else
  return false;
#endif
}

CpuFeatures detect() {
  CpuFeatures f;
  unsigned a, b, c, d;
  if (__get_cpuid(0, &a, &b, &c, &d)) {
    char vendor[13] = {};
    std::memcpy(vendor, &b, 4);
    std::memcpy(vendor + 4, &d, 4);
    std::memcpy(vendor + 8, &c, 4);
    f.amd =
        std::string_view(vendor) == "AuthenticAMD" || std::string_view(vendor) == "HygonGenuine";
  }
  if (!__get_cpuid(1, &a, &b, &c, &d)) return f;
  const bool osxsave = c & (1u << 27);
  const bool avx = c & (1u << 28);
  const bool fma = c & (1u << 12);
  const bool f16c = c & (1u << 29);
  if (!osxsave || !avx) return f;
  const uint64_t xcr0 = xgetbv0();
  const bool os_ymm = (xcr0 & 0x6) == 0x6;              // SSE + AVX state
  const bool os_zmm = os_ymm && (xcr0 & 0xe0) == 0xe0;  // opmask + ZMM_Hi256 + Hi16_ZMM
  if (__get_cpuid_max(0, nullptr) < 7) return f;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5);
  const bool bmi2 = b & (1u << 8);
  f.avx2 = os_ymm && avx2 && fma && f16c && bmi2;
  f.avx512f = os_zmm && (b & (1u << 16));
  f.avx512dq = os_zmm && (b & (1u << 17));
  f.avx512bw = os_zmm && (b & (1u << 30));
  f.avx512vl = os_zmm && (b & (1u << 31));
  f.avx512vnni = os_zmm && (c & (1u << 11));
  unsigned a1, b1, c1, d1;
  __cpuid_count(7, 1, a1, b1, c1, d1);
  f.avx512bf16 = os_zmm && (a1 & (1u << 5));
  const bool amx_bf16 = d & (1u << 22), amx_tile = d & (1u << 24);
  const bool os_tiles = (xcr0 & 0x60000) == 0x60000;  // XTILECFG + XTILEDATA
  f.amx_bf16 = f.avx512bf16 && amx_tile && amx_bf16 && os_tiles && request_amx_tile_state();
  return f;
}

Isa parse_isa_env(Isa best) {
  const char* env = std::getenv("LOOM_ISA");
  if (!env || !*env) return best;
  const std::string s = env;
  Isa want;
  if (s == "scalar")
    want = Isa::kScalar;
  else if (s == "avx2")
    want = Isa::kAvx2;
  else if (s == "avx512")
    want = Isa::kAvx512;
  else {
    LOOM_LOG_WARN("LOOM_ISA=%s is not one of scalar|avx2|avx512; using %s", env,
                  std::string(isa_name(best)).c_str());
    return best;
  }
  if (static_cast<int>(want) > static_cast<int>(best)) {
    LOOM_LOG_WARN("LOOM_ISA=%s is not supported by this CPU; using %s", env,
                  std::string(isa_name(best)).c_str());
    return best;
  }
  return want;
}

std::atomic<bool>& amx_slot() {
  static std::atomic<bool> slot{[] {
    const char* env = std::getenv("LOOM_AMX");
    return !(env && std::string(env) == "0");
  }()};
  return slot;
}

std::atomic<int64_t>& weight_prefetch_slot() {
  static std::atomic<int64_t> slot{[]() -> int64_t {
    const int64_t by_vendor = cpu_features().amd ? 0 : cpu::kPrefetchAheadBytes;
    const char* env = std::getenv("LOOM_WEIGHT_PREFETCH");
    if (!env || !*env) return by_vendor;
    char* end = nullptr;
    const long long v = std::strtoll(env, &end, 10);
    if (*end != '\0' || v < 0 || v > (int64_t{1} << 20)) {
      LOOM_LOG_WARN("LOOM_WEIGHT_PREFETCH=%s is not a byte count in [0, 1048576]; using %lld", env,
                    static_cast<long long>(by_vendor));
      return by_vendor;
    }
    return v;
  }()};
  return slot;
}

std::atomic<int>& active_slot() {
  static std::atomic<int> slot{static_cast<int>(parse_isa_env(best_isa()))};
  return slot;
}

}  // namespace

const CpuFeatures& cpu_features() {
  static const CpuFeatures f = detect();
  return f;
}

std::string_view isa_name(Isa isa) {
  switch (isa) {
    case Isa::kScalar:
      return "scalar";
    case Isa::kAvx2:
      return "avx2";
    case Isa::kAvx512:
      return "avx512";
  }
  return "?";
}

Isa best_isa() {
  const CpuFeatures& f = cpu_features();
  if (f.avx2 && f.avx512f && f.avx512bw && f.avx512vl && f.avx512dq && f.avx512vnni)
    return Isa::kAvx512;
  if (f.avx2) return Isa::kAvx2;
  return Isa::kScalar;
}

std::vector<Isa> available_isas() {
  std::vector<Isa> v;
  for (int i = 0; i <= static_cast<int>(best_isa()); ++i) v.push_back(static_cast<Isa>(i));
  return v;
}

Isa active_isa() {
  return static_cast<Isa>(active_slot().load(std::memory_order_relaxed));
}

void set_active_isa(Isa isa) {
  LOOM_CHECK(static_cast<int>(isa) <= static_cast<int>(best_isa()));
  active_slot().store(static_cast<int>(isa), std::memory_order_relaxed);
}

bool amx_enabled() {
  return active_isa() == Isa::kAvx512 && cpu_features().amx_bf16 &&
         amx_slot().load(std::memory_order_relaxed);
}

void set_amx_enabled(bool on) {
  amx_slot().store(on, std::memory_order_relaxed);
}

int64_t weight_prefetch_bytes() {
  return weight_prefetch_slot().load(std::memory_order_relaxed);
}

void set_weight_prefetch_bytes(int64_t bytes) {
  weight_prefetch_slot().store(bytes, std::memory_order_relaxed);
}

std::string kernels_name() {
  return std::string(isa_name(active_isa())) + (amx_enabled() ? "+amx" : "");
}

}  // namespace loom::kernels
