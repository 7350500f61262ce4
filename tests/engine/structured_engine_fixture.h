// The fixture of the structured-output engine tests: a random-weight model (synth preset
// tiny-qwen3) behind Qwen3's real 151,669-token byte-level BPE vocabulary, grammars compiled
// for it, and constrained requests with random prompts.
#pragma once

#include <gtest/gtest.h>

#include "structured/grammar.h"
#include "structured/matcher.h"
#include "test_engine_util.h"

namespace loom {

// What a batch of constrained requests produced (StructuredEngineTest::run_cases).
struct StructuredOutcome {
  std::vector<std::string> finished;  // per case: the text when it ended by "stop", else ""
  std::vector<bool> stopped;
  int n_stopped = 0;
  int64_t n_tokens = 0;
};

class StructuredEngineTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TestModelOptions o;
    o.preset = "tiny-qwen3";
    bytes_ = testing::test_model_bytes(o);
  }
  static void TearDownTestSuite() { bytes_.reset(); }

  EngineConfig config(int32_t batched_tokens = 0, double kv_gib = 0, int32_t max_num_seqs = 16) {
    EngineConfig c;
    c.max_num_seqs = max_num_seqs;
    c.max_model_len = 512;
    c.n_threads = 1;
    c.kv_dtype = Dtype::kF32;
    if (batched_tokens) c.max_num_batched_tokens = batched_tokens;
    if (kv_gib > 0) c.kv_cache_memory_gib = kv_gib;
    return c;
  }

  std::shared_ptr<const structured::CompiledGrammar> compile(Engine& e, const std::string& gbnf) {
    if (!vocab_)
      vocab_ = structured::TokenVocab::from_tokenizer(*e.tokenizer(), e.model().config().n_vocab);
    auto g = structured::parse_gbnf(gbnf);
    EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
    auto c = structured::CompiledGrammar::create(*g, vocab_);
    EXPECT_TRUE(c.is_ok()) << c.status().message();
    return *c;
  }

  GenerateRequest request(const std::string& id, uint64_t seed,
                          std::shared_ptr<const structured::CompiledGrammar> g,
                          int max_tokens = 300, int prompt_len = 0) {
    GenerateRequest r;
    r.request_id = id;
    if (prompt_len <= 0) prompt_len = 3 + static_cast<int>(seed % 40);
    r.prompt = testing::random_prompt(prompt_len, static_cast<uint32_t>(seed), 151000);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 1.0f;
    r.params.seed = seed;
    r.params.grammar = std::move(g);
    return r;
  }

  // Every grammar gets one request (short random prompt, temperature 1, its own seed); all run
  // together. Outputs that hit max_tokens are checked to be grammar prefixes here; the caller
  // checks the finished ones with its oracle.
  StructuredOutcome run_cases(
      Engine& e, const std::vector<std::shared_ptr<const structured::CompiledGrammar>>& gs,
      uint64_t seed, int max_tokens) {
    for (size_t i = 0; i < gs.size(); ++i) {
      GenerateRequest r = request("c" + std::to_string(i), seed + i, gs[i], max_tokens,
                                  1 + static_cast<int>((seed + i) % 4));
      EXPECT_TRUE(e.add_request(r).is_ok());
    }
    auto out = testing::run_all(e);
    EXPECT_EQ(e.check_kv_drained(), "");
    StructuredOutcome o;
    for (size_t i = 0; i < gs.size(); ++i) {
      const testing::Collected& c = out.at("c" + std::to_string(i));
      const FinishReason f = c.finish.at(0);
      o.n_tokens += static_cast<int64_t>(c.tokens.at(0).size());
      o.stopped.push_back(f == FinishReason::kStop);
      o.finished.push_back(f == FinishReason::kStop ? c.text.at(0) : "");
      if (f == FinishReason::kStop) {
        ++o.n_stopped;
        continue;
      }
      EXPECT_EQ(f, FinishReason::kLength) << c.text.at(0);
      // Cut by length: every token was allowed, and the grammar is not finished.
      structured::GrammarMatcher m(gs[i]);
      for (int32_t t : c.tokens.at(0)) EXPECT_TRUE(m.accept_token(t)) << i << ": " << c.text.at(0);
      EXPECT_EQ(static_cast<int>(c.tokens.at(0).size()), max_tokens) << c.text.at(0);
    }
    return o;
  }

  inline static std::shared_ptr<std::vector<uint8_t>> bytes_;
  std::shared_ptr<const structured::TokenVocab> vocab_;
};

}  // namespace loom
