// Prefix caching through the whole engine: a shared 512-token system prefix is computed once
// (asserted from the counters) without changing any token, and eviction under pressure takes
// the least recently used prefix.
#include <gtest/gtest.h>

#include "model/model.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

GenerateRequest request(const std::string& id, std::vector<int32_t> prompt, int max_tokens) {
  GenerateRequest r;
  r.request_id = id;
  r.prompt = std::move(prompt);
  r.params.max_tokens = max_tokens;
  r.params.temperature = 0.7f;
  r.params.seed = 99;
  r.params.ignore_eos = true;
  return r;
}

std::vector<int32_t> concat(std::vector<int32_t> a, const std::vector<int32_t>& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

TEST(PrefixCache, SharedSystemPrefixComputesOnlyNewTokens) {
  auto bytes = test_model_bytes({.context_length = 1024});
  EngineConfig c;
  c.max_model_len = 1024;
  c.max_num_seqs = 4;
  c.n_threads = 1;
  c.kv_dtype = Dtype::kF32;
  auto e = make_engine(c, bytes);
  e->keep_logits(true);
  const int32_t n_vocab = e->model().config().n_vocab;
  const auto system = random_prompt(512, 1, n_vocab);
  auto a = request("a", concat(system, random_prompt(20, 2, n_vocab)), 4);
  auto b = request("b", concat(system, random_prompt(30, 3, n_vocab)), 6);

  ASSERT_TRUE(e->add_request(a).is_ok());
  run_all(*e);
  const EngineMetrics m0 = e->metrics();
  EXPECT_EQ(m0.prompt_tokens_computed, 532);
  EXPECT_EQ(m0.prefix_cache_hits, 0);
  ASSERT_TRUE(e->add_request(b).is_ok());
  auto got = run_all(*e);
  const EngineMetrics m1 = e->metrics();
  EXPECT_EQ(m1.prefix_cache_hits - m0.prefix_cache_hits, 512);
  EXPECT_EQ(m1.prefix_cache_queries - m0.prefix_cache_queries, 542);
  EXPECT_EQ(m1.prompt_tokens_computed - m0.prompt_tokens_computed, 30);  // only its own tokens
  EXPECT_EQ(got.at("b").num_cached_tokens, 512);
  EXPECT_EQ(e->check_kv_drained(), "");

  // Same tokens and bit-identical logits as without the cache.
  c.enable_prefix_caching = false;
  auto plain = make_engine(c, bytes);
  plain->keep_logits(true);
  ASSERT_TRUE(plain->add_request(b).is_ok());
  auto ref = run_all(*plain);
  EXPECT_EQ(plain->metrics().prefix_cache_hits, 0);
  EXPECT_EQ(plain->metrics().prompt_tokens_computed, 542);
  EXPECT_EQ(got.at("b").tokens, ref.at("b").tokens);
  ASSERT_EQ(got.at("b").logits.size(), ref.at("b").logits.size());
  for (size_t i = 0; i < ref.at("b").logits.size(); ++i)
    EXPECT_TRUE(got.at("b").logits[i] == ref.at("b").logits[i]) << "output " << i;
}

TEST(PrefixCache, EvictionUnderPressureIsLeastRecentlyUsed) {
  auto bytes = test_model_bytes({});
  EngineConfig c;
  c.max_num_seqs = 4;
  c.n_threads = 1;
  c.kv_dtype = Dtype::kF32;
  auto probe = make_engine(c, bytes);
  const int32_t n_vocab = probe->model().config().n_vocab;
  c.kv_cache_memory_gib =
      12.0 * KvCache::bytes_per_block(probe->model().config(), 16, c.kv_dtype) / (1ull << 30);
  auto e = make_engine(c, bytes);
  ASSERT_EQ(e->metrics().num_kv_blocks, 12);
  const auto pa = random_prompt(64, 10, n_vocab), pb = random_prompt(64, 11, n_vocab);
  // A then B: 4 cached blocks each (65-token prompts, one output token).
  ASSERT_TRUE(e->add_request(request("a", concat(pa, {1}), 1)).is_ok());
  run_all(*e);
  ASSERT_TRUE(e->add_request(request("b", concat(pb, {1}), 1)).is_ok());
  run_all(*e);
  // C needs 8 of the 12 blocks: the 4 holding nothing cached, then A's 4 (least recent).
  ASSERT_TRUE(e->add_request(request("c", random_prompt(120, 12, n_vocab), 1)).is_ok());
  run_all(*e);
  auto hits = [&](const std::string& id, const std::vector<int32_t>& prefix) {
    const int64_t before = e->metrics().prefix_cache_hits;
    EXPECT_TRUE(e->add_request(request(id, concat(prefix, {2, 3}), 1)).is_ok());
    run_all(*e);
    return e->metrics().prefix_cache_hits - before;
  };
  EXPECT_EQ(hits("b2", pb), 64);  // B survived
  EXPECT_EQ(hits("a2", pa), 0);   // A was evicted
  EXPECT_EQ(e->check_kv_drained(), "");
}

}  // namespace
}  // namespace loom
