// Speculative decoding on hybrid models (Gated DeltaNet + attention) through the whole engine.
// A verify's rejected proposals are taken back from the recurrent states as from the KV blocks
// (backend/cpu/gated_deltanet.h "Rollback"), so every sampled row's logits and every token are
// the bits of plain decoding: n-gram, draft-model (dense and hybrid) and MTP proposals (the
// Qwen-style module each preset carries), greedy and seeded sampling, alone, batched, forked,
// in prompt chunks, preempted, and resumed from prefix snapshots; the proposals really ran and
// some were kept; every state slot and block is free after a drain. (Random weights keep MTP's
// acceptance near zero: its tests check exactness, not speed.)
#include <gtest/gtest.h>

#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

class HybridSpeculative : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { bytes_ = test_model_bytes({.preset = GetParam()}); }

  // k = 0: no speculation; else n-gram lookup proposing up to k tokens.
  static EngineConfig config(int k) {
    EngineConfig c;
    c.max_model_len = 512;
    c.max_num_seqs = 8;
    c.n_threads = 2;
    c.kv_dtype = Dtype::kF32;
    c.commit_kv_in_background = false;
    if (k > 0) {
      c.speculative.method = SpeculativeConfig::Method::kNgram;
      c.speculative.num_speculative_tokens = k;
      c.speculative.prompt_lookup_min = 1;
      c.speculative.prompt_lookup_max = 3;
    }
    return c;
  }
  static EngineConfig mtp(EngineConfig c) {
    c.speculative.method = SpeculativeConfig::Method::kMtp;
    c.speculative.prompt_lookup_min = c.speculative.prompt_lookup_max = 0;
    return c;
  }
  static EngineConfig draft_model(EngineConfig c) {
    c.speculative.method = SpeculativeConfig::Method::kDraftModel;
    c.speculative.model = "synth:tiny";  // a dense model with the same 512-token vocabulary
    c.speculative.prompt_lookup_min = c.speculative.prompt_lookup_max = 0;
    return c;
  }
  // A prompt that repeats a random span (lookups find something from the start), of a length
  // that puts the first verifies at different offsets inside a recurrent chunk.
  static GenerateRequest request(int i, float temperature, int max_tokens = 48) {
    GenerateRequest r;
    r.request_id = "r" + std::to_string(i);
    const std::vector<int32_t> span = random_prompt(6 + i % 5, 700 + i, 512);
    for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), span.begin(), span.end());
    r.params.max_tokens = max_tokens;
    r.params.temperature = temperature;
    r.params.seed = 31 + i;
    r.params.ignore_eos = true;
    return r;
  }
  std::map<std::string, Collected> run(const EngineConfig& c,
                                       const std::vector<GenerateRequest>& rs) {
    return testing::run_requests(c, bytes_, rs, &metrics_, model_spec_);
  }
  void expect_self_draft_identical();

  std::shared_ptr<std::vector<uint8_t>> bytes_;
  EngineMetrics metrics_;
  std::string model_spec_;  // where the engines' model comes from ("": unknown)
};

