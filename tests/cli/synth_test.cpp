// `loom synth` and `loom quantize` as a user runs them: files written and readable, the
// summary printed, bad arguments rejected with exit code 1 and a message.
#include <gtest/gtest.h>

#include "cli/run_loom.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <string>

#include "format/gguf.h"

namespace loom {
namespace {

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "/cli_synth_" + std::to_string(::getpid()) + "_" + name;
}

TEST(CliSynthTest, WritesAReadableModelAndSaysItIsRandom) {
  const std::string path = tmp("qwen3.gguf");
  CmdResult r = run("synth --arch qwen3 --preset tiny --type q8_0 --seed 3 -o " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("random"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("params"), std::string::npos) << r.out;
  auto f = GgufFile::open(path);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->get_string("general.architecture"), "qwen3");
  ASSERT_NE(f->find_tensor("blk.1.attn_k_norm.weight"), nullptr);
  EXPECT_EQ(f->find_tensor("blk.1.ffn_up.weight")->view.dtype, Dtype::kQ8_0);
  std::remove(path.c_str());
}

TEST(CliSynthTest, QuantizeASynthModel) {
  const std::string in = tmp("f32.gguf"), out = tmp("q4km.gguf");
  ASSERT_EQ(run("synth --preset tiny-k -o " + in).code, 0);
  CmdResult r = run("quantize " + in + " " + out + " Q4_K_M");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Q4_K_M"), std::string::npos) << r.out;
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->get_int("general.file_type"), 15);
  EXPECT_EQ(f->find_tensor("output.weight")->view.dtype, Dtype::kQ6_K);
  EXPECT_EQ(f->find_tensor("blk.0.ffn_up.weight")->view.dtype, Dtype::kQ4_K);
  // Quantizing the quantized file again is refused.
  CmdResult again = run("quantize " + out + " " + in + ".2 Q8_0");
  EXPECT_EQ(again.code, 1);
  EXPECT_NE(again.out.find("already quantized"), std::string::npos) << again.out;
  std::remove(in.c_str());
  std::remove(out.c_str());
}

TEST(CliSynthTest, BadArgumentsExitOne) {
  const std::string path = tmp("bad.gguf");
  CmdResult r = run("synth --preset huge -o " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("unknown preset"), std::string::npos) << r.out;
  r = run("synth --arch gpt2 -o " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("gpt2"), std::string::npos) << r.out;
  r = run("synth --type q9_9 -o " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("q9_9"), std::string::npos) << r.out;
  r = run("synth --vocab /nonexistent.gguf -o " + path);
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("/nonexistent.gguf"), std::string::npos) << r.out;
  EXPECT_NE(run("synth --preset tiny").code, 0);  // no -o
  r = run("synth --seed notanumber -o " + path);
  EXPECT_NE(r.code, 0);
  EXPECT_EQ(::access(path.c_str(), F_OK), -1) << "no file after a failed synth";
  r = run("quantize /nonexistent.gguf " + path + " Q8_0");
  EXPECT_EQ(r.code, 1);
  r = run("quantize a b Q3_XL");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("Q3_XL"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace loom
