// YaRN's attention factor where a config gives its own (rope attention_factor, as Olmo 3 and
// Laguna do): it replaces 0.1·ln(factor) + 1 as what cos and sin are multiplied by, `loom
// convert` writes it as llama.cpp's converter does ({arch}.rope.scaling.yarn_attn_factor), and
// the GGUF gives the checkpoint's logits. Without one, no key is written. The gpt-oss fixture
// (YaRN factor 32) with its config edited.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "format/gguf.h"
#include "model/config_reader.h"
#include "model/hf_cases.h"
#include "tools/convert.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using test::fixture;

std::vector<float> logits_of(const std::string& spec, const std::vector<int32_t>& tokens) {
  auto model = Model::load(spec, {2});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  if (!model.is_ok()) return {};
  auto kv = KvCache::create((*model)->config(), 4, 16, Dtype::kF32).value();
  return test::run_sequence(**model, *kv, tokens, 64).value();
}

TEST(YarnAttnFactor, ConfigsOwnFactorIsAppliedWrittenAndReadBack) {
  const fs::path dir = fs::temp_directory_path() / ("loom_yarn_af_" + std::to_string(::getpid()));
  fs::create_directories(dir);
  fs::copy_file(fixture("gpt_oss") + "/model.safetensors", dir / "model.safetensors");
  std::ifstream in(fixture("gpt_oss") + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(in);
  const auto tokens = test::read_cases(fixture("gpt_oss"))[0].tokens;
  const std::string key = "gpt-oss.rope.scaling.yarn_attn_factor";

  // The published config: the factor derived, no key in the file.
  std::ofstream(dir / "config.json") << cfg.dump();
  auto c = config_from_hf_dir(dir.string());
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_NEAR(c->rope_scaling.attn_factor, 0.1 * std::log(32.0) + 1.0, 1e-6);
  const fs::path plain = dir / "plain.gguf";
  ASSERT_TRUE(convert_hf_to_gguf(dir.string(), plain.string(), ConvertOptions{}).is_ok());
  EXPECT_FALSE(GgufFile::open(plain.string())->get_float(key).has_value());
  const auto published = logits_of(plain.string(), tokens);

  // attention_factor 1: cos and sin unscaled, in the checkpoint and in its GGUF.
  cfg["rope_parameters"]["attention_factor"] = 1.0;
  std::ofstream(dir / "config.json") << cfg.dump();
  c = config_from_hf_dir(dir.string());
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(c->rope_scaling.attn_factor, 1.0f);
  const fs::path gguf = dir / "af.gguf";
  ASSERT_TRUE(convert_hf_to_gguf(dir.string(), gguf.string(), ConvertOptions{}).is_ok());
  auto f = GgufFile::open(gguf.string());
  ASSERT_TRUE(f.is_ok());
  EXPECT_EQ(f->get_float(key).value_or(0), 1.0);
  auto read = config_from_gguf(*f);
  ASSERT_TRUE(read.is_ok());
  EXPECT_EQ(read->rope_scaling.attn_factor, 1.0f);
  const auto from_dir = logits_of(dir.string(), tokens);
  const auto from_gguf = logits_of(gguf.string(), tokens);
  ASSERT_EQ(from_dir.size(), published.size());
  EXPECT_LT(test::row_rel_err(from_gguf, from_dir, 512), 1e-6);
  EXPECT_GT(test::row_rel_err(from_gguf, published, 512), 1e-3);  // the factor does matter
  fs::remove_all(dir);
}

}  // namespace
}  // namespace loom