TEST_P(HybridSpeculative, NgramGreedyAloneIsIdenticalAndProposalsAreKept) {
  int64_t drafted = 0, accepted = 0;
  for (int i = 0; i < 4; ++i) {
    const std::vector<GenerateRequest> rs = {request(i, 0.0f, 80)};
    auto plain = run(config(0), rs);
    for (int k : {4, 15}) {
      testing::expect_same_outputs(plain, run(config(k), rs),
                                   "greedy " + std::to_string(i) + ", k " + std::to_string(k));
      EXPECT_GT(metrics_.spec_num_drafts, 0) << i;
      EXPECT_LE(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
      drafted += metrics_.spec_num_draft_tokens;
      accepted += metrics_.spec_num_accepted_tokens;
    }
  }
  EXPECT_GT(accepted, 0) << "no proposal was ever kept over " << drafted << " proposed tokens";
}

TEST_P(HybridSpeculative, SeededBatchedForkedChunkedAndPreemptedIsIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, i % 2 ? 0.8f : 0.0f));
  rs[2].params.n = 3;  // forked samples speculate independently, each with its own state
  rs[3].params.max_tokens = 7;
  auto plain = run(config(0), rs);
  for (int k : {1, 3, 7}) {
    EngineConfig c = config(k);
    testing::expect_same_outputs(plain, run(c, rs), "batched k=" + std::to_string(k));
    EXPECT_GT(metrics_.spec_num_drafts, 0);
    EXPECT_GT(metrics_.spec_num_accepted_tokens, 0) << k;
    if (k > 1) {  // sampled tokens leave the lookups' guesses: some are taken back
      EXPECT_LT(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens) << k;
    }
    c.max_num_batched_tokens = 7;  // prompt chunks of 7, verifies cut to the budget
    c.shared_prefill_tokens = 7;
    testing::expect_same_outputs(plain, run(c, rs), "chunked k=" + std::to_string(k));
  }
  // Preempted all the time (a pool of 14 blocks), with prefix caching on: preempted sequences
  // resume from state snapshots taken between verifies.
  EngineConfig c = config(4);
  c.max_num_batched_tokens = 40;
  c.shared_prefill_tokens = 40;
  c.enable_prefix_caching = true;
  c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
  testing::expect_same_outputs(plain, run(c, rs), "preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
}

TEST_P(HybridSpeculative, PrefixCacheHitAfterRollbacksIsIdentical) {
  std::vector<GenerateRequest> rs = {request(1, 0.0f, 64)};
  auto plain = run(config(0), rs);
  // The same request again: the second run resumes from state snapshots the first one took
  // between its verifies.
  testing::expect_rerun_hits_prefix(config(4), bytes_, rs[0], plain.at("r1").tokens);
}

// The next turn of a conversation (this one's prompt and output, then more) resumes from the
// state at the last block boundary this turn computed, also where a verify crossed that
// boundary inside its proposals (their state is snapshotted as if kept, and dropped when not).
// Before, only boundaries a verify's first row reached were snapshotted, and with most
// proposals kept the next turn re-ran most of this turn's output.
TEST_P(HybridSpeculative, NextTurnResumesFromTheLastBoundary) {
  EngineConfig c = config(4);
  c.enable_prefix_caching = true;
  auto e = make_engine(c, bytes_);
  ASSERT_TRUE(e != nullptr);
  std::vector<GenerateRequest> next_turns;
  std::map<std::string, std::map<int32_t, std::vector<int32_t>>> resumed;
  for (int i = 0; i < 3; ++i) {
    GenerateRequest first = request(i, 0.0f, 72);
    ASSERT_TRUE(e->add_request(first).is_ok());
    const std::vector<int32_t> out = run_all(*e).at(first.request_id).tokens.at(0);
    GenerateRequest next = first;
    next.request_id = first.request_id + "-next";
    next.prompt.insert(next.prompt.end(), out.begin(), out.end());
    for (int32_t t : random_prompt(5, 900 + i, 512)) next.prompt.push_back(t);
    next.params.max_tokens = 12;
    const int32_t computed = static_cast<int32_t>(first.prompt.size() + out.size()) - 1;
    const int32_t bs = c.block_size;
    ASSERT_TRUE(e->add_request(next).is_ok());
    const auto got = run_all(*e).at(next.request_id);
    EXPECT_EQ(got.num_cached_tokens, computed / bs * bs) << i;
    resumed[next.request_id] = got.tokens;
    next_turns.push_back(next);
  }
  EXPECT_GT(e->metrics().spec_num_accepted_tokens, 0);
  EXPECT_EQ(e->check_kv_drained(), "");
  // Resumed from those states, the next turns generate what they do from scratch.
  auto again = make_engine(c, bytes_);
  ASSERT_TRUE(again != nullptr);
  for (const GenerateRequest& r : next_turns) ASSERT_TRUE(again->add_request(r).is_ok());
  const auto fresh = run_all(*again);
  for (const GenerateRequest& r : next_turns)
    EXPECT_EQ(resumed.at(r.request_id), fresh.at(r.request_id).tokens) << r.request_id;
}

