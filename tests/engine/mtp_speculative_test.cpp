// Speculative decoding with the model's own multi-token prediction layer (method "mtp") on
// synth's tiny-mla (DeepSeek-V3's layout with one MTP module, random weights): the proposer's
// proposals are those of the independent reference module (tests/reference) chained as vLLM
// chains them, after a prompt and after a decode whose row overwrote a chained one; through the
// engine, outputs and every sampled row's logits are identical with and without MTP
// speculation (greedy and seeded, alone, batched with n > 1, in prompt chunks, under
// preemption), proposals ran (the counters say so), and the KV pool drains. Random weights keep
// acceptance near zero: what is checked here is exactness, not speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>

#include "reference/reference_model.h"
#include "spec/mtp_proposer.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

// The reference's argmax of a logits row, and whether it is clear of the runner-up by more
// than float rounding could move it (a near tie could flip between two correct passes).
struct Pick {
  int32_t token;
  bool clear;
};
Pick pick(const float* row, int32_t n) {
  int32_t best = 0, second = -1;
  for (int32_t i = 1; i < n; ++i) {
    if (row[i] > row[best]) {
      second = best;
      best = i;
    } else if (second < 0 || row[i] > row[second]) {
      second = i;
    }
  }
  double scale = 0;
  for (int32_t i = 0; i < n; ++i) scale = std::max(scale, std::fabs(static_cast<double>(row[i])));
  return {best, row[best] - row[second] > 1e-4 * scale};
}

