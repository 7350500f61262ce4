// Fail closed: every unsupported keyword, format or regex feature, and every invalid schema,
// is an error that names it.
#include <gtest/gtest.h>

#include "structured/frontends.h"

namespace loom::structured {
namespace {

std::string schema_error(const char* schema) {
  auto r = json_schema_to_gbnf(OrderedJson::parse(schema));
  EXPECT_FALSE(r.is_ok()) << schema;
  return r.is_ok() ? "" : r.status().message();
}

TEST(FrontendErrors, UnsupportedKeywordsAreNamedWithTheirPointer) {
  for (const char* k : {"multipleOf", "uniqueItems", "patternProperties", "not", "if",
                        "minProperties", "maxProperties", "contains", "propertyNames",
                        "unevaluatedProperties", "dependentRequired"}) {
    const std::string schema =
        std::string(R"({"type":"object","properties":{"a b":{"type":"integer",")") + k +
        R"(":1}}})";
    const std::string msg = schema_error(schema.c_str());
    EXPECT_NE(
        msg.find(std::string("unsupported JSON Schema keyword '") + k + "' at /properties/a b"),
        std::string::npos)
        << msg;
  }
  EXPECT_NE(schema_error(R"({"items":{"x-custom":1}})").find("'x-custom' at /items"),
            std::string::npos);
}

TEST(FrontendErrors, InvalidSchemas) {
  EXPECT_NE(schema_error(R"({"type":5})").find("'type'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"strin"})").find("unknown type 'strin'"), std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"object","required":"a"})").find("'required'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"#/$defs/missing"})").find("points to no definition"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"$ref":"http://x/y.json"})").find("not a local reference"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"number","minimum":0})").find("'minimum' on type 'number'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"string","format":"hostname"})").find("format 'hostname'"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"string","minLength":5,"maxLength":2})").find("minLength"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"integer","minimum":5,"maximum":2})").find("admit no value"),
            std::string::npos);
  EXPECT_NE(schema_error(R"({"type":"string","pattern":"(a)\\1"})").find("backreferences"),
            std::string::npos);
  EXPECT_NE(
      schema_error(
          R"({"type":"object","properties":{},"required":["x"],"additionalProperties":false})")
          .find("required property 'x'"),
      std::string::npos);
  EXPECT_NE(schema_error(R"({"allOf":[{"type":"string","pattern":"a"},{"pattern":"b"}]})")
                .find("cannot merge 'pattern'"),
            std::string::npos);
  EXPECT_NE(schema_error("false").find("admits no value"), std::string::npos);
  EXPECT_NE(schema_error(R"({"enum":[1],"minimum":0})").find("'minimum' combined with 'enum'"),
            std::string::npos);
}

TEST(FrontendErrors, AnnotationsAreIgnored) {
  auto r = json_schema_to_gbnf(OrderedJson::parse(
      R"({"$schema":"x","$id":"y","title":"t","description":"d","default":1,"examples":[1],"$comment":"c",
          "deprecated":true,"readOnly":true,"writeOnly":false,"type":"integer"})"));
  EXPECT_TRUE(r.is_ok()) << r.status().message();
}

TEST(FrontendErrors, RegexFeaturesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {"(a)\\1", "backreferences"},
      {"a(?=b)", "lookahead"},
      {"(?<=a)b", "lookbehind"},
      {"\\bword", "word boundary"},
      {"a++", "possessive"},
      {"\\p{L}", "unicode property"},
      {"(?i)a", "inline flags"},
      {"a^b", "anchor '^'"},
      {"a$b", "anchor '$'"},
      {"(?>a)", "atomic"},
      {"[[:alpha:]]", "POSIX"},
      {"a{2", "lone '{'"},
      {"[]a]", "']'-first"},
      {"a**", "nothing to repeat"},
      {"(a", "missing ')'"},
      {"a)", "unbalanced ')'"},
      {"\\k<n>", "named backreferences"},
      {"[b-a]", "out of order"},
  };
  for (auto [pattern, what] : cases) {
    auto r = regex_to_gbnf(pattern);
    ASSERT_FALSE(r.is_ok()) << pattern;
    EXPECT_NE(r.status().message().find(what), std::string::npos)
        << pattern << ": " << r.status().message();
  }
}

TEST(FrontendErrors, ChoiceAndTextWithout) {
  EXPECT_FALSE(choice_to_gbnf({}).is_ok());
  GbnfBuilder b;
  EXPECT_FALSE(add_text_without(b, {""}, "t").is_ok());
  EXPECT_FALSE(structural_tag_to_gbnf({{"<x>", OrderedJson::object(), "</x>"}}, {"<y"}).is_ok());
}

}  // namespace
}  // namespace loom::structured