TEST_P(HybridSpeculative, DenseDraftModelOutputsAreIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(request(i, i % 2 ? 0.9f : 0.0f, 40));
  auto plain = run(config(0), rs);
  EngineConfig c = draft_model(config(4));
  testing::expect_same_outputs(plain, run(c, rs), "draft batched");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  EXPECT_GT(metrics_.spec_draft_seconds, 0.0);
  c.max_num_batched_tokens = 9;
  c.shared_prefill_tokens = 9;
  testing::expect_same_outputs(plain, run(c, rs), "draft chunked");
}

// The target as its own draft: a draft with recurrent states of its own (one slot per
// sequence, taking back what the verify rejects). Greedy, it always agrees; sampled, batched
// and preempted, it is taken back often; either way the outputs are plain decoding's.
TEST_P(HybridSpeculative, HybridDraftModelOutputsAreIdentical) {
  expect_self_draft_identical();
}

// The same on one model: the engine knows its model is the draft's spec, so the draft runs on
// the target's weights with K/V and recurrent state slots of its own.
TEST_P(HybridSpeculative, DraftThatIsTheTargetSharesItsWeights) {
  model_spec_ = "synth:" + GetParam();
  expect_self_draft_identical();
}

void HybridSpeculative::expect_self_draft_identical() {
  auto self_draft = [&](EngineConfig c) {
    c = draft_model(c);
    c.speculative.model = "synth:" + GetParam();
    return c;
  };
  const std::vector<GenerateRequest> greedy = {request(0, 0.0f, 64)};
  auto plain = run(config(0), greedy);
  testing::expect_same_outputs(plain, run(self_draft(config(4)), greedy), "self-draft greedy");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
  // 64 tokens in steps of up to 5: the prefill, then about 63 / 5 verifies.
  EXPECT_LE(metrics_.num_steps, 1 + 64 / 5 + 2);

  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, i % 2 ? 0.9f : 0.0f, 48));
  rs[2].params.n = 2;
  auto plain_batch = run(config(0), rs);
  EngineConfig c = self_draft(config(3));
  testing::expect_same_outputs(plain_batch, run(c, rs), "self-draft batched");
  EXPECT_LT(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
  c.max_num_batched_tokens = 40;
  c.shared_prefill_tokens = 40;
  c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
  testing::expect_same_outputs(plain_batch, run(c, rs), "self-draft preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
}

// Preemption frees a sequence's blocks and its draft's state slot; back in, it gets other
// blocks, which hold some other sequence's draft K/V (or none), so its draft starts over from
// position 0: a greedy self-draft keeps every proposal through preemptions too.
TEST_P(HybridSpeculative, GreedySelfDraftKeepsEveryProposalThroughPreemption) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, 0.0f, 48));
  auto plain = run(config(0), rs);
  EngineConfig c = draft_model(config(3));
  c.speculative.model = "synth:" + GetParam();
  c.max_num_batched_tokens = 40;
  c.shared_prefill_tokens = 40;
  c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
  testing::expect_same_outputs(plain, run(c, rs), "greedy self-draft preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
}