// The target's rows [begin, end) of one sequence (blocks 0..7 of `kv`, state slot 0 for a
// hybrid): appends every row's hidden state a module reads (before the final norm, or after it:
// ModelConfig::mtp_hidden_after_norm); returns the last row's greedy token.
int32_t target_rows(Model& m, KvCache& kv, const std::vector<int32_t>& tokens, int32_t begin,
                    int32_t end, const std::vector<int32_t>& table, std::vector<float>& pre) {
  const int64_t E = m.config().n_embd, V = m.config().n_vocab;
  Batch b;
  b.sequences.push_back({table.data(), static_cast<int32_t>(table.size()), begin, end - begin, 0});
  if (kv.num_state_slots() > 0) b.sequences[0].state_slot = 0;
  for (int32_t p = begin; p < end; ++p) {
    b.tokens.push_back(tokens[p]);
    b.pos.push_back(p);
    b.seq.push_back(0);
  }
  b.logits_rows.push_back(end - begin - 1);
  std::vector<float> logits(V), h((end - begin) * E);
  Status st = m.forward(b, kv, logits.data(), nullptr, h.data());
  EXPECT_TRUE(st.is_ok()) << st.message();
  pre.insert(pre.end(), h.begin(), h.end());
  return static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The reference's k chained proposals after `tokens` (n of them), given the target's states
// of positions 0..n-2 (those a module reads): module rows p = 0..n-2 pair t_{p+1} with h_p;
// proposal j >= 1 appends a row pairing proposal j-1 with the previous row's output state.
std::vector<Pick> reference_chain(const ModelConfig& c, const GgufFile& f,
                                  const std::vector<int32_t>& tokens, const std::vector<float>& pre,
                                  int k) {
  const int64_t E = c.n_embd, V = c.n_vocab;
  const size_t n = tokens.size();
  std::vector<int32_t> in_tokens(tokens.begin() + 1, tokens.end());
  std::vector<float> in_hidden(pre.begin(), pre.begin() + (n - 1) * E);
  std::vector<Pick> picks;
  for (int j = 0; j < k; ++j) {
    std::vector<float> out;
    auto logits =
        reference::mtp_forward(c, reference::gguf_lookup(f), 0, in_tokens, in_hidden, &out);
    EXPECT_TRUE(logits.is_ok()) << logits.status().message();
    if (!logits.is_ok()) return picks;
    const size_t last = in_tokens.size() - 1;
    picks.push_back(pick(logits->data() + last * V, static_cast<int32_t>(V)));
    in_tokens.push_back(picks.back().token);
    in_hidden.insert(in_hidden.end(), out.begin() + last * E, out.begin() + (last + 1) * E);
  }
  return picks;
}

// The proposer's k = 3 proposals after a prompt and after a decode are the reference module's,
// chained on its output states, for synth preset `preset`.
void check_proposals_are_reference_chain(const std::string& preset) {
  auto bytes = test_model_bytes({.preset = preset});
  auto file = GgufFile::parse_bytes(bytes).value();
  auto model = Model::from_gguf(GgufFile::parse_bytes(bytes).value(), {2}).value();
  const ModelConfig& c = model->config();
  ASSERT_EQ(c.n_mtp_layers, 1);
  auto kv = KvCache::create(c, 8, 16, Dtype::kF32).value();
  std::vector<int32_t> table = {0, 1, 2, 3, 4, 5, 6, 7};
  auto proposer = spec::MtpProposer::create(*model, 8, 16, Dtype::kF32);
  ASSERT_TRUE(proposer.is_ok()) << proposer.status().message();
  spec::MtpProposer& p = **proposer;

  std::vector<int32_t> tokens = random_prompt(10, 3, c.n_vocab);
  std::vector<float> pre;
  int checked = 0, near_ties = 0;
  // Round 0: the prompt (positions 0..9), then its greedy token; round 1: that token decoded
  // (position 10, whose module K/V the chain of round 0 had written), then the next one.
  for (int round = 0; round < 2; ++round) {
    const int32_t begin = round == 0 ? 0 : static_cast<int32_t>(tokens.size()) - 1;
    const int32_t end = static_cast<int32_t>(tokens.size());
    const size_t pre_before = pre.size();
    tokens.push_back(target_rows(*model, *kv, tokens, begin, end, table, pre));
    spec::HiddenProposal hp;
    const spec::ObservedSeq seen = {tokens,      table.data(),     8,  begin,
                                    end - begin, &pre[pre_before], &hp};
    ASSERT_TRUE(p.observe({&seen, 1}).is_ok());
    EXPECT_EQ(hp.at_tokens, static_cast<int32_t>(tokens.size()));
    ASSERT_EQ(hp.hidden.size(), static_cast<size_t>(c.n_embd));
    const int k = 3;
    std::vector<int32_t> draft(k, -1);
    int32_t draft_computed = 0;
    spec::DraftSeq ds = {tokens, table.data(), 8, 0, &draft_computed, &draft, &hp};
    ASSERT_TRUE(p.fill({&ds, 1}).is_ok());
    const std::vector<Pick> want = reference_chain(c, file, tokens, pre, k);
    ASSERT_EQ(want.size(), static_cast<size_t>(k));
    for (int j = 0; j < k; ++j) {
      if (!want[j].clear) {  // a near tie: either token is right; later ones chain on it
        ++near_ties;
        break;
      }
      EXPECT_EQ(draft[j], want[j].token) << "round " << round << " proposal " << j;
      ++checked;
    }
    EXPECT_EQ(hp.token, draft[0]);
  }
  EXPECT_GE(checked, 4) << near_ties << " near ties";
  EXPECT_GT(p.seconds(), 0.0);
  EXPECT_EQ(p.rows_run(), 10 + 2 + 1 + 2);  // prompt rows + 2 chained, 1 decode row + 2 chained
}

TEST(MtpProposer, ProposalsAreTheReferenceModulesChained) {
  check_proposals_are_reference_chain("tiny-mla");
}

// Qwen3-Next's and Qwen3.5's modules behind Gated DeltaNet hybrids: they read the target's
// final-norm states and chain on their own normed output.
class HybridMtpProposer : public ::testing::TestWithParam<std::string> {};
TEST_P(HybridMtpProposer, ProposalsAreTheReferenceModulesChained) {
  check_proposals_are_reference_chain(GetParam());
}
INSTANTIATE_TEST_SUITE_P(Presets, HybridMtpProposer,
                         ::testing::Values("tiny-qwen3next", "tiny-qwen35"), [](const auto& info) {
                           std::string name = info.param;
                           std::replace(name.begin(), name.end(), '-', '_');
                           return name;
                         });

class MtpEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { bytes_ = test_model_bytes({.preset = "tiny-mla"}); }
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
  static void expect_same(const std::map<std::string, Collected>& want,
                          const std::map<std::string, Collected>& got, const std::string& what) {
    testing::expect_same_outputs(want, got, what);
  }
  static std::shared_ptr<std::vector<uint8_t>> bytes_;
  EngineMetrics metrics_;
};
std::shared_ptr<std::vector<uint8_t>> MtpEngine::bytes_;

