// Engine invariants on tiny synthetic models (DESIGN.md "Correctness strategy" 4): a request's
// logits and tokens are bit-identical alone, in a batch of 16, under any prompt chunking, under
// heavy preemption and with a prefix-cache hit; every KV block is free after a drain. Each
// runs on a Llama model and on a Gemma 3 model whose local layers attend over windows of 8
// tokens (prompts of up to 90 tokens cross them), and on a Qwen3-MoE model (8 experts, 2 per
// token: a token's output must not depend on which other tokens share its experts).
#include <gtest/gtest.h>

#include <random>

#include "model/model.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

class EngineTest : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    auto& cached = models_[GetParam()];
    if (!cached)
      cached = test_model_bytes({.preset = GetParam(),
                                 .arch = GetParam() == "tiny-swa"       ? "gemma3"
                                         : GetParam() == "tiny-moe"     ? "qwen3moe"
                                         : GetParam() == "tiny-gpt-oss" ? "gpt-oss"
                                         : GetParam() == "tiny-mla"     ? "deepseek2"
                                                                        : ""});
    bytes_ = cached;
  }
  static void TearDownTestSuite() { models_.clear(); }

  EngineConfig base_config() {
    EngineConfig c;
    c.max_num_seqs = 16;
    c.max_model_len = 256;
    c.n_threads = 1;
    c.kv_dtype = Dtype::kF32;
    return c;
  }
  std::unique_ptr<Engine> engine(const EngineConfig& c) {
    auto e = make_engine(c, bytes_);
    e->keep_logits(true);
    return e;
  }
  // 16 requests: random prompts of 1..90 tokens, seeded random sampling.
  std::vector<GenerateRequest> requests(int n = 16, int max_tokens = 8) {
    std::vector<GenerateRequest> rs;
    std::mt19937 rng(7);
    for (int i = 0; i < n; ++i) {
      GenerateRequest r;
      r.request_id = "r" + std::to_string(i);
      r.prompt = random_prompt(1 + rng() % 90, 100 + i, n_vocab_);
      r.params.max_tokens = max_tokens;
      r.params.temperature = 0.8f;
      r.params.seed = 1000 + i;
      r.params.ignore_eos = true;
      rs.push_back(r);
    }
    return rs;
  }
  std::map<std::string, Collected> run(const EngineConfig& c,
                                       const std::vector<GenerateRequest>& rs) {
    auto e = engine(c);
    for (const auto& r : rs) EXPECT_TRUE(e->add_request(r).is_ok());
    auto out = run_all(*e);
    EXPECT_EQ(e->check_kv_drained(), "");
    last_metrics_ = e->metrics();
    return out;
  }

  static std::map<std::string, std::shared_ptr<std::vector<uint8_t>>> models_;
  std::shared_ptr<std::vector<uint8_t>> bytes_;
  int32_t n_vocab_ = 512;
  EngineMetrics last_metrics_;
};
std::map<std::string, std::shared_ptr<std::vector<uint8_t>>> EngineTest::models_;

void expect_same(const Collected& a, const Collected& b, const std::string& what) {
  ASSERT_EQ(a.tokens.size(), b.tokens.size()) << what;
  EXPECT_EQ(a.tokens.at(0), b.tokens.at(0)) << what;
  ASSERT_EQ(a.logits.size(), b.logits.size()) << what;
  for (size_t i = 0; i < a.logits.size(); ++i)
    ASSERT_TRUE(a.logits[i] == b.logits[i]) << what << ": logits differ at output " << i;
}

TEST_P(EngineTest, BatchInvarianceAloneTogetherAndChunked) {
  auto rs = requests();
  EngineConfig together = base_config();
  together.max_num_batched_tokens = 256;
  auto all = run(together, rs);
  ASSERT_EQ(all.size(), 16u);
  for (const auto& r : rs) {
    const Collected& t = all.at(r.request_id);
    EXPECT_EQ(t.tokens.at(0).size(), 8u);
    EXPECT_EQ(t.finish.at(0), FinishReason::kLength);
    EXPECT_EQ(t.logits.size(), 8u);
    for (int chunk : {0, 1, 7, 64}) {
      EngineConfig alone = base_config();
      alone.max_num_batched_tokens = chunk == 0 ? 256 : chunk;
      auto one = run(alone, {r});
      expect_same(one.at(r.request_id), t,
                  r.request_id + " (" + std::to_string(r.prompt.size()) + " prompt tokens), " +
                      (chunk == 0 ? "alone" : "alone, chunks of " + std::to_string(chunk)));
    }
  }
}

