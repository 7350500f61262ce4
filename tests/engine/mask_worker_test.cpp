// MaskWorker, the thread that fills a step's grammar masks while the forward pass runs: after
// wait() every mask is exactly what the matcher fills synchronously, round after round, and a
// wait() with nothing pending returns.
#include "engine/mask_worker.h"

#include <gtest/gtest.h>

#include <random>

#include "loom/tokenizer.h"
#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom {
namespace {

using structured::CompiledGrammar;
using structured::GrammarMatcher;

// Matchers at different places of an any-JSON grammar over Qwen3's 151k-token vocabulary, each
// walked a few random allowed tokens in.
std::vector<std::unique_ptr<GrammarMatcher>> walked_matchers(int n) {
  auto tok = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3");
  EXPECT_TRUE(tok.is_ok());
  auto vocab = structured::TokenVocab::from_tokenizer(**tok, (*tok)->n_vocab());
  auto g = structured::parse_gbnf(structured::any_json_object_gbnf());
  EXPECT_TRUE(g.is_ok());
  auto cg = CompiledGrammar::create(*g, vocab);
  EXPECT_TRUE(cg.is_ok());
  std::vector<std::unique_ptr<GrammarMatcher>> out;
  std::mt19937 rng(5);
  std::vector<uint32_t> w(structured::bitmask_words(vocab->size()));
  for (int i = 0; i < n; ++i) {
    auto m = std::make_unique<GrammarMatcher>(*cg);
    for (int step = 0; step < i % 7; ++step) {
      m->fill_next_token_bitmask(w);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < vocab->size(); ++id)
        if (w[id / 32] >> (id % 32) & 1) allowed.push_back(id);
      if (allowed.empty()) break;
      const int32_t pick = allowed[rng() % allowed.size()];
      EXPECT_TRUE(m->accept_token(pick));
      if (vocab->is_eos(pick)) break;  // the engine finishes a sequence at its EOS
    }
    out.push_back(std::move(m));
  }
  return out;
}

TEST(MaskWorker, FillsWhatTheMatcherFillsItself) {
  constexpr int kJobs = 24;
  auto matchers = walked_matchers(kJobs);
  const size_t words = structured::bitmask_words(151669);
  std::vector<std::vector<uint32_t>> want(kJobs, std::vector<uint32_t>(words));
  for (int i = 0; i < kJobs; ++i) matchers[i]->fill_next_token_bitmask(want[i]);

  MaskWorker worker;
  for (int round = 0; round < 3; ++round) {
    std::vector<std::vector<uint32_t>> got(kJobs, std::vector<uint32_t>(words, 0xA5A5A5A5u));
    std::vector<MaskWorker::Job> jobs;
    for (int i = 0; i < kJobs; ++i) jobs.push_back({matchers[i].get(), got[i]});
    worker.start(&jobs);
    worker.wait();
    for (int i = 0; i < kJobs; ++i) EXPECT_EQ(got[i], want[i]) << "round " << round << " job " << i;
  }
  worker.wait();  // nothing pending: returns at once
}

}  // namespace
}  // namespace loom
