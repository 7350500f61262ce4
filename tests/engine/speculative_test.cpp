// Speculative decoding (n-gram proposals) through the whole engine on synth's tiny model: every
// sampled row's logits and every token are bit-identical with and without speculation, greedy
// and seeded sampling alike (the engine verifies by sampling each position from the request's
// own generator in plain decoding's order), alone, batched, in prompt chunks, under preemption
// by a small KV pool, with n > 1, stop strings and max_tokens; proposals really ran and were
// partly kept (the counters say so); the KV pool drains and rolled-back blocks are not leaked.
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <functional>

#include "engine/engine_core.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

class SpeculativeEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { bytes_ = test_model_bytes({.preset = "tiny"}); }
  static void TearDownTestSuite() { bytes_.reset(); }

  static EngineConfig config(int k) {
    EngineConfig c;
    c.block_size = 4;
    c.max_num_seqs = 8;
    c.max_model_len = 256;
    c.max_num_batched_tokens = 256;
    c.n_threads = 1;
    c.kv_dtype = Dtype::kF32;
    if (k > 0) {
      c.speculative.method = SpeculativeConfig::Method::kNgram;
      c.speculative.num_speculative_tokens = k;
      c.speculative.prompt_lookup_min = 1;
      c.speculative.prompt_lookup_max = 3;
    }
    return c;
  }
  // `c` speculating with the draft model `draft` instead of n-gram lookup.
  static EngineConfig with_draft(EngineConfig c, const std::string& draft) {
    c.speculative.method = SpeculativeConfig::Method::kDraftModel;
    c.speculative.model = draft;
    c.speculative.prompt_lookup_min = c.speculative.prompt_lookup_max = 0;
    return c;
  }
  // A prompt that repeats a random span, so lookups have something to find from the start.
  static GenerateRequest request(int i, float temperature, int max_tokens = 48) {
    GenerateRequest r;
    r.request_id = "r" + std::to_string(i);
    std::vector<int32_t> span = random_prompt(6 + i % 5, 500 + i, 512);
    for (int rep = 0; rep < 3; ++rep) r.prompt.insert(r.prompt.end(), span.begin(), span.end());
    r.params.max_tokens = max_tokens;
    r.params.temperature = temperature;
    r.params.seed = 11 + i;
    r.params.ignore_eos = true;
    return r;
  }
  std::map<std::string, Collected> run(const EngineConfig& c,
                                       const std::vector<GenerateRequest>& rs) {
    return testing::run_requests(c, bytes_, rs, &metrics_, model_spec_);
  }
  static void expect_same(const std::map<std::string, Collected>& want,
                          const std::map<std::string, Collected>& got, const std::string& what) {
    testing::expect_same_outputs(want, got, what);
  }

  static std::shared_ptr<std::vector<uint8_t>> bytes_;
  EngineMetrics metrics_;
  std::string model_spec_;  // where the engines' model comes from ("": unknown)
  void expect_self_draft_identical();
};
std::shared_ptr<std::vector<uint8_t>> SpeculativeEngine::bytes_;

TEST_F(SpeculativeEngine, GreedyAloneIsIdenticalAndProposalsAreKept) {
  for (int i = 0; i < 4; ++i) {
    const std::vector<GenerateRequest> rs = {request(i, 0.0f)};
    auto plain = run(config(0), rs);
    EXPECT_EQ(metrics_.spec_num_drafts, 0);
    auto spec = run(config(4), rs);
    expect_same(plain, spec, "greedy alone " + std::to_string(i));
    EXPECT_GT(metrics_.spec_num_drafts, 0) << i;
    EXPECT_LE(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
    EXPECT_LE(metrics_.spec_num_draft_tokens, 4 * metrics_.spec_num_drafts);
    // Fewer steps than tokens: proposals were kept, several tokens per step.
    if (metrics_.spec_num_accepted_tokens > 0) {
      EXPECT_LT(metrics_.num_steps, plain.begin()->second.tokens.at(0).size() + 1) << i;
    }
    int64_t per_pos = 0;
    for (int64_t n : metrics_.spec_accepted_per_pos) per_pos += n;
    EXPECT_EQ(per_pos, metrics_.spec_num_accepted_tokens);
  }
}

TEST_F(SpeculativeEngine, AcceptsOnRepetitiveGreedyOutput) {
  int64_t accepted = 0, drafted = 0;
  for (int i = 0; i < 6; ++i) {
    run(config(4), {request(i, 0.0f, 96)});
    accepted += metrics_.spec_num_accepted_tokens;
    drafted += metrics_.spec_num_draft_tokens;
  }
  EXPECT_GT(drafted, 0);
  EXPECT_GT(accepted, 0) << "no proposal was ever kept over " << drafted << " proposed tokens";
}

TEST_F(SpeculativeEngine, SeededSamplingBatchedChunkedAndForkedIsIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, i % 2 ? 0.8f : 0.0f));
  rs[2].params.n = 3;  // forked samples speculate independently
  rs[3].params.max_tokens = 7;
  auto plain = run(config(0), rs);
  for (int k : {1, 3, 5}) {
    EngineConfig c = config(k);
    expect_same(plain, run(c, rs), "batched k=" + std::to_string(k));
    EXPECT_GT(metrics_.spec_num_drafts, 0);
    c.max_num_batched_tokens = 7;  // prompt chunks of 7, verifies cut to the budget
    expect_same(plain, run(c, rs), "chunked k=" + std::to_string(k));
  }
}

