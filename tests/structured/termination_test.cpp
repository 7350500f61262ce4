// Grammars and schemas that can never end are refused when compiled (not accepted and then
// stopped only by "length"); a rule that cannot end but is avoidable only kills the
// alternatives that use it, and the matcher never offers them.
#include <gtest/gtest.h>

#include "frontend_test_util.h"
#include "structured/frontends.h"

namespace loom::structured::test {
namespace {

std::string gbnf_error(const std::string& gbnf) {
  auto g = parse_gbnf(gbnf);
  EXPECT_FALSE(g.is_ok()) << gbnf;
  return g.is_ok() ? "" : g.status().message();
}

TEST(StructuredTermination, GbnfRootThatCannotEndIsRefused) {
  std::string msg = gbnf_error("root ::= \"a\" root\n");
  EXPECT_NE(msg.find("can never end"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'root'"), std::string::npos) << msg;
  // Through other rules, and in every alternative: the culprits are named.
  msg = gbnf_error("root ::= x | \"b\" y\nx ::= \"(\" x \")\"\ny ::= x+ \"c\"\n");
  EXPECT_NE(msg.find("can never end"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'x'"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'y'"), std::string::npos) << msg;
  // A mandatory repetition of a rule that cannot end cannot end either.
  msg = gbnf_error("root ::= item{2,5}\nitem ::= \"[\" item \"]\"\n");
  EXPECT_NE(msg.find("can never end"), std::string::npos) << msg;
}

TEST(StructuredTermination, GbnfRecursionWithAnExitIsAccepted) {
  for (const char* gbnf :
       {"root ::= \"(\" root \")\" | \"a\"\n",
        "root ::= x\nx ::= \"[\" x* \"]\"\n",  // x* may be empty
        "root ::= x\nx ::= \"a\" y | \"b\"\ny ::= \"c\" x\n", "root ::= (\"a\" root)?\n"}) {
    auto g = compile(gbnf);
    ASSERT_TRUE(g) << gbnf;
    std::mt19937_64 rng(1);
    for (int i = 0; i < 20; ++i) {
      std::string s;
      EXPECT_TRUE(random_sentence(g, rng, &s, 0.3, 5000)) << gbnf << " walked to '" << s << "'";
    }
  }
}

TEST(StructuredTermination, DeadAlternativesAreNeverOffered) {
  // "b" x can never end: x only recurses. The grammar is accepted (root can end through "a"),
  // and a matcher does not even accept the "b".
  auto g = compile("root ::= \"a\"+ | \"b\" x\nx ::= \"c\" x\n");
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, "aaa"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept_bytes("b"));
  std::vector<uint32_t> words(bitmask_words(byte_vocab()->size()));
  m.fill_next_token_bitmask(words);
  for (int32_t t = 0; t < 256; ++t)
    EXPECT_EQ((words[t / 32] >> (t % 32)) & 1, t == 'a' ? 1u : 0u) << "byte " << t;
  // Deeper: a dead branch one call below the root, after a shared prefix.
  auto h = compile("root ::= \"k\" v\nv ::= \"=\" [0-9]+ | \"=\" w\nw ::= \"(\" w \")\"\n");
  ASSERT_TRUE(h);
  GrammarMatcher n(h);
  EXPECT_TRUE(n.accept_bytes("k="));
  EXPECT_FALSE(n.accept_bytes("("));
  EXPECT_TRUE(n.accept_bytes("12"));
  EXPECT_TRUE(n.can_end());
  std::mt19937_64 rng(5);
  for (int i = 0; i < 50; ++i) {
    std::string s;
    EXPECT_TRUE(random_sentence(h, rng, &s, 0.3, 1000)) << s;
  }
}

TEST(StructuredTermination, RegexesAlwaysEnd) {
  for (const char* re : {"a*", "(a|b)+c?", "((ab)*|c)+", "", "x(y(z)*)*", "[0-9]{2,}", ".*?"}) {
    auto text = regex_to_gbnf(re);
    ASSERT_TRUE(text.is_ok()) << re << ": " << text.status().message();
    auto g = compile(*text);
    ASSERT_TRUE(g) << re;
    std::mt19937_64 rng(9);
    for (int i = 0; i < 20; ++i) {
      std::string s;
      EXPECT_TRUE(random_sentence(g, rng, &s, 0.3, 2000)) << re;
    }
  }
}

std::string schema_error(const char* schema) {
  auto r = json_schema_to_gbnf(OrderedJson::parse(schema));
  EXPECT_FALSE(r.is_ok()) << schema;
  return r.is_ok() ? "" : r.status().message();
}

TEST(StructuredTermination, SchemaWithRequiredRecursionIsRefused) {
  // The root requires a property that $refs the root.
  std::string msg =
      schema_error(R"({"type":"object","properties":{"next":{"$ref":"#"}},"required":["next"]})");
  EXPECT_NE(msg.find("no finite instance"), std::string::npos) << msg;
  EXPECT_NE(msg.find("'#'"), std::string::npos) << msg;
  // Through $defs, an array that must hold at least one node, and a oneOf-free anyOf whose
  // branches both recurse.
  msg = schema_error(R"({"$ref":"#/$defs/n","$defs":{"n":{"type":"object","properties":{
      "kids":{"type":"array","items":{"$ref":"#/$defs/n"},"minItems":1}},"required":["kids"]}}})");
  EXPECT_NE(msg.find("'#/$defs/n'"), std::string::npos) << msg;
  msg =
      schema_error(R"({"$defs":{"t":{"anyOf":[{"type":"array","prefixItems":[{"$ref":"#/$defs/t"}],
      "minItems":1},{"type":"object","properties":{"t":{"$ref":"#/$defs/t"}},"required":["t"]}]}},
      "$ref":"#/$defs/t"})");
  EXPECT_NE(msg.find("no finite instance"), std::string::npos) << msg;
}

TEST(StructuredTermination, SchemaWithAvoidableRecursionIsAccepted) {
  // Optional recursion: ends.
  auto ok = json_schema_to_gbnf(OrderedJson::parse(
      R"({"type":"object","properties":{"next":{"$ref":"#"},"v":{"type":"integer"}},
          "required":["v"],"additionalProperties":false})"));
  EXPECT_TRUE(ok.is_ok()) << ok.status().message();
  // An optional property whose schema can never end: the schema is usable, the property dead.
  auto text = json_schema_to_gbnf(OrderedJson::parse(
      R"({"type":"object","properties":{"bad":{"$ref":"#/$defs/b"},"v":{"type":"boolean"}},
          "required":["v"],"additionalProperties":false,
          "$defs":{"b":{"type":"object","properties":{"x":{"$ref":"#/$defs/b"}},"required":["x"]}}})"));
  ASSERT_TRUE(text.is_ok()) << text.status().message();
  auto g = compile(*text);
  ASSERT_TRUE(g);
  EXPECT_TRUE(accepts(g, R"({"v":true})"));
  GrammarMatcher m(g);
  EXPECT_FALSE(m.accept_bytes(R"({"b)"));
  std::mt19937_64 rng(3);
  for (int i = 0; i < 30; ++i) {
    std::string s;
    ASSERT_TRUE(random_sentence(g, rng, &s, 0.3, 2000)) << s;
    EXPECT_EQ(s.find("bad"), std::string::npos) << s;
  }
}

}  // namespace
}  // namespace loom::structured::test
