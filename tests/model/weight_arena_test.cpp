// The kernel-ready copies share one huge-page arena (CpuModel::start_repacking): a MoE model's
// many small expert matrices take about their own size in memory. Each in huge pages of its
// own, every one took a whole 2 MiB page (qwen3moe-2b: 7.7 GB for a 1 GB file), which this
// checks on the process's anonymous memory around a load of tiny-moe's 48 expert matrices.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <string>

#include "format/gguf.h"
#include "model/model.h"
#include "tools/synth.h"

namespace loom {
namespace {

// The process's resident anonymous memory (RssAnon in /proc/self/status), bytes; 0 if unknown.
uint64_t rss_anon() {
  std::ifstream status("/proc/self/status");
  for (std::string line; std::getline(status, line);)
    if (line.rfind("RssAnon:", 0) == 0) return std::stoull(line.substr(8)) * 1024;
  return 0;
}

TEST(WeightArena, ExpertCopiesTakeAboutTheirOwnSize) {
  SynthOptions so;
  so.preset = "tiny-moe";
  so.arch = "qwen3moe";
  auto bytes = synth_model_bytes(so);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto file = GgufFile::parse_bytes(*bytes);
  ASSERT_TRUE(file.is_ok());
  ModelLoadOptions o;
  o.n_threads = 1;
  const uint64_t before = rss_anon();
  auto model = Model::from_gguf(std::move(*file), o);
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const uint64_t after = rss_anon();
  if (before == 0) GTEST_SKIP() << "no RssAnon in /proc/self/status";
  const uint64_t copies = (*model)->memory_use().weight_copies;
  std::printf("  copies %llu bytes, anonymous memory grew %llu bytes\n",
              static_cast<unsigned long long>(copies),
              static_cast<unsigned long long>(after - before));
  ASSERT_GT(copies, 0u);
  // The arena in whole huge pages, and the model's small allocations: under 16 MiB more.
  // Each of the 48 expert matrices in a 2 MiB page of its own was 96 MiB.
  EXPECT_LT(after - before, copies + (uint64_t{16} << 20));
}

}  // namespace
}  // namespace loom
