// The random schema generator's own checks: deterministic per seed, and every schema it
// makes is one ajv compiles and our front-end supports.
#include "random_schema.h"

#include <gtest/gtest.h>

#include "ajv_oracle.h"

namespace loom::structured::test {
namespace {

TEST(RandomSchema, DeterministicPerSeed) {
  std::mt19937_64 a(7), b(7);
  for (int i = 0; i < 20; ++i) EXPECT_EQ(random_schema(a).dump(), random_schema(b).dump());
}

TEST(RandomSchema, AjvCompilesEverySchemaAndFrontendSupportsIt) {
  std::string skip;
  const std::string modules = ajv_modules(&skip);
  std::mt19937_64 rng(3);
  std::vector<AjvCase> cases;
  for (int i = 0; i < 200; ++i) {
    nlohmann::ordered_json s = random_schema(rng);
    auto g = json_schema_to_gbnf(s);
    EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << s.dump();
    cases.push_back({s, {"null"}});
  }
  if (modules.empty()) GTEST_SKIP() << skip;
  auto v = ajv_validate(modules, cases);
  ASSERT_EQ(v.size(), cases.size());
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NE(v[i][0], -1) << cases[i].schema.dump();
}

}  // namespace
}  // namespace loom::structured::test