TEST_F(SpeculativeEngine, PreemptedByASmallPoolIsIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, 0.7f, 64));
  EngineConfig c0 = config(0);
  auto plain = run(c0, rs);
  EngineConfig c = config(4);
  c.kv_cache_memory_gib = 60.0 * 4 * 2 * 2 * 32 * 4 / (1 << 30);  // ~60 blocks: preemption
  auto spec = run(c, rs);
  expect_same(plain, spec, "preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
}

TEST_F(SpeculativeEngine, StopStringsAndPrefixCacheAfterRollback) {
  std::vector<GenerateRequest> rs = {request(1, 0.0f, 64)};
  auto plain = run(config(0), rs);
  const std::string text = plain.at("r1").text.at(0);
  ASSERT_GT(text.size(), 8u);
  // A stop string taken from the middle of the plain output cuts both runs at the same place.
  rs[0].params.stop = {text.substr(text.size() / 2, 3)};
  auto plain_stop = run(config(0), rs);
  expect_same(plain_stop, run(config(4), rs), "stop string");
  // The same prompt again, after a run that rolled proposals back: a prefix-cache hit over
  // blocks written during verifies gives the same tokens.
  auto e = make_engine(config(4), bytes_);
  rs[0].params.stop.clear();
  for (int round = 0; round < 2; ++round) {
    rs[0].request_id = "again" + std::to_string(round);
    ASSERT_TRUE(e->add_request(rs[0]).is_ok());
    auto out = run_all(*e);
    EXPECT_EQ(out.at(rs[0].request_id).tokens, plain.at("r1").tokens) << round;
    if (round == 1) {
      EXPECT_GT(out.at(rs[0].request_id).num_cached_tokens, 0);
    }
  }
  EXPECT_EQ(e->check_kv_drained(), "");
}

TEST_F(SpeculativeEngine, LargeBatchesDoNotSpeculate) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(request(i, 0.0f));
  auto plain = run(config(0), rs);
  EngineConfig c = config(4);
  c.speculative.disable_by_batch_size = 4;  // never reached by 3 sequences
  expect_same(plain, run(c, rs), "batch under the bound");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  c.speculative.disable_by_batch_size = 1;  // every step has a decoding sequence
  expect_same(plain, run(c, rs), "batch at the bound");
  EXPECT_EQ(metrics_.spec_num_drafts, 0);
}

// Without disable_by_batch_size, a batch larger than its old default (8) still speculates
// while the proposals pay: the target as its own draft keeps every greedy proposal, at any
// batch size, and the outputs are plain decoding's.
TEST_F(SpeculativeEngine, ByDefaultLargeBatchesSpeculateWhileProposalsPay) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(request(i, 0.0f, 32));
  auto plain = run(config(0), rs);
  EngineConfig c = with_draft(config(4), "synth:tiny");
  c.max_num_seqs = 10;
  ASSERT_EQ(c.speculative.disable_by_batch_size, 0);
  expect_same(plain, run(c, rs), "10 sequences, self-draft");
  EXPECT_GE(metrics_.spec_num_drafts, 10 * (32 / 5));  // every sequence, most of its steps
  EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
}

