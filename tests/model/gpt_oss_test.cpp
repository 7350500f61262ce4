// gpt-oss as `loom synth --preset tiny-gpt-oss --type mxfp4` builds it (llama.cpp's layout:
// experts MXFP4, other matrices Q8_0, routers and biases F32): it loads with the family's
// flags, runs, and a sequence's logits are bit-identical alone and batched with another one
// (MoE routing, attention sinks and sliding windows included), and its experts, repacked for
// the MXFP4 kernel, compute what their dequantized F32 twin does. Its numerics against
// transformers are checked in hf_reference_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "backend/cpu/cpu_model.h"
#include "format/gguf.h"
#include "kernels/cpu/isa.h"
#include "kernels/packed.h"
#include "kernels/quant.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "tools/synth.h"

namespace loom {
namespace {

std::shared_ptr<const std::vector<uint8_t>> tiny_gpt_oss_bytes() {
  SynthOptions o;
  o.arch = "gpt-oss";
  o.preset = "tiny-gpt-oss";
  o.type = Dtype::kMXFP4;
  auto bytes = synth_model_bytes(o);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  return bytes.is_ok() ? std::move(bytes).value() : nullptr;
}

std::unique_ptr<Model> tiny_gpt_oss() {
  const auto bytes = tiny_gpt_oss_bytes();
  auto file = GgufFile::parse_bytes(bytes);
  EXPECT_TRUE(file.is_ok());
  for (const auto& t : file->tensors()) {
    if (t.name.find("_exps.weight") != std::string::npos) {
      EXPECT_EQ(t.view.dtype, Dtype::kMXFP4) << t.name;
    } else if (t.view.n_dims >= 2 && t.name.find("ffn_gate_inp") == std::string::npos &&
               t.name.find(".bias") == std::string::npos) {
      EXPECT_EQ(t.view.dtype, Dtype::kQ8_0) << t.name;
    }
  }
  auto m = Model::from_gguf(std::move(file).value(), {2});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return m.is_ok() ? std::move(m).value() : nullptr;
}

TEST(GptOss, SynthMxfp4LoadsWithItsFlagsAndRuns) {
  auto m = tiny_gpt_oss();
  ASSERT_TRUE(m);
  const ModelConfig& c = m->config();
  EXPECT_EQ(c.arch, "gpt-oss");
  EXPECT_TRUE(c.attn_sinks && c.attn_out_bias && c.qkv_bias);
  EXPECT_TRUE(c.moe.router_bias && c.moe.expert_bias && c.moe.norm_topk);
  EXPECT_EQ(c.activation, Activation::kSwigluOai);
  EXPECT_EQ(c.layers.at(0).window, 8);
  EXPECT_EQ(c.layers.at(1).window, 0);
  auto kv = KvCache::create(c, 4, 16, Dtype::kF32).value();
  const auto tokens = test::random_tokens(20, c.n_vocab, 3);
  auto logits = test::run_sequence(*m, *kv, tokens, 64);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  for (size_t r = 0; r < tokens.size(); ++r) {
    double sq = 0;
    for (int v = 0; v < c.n_vocab; ++v) {
      const float x = (*logits)[r * c.n_vocab + v];
      ASSERT_TRUE(std::isfinite(x));
      sq += double(x) * x;
    }
    EXPECT_GT(sq, 0.0) << "row " << r;
  }
}

// Prefill of sequence A alone, then of A and B in one batch (B's rows first): A's logits
// must not change by a bit.
TEST(GptOss, SequenceLogitsDoNotDependOnTheBatch) {
  auto m = tiny_gpt_oss();
  ASSERT_TRUE(m);
  const int32_t V = m->config().n_vocab, n = 20;
  const auto a = test::random_tokens(n, V, 5), b = test::random_tokens(n, V, 6);
  std::vector<int32_t> table_a = {0, 1}, table_b = {2, 3};
  auto run = [&](bool with_b, std::vector<float>* out) {
    auto kv = KvCache::create(m->config(), 4, 16, Dtype::kF32).value();
    Batch batch;
    int32_t row = 0;
    if (with_b) {
      batch.sequences.push_back({table_b.data(), 2, 0, n, row});
      for (int32_t i = 0; i < n; ++i, ++row) {
        batch.tokens.push_back(b[i]);
        batch.pos.push_back(i);
        batch.seq.push_back(0);
      }
    }
    const int32_t first_a = row;
    batch.sequences.push_back({table_a.data(), 2, 0, n, row});
    for (int32_t i = 0; i < n; ++i, ++row) {
      batch.tokens.push_back(a[i]);
      batch.pos.push_back(i);
      batch.seq.push_back(with_b ? 1 : 0);
      batch.logits_rows.push_back(first_a + i);
    }
    out->assign(static_cast<size_t>(n) * V, 0.0f);
    return m->forward(batch, *kv, out->data());
  };
  std::vector<float> alone, together;
  ASSERT_TRUE(run(false, &alone).is_ok());
  ASSERT_TRUE(run(true, &together).is_ok());
  EXPECT_EQ(0, std::memcmp(alone.data(), together.data(), alone.size() * sizeof(float)))
      << "max rel diff " << test::rel_err(alone.data(), together.data(), alone.size());
}

// The experts as the model runs them (each expert's matrix repacked for the MXFP4 kernel on
// AVX-512; one-token calls and multi-token tiles of up to CpuMoeFfn::kRowsPerTask rows) against a
// twin whose experts are the same MXFP4 values dequantized to F32 (float kernels), every other
// tensor shared: what remains is the int8 rounding of the experts' activations. A wrong nibble,
// offset or scale moves every row by O(1) (the hf_reference test saw > 0.3).
TEST(GptOss, Mxfp4ExpertsMatchTheirDequantizedTwin) {
  const auto bytes = tiny_gpt_oss_bytes();
  auto file = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(file.is_ok());
  std::map<std::string, std::vector<float>, std::less<>> dequantized;
  std::map<std::string, TensorView, std::less<>> twin_views;
  for (const auto& t : file->tensors()) {
    if (t.view.dtype != Dtype::kMXFP4) continue;
    // One expert's matrix, as CpuModel slices it: packable on AVX-512, so repacked at load.
    TensorView expert = t.view;
    expert.n_dims = 2;
    expert.ne = {t.view.ne[0], t.view.ne[1], int64_t{1}, int64_t{1}};
    expert.nbytes = t.view.nbytes / t.view.ne[2];
    EXPECT_EQ(kernels::packable(expert), kernels::best_isa() == kernels::Isa::kAvx512) << t.name;
    std::vector<float>& d = dequantized[t.name];
    d.resize(t.view.numel());
    const int64_t rows = t.view.numel() / t.view.cols();
    for (int64_t r = 0; r < rows; ++r)
      kernels::dequantize_row(Dtype::kMXFP4,
                              static_cast<const uint8_t*>(t.view.data) + r * t.view.row_stride(),
                              &d[r * t.view.cols()], t.view.cols());
    TensorView v = t.view;
    v.dtype = Dtype::kF32;
    v.data = d.data();
    v.nbytes = d.size() * sizeof(float);
    twin_views[t.name] = v;
  }
  ASSERT_EQ(twin_views.size(), 6u);  // gate, up, down of 2 layers
  auto cfg = config_from_gguf(*file);
  ASSERT_TRUE(cfg.is_ok());
  auto w =
      Weights::bind(*cfg, *find_arch(cfg->arch), [&](std::string_view name) -> const TensorView* {
        if (auto it = twin_views.find(name); it != twin_views.end()) return &it->second;
        for (const auto& t : file->tensors())
          if (t.name == name) return &t.view;
        return nullptr;
      });
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  CpuModel twin(*cfg, std::move(*w), ModelLoadOptions{2});
  auto m = tiny_gpt_oss();
  ASSERT_TRUE(m);
  const int32_t V = m->config().n_vocab;
  const auto tokens = test::random_tokens(40, V, 11);
  auto kv = KvCache::create(m->config(), 4, 16, Dtype::kF32).value();
  auto kv2 = KvCache::create(twin.config(), 4, 16, Dtype::kF32).value();
  // Chunks of 1 (decode: one token a call) then of 39 (prefill: many rows per expert).
  for (int32_t chunk : {1, 39}) {
    auto got = test::run_sequence(*m, *kv, tokens, chunk);
    auto want = test::run_sequence(twin, *kv2, tokens, chunk);
    ASSERT_TRUE(got.is_ok() && want.is_ok());
    double worst = 0;
    for (size_t r = 0; r < tokens.size(); ++r)
      worst = std::max(worst, test::rel_err(&(*got)[r * V], &(*want)[r * V], V));
    std::printf("  gpt-oss mxfp4 experts, chunks of %d: worst row rel err %.3g vs F32 twin\n",
                chunk, worst);
    EXPECT_LT(worst, 2e-2) << "chunks of " << chunk;
    EXPECT_GT(worst, 1e-7);  // the model's experts are not the twin's F32 ones by mistake
  }
}

}  // namespace
}  // namespace loom
