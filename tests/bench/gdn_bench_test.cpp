// `loom bench gdn` (src/bench/gdn_bench.cpp) runs at its real shapes on a short sequence and
// exits 0 only when the chunked prefill and the one-token-per-call path gave the same bits.
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom::bench {
int gdn_bench_main(int argc, char** argv);
}

namespace loom {
namespace {

TEST(GdnBench, ChunkedAndTokenByTokenAgreeBitForBit) {
  std::vector<std::string> args = {"gdn", "-n", "40", "-r", "1", "-t", "2"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  testing::internal::CaptureStdout();
  const int rc = bench::gdn_bench_main(static_cast<int>(argv.size()), argv.data());
  const std::string out = testing::internal::GetCapturedStdout();
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("bit-identical chunked vs token by token: yes"), std::string::npos) << out;
  EXPECT_EQ(out.find(": NO"), std::string::npos) << out;
}

}  // namespace
}  // namespace loom
