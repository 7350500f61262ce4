// `loom run` and `loom bench offline` with the model's own MTP layer as the proposer
// (--speculative-config '{"method": "mtp", ...}'): greedy text is plain decoding's (DeepSeek's
// and the Qwen hybrids' modules), the bench reports the proposals and the module's time, and a
// model without MTP layers is refused by name.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_loom.h"

namespace loom {
namespace {

const std::string kMtp =
    R"( --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}')";

// DeepSeek-V3's layout, and Qwen3-Next's and Qwen3.5's behind Gated DeltaNet layers.
TEST(CliMtp, RunGreedyTextIsPlainDecodings) {
  for (const char* preset : {"tiny-mla", "tiny-qwen3next", "tiny-qwen35"}) {
    const std::string base =
        std::string("run -m synth:") + preset + " -p 'hello world' -n 24 --temp 0 -t 1";
    CmdResult plain = run_stdout(base);
    ASSERT_EQ(plain.code, 0) << preset << plain.out;
    CmdResult mtp = run_stdout(base + kMtp);
    ASSERT_EQ(mtp.code, 0) << preset << mtp.out;
    EXPECT_EQ(mtp.out, plain.out) << preset;
    EXPECT_GT(plain.out.size(), std::string("hello world").size()) << preset;
  }
}

TEST(CliMtp, BenchOfflineReportsProposalsAndModuleTime) {
  CmdResult r = run_stdout(
      "bench offline -m synth:tiny-mla --num-prompts 2 --input-len 8 --output-len 32 "
      "--max-num-seqs 1 -t 1 --temperature 0" +
      kMtp);
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("Speculative decoding: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("Proposer forward passes (draft model or MTP module): "), std::string::npos)
      << r.out;
}

TEST(CliMtp, ModelWithoutMtpLayersIsNamed) {
  CmdResult r = run("run -m synth:tiny -p hi -n 4 -t 1" + kMtp);
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("the model synth:tiny (llama) has no multi-token prediction"),
            std::string::npos)
      << r.out;
}

}  // namespace
}  // namespace loom
