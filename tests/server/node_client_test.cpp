// The official `openai` npm client against a real loom server: the test installs the package
// into the build directory (once) and runs tests/server/openai_client.js with node. Skips only
// when node or npm is not installed.
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>

#include "server_fixture.h"

namespace loom::test {
namespace {

std::string run(const std::string& cmd, int* rc) {
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

// Runs tests/server/<script> against a fresh server; expects `marker` in its output.
void run_openai_script(const char* script_name, const char* marker) {
  int rc = 0;
  run("command -v node && command -v npm", &rc);
  if (rc != 0) GTEST_SKIP() << "node or npm is not installed; skipping the openai npm client test";
  // Installed next to the loom binary, i.e. in the build directory.
  const std::filesystem::path dir = std::filesystem::path(LOOM_BINARY).parent_path() / "node_openai";
  if (!std::filesystem::exists(dir / "node_modules" / "openai" / "package.json")) {
    std::string out = run("npm install --prefix '" + dir.string() + "' openai@6 --no-audit --no-fund", &rc);
    ASSERT_EQ(rc, 0) << "npm install openai failed:\n" << out;
  }
  server::ServerOptions so;
  so.api_key = "node-key";
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/server/" + script_name;
  std::string out = run("NODE_PATH='" + (dir / "node_modules").string() + "' node '" + script + "' " +
                            std::to_string(s->port()) + " " + kTestModelName + " node-key",
                        &rc);
  EXPECT_EQ(rc, 0) << out;
  EXPECT_NE(out.find(marker), std::string::npos) << out;
  s->stop();
}

TEST(ServerNodeClient, OfficialOpenAiPackage) { run_openai_script("openai_client.js", "OPENAI_CLIENT_OK"); }

// Structured outputs and tools through the SDK (response_format, tool_choice, streamed calls).
TEST(ServerNodeClient, OfficialOpenAiPackageToolsAndSchemas) {
  run_openai_script("openai_tools_client.js", "OPENAI_TOOLS_CLIENT_OK");
}

}  // namespace
}  // namespace loom::test
