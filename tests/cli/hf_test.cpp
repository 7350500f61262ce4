// `loom pull` and `-hf` as a user runs them, against the fake Hub (tests/hub/fake_hub.js):
// a `loom synth` model pulled by name generates exactly what the same file gives with -m,
// also when the repository holds it as a split GGUF; a corrupt download fails the command.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <fstream>

#include "cli/run_loom.h"
#include "format/format_test_util.h"
#include "format/gguf.h"
#include "hub/fake_hub.h"

namespace loom {
namespace {

using nlohmann::json;

constexpr const char* kCommit = "0123456789abcdef0123456789abcdef01234567";

// Runs loom with `env` before it; stdout only when `stdout_only`, else stdout + stderr.
CmdResult run_env(const std::string& env, const std::string& args, bool stdout_only) {
  return run_shell(env + " " + LOOM_BINARY + " " + args + (stdout_only ? " 2>/dev/null" : " 2>&1"));
}

class HfCli : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!test::have_node()) GTEST_SKIP() << "node is not installed: no fake Hub";
    model_ = dir_.file("tiny.gguf");
    ASSERT_EQ(run("synth --preset tiny --type q8_0 --seed 5 -o " + model_).code, 0);
    auto whole = GgufFile::open(model_);
    ASSERT_TRUE(whole.is_ok()) << whole.status().message();
    auto parts = write_gguf_split(*whole, 3, dir_.file("tiny-split"));
    ASSERT_TRUE(parts.is_ok()) << parts.status().message();
    json split_files = json::array();
    for (int i = 0; i < 3; ++i)
      split_files.push_back({{"path", "tiny-Q8_0-0000" + std::to_string(i + 1) + "-of-00003.gguf"},
                             {"source", (*parts)[i]},
                             {"lfs", true}});
    const json repos = {
        {"acme/tiny-GGUF",
         {{"commit", kCommit},
          {"files",
           {{{"path", "tiny-Q8_0.gguf"},
             {"source", model_},
             {"lfs", true},
             {"drop_after", 40000}}}}}},
        {"acme/tiny-split", {{"commit", kCommit}, {"files", split_files}}},
        {"acme/corrupt",
         {{"commit", kCommit},
          {"files",
           {{{"path", "tiny-Q8_0.gguf"}, {"source", model_}, {"lfs", true}, {"corrupt", true}}}}}}};
    hub_ = std::make_unique<test::FakeHub>(json{{"repos", repos}}, dir_.path());
    ASSERT_TRUE(hub_->ok()) << "the fake hub did not start";
    env_ = "HF_ENDPOINT=" + hub_->endpoint() + " HF_HOME=" + dir_.file("hf") +
           " HF_HUB_CACHE= HF_TOKEN= HF_HUB_OFFLINE=";
  }

  test::TempDir dir_;
  std::string model_, env_;
  std::unique_ptr<test::FakeHub> hub_;
};

TEST_F(HfCli, PullPrintsThePathAndASecondPullUsesTheCache) {
  CmdResult r = run_env(env_, "pull acme/tiny-GGUF:q8_0", false);
  ASSERT_EQ(r.code, 0) << r.out;
  const std::string path =
      dir_.file("hf") + "/hub/models--acme--tiny-GGUF/snapshots/" + kCommit + "/tiny-Q8_0.gguf";
  EXPECT_NE(r.out.find(path), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("resuming"), std::string::npos) << "the dropped connection: " << r.out;
  EXPECT_EQ(test::read_file(path), test::read_file(model_));
  const size_t n = hub_->requests().size();
  r = run_env(env_, "pull acme/tiny-GGUF:Q8_0", false);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("in the cache"), std::string::npos) << r.out;
  EXPECT_EQ(hub_->requests().size(), n);
}

TEST_F(HfCli, RunWithHfGeneratesWhatTheFileGives) {
  const std::string args = " -n 12 --temp 0 -p 'Once upon a time'";
  CmdResult local = run_env("", "run -m " + model_ + args, true);
  ASSERT_EQ(local.code, 0) << local.out;
  CmdResult pulled = run_env(env_, "run -hf acme/tiny-GGUF:Q8_0" + args, true);
  ASSERT_EQ(pulled.code, 0) << run_env(env_, "run -hf acme/tiny-GGUF:Q8_0" + args, false).out;
  EXPECT_EQ(pulled.out, local.out);
  EXPECT_GT(local.out.size(), std::string("Once upon a time").size());
  // The split repository: three files, one model, the same text.
  CmdResult split = run_env(env_, "run -hf acme/tiny-split" + args, true);
  ASSERT_EQ(split.code, 0) << run_env(env_, "run -hf acme/tiny-split" + args, false).out;
  EXPECT_EQ(split.out, local.out);
  CmdResult tok = run_env(env_, "tokenize -hf acme/tiny-split 'Once upon a time'", true);
  CmdResult tok_local = run_env("", "tokenize -m " + model_ + " 'Once upon a time'", true);
  EXPECT_EQ(tok.code, 0);
  EXPECT_EQ(tok.out, tok_local.out);
}

TEST_F(HfCli, ACorruptDownloadFailsTheCommand) {
  CmdResult r = run_env(env_, "pull acme/corrupt", false);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("sha256 mismatch"), std::string::npos) << r.out;
  r = run_env(env_, "run -hf acme/corrupt -n 2", false);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("sha256 mismatch"), std::string::npos) << r.out;
}

TEST_F(HfCli, BadHfArgumentsAreClearErrors) {
  CmdResult r = run_env(env_, "run -m " + model_ + " -hf acme/tiny-GGUF", false);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("not both"), std::string::npos) << r.out;
  r = run_env(env_, "pull not-a-repo", false);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("ORG/NAME"), std::string::npos) << r.out;
  r = run_env(env_, "eval --tokens 1", false);
  EXPECT_NE(r.code, 0);
  EXPECT_NE(r.out.find("-hf"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace loom
