// `loom inspect`: header, every metadata key with its type, the tensor table and totals; works
// on vocabulary-only files; malformed files are an error with exit code 1.
#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <string>

#include "cli/run_loom.h"
#include "format/gguf.h"

namespace loom {
namespace {

std::string tmp(const std::string& name) {
  return ::testing::TempDir() + "/cli_inspect_" + std::to_string(::getpid()) + "_" + name;
}

TEST(CliInspectTest, VocabOnlyFile) {
  CmdResult r = run(std::string("inspect ") + LOOM_TEST_DATA + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("GGUF version: 3"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("tensor count: 0"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("metadata: 22 keys"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("array[string,32000]"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("\"<unk>\", \"<s>\", \"</s>\""), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("llama.vocab_size"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("32000"), std::string::npos) << r.out;
}

TEST(CliInspectTest, SynthModelTensorTableAndTotals) {
  const std::string path = tmp("m.gguf");
  ASSERT_EQ(run("synth --arch qwen2 --preset tiny --type f16 -o " + path).code, 0);
  CmdResult r = run("inspect " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"general.architecture", "qwen2.block_count", "u32", "blk.0.attn_q.bias",
                        "blk.1.ffn_down.weight", "[128, 64]", "f16", "tokenizer.ggml.tokens"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  // tiny qwen2 (untied), counted by hand: embeddings + output 2 * 64*512, output norm 64, per
  // layer: norms 2*64, q 64*64, k and v 2 * 64*32, biases 64+32+32, o 64*64, ffn 3 * 64*128
  // = 37120; total 65536 + 64 + 2 * 37120.
  EXPECT_NE(r.out.find("total: 139840 params"), std::string::npos) << r.out;
  std::remove(path.c_str());
}

// DeepSeek-V3's multi-token prediction layer (synth's tiny-mla has one): block_count counts it,
// its nextn tensors are listed, and it is totalled apart, outside the per-token figure.
TEST(CliInspectTest, MtpLayerListedApart) {
  const std::string path = tmp("mla.gguf");
  ASSERT_EQ(run("synth --preset tiny-mla -o " + path).code, 0);
  CmdResult r = run("inspect " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"deepseek2.nextn_predict_layers", "blk.2.nextn.eh_proj.weight", "[128, 64]",
                        "blk.2.nextn.shared_head_norm.weight", "blk.2.ffn_gate_exps.weight"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
  // Counted by hand (E 64, 4 heads, q rank 32, latent 32 + 8, nope 16, value 16, 8 experts of
  // 32 and a shared one): eh_proj 128*64 + 3 norms of 64 = 8384; attention: norm 64, q_a
  // 64*32, its norm 32, q_b 32*96, kv_a 64*40, its norm 32, k_b and v_b 2 * 16*32*4, o 64*64
  // = 16000; FFN: norm 64, router 64*8, experts 3 * 64*32*8, bias 8, shared 3 * 64*32 = 55880.
  EXPECT_NE(r.out.find("multi-token prediction: 1 layer(s), blocks 2..2, 80264 params"),
            std::string::npos)
      << r.out;
  std::remove(path.c_str());
}

TEST(CliInspectTest, MalformedFilesExitOne) {
  const std::string path = tmp("bad.gguf");
  {
    std::ofstream f(path, std::ios::binary);
    f << "GGUF\x03\x00\x00\x00 truncated";
  }
  CmdResult r = run("inspect " + path);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("loom inspect:"), std::string::npos) << r.out;
  {
    std::ofstream f(path, std::ios::binary);
    f << "not a gguf file at all, just text";
  }
  EXPECT_EQ(run("inspect " + path).code, 1);
  EXPECT_EQ(run("inspect /nonexistent/file.gguf").code, 1);
  EXPECT_NE(run("inspect").code, 0);
  std::remove(path.c_str());
}

// A Mixture-of-Experts file: its total, and what one token reads (2 of 8 experts per layer, one
// of the 512 embedding rows, the whole LM head: model/weight_footprint.h).
// tiny-moe counted by hand: per layer 12,960 parameters outside the experts (norms 64 + 64,
// q 4096, k/v 2048 each, q/k norms 16 each, o 4096, router 512) and 3 x 64 x 32 per expert;
// embeddings and output 2 x 32,768 plus the output norm 64. F32: 4 bytes a parameter.
TEST(CliInspectTest, MoeFileReportsActiveParameters) {
  const std::string path = tmp("moe.gguf");
  ASSERT_EQ(run("synth --preset tiny-moe -o " + path).code, 0);
  CmdResult r = run("inspect " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  const int total = 2 * (12960 + 8 * 6144) + 2 * 32768 + 64;
  const int active = 2 * (12960 + 2 * 6144) + 64 + 32768 + 64;
  EXPECT_NE(r.out.find("total: " + std::to_string(total) + " params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("active per token (2 experts of each MoE layer): " + std::to_string(active) +
                       " params (0.000 B), " + std::to_string(4 * active) + " bytes"),
            std::string::npos)
      << r.out;
  for (const char* s : {"blk.1.ffn_gate_exps.weight", "[64, 32, 8]", "blk.0.ffn_gate_inp.weight",
                        "qwen3moe.expert_count"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s;
  std::remove(path.c_str());
}

// The same MoE with its LM head tied to the embedding (output.weight dropped): the embedding is
// counted once, whole, in what a token reads, which never exceeds the total (before, it counted
// one row plus the whole head in the active parameters, and once in the total).
TEST(CliInspectTest, TiedHeadCountsOnce) {
  const std::string untied = tmp("moe_untied.gguf"), path = tmp("moe_tied.gguf");
  ASSERT_EQ(run("synth --preset tiny-moe -o " + untied).code, 0);
  {
    auto f = GgufFile::open(untied);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    GgufWriter w;
    for (const auto& [k, v] : f->metadata()) w.set(k, v);
    for (const auto& t : f->tensors()) {
      if (t.name == "output.weight") continue;
      std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
      ASSERT_TRUE(w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes).is_ok());
    }
    ASSERT_TRUE(w.write(path).is_ok());
  }
  CmdResult r = run("inspect " + path);
  ASSERT_EQ(r.code, 0) << r.out;
  const int total = 2 * (12960 + 8 * 6144) + 32768 + 64;
  const int active = 2 * (12960 + 2 * 6144) + 32768 + 64;
  EXPECT_NE(r.out.find("total: " + std::to_string(total) + " params"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("active per token (2 experts of each MoE layer): " + std::to_string(active) +
                       " params (0.000 B), " + std::to_string(4 * active) + " bytes"),
            std::string::npos)
      << r.out;
  std::remove(untied.c_str());
  std::remove(path.c_str());
}

}  // namespace
}  // namespace loom
