// DeepSeek-V3's group-limited routing (n_group, topk_group) end to end: transformers' deepseek_v3
// fixture has one group, so its config is rewritten to 2 groups of 2 experts of which 1 is
// eligible, and its correction bias (zeros in the fixture) made random, so groups are chosen by
// biased scores. The CPU model, from the directory and from its converted GGUF, must give the
// logits of the independent reference forward pass (tests/reference, its own routing code).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "format/gguf.h"
#include "model/bind.h"
#include "model/hf_cases.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"
#include "tools/convert.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using test::fixture;
using test::read_cases;
using test::row_rel_err;

constexpr const char* kBias = "model.layers.1.mlp.gate.e_score_correction_bias";

// The fixture in `dir` with n_group / topk_group set and layer 1's correction bias random.
void write_variant(const fs::path& dir, int n_group, int topk_group, uint64_t seed) {
  fs::create_directories(dir);
  std::ifstream in(fixture("deepseek_v3") + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  ASSERT_EQ(cfg["n_routed_experts"], 4);
  ASSERT_EQ(cfg["num_experts_per_tok"], 2);
  cfg["n_group"] = n_group;
  cfg["topk_group"] = topk_group;
  std::ofstream(dir / "config.json") << cfg.dump();

  std::ifstream st(fixture("deepseek_v3") + "/model.safetensors", std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(st)), std::istreambuf_iterator<char>());
  uint64_t header_len;
  std::memcpy(&header_len, bytes.data(), 8);
  const nlohmann::json header =
      nlohmann::json::parse(bytes.begin() + 8, bytes.begin() + 8 + header_len);
  ASSERT_TRUE(header.contains(kBias));
  const auto& t = header[kBias];
  ASSERT_EQ(t["dtype"], "F32");
  const uint64_t at = 8 + header_len + t["data_offsets"][0].get<uint64_t>();
  // About the spread of the sigmoid scores (0.5 ± 0.2 here): the bias moves the choice.
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<float> u(-0.25f, 0.25f);
  for (int e = 0; e < 4; ++e) {
    const float b = u(rng);
    std::memcpy(bytes.data() + at + 4 * e, &b, 4);
  }
  std::ofstream(dir / "model.safetensors", std::ios::binary).write(bytes.data(), bytes.size());
}

struct Logits {
  std::vector<std::vector<float>> from_dir, from_gguf, reference;  // per case
};

Logits run_variant(const fs::path& dir) {
  Logits out;
  const fs::path gguf = dir / "model.gguf";
  const Status converted = convert_hf_to_gguf(dir.string(), gguf.string(), ConvertOptions{});
  EXPECT_TRUE(converted.is_ok()) << converted.message();
  auto file = GgufFile::open(gguf.string());
  EXPECT_TRUE(file.is_ok());
  auto bound = bind_gguf(std::move(*file));
  EXPECT_TRUE(bound.is_ok()) << bound.status().message();
  auto lookup_file = GgufFile::open(gguf.string());
  auto a = Model::load(dir.string(), {2});
  auto b = Model::load(gguf.string(), {2});
  EXPECT_TRUE(a.is_ok() && b.is_ok() && bound.is_ok() && lookup_file.is_ok());
  if (!a.is_ok() || !b.is_ok() || !bound.is_ok() || !lookup_file.is_ok()) return out;
  for (const test::HfCase& c : read_cases(fixture("deepseek_v3"))) {
    for (auto [m, dst] : {std::pair{a->get(), &out.from_dir}, {b->get(), &out.from_gguf}}) {
      auto kv = KvCache::create(m->config(), 4, 16, Dtype::kF32).value();
      // Chunks of 5: routing per token, whatever shares its step.
      auto got = test::run_sequence(*m, *kv, c.tokens, 5);
      EXPECT_TRUE(got.is_ok()) << got.status().message();
      dst->push_back(got.is_ok() ? *got : std::vector<float>());
    }
    auto ref = reference::forward(bound->config, reference::gguf_lookup(*lookup_file), c.tokens);
    EXPECT_TRUE(ref.is_ok()) << ref.status().message();
    out.reference.push_back(ref.is_ok() ? *ref : std::vector<float>());
  }
  return out;
}

TEST(DeepseekGroupRouting, LimitedGroupsMatchTheReferenceAndChangeTheExperts) {
  const fs::path root =
      fs::temp_directory_path() / ("loom_dsv3_groups_" + std::to_string(::getpid()));
  fs::remove_all(root);
  write_variant(root / "g2k1", 2, 1, 7);
  write_variant(root / "g1", 1, 1, 7);    // the same bias, no groups
  write_variant(root / "g2k2", 2, 2, 7);  // every group eligible: no limit at all
  {
    auto c = Model::load((root / "g2k1").string(), {1});
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ((*c)->config().moe.n_group, 2);
    EXPECT_EQ((*c)->config().moe.topk_group, 1);
  }
  const Logits limited = run_variant(root / "g2k1"), plain = run_variant(root / "g1"),
               all_groups = run_variant(root / "g2k2");
  const auto cases = read_cases(fixture("deepseek_v3"));
  ASSERT_EQ(limited.reference.size(), cases.size());
  ASSERT_EQ(plain.reference.size(), cases.size());
  ASSERT_EQ(all_groups.reference.size(), cases.size());
  double min_change = 1e9;
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE(i);
    for (const Logits* l : {&limited, &plain, &all_groups}) {
      const double dir_err = row_rel_err(l->from_dir[i], l->reference[i], 512);
      const double gguf_err = row_rel_err(l->from_gguf[i], l->reference[i], 512);
      EXPECT_LT(dir_err, 1e-5);
      EXPECT_LT(gguf_err, 1e-5);
      std::printf("  case %zu %s: row rel err vs reference %.3g (dir), %.3g (gguf)\n", i,
                  l == &limited ? "2 groups, 1 eligible"
                  : l == &plain ? "1 group"
                                : "2 of 2",
                  dir_err, gguf_err);
    }
    // With both groups eligible nothing is limited: the ungrouped routing's logits.
    EXPECT_LT(row_rel_err(all_groups.from_dir[i], plain.from_dir[i], 512), 1e-6);
    // Limiting the groups chooses other experts for some tokens.
    const double change = row_rel_err(limited.from_dir[i], plain.from_dir[i], 512);
    std::printf("  case %zu: limited vs ungrouped logits differ by %.3g (row rel)\n", i, change);
    min_change = std::min(min_change, change);
  }
  EXPECT_GT(min_change, 1e-2);
  fs::remove_all(root);
}

}  // namespace
}  // namespace loom
