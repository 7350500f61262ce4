// Hybrid models (Gated DeltaNet + attention) through the whole engine. A recurrent state
// cannot be cut at an arbitrary token, so these check what the design promises instead: a
// sequence's logits are the same bits alone, batched with others, prefilled in chunks of any
// size, preempted and recomputed, and resumed from a prefix snapshot (the recurrent layers
// compute in chunks aligned to absolute positions, model/batch.h kRecurrentChunk); a multi-turn
// chat resumes from the snapshot at the end of its previous turn; every state slot and block is
// free after a drain.
#include <gtest/gtest.h>

#include "model/model.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

class HybridEngine : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override { bytes_ = test_model_bytes({.preset = GetParam()}); }

  EngineConfig config() const {
    EngineConfig c;
    c.max_model_len = 512;
    c.max_num_seqs = 8;
    c.n_threads = 2;
    c.kv_dtype = Dtype::kF32;
    c.commit_kv_in_background = false;
    return c;
  }
  std::unique_ptr<Engine> engine(const EngineConfig& c) {
    auto e = make_engine(c, bytes_);
    if (e) e->keep_logits(true);
    return e;
  }
  int32_t n_vocab() {
    auto e = engine(config());
    return e->model().config().n_vocab;
  }

  std::shared_ptr<std::vector<uint8_t>> bytes_;
};