TEST_F(MtpEngine, GreedyAloneIsIdenticalAndProposalsRan) {
  for (int i = 0; i < 3; ++i) {
    const std::vector<GenerateRequest> rs = {request(i, 0.0f)};
    auto plain = run(config(0), rs);
    for (int k : {1, 2, 4}) {
      expect_same(plain, run(config(k), rs), "greedy k=" + std::to_string(k));
      EXPECT_GT(metrics_.spec_num_drafts, 0) << i << " k=" << k;
      EXPECT_LE(metrics_.spec_num_draft_tokens, k * metrics_.spec_num_drafts);
      EXPECT_LE(metrics_.spec_num_accepted_tokens, metrics_.spec_num_draft_tokens);
      EXPECT_GT(metrics_.spec_draft_seconds, 0.0);
      int64_t per_pos = 0;
      for (int64_t n : metrics_.spec_accepted_per_pos) per_pos += n;
      EXPECT_EQ(per_pos, metrics_.spec_num_accepted_tokens);
    }
  }
}

// llama-server's --spec-draft-p-min on MTP's proposals: at 1 the module is never sure enough
// (no proposals at all), just above 0 it proposes as without it; outputs stay plain decoding's,
// and a bound between cuts some proposals short.
TEST_F(MtpEngine, DraftPMinEndsProposals) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(request(i, i == 1 ? 0.8f : 0.0f));
  auto plain = run(config(0), rs);
  EngineConfig c = config(3);
  c.speculative.always_propose = true;  // no back-off: every decode step proposes
  expect_same(plain, run(c, rs), "p_min 0");
  const int64_t drafts = metrics_.spec_num_drafts, tokens = metrics_.spec_num_draft_tokens;
  EXPECT_GT(drafts, 0);
  c.speculative.draft_p_min = 1e-9f;
  expect_same(plain, run(c, rs), "p_min 1e-9");
  EXPECT_EQ(metrics_.spec_num_drafts, drafts);
  EXPECT_EQ(metrics_.spec_num_draft_tokens, tokens);
  c.speculative.draft_p_min = 1.0f;
  expect_same(plain, run(c, rs), "p_min 1");
  EXPECT_EQ(metrics_.spec_num_drafts, 0);
  c.speculative.draft_p_min = 0.25f;
  expect_same(plain, run(c, rs), "p_min 0.25");
  EXPECT_LT(metrics_.spec_num_draft_tokens, tokens);
}

TEST_F(MtpEngine, SeededBatchedForkedChunkedAndPreemptedIsIdentical) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 5; ++i) rs.push_back(request(i, i % 2 ? 0.8f : 0.0f));
  rs[1].params.n = 2;  // forked samples share the prompt's blocks (and their module K/V)
  rs[3].params.max_tokens = 6;
  auto plain = run(config(0), rs);
  EngineConfig c = config(3);
  expect_same(plain, run(c, rs), "batched");
  EXPECT_GT(metrics_.spec_num_drafts, 0);
  c.max_num_batched_tokens = 7;  // prompt chunks of 7: the module runs over each chunk
  expect_same(plain, run(c, rs), "chunked");
  c = config(3);
  // ~60 blocks of 4 tokens (2 MLA layers of 32 + 8 floats per token): preemption.
  c.kv_cache_memory_gib = 60.0 * 4 * 2 * 40 * 4 / (1 << 30);
  expect_same(plain, run(c, rs), "preempted");
  EXPECT_GT(metrics_.num_preemptions, 0);
  EXPECT_GT(metrics_.spec_num_drafts, 0);
}