// A draft that disagrees with the target (another model with the same 512-token vocabulary):
// once the first verifies of all sequences keep nothing, each sequence's proposals pause the
// longest back-off after every failed try instead of doubling from one step, so 10 sequences
// of 40 tokens try a few times each; the outputs are plain decoding's.
TEST_F(SpeculativeEngine, ProposalsThatDoNotPayPauseLong) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 10; ++i) rs.push_back(request(i, 0.0f, 40));
  auto plain = run(config(0), rs);
  EngineConfig c = with_draft(config(4), "synth:tiny-qwen35");
  c.max_num_seqs = 10;
  c.block_size = 16;  // a draft with recurrent layers takes whole recurrent chunks
  expect_same(plain, run(c, rs), "10 sequences, a disagreeing draft");
  EXPECT_GE(metrics_.spec_num_drafts, 10);  // every sequence tried
  // A first try each, then one after each 16-step pause (doubling from 1 would try 5 times).
  EXPECT_LE(metrics_.spec_num_drafts, 10 * 3);
  EXPECT_LT(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens / 4);
}

// A host so noisy that the step-time fit finds no per-row cost (held here at 0): proposals that
// are never kept still pause, since a row never costs nothing (StepCostModel::kMinRowShare).
// With a row share of 0 nothing fell below it, and a disagreeing draft proposed at every step.
TEST_F(SpeculativeEngine, ProposalsNeverKeptPauseWhateverTheFittedRowCost) {
  const std::vector<GenerateRequest> rs = {request(0, 0.0f, 120)};
  auto plain = run(config(0), rs);
  EngineConfig c = with_draft(config(4), "synth:tiny-qwen35");
  c.block_size = 16;  // a draft with recurrent layers takes whole recurrent chunks
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(std::move(*file), {});
  ASSERT_TRUE(model.is_ok());
  auto core = EngineCore::create(std::move(*model), nullptr, c);
  ASSERT_TRUE(core.is_ok()) << core.status().message();
  EngineCore& e = **core;
  e.step_cost().hold(8e-3, 0.0);
  ASSERT_EQ(e.step_cost().seconds_per_row(), 0.0);
  ASSERT_TRUE(e.add_request(rs[0]).is_ok());
  std::vector<int32_t> tokens;
  int64_t steps = 0;
  while (e.has_unfinished() && steps < 1000) {
    auto out = e.step();
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    ++steps;
    for (const RequestOutput& o : *out)
      for (const CompletionOutput& co : o.outputs)
        tokens.insert(tokens.end(), co.token_ids.begin(), co.token_ids.end());
  }
  EXPECT_EQ(tokens, plain.at("r0").tokens.at(0));
  const EngineMetrics m = e.metrics();
  // The draft disagrees with this model on this request: nothing is ever kept.
  EXPECT_GT(m.spec_num_drafts, 0);
  ASSERT_EQ(m.spec_num_accepted_tokens, 0);
  // The first verify keeps nothing, then each try waits the longest pause (16 steps): 119
  // decode steps see at most 119 / 17 + 1 tries, where no back-off proposes at all of them.
  EXPECT_LE(m.spec_num_drafts, 119 / 17 + 1);
  EXPECT_EQ(e.check_kv_drained(), "");
}

// A draft whose context (40) is shorter than max_model_len (256) is accepted, as vLLM does:
// it proposes while its positions (the sequence's tokens, then k - 1 proposals) fit in its
// context, fewer proposals near the end of it and none past it; the outputs are plain
// decoding's. The draft is the test model itself with only its context changed, so every
// greedy proposal is kept.
TEST_F(SpeculativeEngine, DraftWithAShorterContextProposesWhileItFits) {
  constexpr int32_t kDraftContext = 40;
  const std::filesystem::path draft_path =
      std::filesystem::path(::testing::TempDir()) /
      ("loom_short_draft_" + std::to_string(::getpid()) + ".gguf");
  {
    auto draft = test_model_bytes({.context_length = kDraftContext});
    std::ofstream f(draft_path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(draft->data()),
            static_cast<std::streamsize>(draft->size()));
    ASSERT_TRUE(f.good());
  }
  const std::vector<GenerateRequest> rs = {request(0, 0.0f, 64)};  // 18 prompt tokens
  ASSERT_EQ(rs[0].prompt.size(), 18u);
  auto plain = run(config(0), rs);
  const EngineConfig c = with_draft(config(4), draft_path.string());
  expect_same(plain, run(c, rs), "draft with a short context");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);

  // Every verify, with the sequence's length when it was proposed.
  auto e = make_engine(c, bytes_);
  ASSERT_TRUE(e != nullptr);
  e->keep_logits(true);
  ASSERT_TRUE(e->add_request(rs[0]).is_ok());
  int32_t len = 18;
  int verifies_near_the_end = 0;
  while (e->has_unfinished()) {
    auto out = e->step();
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    for (const auto& [id, draft] : e->last_drafts()) {
      const int32_t k = static_cast<int32_t>(draft.size());
      // The draft ran positions up to len + k - 2.
      EXPECT_LT(len + k - 2, kDraftContext) << "length " << len << ", " << k << " proposals";
      verifies_near_the_end += len + 4 - 2 >= kDraftContext;
    }
    for (const RequestOutput& o : *out)
      for (const CompletionOutput& co : o.outputs) len += static_cast<int32_t>(co.token_ids.size());
  }
  EXPECT_EQ(len, 18 + 64);
  EXPECT_GT(verifies_near_the_end, 0);  // proposals cut short near the draft's end, not refused
  std::filesystem::remove(draft_path);
}

