// oneOf: accepted only when no value can match two branches. Accepted cases: documents walked
// from the grammar validate under ajv (which enforces "exactly one"). Refused cases: the
// error names oneOf and the overlap, and ajv confirms the overlap is real (a witness value
// matches both branches), so the refusals are not just caution on disjoint schemas.
#include <gtest/gtest.h>

#include "ajv_oracle.h"
#include "frontend_test_util.h"
#include "structured/frontends.h"

namespace loom::structured::test {
namespace {

using Json = nlohmann::ordered_json;

const char* kDisjoint[] = {
    R"({"oneOf":[{"type":"integer"},{"type":"string","maxLength":3}]})",
    R"({"oneOf":[{"type":["null","boolean"]},{"type":"array","maxItems":2},{"type":"number"}]})",
    R"({"oneOf":[{"const":"a"},{"enum":["b","c",1]},{"const":{"k":[1,2]}}]})",
    R"({"oneOf":[{"const":1},{"type":"string","maxLength":2},{"type":"null"}]})",
    R"({"oneOf":[{"type":"integer","nullable":true},{"type":"string","maxLength":2}]})",
    // Pydantic's discriminated union: $refs into $defs, a typed const tag, "discriminator".
    R"({"oneOf":[{"$ref":"#/$defs/Cat"},{"$ref":"#/$defs/Dog"}],
        "discriminator":{"propertyName":"pet_type","mapping":{"cat":"#/$defs/Cat","dog":"#/$defs/Dog"}},
        "$defs":{"Cat":{"type":"object","title":"Cat","properties":{
                   "pet_type":{"const":"cat","title":"Pet Type","type":"string"},
                   "meows":{"type":"integer","minimum":0,"maximum":9}},
                 "required":["pet_type","meows"]},
                 "Dog":{"type":"object","title":"Dog","properties":{
                   "pet_type":{"enum":["dog"],"type":"string"},
                   "barks":{"type":"number"}},"required":["pet_type"]}}})",
    // The tag through a $ref, and the shared type from the sibling keyword.
    R"({"type":"object","oneOf":[
          {"properties":{"k":{"$ref":"#/$defs/a"},"x":{"type":"integer"}},"required":["k"]},
          {"properties":{"k":{"const":"b"}},"required":["k"],"additionalProperties":false}],
        "$defs":{"a":{"const":"a"}}})",
    // allOf narrows a branch: its integer part makes it disjoint from the string.
    R"({"oneOf":[{"allOf":[{"type":["integer","string"]},{"type":"integer"}]},{"type":"string"}]})",
    // A false branch admits nothing and overlaps nothing.
    R"({"oneOf":[false,{"type":"string"},{"type":"integer"}]})",
};

struct Overlap {
  const char* schema;
  const char* witness;  // a value matching two branches
  int i, k;             // the branches the error must name
};

const Overlap kOverlapping[] = {
    {R"({"oneOf":[{"type":"integer"},{"type":"number"}]})", "1", 0, 1},
    {R"({"oneOf":[{"type":"string"},{"minLength":1}]})", "\"ab\"", 0, 1},  // no type: any
    {R"({"oneOf":[{"enum":[1,2]},{"enum":[2,3]}]})", "2", 0, 1},
    {R"({"oneOf":[{"const":1},{"const":1.0}]})", "1", 0, 1},
    {R"({"oneOf":[{"const":{"a":1,"b":2}},{"const":{"b":2,"a":1}}]})", R"({"a":1,"b":2})", 0, 1},
    {R"({"oneOf":[{"type":"boolean"},{"type":"object","properties":{"t":{"const":"x"}},"required":["t"]},
                  {"type":"object","properties":{"t":{"enum":["y","x"]}},"required":["t"]}]})",
     R"({"t":"x"})", 1, 2},
    // Tags that are not required: {} matches both.
    {R"({"oneOf":[{"type":"object","properties":{"t":{"const":"a"}}},
                  {"type":"object","properties":{"t":{"const":"b"}}}]})",
     "{}", 0, 1},
    {R"({"oneOf":[{"$ref":"#/$defs/p"},{"$ref":"#/$defs/p"}],"$defs":{"p":{"type":"null"}}})",
     "null", 0, 1},
    {R"({"oneOf":[{"type":["string","null"]},{"type":"null","nullable":true}]})", "null", 0, 1},
};

