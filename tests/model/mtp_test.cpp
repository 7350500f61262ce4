// Multi-token prediction modules (DeepSeek-V3's MTP, llama.cpp's nextn layers) against the
// independent reference (tests/reference): loading keeps them out of the main forward pass, the
// main pass's hidden states before the final norm, and the module's logits and output states
// over several positions in chunks (so the K/V of earlier positions are read back), on synth's
// tiny-mla (Multi-head Latent Attention, DeepSeek's routed experts) with random weights.
#include <gtest/gtest.h>

#include "model/model.h"
#include "model/tensor_names.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"
#include "tools/synth.h"

namespace loom {
namespace {

struct Synth {
  GgufFile file;  // the reference reads the same bytes
  std::unique_ptr<Model> model;
};

Synth load_synth(const std::string& spec) {
  auto so = parse_synth_spec(spec);
  EXPECT_TRUE(so.is_ok()) << so.status().message();
  auto bytes = synth_model_bytes(*so);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(f.is_ok());
  auto f2 = GgufFile::parse_bytes(*bytes);
  auto m = Model::from_gguf(std::move(*f2), {2});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return {std::move(*f), std::move(*m)};
}

// Runs rows [begin, end) of one sequence through `m` (positions begin..end-1, blocks 0..),
// with `prev_hidden` rows for an MTP module; appends logits and pre-norm states.
Status run_rows(Model& m, KvCache& kv, const std::vector<int32_t>& tokens,
                const std::vector<float>& prev_hidden, int32_t begin, int32_t end,
                std::vector<float>& logits, std::vector<float>& pre_norm) {
  const int64_t E = m.config().n_embd, V = m.config().n_vocab;
  std::vector<int32_t> table(8);
  for (size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  Batch b;
  b.sequences.push_back({table.data(), static_cast<int32_t>(table.size()), begin, end - begin, 0});
  for (int32_t p = begin; p < end; ++p) {
    b.tokens.push_back(tokens[p]);
    b.pos.push_back(p);
    b.seq.push_back(0);
    b.logits_rows.push_back(p - begin);
  }
  if (!prev_hidden.empty())
    b.prev_hidden.assign(prev_hidden.begin() + begin * E, prev_hidden.begin() + end * E);
  std::vector<float> lg((end - begin) * V), h((end - begin) * E);
  LOOM_RETURN_IF_ERROR(m.forward(b, kv, lg.data(), nullptr, h.data()));
  logits.insert(logits.end(), lg.begin(), lg.end());
  pre_norm.insert(pre_norm.end(), h.begin(), h.end());
  return Status::ok();
}

TEST(Mtp, SynthMlaPresetHasOneModuleKeptOutOfTheMainPass) {
  Synth s = load_synth("synth:tiny-mla");
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
// routing) is unchanged by the module, and its pre-norm states are the reference's; then the
// module over rows 0..n-2 (row p: the token t_{p+1} with h_p), run as a chunk of 5 and then
// row by row, matches the reference's logits and output states.
TEST(Mtp, ModuleMatchesReferenceOverSeveralPositions) {
  Synth s = load_synth("synth:tiny-mla");
  ASSERT_TRUE(s.model);
  Model& m = *s.model;
  const ModelConfig& c = m.config();
  const int64_t E = c.n_embd, V = c.n_vocab;
  const auto tokens = test::random_tokens(12, c.n_vocab, 11);
  const int32_t n = static_cast<int32_t>(tokens.size());

  std::vector<float> ref_pre;
  auto ref = reference::forward(c, reference::gguf_lookup(s.file), tokens, nullptr, &ref_pre);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  auto kv = KvCache::create(c, 8, 16, Dtype::kF32).value();
  std::vector<float> logits, pre;
  ASSERT_TRUE(run_rows(m, *kv, tokens, {}, 0, 7, logits, pre).is_ok());
  ASSERT_TRUE(run_rows(m, *kv, tokens, {}, 7, n, logits, pre).is_ok());
  const double main_err = test::rel_err(logits.data(), ref->data(), ref->size());
  EXPECT_LT(main_err, 1e-4);
  const double pre_err = test::rel_err(pre.data(), ref_pre.data(), ref_pre.size());
  EXPECT_LT(pre_err, 1e-4);

  // Module rows p = 0..n-2: token t_{p+1}, the CPU pass's h_p.
  std::vector<int32_t> mtp_tokens(tokens.begin() + 1, tokens.end());
  std::vector<float> mtp_hidden(pre.begin(), pre.begin() + (n - 1) * E);
  std::vector<float> ref_out;
  auto ref_mtp = reference::mtp_forward(c, reference::gguf_lookup(s.file), 0, mtp_tokens,
                                        mtp_hidden, &ref_out);
  ASSERT_TRUE(ref_mtp.is_ok()) << ref_mtp.status().message();
  auto mod = m.mtp_module(0);
  ASSERT_TRUE(mod.is_ok()) << mod.status().message();
  auto mkv = KvCache::create((*mod)->config(), 8, 16, Dtype::kF32).value();
  std::vector<float> mtp_logits, mtp_out;
  ASSERT_TRUE(run_rows(**mod, *mkv, mtp_tokens, mtp_hidden, 0, 5, mtp_logits, mtp_out).is_ok());
  for (int32_t p = 5; p < n - 1; ++p)
    ASSERT_TRUE(
        run_rows(**mod, *mkv, mtp_tokens, mtp_hidden, p, p + 1, mtp_logits, mtp_out).is_ok());
  ASSERT_EQ(mtp_logits.size(), ref_mtp->size());
  const double mtp_err = test::rel_err(mtp_logits.data(), ref_mtp->data(), ref_mtp->size());
  const double out_err = test::rel_err(mtp_out.data(), ref_out.data(), ref_out.size());
  EXPECT_LT(mtp_err, 1e-4);
  EXPECT_LT(out_err, 1e-4);
  std::printf("  tiny-mla main rel_err %.3g, pre-norm %.3g; MTP logits %.3g, output %.3g\n",
              main_err, pre_err, mtp_err, out_err);
  // Not trivially equal to the main head's: the module's logits differ from the next
  // position's main logits.
  EXPECT_GT(test::rel_err(mtp_logits.data(), logits.data() + V, V), 1e-2);
  // A module row depends on the earlier positions' K/V: rerunning the last row alone at its
  // position over a cache that lost them changes it.
  auto fresh = KvCache::create((*mod)->config(), 8, 16, Dtype::kF32).value();
  std::vector<float> alone_logits, alone_out;
  ASSERT_TRUE(run_rows(**mod, *fresh, mtp_tokens, mtp_hidden, n - 2, n - 1, alone_logits, alone_out)
                  .is_ok());
  EXPECT_GT(test::rel_err(alone_logits.data(), ref_mtp->data() + (n - 2) * V, V), 1e-3);
}

}  // namespace
}  // namespace loom
