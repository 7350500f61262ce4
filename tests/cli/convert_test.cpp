// `loom convert`: HF fixture → GGUF at every supported type; the GGUF carries GGUF names and
// metadata, and `loom eval` on it scores like the source directory.
#include <gtest/gtest.h>

#include "cli/run_loom.h"
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <string>

#include "format/gguf.h"

namespace loom {
namespace {

double nll_of(const std::string& out) {
  auto pos = out.find("mean_nll: ");
  return pos == std::string::npos ? NAN : std::stod(out.substr(pos + 10));
}

TEST(CliConvertTest, QwenFixtureToEveryType) {
  const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/qwen2";
  const std::string tokens = "--tokens \"5 317 88 157 445 373 89 46 297 503\"";
  double base = nll_of(run("eval -t 1 -m " + dir + " " + tokens).out);
  ASSERT_TRUE(std::isfinite(base));
  for (const char* type : {"f32", "f16", "bf16", "q8_0"}) {
    const std::string out = ::testing::TempDir() + "/cli_convert_" + std::to_string(::getpid()) + "_" + type + ".gguf";
    CmdResult r = run("convert " + dir + " " + out + " --type " + type);
    ASSERT_EQ(r.code, 0) << r.out;
    auto f = GgufFile::open(out);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_EQ(f->get_string("general.architecture").value_or(""), "qwen2");
    EXPECT_EQ(f->get_int("qwen2.block_count").value_or(0), 2);
    EXPECT_EQ(f->get_int("qwen2.attention.head_count_kv").value_or(0), 2);
    ASSERT_NE(f->find_tensor("blk.1.attn_q.bias"), nullptr);
    EXPECT_EQ(f->find_tensor("blk.1.attn_q.bias")->view.dtype, Dtype::kF32);  // 1-D stay f32
    EXPECT_EQ(dtype_name(f->find_tensor("blk.0.ffn_up.weight")->view.dtype), type);
    double nll = nll_of(run("eval -t 1 -m " + out + " " + tokens).out);
    const double tol = std::string(type) == "f32" ? 1e-5 : 2e-2;
    EXPECT_NEAR(nll, base, tol * std::fabs(base)) << type;
    std::remove(out.c_str());
  }
}

// A checkpoint directory with tokenizer.json: the GGUF carries the tokenizer, and `loom
// tokenize` on it gives the ids the HF tokenizer directory gives.
TEST(CliConvertTest, EmbedsHfTokenizer) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::path(::testing::TempDir()) / ("cli_convert_tok_" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const fs::path model = fs::path(LOOM_TEST_DATA) / "hf_reference/qwen3";
  const fs::path tok = fs::path(LOOM_TEST_DATA) / "hf_tokenizers/qwen3";
  for (const char* f : {"config.json", "model.safetensors"}) fs::copy_file(model / f, dir / f);
  for (const char* f : {"tokenizer.json", "tokenizer_config.json"}) fs::copy_file(tok / f, dir / f);
  const std::string out = (dir / "out.gguf").string();
  CmdResult r = run("convert " + dir.string() + " " + out);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.find("tokenizer not embedded"), std::string::npos) << r.out;
  auto f = GgufFile::open(out);
  ASSERT_TRUE(f.is_ok()) << f.status().message();
  EXPECT_EQ(f->get_string("tokenizer.ggml.pre").value_or(""), "qwen2");
  EXPECT_TRUE(f->get_string("tokenizer.chat_template").has_value());
  for (const char* text : {"'Hello world'", "--parse-special '<|im_start|>user\nHi 123<|im_end|>'"}) {
    CmdResult a = run("tokenize -m " + out + " " + text);
    CmdResult b = run("tokenize -m " + tok.string() + " " + text);
    ASSERT_EQ(a.code, 0) << a.out;
    ASSERT_EQ(b.code, 0) << b.out;
    EXPECT_FALSE(a.out.empty());
    EXPECT_EQ(a.out, b.out) << text;
  }
  fs::remove_all(dir);
}

TEST(CliConvertTest, Errors) {
  EXPECT_EQ(run("convert /nonexistent " + ::testing::TempDir() + "/x.gguf").code, 1);
  const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/llama";
  CmdResult r = run("convert " + dir + " " + ::testing::TempDir() + "/x.gguf --type q4_k");
  EXPECT_EQ(r.code, 1);
  EXPECT_NE(r.out.find("--type"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace loom