TEST(FrontendOneOf, DisjointBranchesGiveAjvValidDocuments) {
  std::string skip;
  const std::string modules = ajv_modules(&skip);
  std::mt19937_64 rng(17);
  std::vector<AjvCase> cases;
  for (const char* text : kDisjoint) {
    const Json schema = Json::parse(text);
    auto gbnf = json_schema_to_gbnf(schema);
    ASSERT_TRUE(gbnf.is_ok()) << text << ": " << gbnf.status().message();
    auto g = compile(*gbnf);
    ASSERT_TRUE(g) << text;
    AjvCase c{schema, {}};
    for (int i = 0; i < 30; ++i) {
      std::string s;
      if (random_sentence(g, rng, &s, 0.3, 2000)) c.instances.push_back(s);
    }
    EXPECT_GE(c.instances.size(), 25u) << text;
    cases.push_back(std::move(c));
  }
  if (modules.empty()) GTEST_SKIP() << skip;
  const auto v = ajv_validate(modules, cases);
  ASSERT_EQ(v.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    for (size_t k = 0; k < cases[i].instances.size(); ++k)
      EXPECT_EQ(v[i][k], 1) << cases[i].schema.dump() << "\ndocument " << cases[i].instances[k];
}

TEST(FrontendOneOf, OverlappingBranchesAreRefusedNamingOneOf) {
  std::string skip;
  const std::string modules = ajv_modules(&skip);
  std::vector<AjvCase> witnesses;
  for (const Overlap& o : kOverlapping) {
    const Json schema = Json::parse(o.schema);
    auto r = json_schema_to_gbnf(schema);
    ASSERT_FALSE(r.is_ok()) << o.schema;
    const std::string& msg = r.status().message();
    EXPECT_NE(msg.find("'oneOf' at /"), std::string::npos) << msg;
    EXPECT_NE(msg.find("may overlap"), std::string::npos) << msg;
    EXPECT_NE(msg.find("branches " + std::to_string(o.i) + " and " + std::to_string(o.k)),
              std::string::npos)
        << msg;
    // The same branches under anyOf are fine: only oneOf's exclusivity is refused.
    Json any = schema;
    any["anyOf"] = any["oneOf"];
    any.erase("oneOf");
    EXPECT_TRUE(json_schema_to_gbnf(any).is_ok()) << any.dump();
    // Independent check that the overlap is real: the witness matches both named branches.
    for (int b : {o.i, o.k}) {
      Json branch = schema["oneOf"][b];
      if (schema.contains("$defs")) branch = Json{{"allOf", {branch}}, {"$defs", schema["$defs"]}};
      witnesses.push_back({branch, {o.witness}});
    }
  }
  if (modules.empty()) GTEST_SKIP() << skip;
  const auto v = ajv_validate(modules, witnesses);
  ASSERT_EQ(v.size(), witnesses.size());
  for (size_t i = 0; i < v.size(); ++i)
    EXPECT_EQ(v[i][0], 1) << "witness " << witnesses[i].instances[0] << " should match "
                          << witnesses[i].schema.dump();
}

// Nested: a oneOf inside a property is checked at its own pointer.
TEST(FrontendOneOf, NestedOverlapNamesItsPointer) {
  auto r = json_schema_to_gbnf(Json::parse(
      R"({"type":"object","properties":{"n":{"oneOf":[{"type":"integer"},{"type":"number"}]}}})"));
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("'oneOf' at /properties/n"), std::string::npos)
      << r.status().message();
}

}  // namespace
}  // namespace loom::structured::test