TEST_P(EngineTest, HeavyPreemptionGivesSameTokensAndFreesEverything) {
  auto rs = requests(16, 40);
  EngineConfig big = base_config();
  auto ref = run(big, rs);
  EXPECT_EQ(last_metrics_.num_preemptions, 0);

  // Room for about two of the sixteen sequences at once.
  EngineConfig small = base_config();
  small.enable_prefix_caching = false;  // recompute everything, the hardest case
  const uint64_t block_bytes = KvCache::bytes_per_block(make_engine(big, bytes_)->model().config(),
                                                        small.block_size, small.kv_dtype);
  small.kv_cache_memory_gib = 10.0 * block_bytes / double(1ull << 30);
  for (bool caching : {false, true}) {
    small.enable_prefix_caching = caching;
    auto got = run(small, rs);
    EXPECT_GT(last_metrics_.num_preemptions, 10) << "caching " << caching;
    EXPECT_EQ(last_metrics_.num_kv_blocks, 10);
    for (const auto& r : rs)
      EXPECT_EQ(got.at(r.request_id).tokens, ref.at(r.request_id).tokens)
          << r.request_id << " caching " << caching;
  }
}

// A prompt whose first blocks an earlier request left in the cache computes only the rest,
// and gives the logits and tokens of a cold run (MLA: the cached latent rows are reused).
TEST_P(EngineTest, PrefixCacheHitGivesColdRunLogits) {
  auto rs = requests(2, 6);
  rs[0].prompt = random_prompt(64, 11, n_vocab_);
  rs[1].prompt = rs[0].prompt;
  for (int32_t t : random_prompt(9, 12, n_vocab_)) rs[1].prompt.push_back(t);
  EngineConfig cold_config = base_config();
  cold_config.enable_prefix_caching = false;
  auto cold = run(cold_config, {rs[1]});
  auto e = engine(base_config());
  ASSERT_TRUE(e->add_request(rs[0]).is_ok());
  run_all(*e);
  ASSERT_TRUE(e->add_request(rs[1]).is_ok());
  auto warm = run_all(*e);
  EXPECT_GE(e->metrics().prefix_cache_hits, 48);  // the prompt's 3 full blocks of 16
  expect_same(warm.at(rs[1].request_id), cold.at(rs[1].request_id), "prefix-cache hit");
  EXPECT_EQ(e->check_kv_drained(), "");
}

TEST_P(EngineTest, RejectsRequestsThatCanNeverFit) {
  EngineConfig c = base_config();
  c.max_model_len = 128;
  auto e = engine(c);
  GenerateRequest r;
  r.request_id = "big";
  r.prompt = random_prompt(100, 1, n_vocab_);
  r.params.max_tokens = 29;
  Status st = e->add_request(r);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("max_model_len"), std::string::npos) << st.message();
  r.params.max_tokens = 28;
  EXPECT_TRUE(e->add_request(r).is_ok());

  // A cache of 4 blocks (64 tokens) can never hold 100 prompt tokens.
  EngineConfig tiny_cache = base_config();
  tiny_cache.kv_cache_memory_gib =
      4.0 * KvCache::bytes_per_block(e->model().config(), 16, c.kv_dtype) / double(1ull << 30);
  auto e2 = engine(tiny_cache);
  r.params.max_tokens = 5;
  st = e2->add_request(r);
  EXPECT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("KV blocks"), std::string::npos) << st.message();

  // Bad input is an error, not a crash.
  GenerateRequest bad;
  bad.request_id = "bad";
  EXPECT_FALSE(e->add_request(bad).is_ok());  // empty prompt
  bad.prompt = {n_vocab_};
  EXPECT_FALSE(e->add_request(bad).is_ok());  // out of vocabulary
  bad.prompt = {1};
  bad.params.top_p = 2.0f;
  EXPECT_FALSE(e->add_request(bad).is_ok());
  GenerateRequest dup = r;
  dup.request_id = "big";
  EXPECT_FALSE(e->add_request(dup).is_ok());  // id in use
}

TEST_P(EngineTest, AbortAtEveryStageFreesAllBlocks) {
  EngineConfig c = base_config();
  c.max_num_seqs = 2;
  c.max_num_batched_tokens = 16;
  auto e = engine(c);
  auto add = [&](const std::string& id, int len) {
    GenerateRequest r;
    r.request_id = id;
    r.prompt = random_prompt(len, id[0], n_vocab_);
    r.params.max_tokens = 50;
    r.params.ignore_eos = true;
    ASSERT_TRUE(e->add_request(r).is_ok());
  };
  add("decoding", 5);
  add("prefill", 100);
  add("waiting", 10);
  auto s1 = e->step();  // decoding: prompt done + first token; prefill: 11 of 100
  ASSERT_TRUE(s1.is_ok());
  auto s2 = e->step();
  ASSERT_TRUE(s2.is_ok());
  EXPECT_EQ(e->metrics().num_running, 2);
  EXPECT_EQ(e->metrics().num_waiting, 1);
  EXPECT_GT(e->metrics().kv_cache_usage, 0.0);
  for (const char* id : {"waiting", "prefill", "decoding"}) e->abort(id);
  EXPECT_EQ(e->check_kv_drained(), "");  // freed at once, not at the next step
  auto s3 = e->step();
  ASSERT_TRUE(s3.is_ok());
  ASSERT_EQ(s3->size(), 3u);
  for (const RequestOutput& o : *s3) {
    EXPECT_TRUE(o.finished);
    ASSERT_EQ(o.outputs.size(), 1u);
    EXPECT_EQ(o.outputs[0].finish_reason, FinishReason::kAbort);
  }
  EXPECT_FALSE(e->has_unfinished());
  e->abort("unknown");  // harmless
  EXPECT_FALSE(e->has_unfinished());
}

