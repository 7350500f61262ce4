// Multi-token prediction modules (DeepSeek-V3's MTP, llama.cpp's nextn layers) against the
// independent reference (tests/reference): loading keeps them out of the main forward pass, the
// main pass's hidden states before the final norm, and the module's logits and output states
// over several positions in chunks (so the K/V of earlier positions are read back), on synth's
// tiny-mla (Multi-head Latent Attention, DeepSeek's routed experts) with random weights.
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

TEST(Mtp, SynthMlaPresetHasOneModuleKeptOutOfTheMainPass) {
  Synth s = load_synth("tiny-mla");
  ASSERT_TRUE(s.model);
  const ModelConfig& c = s.model->config();
  EXPECT_EQ(c.n_layer, 2);  // block_count 3 = 2 main layers + 1 MTP layer
  EXPECT_EQ(s.file.get_int("deepseek2.block_count").value_or(0), 3);
  EXPECT_EQ(s.file.get_int("deepseek2.nextn_predict_layers").value_or(0), 1);
  ASSERT_EQ(c.n_mtp_layers, 1);
  ASSERT_EQ(c.mtp_layers.size(), 1u);
  EXPECT_TRUE(c.mtp_layers[0].mla);
  EXPECT_TRUE(c.mtp_layers[0].moe);  // as DeepSeek-V3's layer 61
  EXPECT_TRUE(c.mtp_own_norm);
  EXPECT_FALSE(c.mtp_own_head);  // shares output.weight
  for (std::string_view t : {names::kNextnEhProj, names::kNextnEnorm, names::kNextnHnorm,
                             names::kNextnHeadNorm, names::kAttnKvAMqa, names::kFfnGateExps})
    EXPECT_NE(s.file.find_tensor(names::layer_tensor(2, t)), nullptr) << t;
  EXPECT_EQ(s.file.find_tensor(names::layer_tensor(2, names::kNextnHead)), nullptr);
  // The module is a model of its own: one MLA + MoE block.
  auto mod = s.model->mtp_module(0);
  ASSERT_TRUE(mod.is_ok()) << mod.status().message();
  EXPECT_EQ((*mod)->config().n_layer, 1);
  EXPECT_TRUE((*mod)->config().mtp_module);
  EXPECT_FALSE(s.model->mtp_module(1).is_ok());
}

// The main pass (now checkable: the reference has Multi-head Latent Attention and DeepSeek's
// routing) is unchanged by the module, and the states it leaves the module are the reference's
// after the final norm (as vLLM and SGLang pass DeepSeek-V3's, not those before); then the
// module over rows 0..n-2 (row p: the token t_{p+1} with h_p), run as a chunk of 5 and then
// row by row, matches the reference's logits and output states.
TEST(Mtp, ModuleMatchesReferenceOverSeveralPositions) {
  Synth s = load_synth("tiny-mla");
  ASSERT_TRUE(s.model);
  Model& m = *s.model;
  const ModelConfig& c = m.config();
  const int64_t V = c.n_vocab;
  const auto tokens = test::random_tokens(12, c.n_vocab, 11);
  const int32_t n = static_cast<int32_t>(tokens.size());

  EXPECT_TRUE(c.mtp_hidden_after_norm);
  std::vector<float> ref_normed, ref_pre;
  auto ref = reference::forward(c, reference::gguf_lookup(s.file), tokens, &ref_normed, &ref_pre);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  auto kv = KvCache::create(c, 8, 16, Dtype::kF32).value();
  std::vector<float> logits, pre;
  ASSERT_TRUE(run_rows(m, *kv, tokens, {}, 0, 7, logits, pre).is_ok());
  ASSERT_TRUE(run_rows(m, *kv, tokens, {}, 7, n, logits, pre).is_ok());
  const double main_err = test::rel_err(logits.data(), ref->data(), ref->size());
  EXPECT_LT(main_err, 1e-4);
  const double pre_err = test::rel_err(pre.data(), ref_normed.data(), ref_normed.size());
  EXPECT_LT(pre_err, 1e-4);
  EXPECT_GT(test::rel_err(pre.data(), ref_pre.data(), ref_pre.size()), 1e-2);

  // Module rows p = 0..n-2: token t_{p+1}, the CPU pass's h_p.
  const test::ModuleRun r = test::run_module_against_reference(m, s.file, tokens, pre);
  const double mtp_err = r.logits_err, out_err = r.out_err;
  EXPECT_LT(mtp_err, 1e-4);
  EXPECT_LT(out_err, 1e-4);
  std::printf(
      "  tiny-mla main rel_err %.3g, final-norm states %.3g; MTP logits %.3g, output %.3g\n",
      main_err, pre_err, mtp_err, out_err);
  // Not trivially equal to the main head's: the module's logits differ from the next
  // position's main logits.
  EXPECT_GT(test::rel_err(r.logits.data(), logits.data() + V, V), 1e-2);
  // A module row depends on the earlier positions' K/V: rerunning the last row at its
  // position over a cache whose earlier positions hold other K/V (those of other tokens; a
  // fresh cache's unwritten memory may hold anything, even a freed cache's same values)
  // changes it.
  auto mod = m.mtp_module(0);
  ASSERT_TRUE(mod.is_ok()) << mod.status().message();
  auto other = test::mtp_test_cache((*mod)->config());
  std::vector<int32_t> other_tokens = r.tokens;
  for (int32_t& t : other_tokens) t = (t + 1) % static_cast<int32_t>(V);
  std::vector<float> alone_logits, alone_out;
  ASSERT_TRUE(
      run_rows(**mod, *other, other_tokens, r.hidden, 0, n - 2, alone_logits, alone_out).is_ok());
  alone_logits.clear();
  ASSERT_TRUE(
      run_rows(**mod, *other, r.tokens, r.hidden, n - 2, n - 1, alone_logits, alone_out).is_ok());
  EXPECT_GT(test::rel_err(alone_logits.data(), r.ref_logits.data() + (n - 2) * V, V), 1e-3);
}

}  // namespace
}  // namespace loom