// The probability of the best token among a row's 10 best at temperature 1: llama.cpp's
// draft sampler's, computed here by sorting the whole row.
float top10_confidence(std::vector<float> row) {
  std::sort(row.begin(), row.end(), std::greater<float>());
  double sum = 0;
  for (size_t i = 0; i < 10 && i < row.size(); ++i)
    sum += std::exp(static_cast<double>(row[i]) - row[0]);
  return static_cast<float>(1.0 / sum);
}

// llama-server's --spec-draft-p-min with the target as its own draft, whose rows' logits are
// the verify's: each step proposes up to the first row where the best token's probability over
// the 10 best is below p_min (the median of plain decoding's rows here, so both sides occur),
// and decodes without a verify where the first is; outputs stay plain decoding's. p_min 1:
// nothing is ever proposed.
TEST_F(SpeculativeEngine, DraftPMinEndsProposalsWhereTheDraftIsUnsure) {
  constexpr int kK = 4, kTokens = 64;
  const std::vector<GenerateRequest> rs = {request(0, 0.0f, kTokens)};
  struct Step {
    std::vector<int32_t> draft;
    std::vector<std::vector<float>> rows;
    int32_t blocks_in_use = 0;  // after the step
  };
  auto steps = [&](const EngineConfig& c) {
    std::vector<Step> out;
    auto e = make_engine(c, bytes_);
    EXPECT_TRUE(e != nullptr);
    if (!e) return out;
    e->keep_logits(true);
    EXPECT_TRUE(e->add_request(rs[0]).is_ok());
    while (e->has_unfinished()) {
      auto so = e->step();
      EXPECT_TRUE(so.is_ok()) << so.status().message();
      if (!so.is_ok()) break;
      Step s;
      for (const auto& [id, d] : e->last_drafts()) s.draft = d;
      for (const auto& [id, row] : e->last_logits()) s.rows.push_back(row);
      const EngineMetrics m = e->metrics();
      s.blocks_in_use = static_cast<int32_t>(std::lround(m.kv_cache_usage * m.num_kv_blocks));
      out.push_back(std::move(s));
    }
    return out;
  };
  std::vector<float> confidences;
  for (const Step& s : steps(config(0))) confidences.push_back(top10_confidence(s.rows.at(0)));
  std::sort(confidences.begin(), confidences.end());
  const float p_min = confidences[confidences.size() / 2];

  auto plain = run(config(0), rs);
  EngineConfig c = with_draft(config(kK), "synth:tiny");
  c.speculative.always_propose = true;  // no back-off: every decode step proposes
  c.speculative.draft_p_min = p_min;
  expect_same(plain, run(c, rs), "self-draft, p_min " + std::to_string(p_min));
  int32_t outputs = 0, unsure_steps = 0, cut_verifies = 0, full_verifies = 0;
  for (const Step& s : steps(c)) {
    const int32_t n = static_cast<int32_t>(s.draft.size());
    ASSERT_EQ(s.rows.size(), static_cast<size_t>(n + 1)) << "every greedy proposal is kept";
    const int32_t allowed = std::min(kK, kTokens - outputs - 1);
    for (int32_t j = 0; j < n; ++j)
      EXPECT_GE(top10_confidence(s.rows[j]), p_min) << "proposal " << j << " after " << outputs;
    if (outputs > 0 && n < allowed) {
      EXPECT_LT(top10_confidence(s.rows[n]), p_min) << "cut at " << n << " after " << outputs;
      (n == 0 ? unsure_steps : cut_verifies) += 1;
    }
    full_verifies += n == kK;
    outputs += n + 1;
    // The lookahead slots a cut draft did not use went back with it (blocks of 4 tokens).
    const int32_t computed = static_cast<int32_t>(rs[0].prompt.size()) + outputs - 1;
    if (outputs < kTokens) {
      EXPECT_EQ(s.blocks_in_use, (computed + 3) / 4) << "after " << outputs;
    }
  }
  EXPECT_EQ(outputs, kTokens);
  EXPECT_GT(unsure_steps, 0);
  EXPECT_GT(cut_verifies + full_verifies, 0);

  c.speculative.draft_p_min = 1.0f;
  expect_same(plain, run(c, rs), "self-draft, p_min 1");
  EXPECT_EQ(metrics_.spec_num_drafts, 0);
}

