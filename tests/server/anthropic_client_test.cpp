// The official `@anthropic-ai/sdk` npm client against a real loom server: the test installs the
// package into the build directory (once) and runs tests/server/anthropic_client.js with node.
// Skips only when node or npm is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "server_fixture.h"

namespace loom::test {
namespace {

std::string run_command(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  int st = ::pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

TEST(ServerNodeClient, OfficialAnthropicPackage) {
  int rc = 0;
  run_command("command -v node && command -v npm", &rc);
  if (rc != 0)
    GTEST_SKIP() << "node or npm is not installed; skipping the @anthropic-ai/sdk client test";
  // Installed next to the loom binary, i.e. in the build directory.
  const std::filesystem::path dir =
      std::filesystem::path(LOOM_BINARY).parent_path() / "node_anthropic";
  if (!std::filesystem::exists(dir / "node_modules" / "@anthropic-ai" / "sdk" / "package.json")) {
    std::string out = run_command(
        "npm install --prefix '" + dir.string() + "' @anthropic-ai/sdk@1 --no-audit --no-fund",
        &rc);
    ASSERT_EQ(rc, 0) << "npm install @anthropic-ai/sdk failed:\n" << out;
  }
  server::ServerOptions so;
  so.api_key = "node-key";
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/server/anthropic_client.js";
  std::string out =
      run_command("NODE_PATH='" + (dir / "node_modules").string() + "' node '" + script + "' " +
                      std::to_string(s->port()) + " " + kTestModelName + " node-key " +
                      std::to_string(kTestMaxModelLen),
                  &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find("ANTHROPIC_CLIENT_OK"), std::string::npos) << out;
  s->stop();
}

}  // namespace
}  // namespace loom::test
