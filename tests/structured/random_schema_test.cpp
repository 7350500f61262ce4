// The random schema generator's own checks: deterministic per seed, and every schema it
// makes is one ajv compiles and our front-end supports.
#include "random_schema.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

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

// Every kind of disjoint oneOf is generated often (a property test that never sees one
// cannot catch the front-end accepting or refusing it wrongly), and every one compiles.
TEST(RandomSchema, GeneratesEveryKindOfDisjointOneOf) {
  std::mt19937_64 rng(11);
  int typed = 0, values = 0, tagged = 0;
  std::function<void(const nlohmann::ordered_json&)> visit = [&](const nlohmann::ordered_json& s) {
    if (s.is_object() && s.contains("oneOf")) {
      const auto& b = s["oneOf"];
      if (std::all_of(b.begin(), b.end(), [](auto& x) {
            return x.contains("properties") && x["properties"].contains("kind");
          }))
        ++tagged;
      else if (std::all_of(b.begin(), b.end(),
                           [](auto& x) { return x.contains("const") || x.contains("enum"); }))
        ++values;
      else
        ++typed;
    }
    if (s.is_structured())
      for (const auto& k : s) visit(k);
  };
  for (int i = 0; i < 200; ++i) {
    const nlohmann::ordered_json s = random_schema(rng);
    visit(s);
    auto g = json_schema_to_gbnf(s);
    EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << s.dump();
  }
  EXPECT_GT(typed, 10);
  EXPECT_GT(values, 10);
  EXPECT_GT(tagged, 10);
  std::printf("oneOf: typed %d, value sets %d, tagged %d\n", typed, values, tagged);
}

}  // namespace
}  // namespace loom::structured::test