// The target as its own draft (synth:tiny is the same bytes as the test model): a greedy
// request keeps every proposal, since the draft's single-token logits are bit-identical to the
// target's verify rows; sampled requests keep fewer; outputs are plain decoding's either way,
// also batched, chunked and preempted (the draft's K/V in the target's blocks are rolled back
// and recomputed with them).
TEST_F(SpeculativeEngine, DraftModelOutputsAreIdentical) {
  expect_self_draft_identical();
}

// The same with the engine told its model is synth:tiny: the draft then runs on the target
// model itself (one copy of the weights) with K/V of its own, the two models' forward passes
// interleaved on one set of weights and scratch.
TEST_F(SpeculativeEngine, DraftThatIsTheTargetSharesItsWeights) {
  model_spec_ = "synth:tiny";
  expect_self_draft_identical();
}

void SpeculativeEngine::expect_self_draft_identical() {
  auto draft = [](EngineConfig c) { return with_draft(c, "synth:tiny"); };
  const std::vector<GenerateRequest> greedy = {request(0, 0.0f, 64)};
  auto plain = run(config(0), greedy);
  expect_same(plain, run(draft(config(4)), greedy), "draft greedy");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
  EXPECT_GT(metrics_.spec_draft_seconds, 0.0);
  // 64 tokens in steps of up to 5: the prefill, then about 63 / 5 verifies.
  EXPECT_LE(metrics_.num_steps, 1 + 64 / 5 + 2);

  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, i % 2 ? 0.9f : 0.0f, 48));
  rs[2].params.n = 2;
  auto plain_batch = run(config(0), rs);
  EngineConfig c = draft(config(3));
  expect_same(plain_batch, run(c, rs), "draft batched");
  EXPECT_LT(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
  c.max_num_batched_tokens = 7;
  expect_same(plain_batch, run(c, rs), "draft chunked");
  c = draft(config(3));
  c.kv_cache_memory_gib = 60.0 * 4 * 2 * 2 * 32 * 4 / (1 << 30);
  expect_same(plain_batch, run(c, rs), "draft preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
}

// A sliding-window draft (Gemma 3's 5:1 pattern, windows of 8 tokens) proposes what the target
// computes: sequences long past the window keep every greedy self-draft proposal, alone and
// batched (the draft's window layers attend over the same positions as the target's).
TEST_F(SpeculativeEngine, SlidingWindowSelfDraftKeepsEveryProposal) {
  auto bytes = test_model_bytes({.preset = "tiny-swa"});
  EngineConfig c = config(0);
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 3; ++i) {
    GenerateRequest r;
    r.request_id = "w" + std::to_string(i);
    r.prompt = random_prompt(20 + 7 * i, 900 + i, 512);
    r.params.max_tokens = 40;
    r.params.temperature = 0;
    r.params.ignore_eos = true;
    rs.push_back(r);
  }
  EngineMetrics m;
  auto plain = testing::run_requests(c, bytes, rs, &m);
  c.speculative.method = SpeculativeConfig::Method::kDraftModel;
  c.speculative.model = "synth:tiny-swa";
  c.speculative.num_speculative_tokens = 4;
  for (const std::string& spec : {std::string(), std::string("synth:tiny-swa")}) {
    auto got = testing::run_requests(c, bytes, rs, &m, spec);
    testing::expect_same_outputs(plain, got, "sliding-window self-draft " + spec);
    EXPECT_GT(m.spec_num_draft_tokens, 0) << spec;
    EXPECT_EQ(m.spec_num_accepted_tokens, m.spec_num_draft_tokens) << spec;
  }
}

