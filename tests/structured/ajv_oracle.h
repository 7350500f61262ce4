// ajv (with ajv-formats) through node as the independent JSON Schema validator. Installed once
// into the build directory; tests skip only when node or npm is missing.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/node_packages.h"

namespace loom::structured::test {

using loom::test::run_command;

// The node_modules directory holding ajv, or "" (with *skip_reason set) when unavailable.
inline std::string ajv_modules(std::string* skip_reason) {
  return loom::test::npm_modules("node_ajv", "ajv@8 ajv-formats@3", "ajv-formats/package.json",
                                 skip_reason);
}

struct AjvCase {
  nlohmann::ordered_json schema;
  std::vector<std::string> instances;  // JSON texts
};

// Per case, per instance: 1 valid, 0 invalid, -1 ajv refused the schema. Empty on failure.
inline std::vector<std::vector<int>> ajv_validate(const std::string& modules,
                                                  const std::vector<AjvCase>& cases) {
  nlohmann::ordered_json in = nlohmann::ordered_json::array();
  for (const AjvCase& c : cases) in.push_back({{"schema", c.schema}, {"instances", c.instances}});
  const std::string path =
      ::testing::TempDir() + "/loom_ajv_cases_" + std::to_string(::getpid()) + ".json";
  std::ofstream(path) << in.dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
  int rc = 0;
  const std::string script = std::string(LOOM_SOURCE_DIR) + "/tests/structured/validate_json.js";
  std::string out =
      run_command("NODE_PATH='" + modules + "' node '" + script + "' '" + path + "'", &rc);
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