GenerateRequest request(const std::string& id, std::vector<int32_t> prompt, int max_tokens,
                        float temperature = 0.8f) {
  GenerateRequest r;
  r.request_id = id;
  r.prompt = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = temperature;
  r.params.seed = 1234;
  r.params.ignore_eos = true;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Same tokens and, row for row, the same logits bits.
void expect_identical(const Collected& got, const Collected& want, const std::string& what) {
  EXPECT_EQ(got.tokens, want.tokens) << what;
  ASSERT_EQ(got.logits.size(), want.logits.size()) << what;
  for (size_t i = 0; i < want.logits.size(); ++i)
    ASSERT_TRUE(got.logits[i] == want.logits[i]) << what << ": logits of output " << i;
}

std::map<std::string, Collected> run(Engine& e, const std::vector<GenerateRequest>& reqs) {
  for (const GenerateRequest& r : reqs) EXPECT_TRUE(e.add_request(r).is_ok()) << r.request_id;
  auto out = run_all(e);
  EXPECT_EQ(e.check_kv_drained(), "");
  return out;
}

TEST_P(HybridEngine, LogitsAreBitIdenticalAloneBatchedChunkedAndPreempted) {
  const int32_t V = n_vocab();
  // Prompt lengths off every chunk and block boundary.
  const std::vector<GenerateRequest> reqs = {
      request("a", random_prompt(75, 1, V), 24), request("b", random_prompt(33, 2, V), 30),
      request("c", random_prompt(150, 3, V), 12), request("d", random_prompt(5, 4, V), 40)};
  std::map<std::string, Collected> alone;
  for (const GenerateRequest& r : reqs) {
    EngineConfig c = config();
    c.enable_prefix_caching = false;
    auto e = engine(c);
    alone[r.request_id] = run(*e, {r}).at(r.request_id);
    ASSERT_EQ(alone[r.request_id].logits.size(), static_cast<size_t>(r.params.max_tokens));
  }
  struct Variant {
    const char* name;
    int32_t batched_tokens, shared_prefill;
    double kv_gib;  // 0: room for everything; small: preemptions
    bool caching;
  };
  const Variant variants[] = {
      {"batched", 2048, 0, 0, false},
      {"chunked by 7", 7, 7, 0, false},
      {"chunked by 16, caching on", 16, 16, 0, true},
      {"chunked by 50, caching on", 50, 23, 0, true},
  };
  for (const Variant& v : variants) {
    EngineConfig c = config();
    c.max_num_batched_tokens = v.batched_tokens;
    c.shared_prefill_tokens = v.shared_prefill;
    c.enable_prefix_caching = v.caching;
    auto e = engine(c);
    auto got = run(*e, reqs);
    for (const GenerateRequest& r : reqs)
      expect_identical(got.at(r.request_id), alone.at(r.request_id),
                       std::string(v.name) + ", request " + r.request_id);
  }
  // Preempted all the time: a KV cache of 14 blocks (224 tokens) for sequences of up to 190.
  for (bool caching : {false, true}) {
    EngineConfig c = config();
    c.max_num_batched_tokens = 40;
    c.shared_prefill_tokens = 40;
    c.enable_prefix_caching = caching;
    c.kv_cache_memory_gib = testing::kv_gib_for_blocks(c, bytes_, 14);
    auto e = engine(c);
    auto got = run(*e, reqs);
    EXPECT_GT(e->metrics().num_preemptions, 0) << "caching " << caching;
    for (const GenerateRequest& r : reqs)
      expect_identical(got.at(r.request_id), alone.at(r.request_id),
                       std::string("preempted, caching ") + (caching ? "on" : "off") +
                           ", request " + r.request_id);
  }
}

TEST_P(HybridEngine, SharedPrefixResumesFromASnapshot) {
  const int32_t V = n_vocab();
  const auto system = random_prompt(200, 5, V);
  const auto a = request("a", concat(system, random_prompt(9, 6, V)), 6);
  const auto b = request("b", concat(system, random_prompt(21, 7, V)), 10);
  EngineConfig c = config();
  c.state_snapshot_every = 4;  // every 64 tokens, and the newest boundary
  auto e = engine(c);
  run(*e, {a});
  const EngineMetrics m0 = e->metrics();
  EXPECT_GT(m0.state_snapshots_taken, 0);
  auto got = run(*e, {b});
  const EngineMetrics m1 = e->metrics();
  // b shares 200 tokens: the deepest snapshot within them is at 192 (a's prefill of 209
  // tokens took the grid's 64, 128, 192 and its newest boundary, 208, which b does not share).
  EXPECT_EQ(got.at("b").num_cached_tokens, 192);
  EXPECT_EQ(m1.prefix_cache_hits - m0.prefix_cache_hits, 192);
  EXPECT_EQ(m1.prompt_tokens_computed - m0.prompt_tokens_computed, 221 - 192);

  EngineConfig plain = config();
  plain.enable_prefix_caching = false;
  auto ref_engine = engine(plain);
  expect_identical(got.at("b"), run(*ref_engine, {b}).at("b"), "resumed from a snapshot");
}

TEST_P(HybridEngine, MultiTurnChatResumesFromTheEndOfThePreviousTurn) {
  const int32_t V = n_vocab();
  auto e = engine(config());
  std::vector<int32_t> history = random_prompt(40, 8, V);
  int64_t computed_before = 0;
  int32_t previous_len = 0;
  for (int turn = 0; turn < 4; ++turn) {
    const std::string id = "turn" + std::to_string(turn);
    auto got = run(*e, {request(id, history, 20)}).at(id);
    const EngineMetrics m = e->metrics();
    if (turn > 0) {
      // The previous turn ran its prompt and 19 of its 20 output tokens through the model; its
      // newest snapshot is at the last block boundary of those, which this prompt shares.
      const int32_t expected = (previous_len + 19) / 16 * 16;
      EXPECT_EQ(got.num_cached_tokens, expected) << id;
      EXPECT_EQ(m.prompt_tokens_computed - computed_before,
                static_cast<int64_t>(history.size()) - expected)
          << id;
    }
    computed_before = m.prompt_tokens_computed;
    previous_len = static_cast<int32_t>(history.size());
    history = concat(concat(history, got.tokens.at(0)), random_prompt(11, 100 + turn, V));
  }
}

TEST_P(HybridEngine, SeveralSamplesOfOnePrompt) {
  const int32_t V = n_vocab();
  auto greedy = request("g", random_prompt(70, 9, V), 16, 0.0f);
  auto one = engine(config());
  const Collected ref = run(*one, {greedy}).at("g");
  for (bool caching : {false, true}) {
    EngineConfig c = config();
    c.enable_prefix_caching = caching;
    auto e = engine(c);
    GenerateRequest n3 = greedy;
    n3.params.n = 3;
    const Collected got = run(*e, {n3}).at("g");
    ASSERT_EQ(got.tokens.size(), 3u);
    for (int i = 0; i < 3; ++i) EXPECT_EQ(got.tokens.at(i), ref.tokens.at(0)) << i;
  }
}

TEST_P(HybridEngine, RefusesWhatARecurrentStateCannotDo) {
  EngineConfig c = config();
  c.block_size = 8;  // snapshots are exact at multiples of 16 only
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(std::move(*file), {});
  ASSERT_TRUE(model.is_ok());
  auto e = Engine::create(std::move(*model), nullptr, c);
  ASSERT_FALSE(e.is_ok());
  EXPECT_NE(e.status().message().find("--block-size"), std::string::npos) << e.status().message();
  // Speculation on hybrids: hybrid_speculative_test.cpp (more than 15 proposals are refused).
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridEngine, ::testing::Values("tiny-qwen35", "tiny-qwen3next"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& ch : n)
                             if (ch == '-') ch = '_';
                           return n;
                         });

}  // namespace
}  // namespace loom
