// Sliding-window attention in the paged KV cache, through the whole engine, on the tiny-swa
// preset (a Gemma 3 layout: layers 0-4 slide a window of 8 tokens, layer 5 attends over
// everything) with blocks of 4 tokens: the window layers form their own KV group, whose blocks
// behind every sequence's window are released as it grows. Checked: the per-step block counts
// and the released-block counter follow the window arithmetic; the window group's pool is
// sized to the windows; and a request's logits are bit-identical alone, batched, in prompt
// chunks of 1, 7 and 64, under preemption by a small pool, and with prefix-cache hits.
#include <gtest/gtest.h>

#include <random>

#include "model/model.h"
#include "model/tiny_model.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::Collected;
using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

constexpr int32_t kBs = 4, kWindow = 8;

int32_t blocks_for(int32_t tokens) {
  return (tokens + kBs - 1) / kBs;
}
// Blocks no query at position >= pos reads: they end before pos - kWindow + 1.
int32_t blocks_behind(int32_t pos) {
  return std::max(0, pos - kWindow + 1) / kBs;
}

class SlidingWindowEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bytes_ = test_model_bytes({.preset = "tiny-swa", .arch = "gemma3"});
  }
  static void TearDownTestSuite() { bytes_.reset(); }

  static EngineConfig config() {
    EngineConfig c;
    c.block_size = kBs;
    c.max_num_seqs = 4;
    c.max_model_len = 256;
    c.max_num_batched_tokens = 256;
    c.n_threads = 1;
    c.kv_dtype = Dtype::kF32;
    return c;
  }
  static GenerateRequest request(int i, int prompt_len, int max_tokens) {
    GenerateRequest r;
    r.request_id = "r" + std::to_string(i);
    r.prompt = random_prompt(prompt_len, 300 + i, 512);
    r.params.max_tokens = max_tokens;
    r.params.temperature = 0.9f;
    r.params.seed = 77 + i;
    r.params.ignore_eos = true;
    return r;
  }
  std::map<std::string, Collected> run(const EngineConfig& c,
                                       const std::vector<GenerateRequest>& rs) {
    return testing::run_requests(c, bytes_, rs, &metrics_);
  }

  static std::shared_ptr<std::vector<uint8_t>> bytes_;
  EngineMetrics metrics_;
};
std::shared_ptr<std::vector<uint8_t>> SlidingWindowEngine::bytes_;

TEST_F(SlidingWindowEngine, WindowGroupIsSizedToTheWindows) {
  auto e = make_engine(config(), bytes_);
  const EngineMetrics m = e->metrics();
  ASSERT_EQ(m.kv_groups.size(), 2u);
  EXPECT_EQ(m.kv_groups[0].window, 0);
  EXPECT_EQ(m.kv_groups[1].window, kWindow);
  // Full attention: 4 sequences of 256 tokens. Window group: per sequence the 7 tokens
  // before a query (2 blocks) + 2, and one step's 256 tokens (64 blocks).
  EXPECT_EQ(m.kv_groups[0].num_blocks, 4 * 256 / kBs);
  EXPECT_EQ(m.kv_groups[1].num_blocks, 4 * (2 + 2) + 64);
  EXPECT_EQ(m.num_kv_blocks, 256);
}

TEST_F(SlidingWindowEngine, ReleasedBlocksFollowTheWindowStepByStep) {
  EngineConfig c = config();
  c.max_num_batched_tokens = 16;  // the 45-token prompt runs in chunks of 16, 16, 13
  auto e = make_engine(c, bytes_);
  const int32_t prompt = 45, max_tokens = 30;
  ASSERT_TRUE(e->add_request(request(0, prompt, max_tokens)).is_ok());
  int32_t computed = 0, last_start = 0;
  bool finished = false;
  while (!finished) {
    const int32_t n_new = computed < prompt ? std::min(16, prompt - computed) : 1;
    auto out = e->step();
    ASSERT_TRUE(out.is_ok()) << out.status().message();
    for (const RequestOutput& o : *out) finished = finished || o.finished;
    last_start = computed;
    computed += n_new;
    const EngineMetrics m = e->metrics();
    ASSERT_EQ(m.kv_groups.size(), 2u);
    EXPECT_EQ(m.kv_groups[1].num_window_released_blocks, blocks_behind(last_start))
        << "after computing " << computed;
    if (finished) break;
    EXPECT_EQ(m.kv_groups[0].num_used_blocks, blocks_for(computed)) << computed;
    EXPECT_EQ(m.kv_groups[1].num_used_blocks, blocks_for(computed) - blocks_behind(last_start))
        << computed;
  }
  // 45 prompt tokens + 29 generated ones ran (the 30th is never fed back).
  EXPECT_EQ(computed, prompt + max_tokens - 1);
  EXPECT_EQ(last_start, 73);
  EXPECT_EQ(e->check_kv_drained(), "");
}

