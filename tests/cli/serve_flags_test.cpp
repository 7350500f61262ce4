// `loom serve`'s --tool-call-parser and --reasoning-parser: the help lists every name the
// parsers accept (the names an unknown one's error lists), and an unknown name is refused
// before the model loads.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "cli/run_loom.h"

namespace loom {
namespace {

// The names inside "(known: a, b, c)" of an error message.
std::vector<std::string> known_names(const std::string& message) {
  const std::string open = "(known: ";
  const size_t at = message.find(open);
  const size_t end = message.find(')', at);
  std::vector<std::string> out;
  if (at == std::string::npos || end == std::string::npos) return out;
  const std::string list = message.substr(at + open.size(), end - at - open.size());
  for (size_t from = 0;;) {
    const size_t comma = list.find(", ", from);
    out.push_back(list.substr(from, comma - from));
    if (comma == std::string::npos) return out;
    from = comma + 2;
  }
}

// A model path that does not exist: a command that got as far as loading would fail on it
// instead, naming the file.
const char* kNoModel = "/nonexistent/loom-serve-flags-test.gguf";

TEST(CliServeFlags, UnknownParserNamesAreRefusedBeforeLoading) {
  for (const char* flag : {"--tool-call-parser", "--reasoning-parser"}) {
    SCOPED_TRACE(flag);
    CmdResult r =
        run(std::string("serve --port 0 -m ") + kNoModel + " " + flag + " bogus --threads 1");
    EXPECT_EQ(r.code, 1) << r.out;
    EXPECT_NE(r.out.find(std::string(flag) + ": unknown"), std::string::npos) << r.out;
    EXPECT_NE(r.out.find("'bogus'"), std::string::npos) << r.out;
    EXPECT_EQ(r.out.find("nonexistent"), std::string::npos) << r.out;  // never opened
  }
}

TEST(CliServeFlags, HelpListsEveryParserName) {
  const CmdResult help = run("serve --help");
  ASSERT_EQ(help.code, 0) << help.out;
  // The help's lines wrap; compare with whitespace runs made single spaces.
  std::string flat;
  for (char ch : help.out) {
    const bool space = ch == ' ' || ch == '\n' || ch == '\t';
    if (!space || (!flat.empty() && flat.back() != ' ')) flat += space ? ' ' : ch;
  }
  for (const char* flag : {"--tool-call-parser", "--reasoning-parser"}) {
    SCOPED_TRACE(flag);
    const CmdResult r =
        run(std::string("serve --port 0 -m ") + kNoModel + " " + flag + " bogus --threads 1");
    const std::vector<std::string> names = known_names(r.out);
    ASSERT_GE(names.size(), 3u) << r.out;
    const size_t at = flat.find(flag);
    ASSERT_NE(at, std::string::npos) << flat;
    const std::string text = flat.substr(at, flat.find(" --", at + 2) - at);
    for (const std::string& name : names) EXPECT_NE(text.find(name), std::string::npos) << name;
  }
  for (const char* name : {"openai", "openai_gptoss"})
    EXPECT_NE(flat.find(name), std::string::npos) << name;
}

}  // namespace
}  // namespace loom
