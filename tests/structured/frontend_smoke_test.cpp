// Hand-written cases for every front-end: the GBNF parses, and chosen strings are accepted or
// rejected exactly.
#include <gtest/gtest.h>

#include "frontend_test_util.h"
#include "structured/frontends.h"

namespace loom::structured::test {
namespace {

std::shared_ptr<const CompiledGrammar> schema_grammar(const char* schema,
                                                      JsonGrammarOptions o = {}) {
  auto text = json_schema_to_gbnf(OrderedJson::parse(schema), o);
  EXPECT_TRUE(text.is_ok()) << text.status().message();
  if (!text) return nullptr;
  return compile(*text);
}

TEST(FrontendSmoke, ObjectPropertiesInOrder) {
  auto g = schema_grammar(
      R"({"type":"object","properties":{"a":{"type":"integer"},"b":{"type":"string"}},
                              "required":["a"],"additionalProperties":false})");
  EXPECT_TRUE(accepts(g, R"({"a":1})"));
  EXPECT_TRUE(accepts(g, R"({"a":-12,"b":"x\"y\u00e9"})"));
  EXPECT_FALSE(accepts(g, R"({"b":"x"})"));
  EXPECT_FALSE(accepts(g, R"({"b":"x","a":1})"));
  EXPECT_FALSE(accepts(g, R"({"a":1,"c":2})"));
  EXPECT_FALSE(accepts(g, R"({"a":01})"));
  EXPECT_FALSE(accepts(g, R"({ "a":1})"));
}

TEST(FrontendSmoke, TextWithout) {
  GbnfBuilder b;
  auto r = add_text_without(b, {"<tool>", "ab"}, "root");
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto g = compile(b.str());
  EXPECT_TRUE(accepts(g, ""));
  EXPECT_TRUE(accepts(g, "hello <too"));
  EXPECT_TRUE(accepts(g, "a"));
  EXPECT_TRUE(accepts(g, "ba<<tool <toolx"));
  EXPECT_FALSE(accepts(g, "x<tool>"));
  EXPECT_FALSE(accepts(g, "cab"));
  EXPECT_FALSE(accepts(g, "<<tool>"));
}

TEST(FrontendSmoke, IntegerRangesExhaustive) {
  // Every bound pair in a window, every value near it: accepted iff inside.
  const int kBounds[] = {-1001, -100, -99, -10, -9, -1, 0, 1, 9, 10, 99, 100, 101, 999, 1000};
  for (int lo : kBounds) {
    for (int hi : kBounds) {
      if (lo > hi) continue;
      const std::string schema = "{\"type\":\"integer\",\"minimum\":" + std::to_string(lo) +
                                 ",\"maximum\":" + std::to_string(hi) + "}";
      auto g = schema_grammar(schema.c_str());
      for (int v = -1100; v <= 1100; v += (v > -120 && v < 120) ? 1 : 7)
        ASSERT_EQ(accepts(g, std::to_string(v)), v >= lo && v <= hi) << schema << " " << v;
      EXPECT_FALSE(accepts(g, "-0"));
      EXPECT_FALSE(accepts(g, "01"));
    }
  }
  auto g = schema_grammar(R"({"type":"integer","exclusiveMinimum":-5})",
                          JsonGrammarOptions{.max_number_digits = 4});
  EXPECT_TRUE(accepts(g, "-4"));
  EXPECT_TRUE(accepts(g, "9999"));
  EXPECT_FALSE(accepts(g, "10000"));  // the digit cap
  EXPECT_FALSE(accepts(g, "-5"));
}

TEST(FrontendSmoke, FormatsAndStrings) {
  auto date = schema_grammar(R"({"type":"string","format":"date"})");
  EXPECT_TRUE(accepts(date, R"("2024-02-29")"));
  EXPECT_TRUE(accepts(date, R"("2000-02-29")"));
  EXPECT_FALSE(accepts(date, R"("1900-02-29")"));
  EXPECT_FALSE(accepts(date, R"("2023-04-31")"));
  auto len = schema_grammar(R"({"type":"string","minLength":2,"maxLength":3})");
  EXPECT_TRUE(accepts(len, "\"\xf0\x9f\x98\x80\\n\""));  // two characters: emoji, escape
  EXPECT_TRUE(accepts(len, R"("\ud83d\ude00ab")"));      // a surrogate pair is one
  EXPECT_FALSE(accepts(len, R"("abcd")"));
  EXPECT_FALSE(accepts(len, "\"a\nb\""));  // raw control character
  auto pat = schema_grammar(R"({"type":"string","pattern":"^[\"\\\\]x\\n$"})");
  EXPECT_TRUE(accepts(pat, R"("\"x\n")"));
  EXPECT_TRUE(accepts(pat, R"("\\x\n")"));
}

TEST(FrontendSmoke, RefsRecursionAndAdditional) {
  auto g = schema_grammar(R"({"$defs":{"n":{"type":"object","properties":{"v":{"type":"integer"},
      "k":{"type":"array","items":{"$ref":"#/$defs/n"}}},"required":["v"],"additionalProperties":false}},
      "$ref":"#/$defs/n"})");
  EXPECT_TRUE(accepts(g, R"({"v":1,"k":[{"v":2},{"v":3,"k":[]}]})"));
  EXPECT_FALSE(accepts(g, R"({"v":1,"k":[{}]})"));
  auto extra = schema_grammar(
      R"({"type":"object","properties":{"a":{"type":"string"}},"additionalProperties":{"type":"integer"}})");
  EXPECT_TRUE(accepts(extra, R"({"a":"x","b":1,"ab":2})"));
  EXPECT_TRUE(accepts(extra, R"({"b":1})"));
  EXPECT_FALSE(accepts(extra, R"({"a":"x","a":1})"));  // an extra member may not shadow "a"
  EXPECT_FALSE(accepts(extra, R"({"b":"x"})"));
}

TEST(FrontendSmoke, ChoiceAnyJsonAndStructuralTag) {
  auto c = choice_to_gbnf({"yes", "no", "n\"o"});
  ASSERT_TRUE(c.is_ok());
  auto cg = compile(*c);
  EXPECT_TRUE(accepts(cg, "no"));
  EXPECT_TRUE(accepts(cg, "n\"o"));
  EXPECT_FALSE(accepts(cg, "n"));
  auto any = compile(any_json_object_gbnf());
  EXPECT_TRUE(accepts(any, R"({"a":[1,{"b":null}],"c":-1.5e3})"));
  EXPECT_FALSE(accepts(any, R"([1])"));
  auto tag = structural_tag_to_gbnf(
      {{"<function=get>",
        OrderedJson::parse(
            R"({"type":"object","properties":{"q":{"type":"string"}},"required":["q"],"additionalProperties":false})"),
        "</function>"}},
      {"<function="});
  ASSERT_TRUE(tag.is_ok()) << tag.status().message();
  auto tg = compile(*tag);
  EXPECT_TRUE(accepts(tg, "hi <funct"));
  EXPECT_TRUE(accepts(tg, R"(ok <function=get>{"q":"x"}</function> done)"));
  EXPECT_FALSE(accepts(tg, R"(<function=put>{"q":"x"}</function>)"));
  EXPECT_FALSE(accepts(tg, R"(<function=get>{"q":1}</function>)"));
}

}  // namespace
}  // namespace loom::structured::test