// --spec-draft-p-min on a hybrid model: drafts of a recurrent self-draft and of MTP cut short
// where the proposer is unsure (verifies of fewer rows than planned, the state snapshots and
// lookahead slots given back accordingly), batched, sampled and preempted with prefix caching
// on: outputs stay plain decoding's.
TEST_P(HybridSpeculative, DraftPMinCutsAreIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 5; ++i) rs.push_back(request(i, i % 2 ? 0.8f : 0.0f, 40));
  rs[2].params.n = 2;
  auto plain = run(config(0), rs);
  constexpr int kK = 3;
  int64_t planned = 0, proposed = 0;
  for (const bool use_mtp : {false, true}) {
    // A random model is rarely sure (0.1 over 10 equal logits): low bounds, for both presets.
    for (const float p_min : {0.11f, 0.13f, 0.16f, 0.2f, 0.3f}) {
      EngineConfig c = use_mtp ? mtp(config(kK)) : draft_model(config(kK));
      if (!use_mtp) c.speculative.model = "synth:" + GetParam();
      c.speculative.always_propose = true;
      c.speculative.draft_p_min = p_min;
      c.max_num_batched_tokens = 40;
      c.shared_prefill_tokens = 40;
      c.enable_prefix_caching = true;
      c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
      const std::string what =
          std::string(use_mtp ? "mtp" : "self-draft") + ", p_min " + std::to_string(p_min);
      testing::expect_same_outputs(plain, run(c, rs), what);
      EXPECT_GT(metrics_.num_preemptions, 0) << what;
      planned += kK * metrics_.spec_num_drafts;
      proposed += metrics_.spec_num_draft_tokens;
    }
  }
  EXPECT_LT(proposed, planned) << "no draft was cut short";
  EXPECT_GT(proposed, 0);
}

TEST_P(HybridSpeculative, TooManyProposalsAreRefusedByName) {
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(std::move(*file), {});
  ASSERT_TRUE(model.is_ok());
  const Status many = Engine::create(std::move(*model), nullptr, config(16)).status();
  EXPECT_FALSE(many.is_ok());
  EXPECT_NE(many.message().find("num_speculative_tokens 16"), std::string::npos) << many.message();
  EXPECT_NE(many.message().find("at most 15"), std::string::npos) << many.message();
}

TEST_P(HybridSpeculative, MtpGreedyAloneIsIdenticalAndProposalsRan) {
  for (int i = 0; i < 3; ++i) {
    const std::vector<GenerateRequest> rs = {request(i, 0.0f)};
    auto plain = run(config(0), rs);
    for (int k : {1, 2, 4}) {
      testing::expect_same_outputs(plain, run(mtp(config(k)), rs),
                                   "greedy " + std::to_string(i) + ", k " + std::to_string(k));
      EXPECT_GT(metrics_.spec_num_drafts, 0) << i << " k=" << k;
      EXPECT_LE(metrics_.spec_num_draft_tokens, k * metrics_.spec_num_drafts);
      EXPECT_LE(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
      EXPECT_GT(metrics_.spec_draft_seconds, 0.0);
    }
  }
}

TEST_P(HybridSpeculative, MtpSeededBatchedForkedChunkedAndPreemptedIsIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 5; ++i) rs.push_back(request(i, i % 2 ? 0.8f : 0.0f));
  rs[1].params.n = 2;  // forked samples: their own states, the prompt's module K/V shared
  rs[3].params.max_tokens = 6;
  auto plain = run(config(0), rs);
  EngineConfig c = mtp(config(3));
  testing::expect_same_outputs(plain, run(c, rs), "batched");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  c.max_num_batched_tokens = 7;  // prompt chunks of 7: the module runs over each chunk
  c.shared_prefill_tokens = 7;
  testing::expect_same_outputs(plain, run(c, rs), "chunked");
  // Preempted all the time (a pool of 14 blocks), prefix caching on: preempted sequences
  // resume from state snapshots.
  c = mtp(config(3));
  c.max_num_batched_tokens = 40;
  c.shared_prefill_tokens = 40;
  c.enable_prefix_caching = true;
  c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
  testing::expect_same_outputs(plain, run(c, rs), "preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
}

TEST_P(HybridSpeculative, MtpPrefixCacheHitIsIdentical) {
  std::vector<GenerateRequest> rs = {request(2, 0.0f)};
  rs[0].prompt = random_prompt(40, 702, 512);  // full blocks: a hybrid hits at a state snapshot
  auto plain = run(config(0), rs);
  EngineConfig c = mtp(config(2));
  c.enable_prefix_caching = true;
  testing::expect_rerun_hits_prefix(c, bytes_, rs[0], plain.at("r2").tokens);
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridSpeculative,
                         ::testing::Values("tiny-qwen35", "tiny-qwen3next"), [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace loom
