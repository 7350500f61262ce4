#include "spec/spec_config.h"

#include <gtest/gtest.h>

namespace loom::spec {
namespace {

TEST(SpecConfig, ParsesVllmSpelling) {
  auto c = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 4, "prompt_lookup_max": 4,
          "prompt_lookup_min": 2, "disable_by_batch_size": 12})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->method, SpeculativeConfig::Method::kNgram);
  EXPECT_EQ(c->num_speculative_tokens, 4);
  EXPECT_EQ(c->prompt_lookup_min, 2);
  EXPECT_EQ(c->prompt_lookup_max, 4);
  EXPECT_EQ(c->disable_by_batch_size, 12);
  EXPECT_TRUE(c->enabled());
}

TEST(SpecConfig, DraftModel) {
  for (const char* json : {R"({"model": "draft.gguf", "num_speculative_tokens": 3})",
                           R"({"method": "draft_model", "model": "draft.gguf",
                               "num_speculative_tokens": 3})"}) {
    auto c = parse_speculative_config(json);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->method, SpeculativeConfig::Method::kDraftModel);
    EXPECT_EQ(c->model, "draft.gguf");
    EXPECT_EQ(c->num_speculative_tokens, 3);
  }
}

// The model's own multi-token prediction layers: vLLM's "mtp" and its older "deepseek_mtp";
// a draft model path makes no sense with them.
TEST(SpecConfig, Mtp) {
  for (const char* json : {R"({"method": "mtp", "num_speculative_tokens": 2})",
                           R"({"method": "deepseek_mtp", "num_speculative_tokens": 2})"}) {
    auto c = parse_speculative_config(json);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->method, SpeculativeConfig::Method::kMtp);
    EXPECT_EQ(c->num_speculative_tokens, 2);
    EXPECT_TRUE(c->enabled());
  }
  auto with_model = parse_speculative_config(
      R"({"method": "mtp", "model": "draft.gguf", "num_speculative_tokens": 2})");
  ASSERT_FALSE(with_model.is_ok());
  EXPECT_NE(with_model.status().message().find("mtp"), std::string::npos);
}

TEST(SpecConfig, LookupBoundsDefaultAsVllms) {
  auto both = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})");
  ASSERT_TRUE(both.is_ok());
  EXPECT_EQ(both->prompt_lookup_min, 5);
  EXPECT_EQ(both->prompt_lookup_max, 5);
  EXPECT_EQ(both->disable_by_batch_size, 0);  // vLLM's default: no fixed bound
  auto max_only = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4})");
  ASSERT_TRUE(max_only.is_ok());
  EXPECT_EQ(max_only->prompt_lookup_min, 4);
  auto min_only = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_min": 2})");
  ASSERT_TRUE(min_only.is_ok());
  EXPECT_EQ(min_only->prompt_lookup_max, 2);
}

TEST(SpecConfig, ErrorsNameWhatIsWrong) {
  struct Case {
    const char* json;
    const char* needle;
  };
  const Case cases[] = {
      {"[1]", "JSON object"},
      {"{not json", "JSON object"},
      {R"({"num_speculative_tokens": 4})", "is required"},
      {R"({"method": "eagle", "num_speculative_tokens": 4})", "method \"eagle\""},
      {R"({"method": "ngram", "model": "d.gguf", "num_speculative_tokens": 4})",
       "only for a draft model"},
      {R"({"method": "draft_model", "num_speculative_tokens": 4})", "needs \"model\""},
      {R"({"model": "", "num_speculative_tokens": 4})", "must be a model path"},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "lookahead": 1})",
       "unknown key \"lookahead\""},
      {R"({"method": "ngram", "num_speculative_tokens": 4, "lookahead": 1})", "model,"},
      {R"({"method": "ngram"})", "\"num_speculative_tokens\" (tokens proposed per step"},
      {R"({"model": "d.gguf"})", "\"num_speculative_tokens\" (tokens proposed per step"},
      {R"({"method": "ngram", "num_speculative_tokens": "4"})", "must be an integer"},
      {R"({"method": "ngram", "num_speculative_tokens": 0})", "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": 99})", "num_speculative_tokens"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 4,
           "prompt_lookup_max": 2})",
       "prompt_lookup_min"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": -1})",
       "out of range"},
  };
  for (const Case& c : cases) {
    auto r = parse_speculative_config(c.json);
    ASSERT_FALSE(r.is_ok()) << c.json;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.json << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace loom::spec
