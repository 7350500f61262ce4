// `loom run --json-schema FILE` and `--grammar FILE`: the demo model's random weights write
// whatever they want, so only a working constraint makes every printed answer follow the file;
// bad files and a request for both are clear errors.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <regex>

#include "run_loom.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

std::string write_temp(const std::string& name, const std::string& text) {
  const fs::path dir =
      fs::temp_directory_path() / ("loom_run_constrained_" + std::to_string(getpid()));
  fs::create_directories(dir);
  const fs::path p = dir / name;
  std::ofstream(p) << text;
  return p.string();
}

TEST(CliRunConstrained, JsonSchemaFileShapesEveryAnswer) {
  const std::string schema = write_temp("point.json", R"({
    "type": "object",
    "properties": {
      "x": {"type": "integer", "minimum": -50, "maximum": 50},
      "label": {"type": "string", "maxLength": 5},
      "ok": {"type": "boolean"}
    },
    "required": ["x", "label", "ok"],
    "additionalProperties": false
  })");
  for (int seed = 1; seed <= 3; ++seed) {
    SCOPED_TRACE(seed);
    CmdResult r = run_stdout("run -p 'Point:' -n 120 --temp 1 --seed " + std::to_string(seed) +
                             " --json-schema " + schema);
    ASSERT_EQ(r.code, 0) << r.out;
    ASSERT_EQ(r.out.rfind("Point:", 0), 0u) << r.out;
    json doc;
    ASSERT_NO_THROW(doc = json::parse(r.out.substr(6))) << r.out;
    ASSERT_TRUE(doc.is_object()) << r.out;
    EXPECT_EQ(doc.size(), 3u) << r.out;
    ASSERT_TRUE(doc["x"].is_number_integer()) << r.out;
    EXPECT_LE(std::abs(doc["x"].get<int>()), 50) << r.out;
    ASSERT_TRUE(doc["label"].is_string()) << r.out;
    size_t code_points = 0;
    for (unsigned char c : doc["label"].get<std::string>()) code_points += (c & 0xC0) != 0x80;
    EXPECT_LE(code_points, 5u) << r.out;
    EXPECT_TRUE(doc["ok"].is_boolean()) << r.out;
  }
}

TEST(CliRunConstrained, GrammarFileShapesEveryAnswer) {
  const std::string grammar = write_temp(
      "answer.gbnf", "root ::= \"yes\" | \"no\" | digit digit? digit?\ndigit ::= [0-9]\n");
  for (int seed = 1; seed <= 4; ++seed) {
    CmdResult r = run_stdout("run -p 'Answer:' -n 20 --temp 1 --seed " + std::to_string(seed) +
                             " --grammar " + grammar);
    ASSERT_EQ(r.code, 0) << r.out;
    EXPECT_TRUE(std::regex_match(r.out, std::regex("Answer:(yes|no|[0-9]{1,3})\n?"))) << r.out;
  }
}

TEST(CliRunConstrained, BadFilesAreClearErrors) {
  const std::string schema =
      write_temp("bad_kw.json", R"({"type": "object", "patternProperties": {}})");
  const std::string not_json = write_temp("not.json", "{type: object");
  const std::string bad_gbnf = write_temp("bad.gbnf", "root ::= missing-rule\n");
  const std::string good_gbnf = write_temp("good.gbnf", "root ::= \"a\"\n");
  struct Case {
    std::string args, message;
  };
  const Case cases[] = {
      {"--json-schema " + schema, "patternProperties"},
      {"--json-schema " + not_json, "is not valid JSON"},
      {"--json-schema /nonexistent/x.json", "cannot read --json-schema"},
      {"--grammar " + bad_gbnf, "missing-rule"},
      {"--grammar " + good_gbnf + " --json-schema " + schema, "not both"},
  };
  for (const Case& c : cases) {
    CmdResult r = run("run -p hi -n 4 " + c.args);
    EXPECT_EQ(r.code, 1) << c.args << "\n" << r.out;
    EXPECT_NE(r.out.find(c.message), std::string::npos) << c.args << "\n" << r.out;
  }
}

}  // namespace
}  // namespace loom
