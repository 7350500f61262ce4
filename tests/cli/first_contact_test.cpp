// A new user's first commands: every --help shows the defaults and that -m is optional; with
// no -m, `loom run` (and `loom serve`, the same function) says it uses the random-weight demo
// model; text meant for a terminal has its control bytes escaped.
#include <gtest/gtest.h>

#include "cli/demo_model.h"
#include "cli/run_loom.h"

namespace loom {
namespace {

TEST(CliFirstContact, RunHelpShowsDefaults) {
  CmdResult r = run("run --help");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s : {"TEXT=Once upon a time", "]=64", "]=0.8", "]=40", "]=0.95", "INT=-1",
                        "optional; default: the random-weight demo model synth:tiny"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(CliFirstContact, ServeHelpSaysTheModelIsOptionalAndWhatTheKvDefaultIs) {
  CmdResult r = run("serve --help");
  ASSERT_EQ(r.code, 0) << r.out;
  for (const char* s :
       {"optional; default: the random-weight demo model synth:tiny", "at most a quarter of RAM"})
    EXPECT_NE(r.out.find(s), std::string::npos) << s << "\n" << r.out;
}

TEST(CliFirstContact, RunWithoutAModelAnnouncesTheDemoModel) {
  CmdResult r = run("run -n 4 -p hello");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("loom run: no model given (-m): using the built-in demo model 'synth:tiny'"),
            std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("RANDOM"), std::string::npos) << r.out;
}

// The start-up log says what a token of context costs: synth:tiny's 2 layers x K and V x 2 KV
// heads x 16 dimensions x 2 bytes (f16) = 256 bytes.
TEST(CliFirstContact, StartUpPrintsKvBytesPerToken) {
  CmdResult r = run("run -n 2 -p hi");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_NE(r.out.find("(f16, 256 bytes per token over 2 layers)"), std::string::npos) << r.out;
}

TEST(CliFirstContact, VersionSaysWhatWasBuilt) {
  CmdResult r = run("--version");
  ASSERT_EQ(r.code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("loom 0.1.0 (commit ", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("kernels: "), std::string::npos) << r.out;
}

TEST(CliFirstContact, ControlBytesAreEscapedForTerminals) {
  EXPECT_EQ(cli::escape_control_bytes("a\x1b[2Jb\r\x07\x7f"), "a\\x1b[2Jb\\x0d\\x07\\x7f");
  EXPECT_EQ(cli::escape_control_bytes("line\n\ttab"), "line\n\ttab");
  EXPECT_EQ(cli::escape_control_bytes("caf\xc3\xa9 \xe2\x9c\x93"), "caf\xc3\xa9 \xe2\x9c\x93");
  EXPECT_EQ(cli::escape_control_bytes(std::string("nul\0x", 5)), "nul\\x00x");
}

}  // namespace
}  // namespace loom
