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

// vLLM replaces its per-architecture MTP names (MTPModelTypes) with "mtp": Qwen's model cards
// give "qwen3_next_mtp" for Qwen3-Next and Qwen3.5. Names vLLM does not know stay refused.
TEST(SpecConfig, VllmsMtpAliasesAreMtp) {
  for (const char* m : {"qwen3_next_mtp", "qwen3_5_mtp", "mimo_mtp", "glm4_moe_mtp", "ernie_mtp",
                        "longcat_flash_mtp", "step3p5_mtp", "pangu_ultra_moe_mtp"}) {
    auto c = parse_speculative_config(std::string(R"({"method": ")") + m +
                                      R"(", "num_speculative_tokens": 2})");
    ASSERT_TRUE(c.is_ok()) << m << ": " << c.status().message();
    EXPECT_EQ(c->method, SpeculativeConfig::Method::kMtp) << m;
    EXPECT_EQ(c->num_speculative_tokens, 2) << m;
    // Without a count, as "mtp": the model's MTP layers decide it.
    auto unset = parse_speculative_config(std::string(R"({"method": ")") + m + R"("})");
    ASSERT_TRUE(unset.is_ok()) << m << ": " << unset.status().message();
    EXPECT_EQ(unset->method, SpeculativeConfig::Method::kMtp) << m;
  }
  for (const char* m : {"qwen3_mtp", "mtp2", "QWEN3_NEXT_MTP"}) {
    auto c = parse_speculative_config(std::string(R"({"method": ")") + m +
                                      R"(", "num_speculative_tokens": 2})");
    ASSERT_FALSE(c.is_ok()) << m;
    EXPECT_NE(c.status().message().find("is not supported"), std::string::npos)
        << c.status().message();
  }
}

// vLLM defaults an MTP method's num_speculative_tokens to the model's MTP layers (n_predict):
// unset after parsing, filled once the engine knows the model; an explicit 0 is an error.
TEST(SpecConfig, MtpTokensDefaultToTheModelsMtpLayers) {
  auto c = parse_speculative_config(R"({"method": "mtp"})");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->num_speculative_tokens, 0);
  SpeculativeConfig with_layers = *c;
  ASSERT_TRUE(finalize_speculative_config(with_layers, /*n_mtp_layers=*/3).is_ok());
  EXPECT_EQ(with_layers.num_speculative_tokens, 3);
  EXPECT_TRUE(with_layers.enabled());
  // A model without MTP layers leaves it unset: the MTP proposer refuses it by name.
  SpeculativeConfig without = *c;
  EXPECT_TRUE(finalize_speculative_config(without, 0).is_ok());
  EXPECT_EQ(without.num_speculative_tokens, 0);
  // Given, it stays.
  auto two = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 2})");
  ASSERT_TRUE(two.is_ok());
  ASSERT_TRUE(finalize_speculative_config(*two, 3).is_ok());
  EXPECT_EQ(two->num_speculative_tokens, 2);
  auto zero = parse_speculative_config(R"({"method": "mtp", "num_speculative_tokens": 0})");
  ASSERT_FALSE(zero.is_ok());
  EXPECT_NE(zero.status().message().find("\"num_speculative_tokens\" must be in [1, 64], got 0"),
            std::string::npos)
      << zero.status().message();
}

TEST(SpecConfig, LookupBoundsDefaultAsVllms) {
  auto both = parse_speculative_config(R"({"method": "ngram", "num_speculative_tokens": 3})");
  ASSERT_TRUE(both.is_ok());
  EXPECT_EQ(both->prompt_lookup_min, 5);
  EXPECT_EQ(both->prompt_lookup_max, 5);
  EXPECT_EQ(both->disable_by_batch_size, 0);  // vLLM's default: no fixed bound
  auto two = parse_speculative_config(
      R"({"method": "ngram", "num_speculative_tokens": 3, "disable_by_batch_size": 2})");
  ASSERT_TRUE(two.is_ok()) << two.status().message();
  EXPECT_EQ(two->disable_by_batch_size, 2);
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
       "--speculative-config: prompt_lookup_min (4) must not be over prompt_lookup_max (2)"},
      // The value given is named, not the default filled in for the other bound.
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 100})",
       "--speculative-config: prompt_lookup_max must be in [1, 64], got 100"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 65})",
       "--speculative-config: prompt_lookup_min must be in [1, 64], got 65"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": -1})",
       "out of range"},
      // Written as 0, a lookup bound is not "unset" (vLLM: must be > 0).
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0})",
       "\"prompt_lookup_min\" must be at least 1, got 0"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_max": 0})",
       "\"prompt_lookup_max\" must be at least 1, got 0"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "prompt_lookup_min": 0,
           "prompt_lookup_max": 0})",
       "must be at least 1, got 0"},
      // Lookup bounds belong to n-gram lookup alone.
      {R"({"method": "mtp", "prompt_lookup_max": 3})",
       "\"prompt_lookup_max\" is only for method \"ngram\""},
      {R"({"model": "d.gguf", "num_speculative_tokens": 2, "prompt_lookup_min": 2})",
       "\"prompt_lookup_min\" is only for method \"ngram\""},
      // A key given twice: which value was meant is not for the parser to guess.
      {R"({"method": "ngram", "num_speculative_tokens": 2, "num_speculative_tokens": 4})",
       "\"num_speculative_tokens\" is given twice"},
      {R"({"method": "ngram", "method": "mtp", "num_speculative_tokens": 2})",
       "\"method\" is given twice"},
      // vLLM: the batch size that turns proposals off must be > 1.
      {R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": 0})",
       "\"disable_by_batch_size\" must be > 1"},
      {R"({"method": "ngram", "num_speculative_tokens": 2, "disable_by_batch_size": 1})",
       "\"disable_by_batch_size\" must be > 1"},
  };
  for (const Case& c : cases) {
    auto r = parse_speculative_config(c.json);
    EXPECT_FALSE(r.is_ok()) << c.json;
    if (r.is_ok()) continue;
    EXPECT_NE(r.status().message().find(c.needle), std::string::npos)
        << c.json << " -> " << r.status().message();
  }
}

}  // namespace
}  // namespace loom::spec