TEST_P(EngineTest, RandomAddAbortStepKeepsPoolInvariants) {
  EngineConfig c = base_config();
  c.max_num_seqs = 6;
  c.max_num_batched_tokens = 48;
  c.kv_cache_memory_gib = 12.0 *
                          KvCache::bytes_per_block(engine(c)->model().config(), 16, c.kv_dtype) /
                          double(1ull << 30);
  auto e = engine(c);
  std::mt19937 rng(123);
  std::vector<std::string> live;
  std::vector<std::vector<int32_t>> prefixes = {random_prompt(40, 1, n_vocab_),
                                                random_prompt(40, 2, n_vocab_)};
  int next = 0;
  for (int op = 0; op < 1000; ++op) {
    const int kind = rng() % 10;
    if (kind < 3) {
      GenerateRequest r;
      r.request_id = "q" + std::to_string(next++);
      // Shared prefixes exercise the prefix cache and ref counts.
      r.prompt = prefixes[rng() % 2];
      r.prompt.resize(1 + rng() % 40);
      for (int i = 0, extra = rng() % 60; i < extra; ++i) r.prompt.push_back(rng() % n_vocab_);
      r.params.max_tokens = 1 + rng() % 40;
      r.params.n = 1 + rng() % 2;
      r.params.seed = op;
      r.params.ignore_eos = rng() % 2;
      if (e->add_request(r).is_ok()) live.push_back(r.request_id);
    } else if (kind < 4 && !live.empty()) {
      size_t i = rng() % live.size();
      e->abort(live[i]);
      live.erase(live.begin() + i);
    } else {
      auto out = e->step();
      ASSERT_TRUE(out.is_ok()) << out.status().message();
      for (const RequestOutput& o : *out)
        if (o.finished) std::erase(live, o.request_id);
    }
    std::string inv = e->check_kv_drained();
    if (!inv.empty()) {
      ASSERT_NE(inv.find("still in use"), std::string::npos) << inv;
    }
    EngineMetrics m = e->metrics();
    ASSERT_LE(m.num_running, c.max_num_seqs + 1);  // + forks of one n=2 request
    ASSERT_GE(m.kv_cache_usage, 0.0);
    ASSERT_LE(m.kv_cache_usage, 1.0);
  }
  for (const auto& id : live) e->abort(id);
  run_all(*e);
  EXPECT_EQ(e->check_kv_drained(), "");
}

TEST_P(EngineTest, ParallelSamplesShareThePromptAndMatchSingleSampleStream) {
  GenerateRequest r;
  r.request_id = "n";
  r.prompt = random_prompt(70, 9, n_vocab_);
  r.params.max_tokens = 12;
  r.params.n = 3;
  r.params.seed = 5;
  r.params.ignore_eos = true;
  auto got = run(base_config(), {r});
  const Collected& c = got.at("n");
  ASSERT_EQ(c.tokens.size(), 3u);
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(c.tokens.at(i).size(), 12u);
    EXPECT_EQ(c.finish.at(i), FinishReason::kLength);
  }
  EXPECT_NE(c.tokens.at(0), c.tokens.at(1));
  EXPECT_NE(c.tokens.at(1), c.tokens.at(2));
  // Sample 0 uses the same random stream as an n = 1 request with that seed.
  r.params.n = 1;
  auto single = run(base_config(), {r});
  EXPECT_EQ(single.at("n").tokens.at(0), c.tokens.at(0));
  // Deterministic.
  r.params.n = 3;
  EXPECT_EQ(run(base_config(), {r}).at("n").tokens, c.tokens);
}

