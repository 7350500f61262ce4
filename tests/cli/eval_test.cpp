// `loom eval`: scores a token sequence from the HF llama fixture, writes the logits file, and
// its logits agree with the transformers logits stored beside the fixture.
#include <gtest/gtest.h>

#include "cli/run_loom.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom {
namespace {

TEST(CliEvalTest, LlamaFixtureLogitsAndNll) {
  const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/llama";
  std::ifstream in(dir + "/cases.json");
  auto j = nlohmann::json::parse(in);
  auto tokens = j["cases"][0]["tokens"].get<std::vector<int32_t>>();
  std::string ids;
  for (auto t : tokens) ids += std::to_string(t) + " ";
  const std::string out = ::testing::TempDir() + "/cli_eval_" + std::to_string(::getpid()) + ".f32";
  CmdResult r = run("eval -t 1 -m " + dir + " --tokens \"" + ids + "\" --logits-out " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  ASSERT_EQ(std::filesystem::file_size(out), tokens.size() * 512 * 4);
  auto pos = r.out.find("mean_nll: ");
  ASSERT_NE(pos, std::string::npos) << r.out;
  double nll = std::stod(r.out.substr(pos + 10));
  EXPECT_TRUE(std::isfinite(nll));
  EXPECT_GT(nll, 0.0);

  // The written logits are the model's: compare with transformers' numbers, and recompute
  // the NLL from them.
  std::vector<float> got(tokens.size() * 512), want(tokens.size() * 512);
  std::ifstream(out, std::ios::binary).read(reinterpret_cast<char*>(got.data()), got.size() * 4);
  std::ifstream(dir + "/logits_0.f32", std::ios::binary).read(reinterpret_cast<char*>(want.data()), want.size() * 4);
  double num = 0, den = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    num = std::max(num, std::fabs(static_cast<double>(got[i]) - want[i]));
    den = std::max(den, std::fabs(static_cast<double>(want[i])));
  }
  EXPECT_LT(num / den, 1e-4);
  double ref_nll = 0;
  for (size_t i = 1; i < tokens.size(); ++i) {
    const float* row = &want[(i - 1) * 512];
    double mx = *std::max_element(row, row + 512), s = 0;
    for (int v = 0; v < 512; ++v) s += std::exp(row[v] - mx);
    ref_nll -= row[tokens[i]] - mx - std::log(s);
  }
  ref_nll /= tokens.size() - 1;
  EXPECT_NEAR(nll, ref_nll, 1e-4);
  std::remove(out.c_str());
}

TEST(CliEvalTest, BadInputIsAnError) {
  const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/llama";
  EXPECT_EQ(run("eval -m " + dir + " --tokens \"1 x 3\"").code, 1);
  CmdResult r = run("eval -m " + dir + " --tokens \"1 512\"");  // vocab is 512
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("vocabulary"), std::string::npos) << r.out;
  EXPECT_EQ(run("eval -m /nonexistent/model.gguf --tokens 1").code, 1);
}

}  // namespace
}  // namespace loom
