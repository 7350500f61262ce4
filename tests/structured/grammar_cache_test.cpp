// GrammarCache: a repeated schema is a cache hit (the same compiled grammar, no compile), keyed
// by grammar text and vocabulary; least recently used entries go first; failures are not cached.
#include <gtest/gtest.h>

#include <thread>

#include "frontend_test_util.h"
#include "structured/frontends.h"

namespace loom::structured::test {
namespace {

const char* kSchema = R"({"type":"object","properties":{"id":{"type":"integer"},
    "tags":{"type":"array","items":{"type":"string","maxLength":8},"maxItems":3}},
    "required":["id"],"additionalProperties":false})";

std::string schema_gbnf(const char* schema) {
  auto g = json_schema_to_gbnf(OrderedJson::parse(schema));
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  return g.is_ok() ? *g : "";
}

TEST(StructuredGrammarCache, SameSchemaTwiceIsAHit) {
  GrammarCache cache;
  // Two requests with the same schema, each parsed and converted on its own.
  auto a = cache.get(schema_gbnf(kSchema), byte_vocab());
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.stats().misses, 1u);
  auto b = cache.get(schema_gbnf(kSchema), byte_vocab());
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(cache.stats().hits, 1u);
  EXPECT_EQ(cache.stats().misses, 1u);
  EXPECT_EQ(a->get(), b->get());  // the very same compiled grammar
  EXPECT_EQ(cache.size(), 1u);
  // And it is the grammar of the schema.
  EXPECT_TRUE(accepts(*b, R"({"id":7,"tags":["x"]})"));
  EXPECT_FALSE(accepts(*b, R"({"tags":[]})"));
}

TEST(StructuredGrammarCache, KeyedByTextAndVocabulary) {
  GrammarCache cache;
  const std::string g = schema_gbnf(kSchema);
  auto a = cache.get(g, byte_vocab());
  // Another vocabulary (one more token): compiled again, a different grammar object.
  std::vector<std::string> bytes;
  for (int i = 0; i < 256; ++i) bytes.push_back(std::string(1, static_cast<char>(i)));
  bytes.push_back("{\"");
  bytes.push_back("</s>");
  std::vector<bool> special(bytes.size(), false);
  special.back() = true;
  auto other = TokenVocab::from_tokens(bytes, special, {static_cast<int32_t>(bytes.size() - 1)});
  auto b = cache.get(g, other);
  ASSERT_TRUE(a.is_ok() && b.is_ok());
  EXPECT_NE(a->get(), b->get());
  // Another schema: a miss too.
  auto c = cache.get(schema_gbnf(R"({"type":"integer"})"), byte_vocab());
  ASSERT_TRUE(c.is_ok());
  EXPECT_EQ(cache.stats().misses, 3u);
  EXPECT_EQ(cache.stats().hits, 0u);
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_FALSE(cache.get(g, nullptr).is_ok());
}

TEST(StructuredGrammarCache, LeastRecentlyUsedIsDropped) {
  GrammarCache cache(2);
  const std::string x = "root ::= \"x\"", y = "root ::= \"y\"", z = "root ::= \"z\"";
  ASSERT_TRUE(cache.get(x, byte_vocab()).is_ok());
  ASSERT_TRUE(cache.get(y, byte_vocab()).is_ok());
  ASSERT_TRUE(cache.get(x, byte_vocab()).is_ok());  // hit: x is now the most recent
  ASSERT_TRUE(cache.get(z, byte_vocab()).is_ok());  // evicts y
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_EQ(cache.stats().hits, 1u);
  ASSERT_TRUE(cache.get(x, byte_vocab()).is_ok());
  EXPECT_EQ(cache.stats().hits, 2u);
  ASSERT_TRUE(cache.get(y, byte_vocab()).is_ok());
  EXPECT_EQ(cache.stats().hits, 2u);
  EXPECT_EQ(cache.stats().misses, 4u);
}

TEST(StructuredGrammarCache, FailuresAreNotCached) {
  GrammarCache cache;
  for (int i = 0; i < 2; ++i) {
    auto r = cache.get("root ::= \"a\" root", byte_vocab());
    ASSERT_FALSE(r.is_ok());
    EXPECT_NE(r.status().message().find("can never end"), std::string::npos);
  }
  EXPECT_EQ(cache.size(), 0u);
  EXPECT_EQ(cache.stats().misses, 2u);
}

TEST(StructuredGrammarCache, ConcurrentRequestsShareOneGrammar) {
  GrammarCache cache;
  const std::string g = schema_gbnf(kSchema);
  std::vector<const CompiledGrammar*> got(4, nullptr);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = 0; i < 10; ++i) {
        auto r = cache.get(g, byte_vocab());
        if (r.is_ok()) got[t] = r->get();
      }
    });
  for (auto& t : threads) t.join();
  for (int t = 0; t < 4; ++t) EXPECT_EQ(got[t], got[0]);
  EXPECT_EQ(cache.size(), 1u);
  EXPECT_EQ(cache.stats().hits + cache.stats().misses, 40u);
  EXPECT_GE(cache.stats().hits, 36u);  // at most one compile per thread racing the first
}

}  // namespace
}  // namespace loom::structured::test