// The engine's sampled rows against the model run over one cache that keeps every position
// (every layer in one group, nothing released: how the model tests check windows against
// transformers), for a sequence well past the window.
TEST_F(SlidingWindowEngine, LogitsAreTheModelsOverAWholeCache) {
  GenerateRequest r = request(0, 30, 20);
  r.params.temperature = 0;
  const Collected got = run(config(), {r}).at(r.request_id);
  std::vector<int32_t> tokens = r.prompt;
  tokens.insert(tokens.end(), got.tokens.at(0).begin(), got.tokens.at(0).end() - 1);
  auto file = GgufFile::parse_bytes(bytes_);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(std::move(*file), ModelLoadOptions{});
  ASSERT_TRUE(model.is_ok());
  auto kv = KvCache::create((*model)->config(), 64, kBs, Dtype::kF32).value();
  auto want = test::run_sequence(**model, *kv, tokens, 64);
  ASSERT_TRUE(want.is_ok());
  const int32_t V = (*model)->config().n_vocab;
  ASSERT_EQ(got.logits.size(), 20u);
  for (size_t i = 0; i < got.logits.size(); ++i) {
    const float* w = &(*want)[(r.prompt.size() - 1 + i) * V];
    float diff = 0;
    for (int32_t v = 0; v < V; ++v) diff = std::max(diff, std::abs(got.logits[i][v] - w[v]));
    EXPECT_LT(diff, 1e-4) << "output " << i << " (position " << r.prompt.size() - 1 + i << ")";
  }
}

TEST_F(SlidingWindowEngine, SameLogitsAloneBatchedChunkedPreemptedAndCached) {
  std::vector<GenerateRequest> rs;
  std::mt19937 rng(5);
  for (int i = 0; i < 8; ++i) rs.push_back(request(i, 1 + rng() % 70, 12));
  std::map<std::string, Collected> alone;
  for (const auto& r : rs) alone[r.request_id] = run(config(), {r}).at(r.request_id);
  auto expect_same = [&](const std::map<std::string, Collected>& got, const std::string& how) {
    for (const auto& r : rs) {
      const Collected& a = alone.at(r.request_id);
      const Collected& b = got.at(r.request_id);
      ASSERT_EQ(a.tokens, b.tokens) << r.request_id << " " << how;
      ASSERT_EQ(a.logits.size(), b.logits.size()) << r.request_id << " " << how;
      for (size_t i = 0; i < a.logits.size(); ++i)
        ASSERT_TRUE(a.logits[i] == b.logits[i]) << r.request_id << " " << how << " output " << i;
    }
  };
  expect_same(run(config(), rs), "batched");
  EXPECT_GT(metrics_.kv_groups.at(1).num_window_released_blocks, 0);
  for (int chunk : {1, 7, 64}) {
    EngineConfig c = config();
    c.max_num_batched_tokens = chunk;
    expect_same(run(c, rs), "chunks of " + std::to_string(chunk));
  }
  // A pool of 24 full-attention blocks' bytes: the window group gets its cap, the rest too
  // little for four sequences of up to 81 tokens at once.
  for (bool caching : {false, true}) {
    EngineConfig c = config();
    c.enable_prefix_caching = caching;
    const uint64_t layer_block =
        KvCache::bytes_per_block(make_engine(c, bytes_)->model().config(), kBs, c.kv_dtype) / 6;
    c.kv_cache_memory_gib = (24.0 * 6) * layer_block / double(1ull << 30);
    expect_same(run(c, rs), caching ? "preempted, caching" : "preempted");
    EXPECT_GT(metrics_.num_preemptions, 0) << caching;
  }
  // Prefix-cache hits: every request runs a second time on the same engine; its prompt is
  // then cached up to the window before its last block.
  {
    auto e = make_engine(config(), bytes_);
    e->keep_logits(true);
    for (const auto& r : rs) ASSERT_TRUE(e->add_request(r).is_ok());
    run_all(*e);
    std::vector<GenerateRequest> again = rs;
    for (auto& r : again) ASSERT_TRUE(e->add_request(r).is_ok());
    auto got = run_all(*e);
    expect_same(got, "second time, prefix-cache hit");
    int64_t hits = 0;
    for (const auto& r : rs) hits += got.at(r.request_id).num_cached_tokens;
    EXPECT_GT(hits, 0);
    EXPECT_EQ(e->check_kv_drained(), "");
  }
}

}  // namespace
}  // namespace loom