// disable_by_batch_size: no proposals (the module then only keeps its K/V), same outputs.
TEST_F(MtpEngine, LargeBatchesDoNotSpeculate) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 3; ++i) rs.push_back(request(i, 0.0f, 16));
  auto plain = run(config(0), rs);
  EngineConfig c = config(2);
  c.speculative.disable_by_batch_size = 1;
  expect_same(plain, run(c, rs), "batch at the bound");
  EXPECT_EQ(metrics_.spec_num_drafts, 0);
  EXPECT_GT(metrics_.spec_draft_seconds, 0.0);  // the module still ran over every row
}

TEST_F(MtpEngine, PrefixCacheHitIsIdentical) {
  std::vector<GenerateRequest> rs = {request(2, 0.0f)};
  auto plain = run(config(0), rs);
  testing::expect_rerun_hits_prefix(config(2), bytes_, rs[0], plain.at("r2").tokens);
}

// The module's K/V at a position pairs the target's hidden state there with the next token's
// embedding, so the last cached position's pairs with a token past the hit: with MTP a hit
// gives its last block back (recomputed with the sequence's own next token), as vLLM does.
TEST_F(MtpEngine, PrefixHitsGiveTheirLastBlockBack) {
  GenerateRequest r = request(2, 0.0f, 4);  // a 15-token prompt: 3 whole blocks before its last
  for (const int k : {0, 2}) {
    auto e = make_engine(config(k), bytes_);
    ASSERT_TRUE(e != nullptr);
    int32_t cached = -1;
    for (int round = 0; round < 2; ++round) {
      r.request_id = "again" + std::to_string(round);
      ASSERT_TRUE(e->add_request(r).is_ok());
      cached = run_all(*e).at(r.request_id).num_cached_tokens;
    }
    EXPECT_EQ(cached, k == 0 ? 12 : 8) << "k=" << k;
  }
}

// A chat's turns: each turn's prompt is the previous turn's tokens and more. Rows computed in
// a turn's last step (all of its prompt's when it generates one token) land in blocks that
// enter the prefix cache when it finishes; the next turns' hits read their module K/V (the
// next turn gives its hit's last block back, above, but recomputes it into a new block while
// the cache keeps the first under that hash, which the third turn's hit then reads). The third
// turn's proposals must be those computed without prefix caching: every cached position's
// module K/V written (a finishing sequence is observed before its blocks go).
TEST_F(MtpEngine, ThirdTurnProposalsAreThoseWithoutTheCache) {
  EngineConfig cached = config(2);
  cached.speculative.always_propose = true;
  EngineConfig uncached = cached;
  uncached.enable_prefix_caching = false;
  // 32 blocks, every one first written by two other requests of 17 blocks each (an unwritten
  // module entry then holds their K/V, not zeros, which a softmax could all but ignore).
  cached.kv_cache_memory_gib = testing::kv_gib_for_blocks(cached, bytes_, 32);
  std::vector<GenerateRequest> others = {request(6, 0.0f, 8), request(7, 0.0f, 8)};
  for (GenerateRequest& o : others)
    o.prompt = random_prompt(60, 800 + static_cast<uint32_t>(o.params.seed.value()), 512);
  // A first turn of one token (its prompt's rows are its last step's) and four lengths whose
  // last step's row falls in each place of a block.
  for (int first_len : {1, 5, 6, 7, 8}) {
    auto e = make_engine(cached, bytes_);
    ASSERT_TRUE(e != nullptr);
    for (const GenerateRequest& o : others) ASSERT_TRUE(e->add_request(o).is_ok());
    run_all(*e);
    e->keep_logits(true);
    GenerateRequest turn = request(1, 0.0f, first_len);
    std::vector<int32_t> history = turn.prompt;
    Collected last;
    for (int t = 0; t < 3; ++t) {
      turn.request_id = "turn" + std::to_string(t);
      turn.prompt = history;
      ASSERT_TRUE(e->add_request(turn).is_ok());
      last = run_all(*e).at(turn.request_id);
      const std::vector<int32_t>& out = last.tokens.at(0);
      history.insert(history.end(), out.begin(), out.end());
      const std::vector<int32_t> more = random_prompt(5 + t, 900 + t, 512);
      history.insert(history.end(), more.begin(), more.end());
      turn.params.max_tokens = 8;
    }
    EXPECT_GT(last.num_cached_tokens, static_cast<int32_t>(turn.prompt.size()) / 2) << first_len;
    ASSERT_FALSE(last.drafts.empty());
    const auto fresh = run(uncached, {turn}).at(turn.request_id);
    EXPECT_EQ(fresh.tokens, last.tokens) << first_len;
    EXPECT_EQ(fresh.drafts, last.drafts) << "first turn of " << first_len << " tokens";
  }
}

