// ModelLoadOptions::thread_pool: a model given a pool runs on it instead of starting its own
// (the engine gives a draft model its target's), and two models taking turns on one pool give
// the logits each gives on a pool of its own, bit for bit.
#include <gtest/gtest.h>

#include <algorithm>

#include "model/model.h"
#include "model/tiny_model.h"

namespace loom {
namespace {

std::unique_ptr<Model> load(const std::shared_ptr<std::vector<uint8_t>>& bytes, ThreadPool* pool) {
  auto file = GgufFile::parse_bytes(bytes);
  EXPECT_TRUE(file.is_ok());
  ModelLoadOptions o;
  o.n_threads = 2;
  o.thread_pool = pool;
  auto m = Model::from_gguf(*file, o);
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return std::move(m).value();
}

std::vector<float> run(Model& m, const std::vector<int32_t>& tokens) {
  auto kv = KvCache::create(m.config(), 16, 4, Dtype::kF32).value();
  auto logits = test::run_sequence(m, *kv, tokens, 29);
  EXPECT_TRUE(logits.is_ok()) << logits.status().message();
  return std::move(logits).value();
}

TEST(SharedPool, ModelsTakingTurnsOnOnePoolMatchTheirOwnPools) {
  const auto target_bytes = test::build_tiny_gguf(test::tiny_spec("llama", Dtype::kQ8_0));
  const auto draft_bytes = test::build_tiny_gguf(test::tiny_spec("qwen3", Dtype::kQ4_0));
  auto target = load(target_bytes, nullptr);
  auto draft_alone = load(draft_bytes, nullptr);
  const auto tokens =
      test::random_tokens(41, std::min(target->config().n_vocab, draft_alone->config().n_vocab), 9);
  const std::vector<float> want_target = run(*target, tokens);
  const std::vector<float> want_draft = run(*draft_alone, tokens);

  auto draft = load(draft_bytes, &target->thread_pool());
  EXPECT_EQ(&draft->thread_pool(), &target->thread_pool());
  EXPECT_NE(&draft_alone->thread_pool(), &target->thread_pool());
  for (int turn = 0; turn < 3; ++turn) {
    EXPECT_TRUE(run(*draft, tokens) == want_draft) << turn;
    EXPECT_TRUE(run(*target, tokens) == want_target) << turn;
  }
}

}  // namespace
}  // namespace loom
