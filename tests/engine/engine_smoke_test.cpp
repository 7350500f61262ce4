#include <atomic>
#include <chrono>
#include <thread>

#include "engine/engine_core.h"
#include "model/model.h"
#include "test_engine_util.h"

namespace loom {
namespace {

TEST(EngineSmoke, GeneratesMaxTokens) {
  EngineConfig c;
  c.max_num_seqs = 4;
  c.n_threads = 1;
  auto e = testing::make_engine(c, testing::test_model_bytes({}));
  ASSERT_TRUE(e);
  GenerateRequest r;
  r.request_id = "a";
  r.prompt = testing::random_prompt(20, 1, e->model().config().n_vocab);
  r.params.max_tokens = 5;
  r.params.ignore_eos = true;
  ASSERT_TRUE(e->add_request(r).is_ok());
  auto out = testing::run_all(*e);
  EXPECT_EQ(out["a"].tokens[0].size(), 5u);
  EXPECT_EQ(out["a"].finish[0], FinishReason::kLength);
  EXPECT_EQ(e->check_kv_drained(), "");
}

// A model whose weight copies are made when the test says so (the rest is the tiny model's).
class CopiesWhenTold final : public Model {
 public:
  CopiesWhenTold(std::unique_ptr<Model> m, std::shared_ptr<std::atomic<bool>> made)
      : m_(std::move(m)), made_(std::move(made)) {}
  const ModelConfig& config() const override { return m_->config(); }
  using Model::forward;
  Status forward(const Batch& b, KvCache& kv, float* logits, float* hidden,
                 float* residual) override {
    return m_->forward(b, kv, logits, hidden, residual);
  }
  Status classify(const float* hidden, float* out) const override {
    return m_->classify(hidden, out);
  }
  ThreadPool& thread_pool() override { return m_->thread_pool(); }
  uint64_t weight_bytes() const override { return m_->weight_bytes(); }
  WeightStats weight_stats() const override { return m_->weight_stats(); }
  MemoryUse memory_use() const override { return m_->memory_use(); }
  std::function<bool()> weight_copies_made() const override {
    return [made = made_] { return made->load(); };
  }

 private:
  std::unique_ptr<Model> m_;
  std::shared_ptr<std::atomic<bool>> made_;
};

// The KV cache commits its memory only once the model's weight copies are made (EngineCore
// hands Model::weight_copies_made to KvCache::create: until then the copies still read the
// file's pages, which a KV cache committed beside them would evict). A start-up that waits for
// its KV cache (commit_kv_in_background = false) waits for the copies too.
TEST(EngineStartup, KvCacheCommitsAfterTheWeightCopies) {
  auto file = GgufFile::parse_bytes(testing::test_model_bytes({}));
  ASSERT_TRUE(file.is_ok());
  auto tiny = Model::from_gguf(std::move(*file), {1});
  ASSERT_TRUE(tiny.is_ok()) << tiny.status().message();
  auto made = std::make_shared<std::atomic<bool>>(false);
  EngineConfig c;
  c.max_model_len = 64;
  c.max_num_seqs = 1;
  c.n_threads = 1;
  c.commit_kv_in_background = false;
  constexpr auto kCopying = std::chrono::milliseconds(300);
  std::thread copier([&] {
    std::this_thread::sleep_for(kCopying);
    made->store(true);
  });
  const auto t0 = std::chrono::steady_clock::now();
  auto engine =
      EngineCore::create(std::make_unique<CopiesWhenTold>(std::move(*tiny), made), nullptr, c);
  const auto waited = std::chrono::steady_clock::now() - t0;
  copier.join();
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  EXPECT_GE(waited, kCopying) << "the KV cache was committed before the weight copies were made";
}

}  // namespace
}  // namespace loom