TEST_P(EngineTest, StopTokenIdsMinTokensAndLogprobs) {
  GenerateRequest r;
  r.request_id = "s";
  r.prompt = random_prompt(30, 3, n_vocab_);
  r.params.max_tokens = 20;
  r.params.temperature = 0.0f;
  r.params.ignore_eos = true;
  r.params.logprobs = 3;
  auto e = engine(base_config());
  ASSERT_TRUE(e->add_request(r).is_ok());
  std::vector<PositionLogprobs> lps;
  std::vector<int32_t> toks;
  while (e->has_unfinished()) {
    auto out = e->step();
    ASSERT_TRUE(out.is_ok());
    for (const auto& o : *out)
      for (const auto& co : o.outputs) {
        toks.insert(toks.end(), co.token_ids.begin(), co.token_ids.end());
        lps.insert(lps.end(), co.logprobs.begin(), co.logprobs.end());
      }
  }
  ASSERT_EQ(toks.size(), 20u);
  ASSERT_EQ(lps.size(), 20u);
  for (size_t i = 0; i < toks.size(); ++i) {
    EXPECT_EQ(lps[i].token, toks[i]);
    EXPECT_LE(lps[i].logprob, 0.0f);
    ASSERT_EQ(lps[i].top.size(), 3u);
    EXPECT_EQ(lps[i].top[0].token, toks[i]);  // greedy: the sampled token is the top one
    EXPECT_GE(lps[i].top[0].logprob, lps[i].top[1].logprob);
  }
  // Stop at the first occurrence of the token generated at position 5, unless min_tokens
  // forbids stopping that early.
  const int32_t stop = toks[5];
  const size_t first = std::find(toks.begin(), toks.end(), stop) - toks.begin();
  r.params.logprobs = -1;
  r.params.stop_token_ids = {stop};
  auto got = run(base_config(), {r}).at("s");
  EXPECT_EQ(got.tokens.at(0), std::vector<int32_t>(toks.begin(), toks.begin() + first + 1));
  EXPECT_EQ(got.finish.at(0), FinishReason::kStop);
  EXPECT_EQ(got.stop_reason.at(0), std::to_string(stop));
  // min_tokens suppresses stop tokens: the run then differs from the plain one only where the
  // stop token was the argmax, so just check the stop is not before min_tokens.
  r.params.min_tokens = static_cast<int32_t>(first) + 2;
  auto late = run(base_config(), {r}).at("s");
  EXPECT_GE(late.tokens.at(0).size(), first + 3);
  for (size_t i = 0; i + 1 < static_cast<size_t>(r.params.min_tokens); ++i)
    EXPECT_NE(late.tokens.at(0)[i], stop);
}

// The sliding-window model does use its windows: the same weights with full attention give
// other logits once a prompt is longer than the window.
TEST_P(EngineTest, WindowsAreAppliedWhereTheModelHasThem) {
  auto e = engine(base_config());
  const ModelConfig& c = e->model().config();
  if (GetParam() == "tiny-gpt-oss") {  // even layers slide (their effect: hf_reference_test)
    for (size_t l = 0; l < c.layers.size(); ++l) EXPECT_EQ(c.layers[l].window, l % 2 ? 0 : 8);
    return;
  }
  if (GetParam() != "tiny-swa") {
    for (const LayerSpec& s : c.layers) EXPECT_EQ(s.window, 0);
    return;
  }
  ASSERT_EQ(c.layers.size(), 6u);
  for (int l = 0; l < 5; ++l) EXPECT_EQ(c.layers[l].window, 8) << l;
  EXPECT_EQ(c.layers[5].window, 0);
  auto rs = requests(1, 4);
  rs[0].prompt = random_prompt(40, 5, n_vocab_);
  auto windowed = run(base_config(), rs);
  // Same bytes, sliding_window removed from the metadata: every layer global.
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  GgufWriter w;
  w.set_alignment(file->alignment());
  for (const auto& [key, value] : file->metadata())
    if (key != "gemma3.attention.sliding_window") w.set(key, value);
  for (const GgufTensorInfo& t : file->tensors()) {
    std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
    ASSERT_TRUE(w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes).is_ok());
  }
  auto saved = bytes_;
  bytes_ = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  auto full = run(base_config(), rs);
  bytes_ = saved;
  EXPECT_FALSE(windowed.at("r0").logits.at(0) == full.at("r0").logits.at(0));
}

// EngineConfig::disable_sliding_window (loom serve --disable-sliding-window) reaches the model.
TEST(EngineLoad, DisableSlidingWindowGivesEveryLayerFullAttention) {
  for (bool disable : {false, true}) {
    EngineConfig c;
    c.n_threads = 1;
    c.max_num_seqs = 2;
    c.disable_sliding_window = disable;
    auto e = Engine::load("synth:tiny-swa", c);
    ASSERT_TRUE(e.is_ok()) << e.status().message();
    EXPECT_EQ((*e)->model().config().layers.at(0).window, disable ? 0 : 8);
  }
}

INSTANTIATE_TEST_SUITE_P(Models, EngineTest,
                         ::testing::Values("tiny", "tiny-swa", "tiny-moe", "tiny-gpt-oss",
                                           "tiny-mla"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& ch : s)
                             if (ch == '-') ch = '_';
                           return s;
                         });

}  // namespace
}  // namespace loom