// Embedding requests beside generating ones on an engine proposing with MTP: they finish in
// their last prompt step (their blocks freed then) and never propose, so the module never sees
// their rows; the generating requests' outputs stay plain decoding's.
TEST_F(MtpEngine, PoolingRequestsAmongSpeculatingOnes) {
  std::vector<GenerateRequest> rs;
  for (int i = 0; i < 4; ++i) rs.push_back(request(i, 0.0f, 12));
  auto plain = run(config(0), rs);
  for (int i = 0; i < 3; ++i) {
    GenerateRequest e;
    e.request_id = "e" + std::to_string(i);
    e.prompt = random_prompt(6 + 5 * i, 40 + i, 512);
    e.pooling = PoolingParams{};
    rs.push_back(e);
  }
  EngineConfig c = config(2);
  c.speculative.always_propose = true;
  c.max_num_batched_tokens = 8;  // prompts in chunks: a pooling request's last one is short
  auto e = make_engine(c, bytes_);
  ASSERT_TRUE(e != nullptr);
  for (const GenerateRequest& r : rs) ASSERT_TRUE(e->add_request(r).is_ok()) << r.request_id;
  std::map<std::string, std::vector<int32_t>> tokens;
  int pooled = 0;
  while (e->has_unfinished()) {
    auto step = e->step();
    ASSERT_TRUE(step.is_ok()) << step.status().message();
    for (const RequestOutput& o : *step) {
      pooled += o.finished && !o.pooled.empty();
      for (const CompletionOutput& co : o.outputs)
        tokens[o.request_id].insert(tokens[o.request_id].end(), co.token_ids.begin(),
                                    co.token_ids.end());
    }
  }
  EXPECT_EQ(pooled, 3);
  for (int i = 0; i < 4; ++i) {
    const std::string id = "r" + std::to_string(i);
    EXPECT_EQ(tokens[id], plain.at(id).tokens.at(0)) << id;
  }
  EXPECT_GT(e->metrics().spec_num_drafts, 0);
  EXPECT_EQ(e->check_kv_drained(), "");
}

TEST(MtpEngineErrors, ModelWithoutMtpLayersIsNamed) {
  auto bytes = test_model_bytes({.preset = "tiny"});
  auto model = Model::from_gguf(GgufFile::parse_bytes(bytes).value(), {1}).value();
  EngineConfig c;
  c.max_model_len = 128;
  c.speculative.method = SpeculativeConfig::Method::kMtp;
  c.speculative.num_speculative_tokens = 2;
  auto e = Engine::create(std::move(model), nullptr, c);
  ASSERT_FALSE(e.is_ok());
  const std::string msg = e.status().message();
  EXPECT_NE(msg.find("llama"), std::string::npos) << msg;
  EXPECT_NE(msg.find("no multi-token prediction"), std::string::npos) << msg;
  // Loading by name says which model, before its weights are loaded.
  auto loaded = Engine::load("synth:tiny", c);
  ASSERT_FALSE(loaded.is_ok());
  EXPECT_NE(loaded.status().message().find("the model synth:tiny (llama) has no multi-token"),
            std::string::npos)
      << loaded.status().message();
}

}  // namespace
}  // namespace loom
