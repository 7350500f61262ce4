// The fast CPU forward pass against the independent reference (tests/reference) on tiny
// random-weight models of every supported architecture and weight dtype.
#include <gtest/gtest.h>

#include <cstdio>

#include "model/model.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"

namespace loom {
namespace {

using test::build_tiny_gguf;
using test::rel_err;
using test::tiny_spec;

struct Loaded {
  GgufFile file;
  std::unique_ptr<Model> model;
};

Loaded load(const test::TinySpec& spec, int threads = 2) {
  auto bytes = build_tiny_gguf(spec);
  auto file = GgufFile::parse_bytes(bytes);
  EXPECT_TRUE(file.is_ok()) << file.status().message();
  auto model = Model::from_gguf(*file, {threads});
  EXPECT_TRUE(model.is_ok()) << model.status().message();
  return {std::move(*file), std::move(*model)};
}

std::unique_ptr<KvCache> make_kv(const Model& m, int32_t blocks, Dtype dt = Dtype::kF32, int32_t bs = 16) {
  auto kv = KvCache::create(m.config(), blocks, bs, dt);
  EXPECT_TRUE(kv.is_ok()) << kv.status().message();
  return std::move(*kv);
}

struct Case {
  std::string arch;
  Dtype type;
  double tol;  // max|fast - ref| / max|ref| over all logits
};

class ForwardVsReference : public ::testing::TestWithParam<Case> {};

TEST_P(ForwardVsReference, LogitsMatchAndGreedyAgrees) {
  const Case& c = GetParam();
  auto spec = tiny_spec(c.arch, c.type);
  Loaded l = load(spec);
  ASSERT_TRUE(l.model);
  const ModelConfig& cfg = l.model->config();
  EXPECT_EQ(cfg.arch, c.arch);
  EXPECT_EQ(cfg.qkv_bias, c.arch == "qwen2");
  EXPECT_EQ(cfg.qk_norm, c.arch == "qwen3");
  EXPECT_EQ(cfg.rope_style, c.arch == "llama" ? RopeStyle::kInterleaved : RopeStyle::kNeox);

  auto tokens = test::random_tokens(21, cfg.n_vocab, 7);
  auto kv = make_kv(*l.model, 8);
  auto fast = test::run_sequence(*l.model, *kv, tokens, 64);
  ASSERT_TRUE(fast.is_ok()) << fast.status().message();
  auto ref = reference::forward(cfg, reference::gguf_lookup(l.file), tokens);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  double err = rel_err(fast->data(), ref->data(), ref->size());
  EXPECT_LT(err, c.tol) << c.arch << " " << dtype_name(c.type);
  RecordProperty("rel_err", std::to_string(err));
  std::printf("  %s %s rel_err %.3g\n", c.arch.c_str(), std::string(dtype_name(c.type)).c_str(), err);

  // Block-quantized weights: activation rounding (~1e-2) may legitimately flip a near tie.
  if (dtype_info(c.type).quantized) return;
  // 32 greedy tokens: the fast path decodes one token at a time from its KV cache; the
  // reference recomputes the whole sequence each step.
  std::vector<int32_t> seq(tokens.begin(), tokens.begin() + 8);
  auto kv2 = make_kv(*l.model, 4);
  std::vector<int32_t> table = {3, 0, 2, 1};  // non-identity block placement
  std::vector<float> logits(cfg.n_vocab);
  int32_t n_done = 0;
  std::vector<int32_t> fast_tokens, ref_tokens;
  for (int step = 0; step < 32; ++step) {
    Batch b;
    const int32_t n_new = static_cast<int32_t>(seq.size()) - n_done;
    b.sequences.push_back({table.data(), 4, n_done, n_new, 0});
    for (int32_t i = 0; i < n_new; ++i) {
      b.tokens.push_back(seq[n_done + i]);
      b.pos.push_back(n_done + i);
      b.seq.push_back(0);
    }
    b.logits_rows.push_back(n_new - 1);
    ASSERT_TRUE(l.model->forward(b, *kv2, logits.data()).is_ok());
    n_done = static_cast<int32_t>(seq.size());
    int32_t next = test::argmax(logits.data(), cfg.n_vocab);
    auto r = reference::forward(cfg, reference::gguf_lookup(l.file), seq);
    ASSERT_TRUE(r.is_ok());
    ref_tokens.push_back(test::argmax(&(*r)[(seq.size() - 1) * cfg.n_vocab], cfg.n_vocab));
    fast_tokens.push_back(next);
    seq.push_back(next);
  }
  EXPECT_EQ(fast_tokens, ref_tokens);
}

// F32/F16 weights: only summation order differs (measured ~5e-7). BF16 weights on AVX512-BF16
// multiply bf16-rounded activations (vdpbf16ps, as llama.cpp does; 8 significant bits, so
// each dot moves by at most 2^-8 of |w||x|): measured 3e-3 over two layers and the logits;
// elsewhere ~5e-7. Block-quantized
// weights: the reference dequantizes the very same quantized weights, so the difference is
// activation-side rounding: the matmul kernels quantize activations to 8 bits (Q8_0 / Q8_K)
// for integer dot products (measured 0.7-2.2e-2 over two layers and the logits).
INSTANTIATE_TEST_SUITE_P(
    All, ForwardVsReference,
    ::testing::Values(Case{"llama", Dtype::kF32, 1e-4}, Case{"qwen2", Dtype::kF32, 1e-4},
                      Case{"qwen3", Dtype::kF32, 1e-4}, Case{"llama", Dtype::kF16, 1e-5},
                      Case{"qwen3", Dtype::kBF16, 1e-2}, Case{"llama", Dtype::kQ8_0, 4e-2},
                      Case{"qwen2", Dtype::kQ4_0, 4e-2}, Case{"llama", Dtype::kQ4_K, 4e-2},
                      Case{"qwen3", Dtype::kQ4_K, 4e-2}),
    [](const auto& info) {
      return info.param.arch + "_" + std::string(dtype_name(info.param.type));
    });

TEST(ForwardTest, Llama3RopeScalingAndRopeFreqsTensorMatchReference) {
  for (int variant = 0; variant < 2; ++variant) {
    auto spec = tiny_spec("llama");
    spec.llama3_factor = 8.0f;
    spec.rope_freqs_tensor = variant == 1;  // the tensor overrides the keys
    Loaded l = load(spec);
    ASSERT_TRUE(l.model);
    EXPECT_EQ(l.model->config().rope_scaling.type, RopeScalingType::kLlama3);
    auto tokens = test::random_tokens(40, l.model->config().n_vocab, 3);
    auto kv = make_kv(*l.model, 4);
    auto fast = test::run_sequence(*l.model, *kv, tokens, 64);
    ASSERT_TRUE(fast.is_ok());
    auto ref = reference::forward(l.model->config(), reference::gguf_lookup(l.file), tokens);
    ASSERT_TRUE(ref.is_ok());
    EXPECT_LT(rel_err(fast->data(), ref->data(), ref->size()), 1e-4) << variant;
  }
}

TEST(ForwardTest, ScalingChangesLogits) {
  // Guards the scaling tests above against a scaling that silently does nothing.
  auto a = tiny_spec("llama");
  auto b = a;
  b.llama3_factor = 8.0f;
  Loaded la = load(a), lb = load(b);
  auto tokens = test::random_tokens(40, la.model->config().n_vocab, 3);
  auto kva = make_kv(*la.model, 4), kvb = make_kv(*lb.model, 4);
  auto fa = test::run_sequence(*la.model, *kva, tokens, 64);
  auto fb = test::run_sequence(*lb.model, *kvb, tokens, 64);
  EXPECT_GT(rel_err(fa->data(), fb->data(), fa->size()), 1e-3);
}

TEST(ForwardTest, KvCacheDtypesCloseToF32) {
  Loaded l = load(tiny_spec("qwen2"));
  auto tokens = test::random_tokens(30, l.model->config().n_vocab, 11);
  auto kv32 = make_kv(*l.model, 2);
  auto base = test::run_sequence(*l.model, *kv32, tokens, 5);
  ASSERT_TRUE(base.is_ok());
  for (auto [dt, tol] : {std::pair{Dtype::kF16, 5e-3}, std::pair{Dtype::kBF16, 3e-2}}) {
    auto kv = make_kv(*l.model, 2, dt);
    auto got = test::run_sequence(*l.model, *kv, tokens, 5);
    ASSERT_TRUE(got.is_ok());
    double err = rel_err(got->data(), base->data(), base->size());
    EXPECT_LT(err, tol) << dtype_name(dt);
    EXPECT_GT(err, 0.0) << dtype_name(dt);  // it really stored reduced precision
  }
}

TEST(ForwardTest, RejectsBadBatches) {
  Loaded l = load(tiny_spec("llama"));
  auto kv = make_kv(*l.model, 2);
  std::vector<int32_t> table = {0, 1};
  std::vector<float> logits(l.model->config().n_vocab);
  auto make = [&](int32_t token, int32_t pos, int32_t block) {
    table[0] = block;
    Batch b;
    b.sequences.push_back({table.data(), 2, pos, 1, 0});
    b.tokens = {token};
    b.pos = {pos};
    b.seq = {0};
    b.logits_rows = {0};
    return b;
  };
  EXPECT_TRUE(l.model->forward(make(1, 0, 0), *kv, logits.data()).is_ok());
  EXPECT_FALSE(l.model->forward(make(97, 0, 0), *kv, logits.data()).is_ok());   // token
  EXPECT_FALSE(l.model->forward(make(1, 32, 0), *kv, logits.data()).is_ok());   // past table
  EXPECT_FALSE(l.model->forward(make(1, 0, 2), *kv, logits.data()).is_ok());    // block id
  auto bad_kv = KvCache::create(l.model->config(), 2, 16, Dtype::kQ8_0);
  EXPECT_FALSE(bad_kv.is_ok());
}

}  // namespace
}  // namespace loom
