// Speculative decoding with the model's own multi-token prediction layer (method "mtp") on the
// Gated DeltaNet hybrids tiny-qwen35 and tiny-qwen3next (one Qwen-style module each, random
// weights), through the whole engine: outputs and every sampled row's logits are plain
// decoding's bits with and without MTP speculation (greedy and seeded, alone, batched with
// n > 1, in prompt chunks, preempted with prefix caching on, and from a prefix-cache hit), a
// rejected proposal being taken back from the recurrent states as from the module's and the
// target's K/V; proposals ran (the counters say so), and every block and state slot is free
// after a drain. Random weights keep acceptance near zero: this checks exactness, not speed.
#include <gtest/gtest.h>

#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

class HybridMtpEngine : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { bytes_ = test_model_bytes({.preset = GetParam()}); }

  // k = 0: no speculation; else the MTP module proposing k tokens (chained past the first).
  static EngineConfig config(int k) {
    EngineConfig c;
    c.max_model_len = 512;
    c.max_num_seqs = 8;
    c.n_threads = 2;
    c.kv_dtype = Dtype::kF32;
    c.commit_kv_in_background = false;
    if (k > 0) {
      c.speculative.method = SpeculativeConfig::Method::kMtp;
      c.speculative.num_speculative_tokens = k;
    }
    return c;
  }
  static GenerateRequest request(int i, float temperature, int max_tokens = 40) {
    GenerateRequest r;
    r.request_id = "r" + std::to_string(i);
    r.prompt = random_prompt(9 + 3 * i, 700 + i, 512);
    r.params.max_tokens = max_tokens;
    r.params.temperature = temperature;
    r.params.seed = 5 + i;
    r.params.ignore_eos = true;
    return r;
  }
  std::map<std::string, Collected> run(const EngineConfig& c,
                                       const std::vector<GenerateRequest>& rs) {
    return testing::run_requests(c, bytes_, rs, &metrics_);
  }

  std::shared_ptr<std::vector<uint8_t>> bytes_;
  EngineMetrics metrics_;
};

TEST_P(HybridMtpEngine, GreedyAloneIsIdenticalAndProposalsRan) {
  for (int i = 0; i < 3; ++i) {
    const std::vector<GenerateRequest> rs = {request(i, 0.0f)};
    auto plain = run(config(0), rs);
    for (int k : {1, 2, 4}) {
      testing::expect_same_outputs(plain, run(config(k), rs),
                                   "greedy " + std::to_string(i) + ", k " + std::to_string(k));
      EXPECT_GT(metrics_.spec_num_drafts, 0) << i << " k=" << k;
      EXPECT_LE(metrics_.spec_num_draft_tokens, k * metrics_.spec_num_drafts);
      EXPECT_LE(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
      EXPECT_GT(metrics_.spec_draft_seconds, 0.0);
    }
  }
}

TEST_P(HybridMtpEngine, SeededBatchedForkedChunkedAndPreemptedIsIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 5; ++i) rs.push_back(request(i, i % 2 ? 0.8f : 0.0f));
  rs[1].params.n = 2;  // forked samples: their own states, the prompt's module K/V shared
  rs[3].params.max_tokens = 6;
  auto plain = run(config(0), rs);
  EngineConfig c = config(3);
  testing::expect_same_outputs(plain, run(c, rs), "batched");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  c.max_num_batched_tokens = 7;  // prompt chunks of 7: the module runs over each chunk
  c.shared_prefill_tokens = 7;
  testing::expect_same_outputs(plain, run(c, rs), "chunked");
  // Preempted all the time (a pool of 14 blocks), prefix caching on: preempted sequences
  // resume from state snapshots.
  c = config(3);
  c.max_num_batched_tokens = 40;
  c.shared_prefill_tokens = 40;
  c.enable_prefix_caching = true;
  c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
  testing::expect_same_outputs(plain, run(c, rs), "preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
}

TEST_P(HybridMtpEngine, PrefixCacheHitIsIdentical) {
  std::vector<GenerateRequest> rs = {request(2, 0.0f)};
  rs[0].prompt = random_prompt(40, 702, 512);  // full blocks: a hybrid hits at a state snapshot
  auto plain = run(config(0), rs);
  EngineConfig c = config(2);
  c.enable_prefix_caching = true;
  auto e = make_engine(c, bytes_);
  ASSERT_TRUE(e != nullptr);
  for (int round = 0; round < 2; ++round) {
    rs[0].request_id = "again" + std::to_string(round);
    ASSERT_TRUE(e->add_request(rs[0]).is_ok());
    auto out = run_all(*e);
    EXPECT_EQ(out.at(rs[0].request_id).tokens, plain.at("r2").tokens) << round;
    if (round == 1) {
      EXPECT_GT(out.at(rs[0].request_id).num_cached_tokens, 0);
    }
  }
  EXPECT_EQ(e->check_kv_drained(), "");
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridMtpEngine,
                         ::testing::Values("tiny-qwen35", "tiny-qwen3next"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace loom
