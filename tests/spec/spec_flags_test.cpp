// The speculative-decoding flags as a command parses them (CLI11, then apply()): an error names
// the flag the user typed, and nothing given is silently dropped (an empty value, a
// --draft-max that disagrees with the JSON).
#include "spec/spec_flags.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace loom::spec {
namespace {

struct Applied {
  Status status;
  SpeculativeConfig config;
};

// Parses `args` (after the command name) as a command with the flags would, then applies them.
Applied parse_and_apply(std::vector<std::string> args) {
  CLI::App app;
  SpeculativeFlags flags;
  flags.add_to(app);
  std::vector<const char*> argv = {"loom"};
  for (const std::string& a : args) argv.push_back(a.c_str());
  Applied r;
  try {
    app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::ParseError& e) {
    r.status = invalid_argument(std::string("CLI11: ") + e.what());
    return r;
  }
  r.status = flags.apply(r.config);
  return r;
}

void expect_error(const std::vector<std::string>& args, const std::string& needle) {
  Applied r = parse_and_apply(args);
  std::string line;
  for (const std::string& a : args) line += a + " ";
  ASSERT_FALSE(r.status.is_ok()) << line;
  EXPECT_NE(r.status.message().find(needle), std::string::npos)
      << line << "-> " << r.status.message();
}

// llama-server's other spellings: --draft / --draft-n for --draft-max, --draft-n-min for
// --draft-min (-md for --model-draft is rewritten before parsing: CliMain tests).
TEST(SpecFlags, LlamaServerAliases) {
  for (const char* max_name : {"--draft-max", "--draft", "--draft-n"})
    for (const char* min_name : {"--draft-min", "--draft-n-min"}) {
      Applied r = parse_and_apply({max_name, "3", min_name, "2"});
      ASSERT_TRUE(r.status.is_ok()) << max_name << " " << min_name << ": " << r.status.message();
      EXPECT_EQ(r.config.method, SpeculativeConfig::Method::kNgram);
      EXPECT_EQ(r.config.num_speculative_tokens, 3);
      EXPECT_EQ(r.config.draft_min, 2);
    }
}

TEST(SpecFlags, ErrorsNameTheFlagTyped) {
  expect_error({"--draft-max", "40"},
               "--draft-max 40: tokens proposed per step must be in [1, 32]");
  expect_error({"--draft-min", "2"},
               "--draft-min needs --draft-max, --model-draft or --speculative-config");
}

// An option given with an empty value (an unset shell variable) is an error, not a run without
// speculation.
TEST(SpecFlags, EmptyValuesAreRefused) {
  expect_error({"--speculative-config", ""}, "--speculative-config: the value is empty");
  expect_error({"--model-draft", ""}, "--model-draft: the value is empty");
  Applied none = parse_and_apply({});
  ASSERT_TRUE(none.status.is_ok()) << none.status.message();
  EXPECT_FALSE(none.config.enabled());
}

// --draft-max beside the JSON's num_speculative_tokens: the same value is fine, another one is
// an error; for "mtp", whose JSON may leave it out, --draft-max sets it.
TEST(SpecFlags, DraftMaxMustAgreeWithTheJson) {
  const std::string ngram4 = R"({"method": "ngram", "num_speculative_tokens": 4})";
  expect_error({"--speculative-config", ngram4, "--draft-max", "3"},
               "--draft-max 3 and --speculative-config's \"num_speculative_tokens\": 4 differ");
  Applied same = parse_and_apply({"--speculative-config", ngram4, "--draft-max", "4"});
  ASSERT_TRUE(same.status.is_ok()) << same.status.message();
  EXPECT_EQ(same.config.num_speculative_tokens, 4);

  Applied mtp =
      parse_and_apply({"--speculative-config", R"({"method": "mtp"})", "--draft-max", "2"});
  ASSERT_TRUE(mtp.status.is_ok()) << mtp.status.message();
  EXPECT_EQ(mtp.config.method, SpeculativeConfig::Method::kMtp);
  EXPECT_EQ(mtp.config.num_speculative_tokens, 2);
  // Without it, the engine fills in the model's MTP layers; --draft-min is checked then.
  Applied unset =
      parse_and_apply({"--speculative-config", R"({"method": "mtp"})", "--draft-min", "1"});
  ASSERT_TRUE(unset.status.is_ok()) << unset.status.message();
  EXPECT_EQ(unset.config.num_speculative_tokens, 0);
  EXPECT_EQ(unset.config.draft_min, 1);
}

TEST(SpecFlags, LlamaServerSpellings) {
  Applied ngram = parse_and_apply({"--draft-max", "3", "--draft-min", "2"});
  ASSERT_TRUE(ngram.status.is_ok()) << ngram.status.message();
  EXPECT_EQ(ngram.config.method, SpeculativeConfig::Method::kNgram);
  EXPECT_EQ(ngram.config.num_speculative_tokens, 3);
  EXPECT_EQ(ngram.config.draft_min, 2);
  Applied draft = parse_and_apply({"--model-draft", "d.gguf"});
  ASSERT_TRUE(draft.status.is_ok()) << draft.status.message();
  EXPECT_EQ(draft.config.method, SpeculativeConfig::Method::kDraftModel);
  EXPECT_EQ(draft.config.num_speculative_tokens, 4);
  expect_error({"--model-draft", "d.gguf", "--speculative-config",
                R"({"model": "e.gguf", "num_speculative_tokens": 2})"},
               "give one of them");
}

}  // namespace
}  // namespace loom::spec
