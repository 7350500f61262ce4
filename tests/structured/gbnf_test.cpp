// GBNF parsing: syntax, escapes, repetitions, and the errors a user sees.
#include <gtest/gtest.h>

#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::structured {
namespace {

// Whether `text` is a full sentence of the grammar.
bool matches(const std::string& gbnf, const std::string& text) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message();
  if (!g.is_ok()) return false;
  auto vocab = TokenVocab::from_tokens({"x"}, {false}, {});
  GrammarMatcher m(*CompiledGrammar::create(*g, vocab));
  return m.accept_bytes(text) && m.can_end();
}

std::string error_of(const std::string& gbnf) {
  auto g = parse_gbnf(gbnf);
  EXPECT_FALSE(g.is_ok()) << gbnf;
  return g.is_ok() ? "" : g.status().message();
}

TEST(Gbnf, ParsesBasics) {
  auto g = parse_gbnf("root ::= \"a\" [b-d]* (\"x\" | \"y\")+ . x?\nx ::= [^\\n]{2,3}\n");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
}

TEST(Gbnf, Escapes) {
  EXPECT_TRUE(
      matches(R"(root ::= "\x41\u00e9\U0001F600\n\t\\\"")", "A\xC3\xA9\xF0\x9F\x98\x80\n\t\\\""));
  EXPECT_TRUE(matches(R"(root ::= [\x00-\x1F\]\-]+)", "\x01]-\x1F"));
  EXPECT_FALSE(matches(R"(root ::= [\x00-\x1F\]\-]+)", "a"));
  EXPECT_TRUE(matches("root ::= \"é\" [à-ü]", "\xC3\xA9\xC3\xBC"));  // UTF-8 in the grammar text
}

TEST(Gbnf, Repetitions) {
  const std::string g = "root ::= \"a\"{2} \"b\"{1,} \"c\"{,2} \"d\"{0,3}";
  EXPECT_TRUE(matches(g, "aab"));
  EXPECT_TRUE(matches(g, "aabbbccddd"));
  EXPECT_FALSE(matches(g, "ab"));
  EXPECT_FALSE(matches(g, "aabccc"));
  EXPECT_FALSE(matches(g, "aabdddd"));
}

TEST(Gbnf, CommentsNewlinesAndContinuations) {
  const std::string g = R"(
# a comment
root ::= item ( # a comment inside a group
    "," item
  )*
item ::= "x"
  | "y"   # continued alternative on the next line
)";
  EXPECT_TRUE(matches(g, "x,y,x"));
  EXPECT_FALSE(matches(g, "x,,y"));
}

TEST(Gbnf, Errors) {
  EXPECT_NE(error_of("root ::= foo").find("undefined rule 'foo'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\n\nx ::= y").find("line 3"), std::string::npos);
  EXPECT_NE(error_of("root ::= (\"a\"").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\")").find("unbalanced"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\\q\"").find("bad escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"\\xZZ\"").find("bad escape"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"abc").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("root ::= [abc").find("unterminated"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"{3,1}").find("n < m"), std::string::npos);
  EXPECT_NE(error_of("start ::= \"a\"").find("no rule 'root'"), std::string::npos);
  EXPECT_NE(error_of("root ::= \"a\"\nroot ::= \"b\"").find("defined twice"), std::string::npos);
  EXPECT_NE(error_of("root ::= root \"a\" | \"b\"").find("left recursion"), std::string::npos);
  // Indirect, through a nullable prefix.
  EXPECT_NE(
      error_of("root ::= e\ne ::= n t\nn ::= \"-\"?\nt ::= e \"+\" | \"1\"").find("left recursion"),
      std::string::npos);
  EXPECT_NE(error_of("root ::= = \"a\"").find("line 1"), std::string::npos);
}

// llama.cpp's json.gbnf shape, written here from the JSON grammar (RFC 8259).
constexpr const char* kJson = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4})
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
ws ::= | " " | "\n" [ \t]{0,20}
)";

TEST(Gbnf, JsonGrammar) {
  EXPECT_TRUE(matches(kJson, R"({"a": [1, 2.5e+3, "x\u00e9\n", {"b": null}], "c": true})"));
  EXPECT_TRUE(matches(kJson, "{\"k\": \"\xE6\x97\xA5\xE6\x9C\xAC\"}"));
  EXPECT_FALSE(matches(kJson, R"({"a": [1, 2,]})"));
  EXPECT_FALSE(matches(kJson, R"({"a": "\q"})"));
  EXPECT_FALSE(matches(kJson, R"([1])"));             // root is an object
  EXPECT_FALSE(matches(kJson, "{\"a\": \"x\ty\"}"));  // raw control character
}

constexpr const char* kArithmetic = R"gbnf(
root  ::= (expr "=" ws term "\n")+
expr  ::= term ([-+*/] term)*
term  ::= ident | num | "(" ws expr ")" ws
ident ::= [a-z] [a-z0-9_]* ws
num   ::= [0-9]+ ws
ws    ::= [ \t\n]*
)gbnf";

TEST(Gbnf, ArithmeticGrammar) {
  EXPECT_TRUE(matches(kArithmetic, "(a+1)*b= 42\nx_1/2 =y\n"));
  EXPECT_TRUE(matches(kArithmetic, "((((1))))=2\n"));
  EXPECT_FALSE(matches(kArithmetic, "(a+1=2\n"));
  EXPECT_FALSE(matches(kArithmetic, "a+=2\n"));
  EXPECT_FALSE(matches(kArithmetic, "1=2"));  // missing the final newline
}

}  // namespace
}  // namespace loom::structured
