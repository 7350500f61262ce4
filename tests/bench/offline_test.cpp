// The offline throughput benchmark: counts add up, figures are consistent, JSON has vLLM's keys.
#include "bench/offline.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace loom::bench {
namespace {

TEST(OfflineBench, RunsEveryPromptToItsOutputLength) {
  EngineConfig c;
  c.max_num_seqs = 4;
  c.max_model_len = 64;
  c.n_threads = 1;
  auto engine = Engine::load("synth:tiny", c);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  OfflineOptions o;
  o.num_prompts = 10;
  o.input_len = 24;
  o.output_len = 9;
  auto r = run_offline(**engine, o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ(r->num_requests, 10);
  EXPECT_EQ(r->prompt_tokens, 240);
  EXPECT_EQ(r->output_tokens, 90);
  EXPECT_EQ(r->total_num_tokens, 330);
  EXPECT_GT(r->elapsed_time, 0.0);
  EXPECT_NEAR(r->tokens_per_second * r->elapsed_time, 330.0, 1e-6);
  EXPECT_NEAR(r->output_tokens_per_second * r->elapsed_time, 90.0, 1e-6);
  EXPECT_NEAR(r->requests_per_second * r->elapsed_time, 10.0, 1e-9);
  // At most 4 run at once, so at least ceil(10/4) * 9 decode steps.
  EXPECT_GE(r->metrics.num_steps, 27);
  EXPECT_EQ((*engine)->check_kv_drained(), "");

  auto j = nlohmann::json::parse(offline_result_json(*r));
  for (const char* key : {"elapsed_time", "num_requests", "total_num_tokens", "requests_per_second",
                          "tokens_per_second", "output_tokens_per_second"})
    EXPECT_TRUE(j.contains(key)) << key;
  EXPECT_EQ(j["num_requests"], 10);
  EXPECT_EQ(j["total_num_tokens"], 330);
}

// Decode steps are the steps without prompt tokens: one sequence at a time, each prompt's
// first token comes from its prefill and every other one from a decode step, with n-gram
// speculation as without (its verifies are decode steps emitting several tokens).
TEST(OfflineBench, DecodeStepsCountEveryTokenButThePrefillsFirst) {
  for (const bool ngram : {false, true}) {
    EngineConfig c;
    c.max_num_seqs = 1;
    c.max_model_len = 128;
    c.n_threads = 1;
    if (ngram) {
      c.speculative.method = SpeculativeConfig::Method::kNgram;
      c.speculative.num_speculative_tokens = 4;
      c.speculative.prompt_lookup_min = 2;
      c.speculative.prompt_lookup_max = 4;
    }
    auto engine = Engine::load("synth:tiny", c);
    ASSERT_TRUE(engine.is_ok()) << engine.status().message();
    OfflineOptions o;
    o.num_prompts = 3;
    o.input_len = 16;
    o.output_len = 24;
    o.workload = "self-repeat";
    auto r = run_offline(**engine, o);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    EXPECT_EQ(r->output_tokens, 72);
    EXPECT_EQ(r->metrics.decode_step_tokens, 72 - 3) << "ngram " << ngram;
    EXPECT_GT(r->metrics.decode_step_seconds, 0.0);
    EXPECT_LT(r->metrics.decode_step_seconds, r->elapsed_time);
    // Without speculation a decode step emits one token; with it, fewer steps than tokens
    // (the self-repeat prompts let lookups match).
    const int64_t decode_steps = r->metrics.num_steps - 3;
    if (ngram) {
      EXPECT_GT(r->metrics.spec_num_accepted_tokens, 0);
      EXPECT_GT(r->metrics.spec_proposer_seconds, 0.0);
      EXPECT_LT(r->metrics.spec_proposer_seconds, r->metrics.decode_step_seconds);
      EXPECT_LT(decode_steps, 69);
    } else {
      EXPECT_EQ(decode_steps, 69);
    }
    auto j = nlohmann::json::parse(offline_result_json(*r));
    EXPECT_EQ(j["decode_step_tokens"], 69);
    EXPECT_EQ(j.contains("spec_num_drafts"), ngram);
    if (ngram) {
      EXPECT_GT(j["spec_acceptance_rate"].get<double>(), 0.0);
    }
    EXPECT_NEAR(j["decode_tokens_per_second"].get<double>() * r->metrics.decode_step_seconds, 69.0,
                1e-6);
  }
}

// Speculation configured but nothing proposed (an n-gram of 16 cannot occur in 8 + 8 random
// tokens): the JSON still reports it, 0 proposals and the rates null rather than 0.
TEST(OfflineBench, SpeculationWithoutProposalsIsStillReported) {
  EngineConfig c;
  c.max_num_seqs = 1;
  c.max_model_len = 32;
  c.n_threads = 1;
  c.speculative.method = SpeculativeConfig::Method::kNgram;
  c.speculative.num_speculative_tokens = 2;
  c.speculative.prompt_lookup_min = c.speculative.prompt_lookup_max = 16;
  auto engine = Engine::load("synth:tiny", c);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  OfflineOptions o;
  o.num_prompts = 1;
  o.input_len = 8;
  o.output_len = 8;
  auto r = run_offline(**engine, o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  ASSERT_EQ(r->metrics.spec_num_drafts, 0);
  auto j = nlohmann::json::parse(offline_result_json(*r));
  ASSERT_TRUE(j.contains("spec_num_drafts")) << j.dump();
  EXPECT_EQ(j["spec_num_drafts"], 0);
  EXPECT_EQ(j["spec_num_draft_tokens"], 0);
  EXPECT_EQ(j["spec_num_accepted_tokens"], 0);
  EXPECT_TRUE(j["spec_acceptance_rate"].is_null()) << j.dump();
  EXPECT_TRUE(j["spec_mean_acceptance_length"].is_null()) << j.dump();
}

// The proposers' time covers every step, prompts' included (an MTP module over the prompts'
// rows, a draft model's first pass over a prompt), so it is reported as a share of the whole
// run, which holds it, not of the decode steps' time, which it exceeded (102%). The JSON has
// the times the text shows.
TEST(OfflineBench, ProposerTimeIsAShareOfTheWholeRun) {
  OfflineResult r;
  r.elapsed_time = 2.0;
  r.output_tokens = 100;
  r.metrics.forward_seconds = 1.25;
  r.metrics.decode_step_seconds = 0.5;
  r.metrics.decode_step_tokens = 90;
  r.metrics.spec_draft_seconds = 0.4;
  r.metrics.spec_proposer_seconds = 0.6;  // more than the decode steps' time
  r.metrics.spec_accepted_per_pos = {0, 0};
  const std::string text = offline_result_text(r);
  EXPECT_NE(text.find("Proposers, every step (prompts' passes included): 0.6000 s (30.000% of "
                      "the elapsed time)"),
            std::string::npos)
      << text;
  EXPECT_EQ(text.find("decode steps' time"), std::string::npos) << text;
  EXPECT_NE(text.find("Target model forward passes: 1.25 s"), std::string::npos) << text;
  auto j = nlohmann::json::parse(offline_result_json(r));
  EXPECT_EQ(j["target_forward_seconds"].get<double>(), 1.25) << j.dump();
  EXPECT_EQ(j["spec_draft_seconds"].get<double>(), 0.4) << j.dump();
  EXPECT_EQ(j["spec_proposer_seconds"].get<double>(), 0.6) << j.dump();
  // Without speculation: the target's time, no proposer's.
  r.metrics.spec_accepted_per_pos.clear();
  j = nlohmann::json::parse(offline_result_json(r));
  EXPECT_EQ(j["target_forward_seconds"].get<double>(), 1.25);
  EXPECT_FALSE(j.contains("spec_proposer_seconds"));
  EXPECT_FALSE(j.contains("spec_draft_seconds"));
  EXPECT_EQ(offline_result_text(r).find("Proposers"), std::string::npos);
}

TEST(OfflineBench, RejectsBadOptions) {
  EngineConfig c;
  c.max_model_len = 64;
  c.max_num_seqs = 2;
  c.n_threads = 1;
  auto engine = Engine::load("synth:tiny", c);
  ASSERT_TRUE(engine.is_ok());
  OfflineOptions o;
  o.num_prompts = 0;
  EXPECT_FALSE(run_offline(**engine, o).is_ok());
  o.num_prompts = 1;
  o.input_len = 60;
  o.output_len = 10;  // over max_model_len 64
  auto r = run_offline(**engine, o);
  EXPECT_FALSE(r.is_ok());
}

}  // namespace
}  // namespace loom::bench
