// `loom run` and `loom bench offline` with the model's own MTP layer as the proposer
// (--speculative-config '{"method": "mtp", ...}'): greedy text is plain decoding's, the bench
// reports the proposals and the module's time, and a model without MTP layers is refused by
// name.
#include <gtest/gtest.h>

#include <string>

#include "cli/run_loom.h"

namespace loom {
namespace {

const std::string kMtp =
    R"( --speculative-config '{"method": "mtp", "num_speculative_tokens": 2}')";

TEST(CliMtp, RunGreedyTextIsPlainDecodings) {
  const std::string base = "run -m synth:tiny-mla -p 'hello world' -n 24 --temp 0 -t 1";
  CmdResult plain = run_stdout(base);
  ASSERT_EQ(plain.code, 0) << plain.out;
  CmdResult mtp = run_stdout(base + kMtp);
  ASSERT_EQ(mtp.code, 0) << mtp.out;
  EXPECT_EQ(mtp.out, plain.out);
  EXPECT_GT(plain.out.size(), std::string("hello world").size());
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
