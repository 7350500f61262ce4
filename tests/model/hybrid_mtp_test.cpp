// Qwen3-Next's and Qwen3.5's multi-token prediction modules on `loom synth` models
// (tiny-qwen3next: experts and a shared expert; tiny-qwen35: dense; tiny-qwen3next@qwen35moe:
// Qwen3.5's layers with experts), each with one module after its Gated DeltaNet hybrid layers:
// the module is one gated full-attention block whatever the layer pattern, with the model's
// FFN reading the target's final-norm hidden states, and its logits and normed output states
// over several positions, in a chunk and then row by row, match the independent reference
// (tests/reference) fed the states the CPU pass hands a module.
#include <gtest/gtest.h>

#include "model/model.h"
#include "model/mtp_check.h"
#include "model/tensor_names.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"
#include "tools/synth.h"

namespace loom {
namespace {

using test::load_synth;
using test::run_rows;
using test::Synth;

class HybridMtp : public ::testing::TestWithParam<std::string> {};

TEST_P(HybridMtp, PresetHasOneFullAttentionModuleKeptOutOfTheMainPass) {
  Synth s = load_synth(GetParam());
  ASSERT_TRUE(s.model);
  const ModelConfig& c = s.model->config();
  const bool experts = c.moe.n_expert > 0;
  EXPECT_EQ(experts, GetParam() != "tiny-qwen35");
  EXPECT_EQ(c.n_layer, 4);  // block_count 5 = 4 main layers + 1 MTP layer
  EXPECT_EQ(s.file.get_int(c.arch + ".block_count").value_or(0), 5);
  EXPECT_EQ(s.file.get_int(c.arch + ".nextn_predict_layers").value_or(0), 1);
  ASSERT_EQ(c.n_mtp_layers, 1);
  ASSERT_EQ(c.mtp_layers.size(), 1u);
  EXPECT_FALSE(c.mtp_layers[0].deltanet);  // layer 4 of the interval pattern would recur
  EXPECT_EQ(c.mtp_layers[0].moe, experts);
  EXPECT_TRUE(c.mtp_own_norm);
  EXPECT_FALSE(c.mtp_own_head || c.mtp_own_embed);
  EXPECT_FALSE(c.mtp_zero_embedding_at_start);
  EXPECT_TRUE(c.mtp_hidden_after_norm);
  for (std::string_view t : {names::kNextnEhProj, names::kNextnEnorm, names::kNextnHnorm,
                             names::kNextnHeadNorm, names::kAttnQ, names::kAttnQNorm,
                             names::kAttnPostNorm, experts ? names::kFfnGateExps : names::kFfnGate})
    EXPECT_NE(s.file.find_tensor(names::layer_tensor(4, t)), nullptr) << t;
  for (std::string_view t : {names::kSsmConv1d, names::kNextnHead, names::kNextnEmbed})
    EXPECT_EQ(s.file.find_tensor(names::layer_tensor(4, t)), nullptr) << t;
  // The query rows carry the output gate's: 2 · n_head · head_dim.
  const GgufTensorInfo* q = s.file.find_tensor(names::layer_tensor(4, names::kAttnQ));
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->view.ne[1], 2 * c.n_head * c.head_dim);
  auto mod = s.model->mtp_module(0);
  ASSERT_TRUE(mod.is_ok()) << mod.status().message();
  EXPECT_EQ((*mod)->config().n_layer, 1);
  EXPECT_FALSE((*mod)->config().layers[0].deltanet);
  EXPECT_TRUE((*mod)->config().mtp_module);
}

// The main pass matches the reference (logits, and the final-norm states a module reads, not
// those before the norm); then the module over rows 0..n-2 (row p: token t_{p+1} with h_p), as
// a chunk of 5 and then row by row, matches the reference's logits and normed output states,
// the embedding read at position 0 too.
TEST_P(HybridMtp, ModuleMatchesReferenceOverSeveralPositions) {
  Synth s = load_synth(GetParam());
  ASSERT_TRUE(s.model);
  Model& m = *s.model;
  const ModelConfig& c = m.config();
  const int64_t V = c.n_vocab;
  const auto tokens = test::random_tokens(12, c.n_vocab, 5);
  const int32_t n = static_cast<int32_t>(tokens.size());

  std::vector<float> ref_normed, ref_pre;
  auto ref = reference::forward(c, reference::gguf_lookup(s.file), tokens, &ref_normed, &ref_pre);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  auto kv = test::mtp_test_cache(c);
  std::vector<float> logits, reads;
  ASSERT_TRUE(run_rows(m, *kv, tokens, {}, 0, 7, logits, reads).is_ok());
  ASSERT_TRUE(run_rows(m, *kv, tokens, {}, 7, n, logits, reads).is_ok());
  const double main_err = test::rel_err(logits.data(), ref->data(), ref->size());
  const double reads_err = test::rel_err(reads.data(), ref_normed.data(), ref_normed.size());
  EXPECT_LT(main_err, 1e-4);
  EXPECT_LT(reads_err, 1e-4);
  EXPECT_GT(test::rel_err(reads.data(), ref_pre.data(), ref_pre.size()), 1e-2);

  const test::ModuleRun r = test::run_module_against_reference(m, s.file, tokens, reads);
  const double mtp_err = r.logits_err, out_err = r.out_err;
  EXPECT_LT(mtp_err, 1e-4);
  EXPECT_LT(out_err, 1e-4);
  std::printf("  %s main rel_err %.3g, final-norm states %.3g; MTP logits %.3g, output %.3g\n",
              GetParam().c_str(), main_err, reads_err, mtp_err, out_err);
  // Not the main head's next-position logits.
  EXPECT_GT(test::rel_err(r.logits.data(), logits.data() + V, V), 1e-2);
  // Position 0 reads its token's embedding (vLLM's qwen3_next_mtp; its DeepSeek MTP zeroes
  // it): the reference with the embedding zeroed there gives other logits for row 0.
  ModelConfig zeroed = c;
  zeroed.mtp_zero_embedding_at_start = true;
  auto ref_zeroed =
      reference::mtp_forward(zeroed, reference::gguf_lookup(s.file), 0, r.tokens, r.hidden);
  ASSERT_TRUE(ref_zeroed.is_ok());
  EXPECT_GT(test::rel_err(r.logits.data(), ref_zeroed->data(), V), 1e-3);
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridMtp,
                         ::testing::Values("tiny-qwen3next", "tiny-qwen35",
                                           "tiny-qwen3next@qwen35moe"),
                         [](const auto& info) {
                           std::string name = info.param;
                           for (char& ch : name)
                             if (ch == '-' || ch == '@') ch = '_';
                           return name;
                         });

}  // namespace
}  // namespace loom
