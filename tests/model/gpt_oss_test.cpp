// gpt-oss as `loom synth --preset tiny-gpt-oss --type mxfp4` builds it (llama.cpp's layout:
// experts MXFP4, other matrices Q8_0, routers and biases F32): it loads with the family's
// flags, runs, and a sequence's logits are bit-identical alone and batched with another one
// (MoE routing, attention sinks and sliding windows included). Its numerics against
// transformers are checked in hf_reference_test.cpp.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "format/gguf.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "tools/synth.h"

namespace loom {
namespace {

std::unique_ptr<Model> tiny_gpt_oss() {
  SynthOptions o;
  o.arch = "gpt-oss";
  o.preset = "tiny-gpt-oss";
  o.type = Dtype::kMXFP4;
  auto bytes = synth_model_bytes(o);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto file = GgufFile::parse_bytes(*bytes);
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

}  // namespace
}  // namespace loom
