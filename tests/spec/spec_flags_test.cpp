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
  expect_error({"--draft-max", "80"},
               "--draft-max 80: tokens proposed per step must be in [1, 64]");
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

// llama.cpp's current spellings (2026): --spec-draft-model / -n-max / -n-min / -p-min, and
// --spec-type with its ngram-simple sizes, onto the same configuration.
TEST(SpecFlags, LlamaCppSpecSpellings) {
  Applied draft = parse_and_apply({"--spec-draft-model", "d.gguf", "--spec-draft-n-max", "6",
                                   "--spec-draft-n-min", "2", "--spec-draft-p-min", "0.75"});
  ASSERT_TRUE(draft.status.is_ok()) << draft.status.message();
  EXPECT_EQ(draft.config.method, SpeculativeConfig::Method::kDraftModel);
  EXPECT_EQ(draft.config.model, "d.gguf");
  EXPECT_EQ(draft.config.num_speculative_tokens, 6);
  EXPECT_EQ(draft.config.draft_min, 2);
  EXPECT_FLOAT_EQ(draft.config.draft_p_min, 0.75f);

  Applied typed = parse_and_apply(
      {"--spec-type", "draft-simple", "--model-draft", "d.gguf", "--draft-p-min", "0.5"});
  ASSERT_TRUE(typed.status.is_ok()) << typed.status.message();
  EXPECT_EQ(typed.config.method, SpeculativeConfig::Method::kDraftModel);
  EXPECT_FLOAT_EQ(typed.config.draft_p_min, 0.5f);

  Applied mtp = parse_and_apply(
      {"--spec-type", "draft-mtp", "--spec-draft-n-max", "2", "--spec-draft-p-min", "0.1"});
  ASSERT_TRUE(mtp.status.is_ok()) << mtp.status.message();
  EXPECT_EQ(mtp.config.method, SpeculativeConfig::Method::kMtp);
  EXPECT_EQ(mtp.config.num_speculative_tokens, 2);
  Applied mtp_layers = parse_and_apply({"--spec-type", "draft-mtp"});
  ASSERT_TRUE(mtp_layers.status.is_ok()) << mtp_layers.status.message();
  EXPECT_EQ(mtp_layers.config.num_speculative_tokens, 0);  // the engine fills in its layers

  // ngram-simple: llama.cpp's defaults (12-token lookups, 48 proposals), or the sizes given.
  Applied ngram = parse_and_apply({"--spec-type", "ngram-simple"});
  ASSERT_TRUE(ngram.status.is_ok()) << ngram.status.message();
  EXPECT_EQ(ngram.config.method, SpeculativeConfig::Method::kNgram);
  EXPECT_EQ(ngram.config.prompt_lookup_min, 12);
  EXPECT_EQ(ngram.config.prompt_lookup_max, 12);
  EXPECT_EQ(ngram.config.num_speculative_tokens, 48);
  Applied sized =
      parse_and_apply({"--spec-type", "none,ngram-simple", "--spec-ngram-simple-size-n", "3",
                       "--spec-ngram-simple-size-m", "5", "--spec-ngram-simple-min-hits", "1"});
  ASSERT_TRUE(sized.status.is_ok()) << sized.status.message();
  EXPECT_EQ(sized.config.prompt_lookup_min, 3);
  EXPECT_EQ(sized.config.prompt_lookup_max, 3);
  EXPECT_EQ(sized.config.num_speculative_tokens, 5);

  Applied none = parse_and_apply({"--spec-type", "none"});
  ASSERT_TRUE(none.status.is_ok()) << none.status.message();
  EXPECT_FALSE(none.config.enabled());
}

// What loom cannot do as asked is refused, naming the flag; nothing is dropped.
TEST(SpecFlags, LlamaCppSpecSpellingsRefused) {
  expect_error({"--spec-type", "draft-eagle3"},
               "--spec-type draft-eagle3: llama.cpp's proposer of that name is not in loom");
  expect_error({"--spec-type", "ngram-mod"}, "not in loom; loom has draft-simple, draft-mtp");
  expect_error({"--spec-type", "lookahead"}, "--spec-type lookahead: unknown type");
  expect_error({"--spec-type", "ngram-simple,draft-simple", "--spec-draft-model", "d.gguf"},
               "loom runs one proposer at a time");
  expect_error({"--spec-type", "draft-simple"},
               "--spec-type draft-simple needs --spec-draft-model");
  expect_error({"--spec-type", "ngram-simple", "--spec-draft-model", "d.gguf"},
               "--spec-draft-model is for --spec-type draft-simple, not ngram-simple");
  expect_error({"--spec-type", "none", "--spec-draft-n-max", "3"},
               "--spec-type none: no proposer to give the draft flags to");
  expect_error({"--spec-type", "ngram-simple", "--speculative-config",
                R"({"method": "ngram", "num_speculative_tokens": 4})"},
               "--spec-type and --speculative-config: give one of them");
  expect_error({"--spec-ngram-simple-size-n", "3"}, "these need --spec-type ngram-simple");
  expect_error({"--spec-type", "draft-mtp", "--spec-ngram-simple-size-m", "3"},
               "these need --spec-type ngram-simple");
  expect_error({"--spec-type", "ngram-simple", "--spec-ngram-simple-min-hits", "2"},
               "--spec-ngram-simple-min-hits 2: loom's n-gram lookup proposes after the first");
  expect_error({"--spec-type", "ngram-simple", "--spec-ngram-simple-size-m", "100"},
               "--spec-ngram-simple-size-m 100: tokens proposed per step must be in [1, 64]");
  expect_error({"--spec-type", "ngram-simple", "--spec-ngram-simple-size-n", "100"},
               "--spec-ngram-simple-size-n 100: the lookup matches at most 64 tokens");
  expect_error({"--spec-type", "ngram-simple", "--spec-draft-n-max", "4"},
               "--draft-max 4 and --spec-ngram-simple-size-m 48 differ");
  expect_error({"--spec-draft-p-min", "0.5"}, "--spec-draft-p-min needs a draft model");
  expect_error({"--spec-draft-n-max", "3", "--spec-draft-p-min", "0.5"},
               "n-gram lookup's have no probabilities");
  expect_error({"--spec-draft-model", "d.gguf", "--spec-draft-p-min", "1.5"}, "CLI11");
}

}  // namespace
}  // namespace loom::spec
