// ModelLoadOptions::repack_in_background: the model answers at once on the file's layout while
// its kernel-ready copies are made on another thread, then switches to them between two forward
// calls. Before the switch its logits are close to the copies' (the same weights, sums in
// another order); after it they are bit-identical to a model that made the copies up front.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <thread>

#include "model/model.h"
#include "model/tiny_model.h"

namespace loom {
namespace {

class BackgroundRepack : public ::testing::TestWithParam<Dtype> {};

TEST_P(BackgroundRepack, ServesAtOnceThenMatchesTheUpFrontCopiesBitForBit) {
  auto bytes = test::build_tiny_gguf(test::tiny_spec("llama", GetParam()));
  auto load = [&](bool background) {
    auto file = GgufFile::parse_bytes(bytes);
    EXPECT_TRUE(file.is_ok());
    ModelLoadOptions o;
    o.n_threads = 2;
    o.repack_in_background = background;
    auto m = Model::from_gguf(*file, o);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    return std::move(m).value();
  };
  auto up_front = load(false);
  const auto tokens = test::random_tokens(37, up_front->config().n_vocab, 5);
  auto run = [&](Model& m) {
    auto kv = KvCache::create(m.config(), 16, 4, Dtype::kF32).value();
    auto logits = test::run_sequence(m, *kv, tokens, 37);
    EXPECT_TRUE(logits.is_ok()) << logits.status().message();
    return std::move(logits).value();
  };
  const std::vector<float> want = run(*up_front);

  auto background = load(true);
  const std::vector<float> first = run(*background);
  // Both layouts quantize the activations to 8 bits, each in its own way: within what
  // forward_test allows either of them against the scalar reference (4e-2 for 4-bit weights).
  const bool four_bit = GetParam() == Dtype::kQ4_0 || GetParam() == Dtype::kQ4_K;
  EXPECT_LT(test::rel_err(first.data(), want.data(), want.size()), four_bit ? 4e-2 : 2e-2);
  // The copies of a tiny model take milliseconds: within seconds a call has switched to them.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  std::vector<float> got = first;
  while (got != want && std::chrono::steady_clock::now() < deadline) got = run(*background);
  EXPECT_TRUE(got == want) << "never switched to the kernel-ready copies";
  EXPECT_EQ(background->weight_bytes(), up_front->weight_bytes());
  EXPECT_EQ(background->memory_use().weight_copies, up_front->memory_use().weight_copies);
}

// A model dropped while its copies are being made stops the thread and frees them.
TEST(BackgroundRepack, DestroyedWhileCopying) {
  auto bytes = test::build_tiny_gguf(test::tiny_spec("llama", Dtype::kQ8_0));
  for (int i = 0; i < 20; ++i) {
    auto file = GgufFile::parse_bytes(bytes);
    ASSERT_TRUE(file.is_ok());
    ModelLoadOptions o;
    o.repack_in_background = true;
    auto m = Model::from_gguf(*file, o);
    ASSERT_TRUE(m.is_ok());
  }
}

// Each matrix switches to its copy as soon as the copy exists, not all of them once the last is
// made: steps taken while the copies are being made see some layers on copies and the rest on
// the file (logits neither the file's nor the copies'), so a model larger than what is left of
// memory beside its file stops reading each part of the file as it is copied. With 16 layers of
// ~4 MiB the copies take tens of milliseconds, a one-token step one or two.
TEST(BackgroundRepack, SwitchesEachMatrixAsItsCopyIsMade) {
  test::TinySpec s = test::tiny_spec("llama", Dtype::kQ8_0);
  s.n_layer = 16, s.n_embd = 512, s.n_head = 8, s.n_head_kv = 4, s.head_dim = 64, s.n_ff = 2048;
  const auto bytes = test::build_tiny_gguf(s);
  auto file = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(file.is_ok());
  ModelLoadOptions o;
  o.n_threads = 2;
  auto copies = Model::from_gguf(*file, o);  // made up front
  ASSERT_TRUE(copies.is_ok()) << copies.status().message();
  auto kv = KvCache::create((*copies)->config(), 4, 4, Dtype::kF32).value();
  const std::vector<int32_t> token = {7};
  const std::vector<float> want = test::run_sequence(**copies, *kv, token, 1).value();
  o.repack_in_background = true;
  // How many different logits a background model's steps give before they are the copies'.
  auto distinct_steps = [&]() -> size_t {
    auto m = Model::from_gguf(*file, o);
    EXPECT_TRUE(m.is_ok()) << m.status().message();
    std::vector<std::vector<float>> seen;  // each new logits vector, in order
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while ((seen.empty() || seen.back() != want) && std::chrono::steady_clock::now() < deadline) {
      auto logits = test::run_sequence(**m, *kv, token, 1);
      EXPECT_TRUE(logits.is_ok()) << logits.status().message();
      if (!logits.is_ok()) return 0;
      if (seen.empty() || seen.back() != *logits) seen.push_back(std::move(logits).value());
    }
    EXPECT_TRUE(seen.back() == want) << "never switched to the kernel-ready copies";
    EXPECT_TRUE((*m)->weight_copies_made()()) << "all switched, yet not all made";
    return seen.size();
  };
  // The file's layout, one mix or more, the copies': at least three. A loaded machine may
  // pause this thread for all of the copying; a few tries.
  size_t most = 0;
  for (int attempt = 0; attempt < 4 && most < 3; ++attempt) most = std::max(most, distinct_steps());
  EXPECT_GE(most, 3u) << "every view switched at once";
}

// weight_copies_made (what the engine's KV cache waits for before committing its memory):
// true once made, up front or in the background, and still callable after the model is gone.
TEST(BackgroundRepack, SaysWhenItsCopiesAreMade) {
  auto bytes = test::build_tiny_gguf(test::tiny_spec("llama", Dtype::kQ8_0));
  for (bool background : {false, true}) {
    auto file = GgufFile::parse_bytes(bytes);
    ASSERT_TRUE(file.is_ok());
    ModelLoadOptions o;
    o.repack_in_background = background;
    auto m = Model::from_gguf(*file, o);
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    const std::function<bool()> made = (*m)->weight_copies_made();
    if (!background) {
      EXPECT_TRUE(made());
    }
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (!made() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    EXPECT_TRUE(made());
    m->reset();
    EXPECT_TRUE(made());
  }
}

INSTANTIATE_TEST_SUITE_P(Types, BackgroundRepack,
                         ::testing::Values(Dtype::kF16, Dtype::kQ8_0, Dtype::kQ4_0, Dtype::kQ4_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace loom
