// `loom bench structured` as the issue names it: one row per grammar with `grammar`,
// `compile_ms`, `mask_us_median` and `mask_us_p99`, as a table or with `-o json`, on the real
// Qwen3 vocabulary (a short walk: the figures themselves are measured in docs/benchmarks.md).
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <string>

namespace loom {
namespace {

std::string run_loom(const std::string& args, int* code) {
  const std::string cmd = std::string(LOOM_BINARY) + " " + args + " 2>&1";
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  if (!p) return out;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) out.append(buf, n);
  const int st = pclose(p);
  *code = WIFEXITED(st) ? WEXITSTATUS(st) : -1;
  return out;
}

const std::string kTokenizer =
    (std::filesystem::path(LOOM_TEST_DATA) / "hf_tokenizers/qwen3").string();

TEST(StructuredBenchCli, JsonRowsNameEveryGrammarWithItsFigures) {
  int code = -1;
  const std::string out = run_loom(
      "bench structured --tokenizer " + kTokenizer + " -o json --documents 2 --max-steps 12",
      &code);
  ASSERT_EQ(code, 0) << out;
  // The log goes to stderr; the JSON array is the rest.
  const auto j = nlohmann::json::parse(out.substr(out.find('[')), nullptr, false);
  ASSERT_TRUE(j.is_array()) << out;
  std::vector<std::string> names;
  for (const auto& row : j) {
    names.push_back(row["grammar"]);
    for (const char* k : {"compile_ms", "mask_us_median", "mask_us_p99"}) {
      ASSERT_TRUE(row[k].is_number()) << k << " in " << row.dump();
      EXPECT_GT(row[k].get<double>(), 0.0) << k << " in " << row.dump();
    }
    EXPECT_LE(row["mask_us_median"].get<double>(), row["mask_us_p99"].get<double>()) << row.dump();
    EXPECT_GE(row["steps"].get<int>(), 1) << row.dump();
    EXPECT_LE(row["steps"].get<int>(), 2 * 12) << row.dump();
  }
  const std::vector<std::string> expected = {"json_schema_nested", "json_object", "regex",
                                             "gbnf_arithmetic", "json_schema_fresh"};
  EXPECT_EQ(names, expected);
}

TEST(StructuredBenchCli, TableHeaderAndErrors) {
  int code = -1;
  std::string out = run_loom(
      "bench structured --tokenizer " + kTokenizer + " --documents 1 --max-steps 4", &code);
  ASSERT_EQ(code, 0) << out;
  EXPECT_NE(out.find("grammar"), std::string::npos) << out;
  for (const char* col : {"compile_ms", "mask_us_median", "mask_us_p99", "json_object"})
    EXPECT_NE(out.find(col), std::string::npos) << col << "\n" << out;
  out = run_loom("bench structured", &code);
  EXPECT_NE(code, 0) << out;
  EXPECT_NE(out.find("--tokenizer"), std::string::npos) << out;
  out = run_loom("bench structured --tokenizer /nonexistent/tok", &code);
  EXPECT_NE(code, 0) << out;
}

}  // namespace
}  // namespace loom
