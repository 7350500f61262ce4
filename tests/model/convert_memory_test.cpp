// `loom convert` holds one made tensor at a time: what a checkpoint does not store as GGUF
// wants it (experts stacked, FP8 dequantized, derived tensors) is made on lookup and freed
// before the next, so a 60 GB MoE checkpoint does not need 60 GB more memory to convert.
// Compared with what holding them all takes (every planned tensor looked up, nothing freed:
// the converter before this bound) and with the largest single one.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>

#include "model/arch.h"
#include "model/config_reader.h"
#include "model/hf_cases.h"
#include "model/hf_tensors.h"
#include "model/tensor_plan.h"
#include "tools/convert.h"

namespace loom {
namespace {

struct MadeSizes {
  uint64_t all = 0;      // every made tensor held at once
  uint64_t largest = 0;  // the largest one, its sources included while it is made
};

MadeSizes made_sizes(const std::string& dir) {
  MadeSizes s;
  auto config = config_from_hf_dir(dir);
  EXPECT_TRUE(config.is_ok());
  const ArchSpec* arch = find_arch(config->arch);
  auto held = HfTensors::open(dir, *arch, *config);
  auto one = HfTensors::open(dir, *arch, *config);
  EXPECT_TRUE(held.is_ok() && one.is_ok());
  for (const PlannedWeight& t : tensor_plan(*config, {})) {
    (*held)->find(t.name);
    const TensorView* v = (*one)->find(t.name);
    s.largest = std::max(s.largest, (*one)->made_bytes());
    if (v) (*one)->release(std::span<const void* const>(&v->data, 1), {});
  }
  s.all = (*held)->made_bytes();
  return s;
}

class ConvertMemory : public ::testing::TestWithParam<std::string> {};

TEST_P(ConvertMemory, HoldsOneMadeTensorAtATime) {
  const std::string dir = test::fixture(GetParam());
  const MadeSizes sizes = made_sizes(dir);
  ASSERT_GT(sizes.largest, 0u);
  const auto out = std::filesystem::temp_directory_path() /
                   ("loom_convert_memory_" + GetParam() + std::to_string(::getpid()) + ".gguf");
  ConvertReport report;
  ASSERT_TRUE(convert_hf_to_gguf(dir, out.string(), {}, &report).is_ok());
  std::filesystem::remove(out);
  std::printf("  %s: made tensors at once %llu bytes (largest %llu, all %llu)\n",
              GetParam().c_str(), static_cast<unsigned long long>(report.peak_made_bytes),
              static_cast<unsigned long long>(sizes.largest),
              static_cast<unsigned long long>(sizes.all));
  EXPECT_GT(report.peak_made_bytes, 0u);
  EXPECT_LE(report.peak_made_bytes, sizes.largest);
  EXPECT_GE(sizes.all, 3 * sizes.largest);  // the fixture is one where the bound matters
}

// Stacked experts (Qwen3-MoE, Mixtral), derived ones (gpt-oss's gate/up split, DeepSeek's
// kv_b_proj split into k_b and v_b).
INSTANTIATE_TEST_SUITE_P(MoeFixtures, ConvertMemory,
                         ::testing::Values("qwen3_moe", "mixtral", "gpt_oss", "deepseek_v3"));

}  // namespace
}  // namespace loom
