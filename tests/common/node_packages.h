// Tests that drive loom through npm packages (the openai and @anthropic-ai/sdk clients, the
// ajv validator): run a shell command, and install packages once into the build directory.
// Tests skip only when node or npm is not installed.
#pragma once

#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <string>

namespace loom::test {

// Runs `cmd` through the shell; returns stdout + stderr and sets *rc to the exit status.
inline std::string run_command(const std::string& cmd, int* rc) {
  std::string out;
  FILE* p = ::popen((cmd + " 2>&1").c_str(), "r");
  if (!p) {
    *rc = -1;
    return out;
  }
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = ::pclose(p);
  *rc = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

// The node_modules directory of <build dir>/<dir_name> after installing `packages` there once
// (`probe`: a path under node_modules that exists once installed, e.g. "openai/package.json").
// "" with *skip_reason set when node or npm is missing; "" with a test failure when the
// install fails.
inline std::string npm_modules(const std::string& dir_name, const std::string& packages,
                               const std::string& probe, std::string* skip_reason) {
  int rc = 0;
  run_command("command -v node && command -v npm", &rc);
  if (rc != 0) {
    *skip_reason = "node or npm is not installed; skipping a test that needs " + packages;
    return "";
  }
  const std::filesystem::path dir = std::filesystem::path(LOOM_BINARY).parent_path() / dir_name;
  // ctest runs tests in parallel: two installs into one directory race (npm ENOTEMPTY), so the
  // check-and-install runs under a lock file beside the directory.
  const std::string probe_path = (dir / "node_modules" / probe).string();
  const std::string out =
      run_command("flock '" + dir.string() + ".lock' sh -c \"[ -e '" + probe_path +
                      "' ] || npm install --prefix '" + dir.string() + "' " + packages +
                      " --no-audit --no-fund\"",
                  &rc);
  EXPECT_EQ(rc, 0) << "npm install " << packages << " failed:\n" << out;
  if (rc != 0) return "";
  return (dir / "node_modules").string();
}

}  // namespace loom::test