// Preemption frees a sequence's blocks; back in, it gets others, which hold some other
// sequence's draft K/V (or none): its draft starts over from position 0, so a greedy
// self-draft keeps every proposal through preemptions too.
TEST_F(SpeculativeEngine, GreedySelfDraftKeepsEveryProposalThroughPreemption) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 6; ++i) rs.push_back(request(i, 0.0f, 48));
  auto plain = run(config(0), rs);
  EngineConfig c = with_draft(config(3), "synth:tiny");
  c.kv_cache_memory_gib = 60.0 * 4 * 2 * 2 * 32 * 4 / (1 << 30);  // ~60 blocks: preemption
  expect_same(plain, run(c, rs), "greedy self-draft preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
}

// Acceptance counts what acceptance decided, before stop checks (vLLM's counters): a greedy
// self-draft keeps every proposal, also in the verify a stop token ends mid-way, whose later
// proposals the output never shows. Stop tokens at five consecutive places of the output land
// mid-verify (steps of up to 4 tokens) for most of them.
TEST_F(SpeculativeEngine, StopMidVerifyCountsEveryProposalAcceptanceKeeps) {
  const std::vector<GenerateRequest> greedy = {request(0, 0.0f, 40)};
  const std::vector<int32_t> out = run(config(0), greedy).at("r0").tokens.at(0);
  ASSERT_EQ(out.size(), 40u);
  int stopped_mid_verify = 0;
  for (size_t at = 12; at < 17; ++at) {
    std::vector<GenerateRequest> rs = greedy;
    rs[0].params.stop_token_ids = {out[at]};
    const size_t first = std::find(out.begin(), out.end(), out[at]) - out.begin();
    auto plain = run(config(0), rs);
    ASSERT_EQ(plain.at("r0").tokens.at(0).size(), first + 1);
    expect_same(plain, run(with_draft(config(3), "synth:tiny"), rs), "self-draft, stop token");
    EXPECT_GT(metrics_.spec_num_drafts, 0);
    EXPECT_EQ(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens) << at;
    int64_t per_pos = 0;
    for (int64_t n : metrics_.spec_accepted_per_pos) per_pos += n;
    EXPECT_EQ(per_pos, metrics_.spec_num_accepted_tokens);
    // Generated first + 1 tokens: the prompt's sample, then verifies of 4 tokens each.
    stopped_mid_verify += first % 4 != 0;
  }
  EXPECT_GT(stopped_mid_verify, 0);
}

// A draft with recurrent layers (tiny-qwen35 has this model's vocabulary) has one state slot
// per sequence max_num_seqs allows, but forked samples join the running set beyond it: 2
// requests of n = 3 at max_num_seqs 2 decode 6 sequences. Those without a slot decode without
// proposals until one frees (this aborted on a full slot pool), and outputs stay plain's.
TEST_F(SpeculativeEngine, RecurrentDraftWithMoreSequencesThanSlots) {
  std::vector<GenerateRequest> rs = {request(0, 0.0f, 40), request(1, 0.8f, 40)};
  for (GenerateRequest& r : rs) r.params.n = 3;
  EngineConfig c = config(0);
  c.max_num_seqs = 2;
  c.block_size = 16;  // a recurrent draft's states are checkpointed per chunk of 16
  auto plain = run(c, rs);
  c = with_draft(config(3), "synth:tiny-qwen35");
  c.max_num_seqs = 2;
  c.block_size = 16;
  expect_same(plain, run(c, rs), "forked past the draft's slots");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
}

TEST_F(SpeculativeEngine, DraftModelMustShareTheVocabulary) {
  EngineConfig c = config(4);
  c.speculative.method = SpeculativeConfig::Method::kDraftModel;
  c.speculative.model = "synth:tiny-qwen3";  // Qwen3's 151,936-token vocabulary
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(std::move(*file), {});
  ASSERT_TRUE(model.is_ok());
  auto e = Engine::create(std::move(*model), nullptr, c);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("vocabulary"), std::string::npos) << e.status().message();
}

TEST_F(SpeculativeEngine, BadConfigIsRefused) {
  EngineConfig c = config(4);
  c.speculative.prompt_lookup_min = 5;
  c.speculative.prompt_lookup_max = 2;
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(std::move(*file), {});
  ASSERT_TRUE(model.is_ok());
  auto e = Engine::create(std::move(*model), nullptr, c);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("prompt_lookup_min"), std::string::npos);
}

}  // namespace
}  // namespace loom
