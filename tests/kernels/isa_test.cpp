// CPU feature detection sanity and the active-ISA switch.
#include "kernels/cpu/isa.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <fstream>
#include <string>

namespace loom::kernels {
namespace {

bool cpuinfo_has(const std::string& flag) {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("flags", 0) == 0)
      return (line + " ").find(" " + flag + " ") != std::string::npos;
  return false;
}

TEST(Isa, DetectionAgreesWithProcCpuinfo) {
  const CpuFeatures& f = cpu_features();
  EXPECT_EQ(f.avx2, cpuinfo_has("avx2") && cpuinfo_has("fma") && cpuinfo_has("f16c") &&
                        cpuinfo_has("bmi2"));
  EXPECT_EQ(f.avx512f, cpuinfo_has("avx512f"));
  EXPECT_EQ(f.avx512bw, cpuinfo_has("avx512bw"));
  EXPECT_EQ(f.avx512vnni, cpuinfo_has("avx512_vnni"));
  EXPECT_EQ(f.avx512bf16, cpuinfo_has("avx512_bf16"));
  // Linux lists amx_* only when the OS enables the tile state; the process grant follows.
  EXPECT_EQ(f.amx_bf16, f.avx512bf16 && cpuinfo_has("amx_tile") && cpuinfo_has("amx_bf16"));
  std::printf("best isa: %s (avx512_bf16: %d, amx_bf16: %d)\n",
              std::string(isa_name(best_isa())).c_str(), f.avx512bf16, f.amx_bf16);
}

std::string cpuinfo_vendor() {
  std::ifstream in("/proc/cpuinfo");
  std::string line;
  while (std::getline(in, line))
    if (line.rfind("vendor_id", 0) == 0) return line.substr(line.find(':') + 2);
  return "";
}

// The vendor decides decode's weight prefetch (weight_prefetch_bytes): CPUID's vendor string
// against the kernel's, and the default that follows from it unless LOOM_WEIGHT_PREFETCH says.
TEST(Isa, VendorAgreesWithProcCpuinfoAndSetsTheWeightPrefetch) {
  const std::string vendor = cpuinfo_vendor();
  if (vendor.empty()) GTEST_SKIP() << "no vendor_id in /proc/cpuinfo";
  EXPECT_EQ(cpu_features().amd, vendor == "AuthenticAMD" || vendor == "HygonGenuine") << vendor;
  if (std::getenv("LOOM_WEIGHT_PREFETCH")) GTEST_SKIP() << "LOOM_WEIGHT_PREFETCH is set";
  EXPECT_EQ(weight_prefetch_bytes(), cpu_features().amd ? 0 : int64_t{16384}) << vendor;
}

TEST(Isa, AmxFollowsTheActiveIsaAndTheSwitch) {
  const Isa saved = active_isa();
  const bool was = amx_enabled();
  set_amx_enabled(true);
  EXPECT_EQ(amx_enabled(), cpu_features().amx_bf16 && active_isa() == Isa::kAvx512);
  set_active_isa(Isa::kScalar);
  EXPECT_FALSE(amx_enabled());
  EXPECT_EQ(kernels_name(), "scalar");
  set_active_isa(saved);
  set_amx_enabled(false);
  EXPECT_FALSE(amx_enabled());
  EXPECT_EQ(kernels_name(), isa_name(saved));
  set_amx_enabled(was);
}

TEST(Isa, AvailableIsasAreOrderedAndSwitchable) {
  const auto isas = available_isas();
  ASSERT_FALSE(isas.empty());
  EXPECT_EQ(isas.front(), Isa::kScalar);
  EXPECT_EQ(isas.back(), best_isa());
  const Isa saved = active_isa();
  for (Isa i : isas) {
    set_active_isa(i);
    EXPECT_EQ(active_isa(), i);
  }
  set_active_isa(saved);
  EXPECT_EQ(isa_name(Isa::kAvx512), "avx512");
}

}  // namespace
}  // namespace loom::kernels
