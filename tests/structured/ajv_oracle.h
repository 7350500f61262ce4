// ajv (with ajv-formats) through node as the independent JSON Schema validator. Installed once
// into the build directory; tests skip only when node or npm is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace loom::structured::test {

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

// The node_modules directory holding ajv, or "" (with *skip_reason set) when unavailable.
inline std::string ajv_modules(std::string* skip_reason) {
  int rc = 0;
  run_command("command -v node && command -v npm", &rc);
  if (rc != 0) {
    *skip_reason = "node or npm is not installed; skipping the ajv oracle";
    return "";
  }
  const std::filesystem::path dir = std::filesystem::path(LOOM_BINARY).parent_path() / "node_ajv";
  if (!std::filesystem::exists(dir / "node_modules" / "ajv-formats" / "package.json")) {
    std::string out = run_command("npm install --prefix '" + dir.string() +
                                      "' ajv@8 ajv-formats@3 --no-audit --no-fund",
                                  &rc);
    EXPECT_EQ(rc, 0) << "npm install ajv failed:\n" << out;
    if (rc != 0) return "";
  }
  return (dir / "node_modules").string();
}

struct AjvCase {
  nlohmann::ordered_json schema;
  std::vector<std::string> instances;  // JSON texts
};

// Per case, per instance: 1 valid, 0 invalid, -1 ajv refused the schema. Empty on failure.
inline std::vector<std::vector<int>> ajv_validate(const std::string& modules, const std::vector<AjvCase>& cases) {
  nlohmann::ordered_json in = nlohmann::ordered_json::array();
  for (const AjvCase& c : cases) in.push_back({{"schema", c.schema}, {"instances", c.instances}});
  const std::string path = ::testing::TempDir() + "/loom_ajv_cases_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << in.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  int rc = 0;
  const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/structured/validate_json.js";
  std::string out = run_command("NODE_PATH='" + modules + "' node '" + script + "' '" + path + "'", &rc);
  std::filesystem::remove(path);
  EXPECT_EQ(rc, 0) << out;
  std::vector<std::vector<int>> result;
  if (rc != 0) return result;
  auto j = nlohmann::json::parse(out, nullptr, false);
  if (j.is_discarded()) {
    ADD_FAILURE() << "ajv output is not JSON: " << out.substr(0, 500);
    return result;
  }
  for (const auto& c : j) {
    std::vector<int> r;
    for (const auto& v : c) r.push_back(v.is_boolean() ? (v.get<bool>() ? 1 : 0) : -1);
    result.push_back(r);
  }
  return result;
}

}  // namespace loom::structured::test
