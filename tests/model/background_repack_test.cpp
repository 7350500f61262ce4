// ModelLoadOptions::repack_in_background: the model answers at once on the file's layout while
// its kernel-ready copies are made on another thread, then switches to them between two forward
// calls. Before the switch its logits are close to the copies' (the same weights, sums in
// another order); after it they are bit-identical to a model that made the copies up front.
#include <gtest/gtest.h>

#include <chrono>

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

INSTANTIATE_TEST_SUITE_P(Types, BackgroundRepack,
                         ::testing::Values(Dtype::kF16, Dtype::kQ8_0, Dtype::kQ4_0, Dtype::kQ4_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace loom
