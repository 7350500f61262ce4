// DeepSeek GGUF files from llama.cpp's converter before its MLA support: each layer's attn_kv_b
// unsplit and key_length / value_length describing the heads (no _mla keys). llama.cpp still
// loads them; loom splits attn_kv_b into attn_k_b / attn_v_b at load (model/mla_kv_b.h) and
// gives the split file's logits. synth's tiny-mla rewritten in the old layout.
#include <gtest/gtest.h>

#include <cstring>

#include "format/gguf.h"
#include "kernels/quant.h"
#include "model/mla_kv_b.h"
#include "model/model.h"
#include "model/tensor_names.h"
#include "model/tiny_model.h"
#include "tools/gguf_build.h"
#include "tools/synth.h"

namespace loom {
namespace {

namespace n = names;

// tiny-mla: 4 heads, latent 32, nope 16, rope 8, value 16.
constexpr int64_t kH = 4, kR = 32, kN = 16, kDv = 16, kP = 8;

std::shared_ptr<const std::vector<uint8_t>> tiny_mla() {
  SynthOptions o;
  o.preset = "tiny-mla";
  o.arch = "deepseek2";
  auto bytes = synth_model_bytes(o);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  return bytes.is_ok() ? std::move(bytes).value() : nullptr;
}

// The same model as the old converter wrote it: attn_kv_b {R, H * (N + Dv)} (per head its key
// rows, then its value rows), key_length N + P and value_length Dv.
std::shared_ptr<const std::vector<uint8_t>> as_legacy(
    std::shared_ptr<const std::vector<uint8_t>> b) {
  auto f = GgufFile::parse_bytes(std::move(b));
  EXPECT_TRUE(f.is_ok());
  GgufWriter meta;
  const std::string a = "deepseek2.";
  for (const auto& [k, v] : f->metadata()) {
    if (k == a + std::string(n::kKeyLengthMla) || k == a + std::string(n::kValueLengthMla) ||
        k == a + std::string(n::kKeyLength) || k == a + std::string(n::kValueLength) ||
        k == a + std::string(n::kHeadCountKv))
      continue;
    meta.set(k, v);
  }
  meta.set_u32(a + std::string(n::kHeadCountKv), kH);
  meta.set_u32(a + std::string(n::kKeyLength), kN + kP);
  meta.set_u32(a + std::string(n::kValueLength), kDv);
  std::vector<PlannedTensor> plan;
  std::vector<const GgufTensorInfo*> src, v_b;
  for (const auto& t : f->tensors()) {
    auto l = n::parse_layer_tensor(t.name);
    if (l && l->suffix == n::kAttnVB) continue;
    std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
    std::string name = t.name;
    const GgufTensorInfo* v = nullptr;
    if (l && l->suffix == n::kAttnKB) {
      EXPECT_EQ(t.view.dtype, Dtype::kF32);
      v = f->find_tensor(n::layer_tensor(l->layer, n::kAttnVB));
      name = n::layer_tensor(l->layer, n::kAttnKvB);
      ne = {kR, kH * (kN + kDv)};
    }
    plan.push_back(plan_tensor(name, t.view.dtype, ne).value());
    src.push_back(&t);
    v_b.push_back(v);
  }
  auto fill = [&](size_t i, uint8_t* dst) {
    const TensorView& t = src[i]->view;
    if (!v_b[i]) {
      std::memcpy(dst, t.data, t.nbytes);
      return Status::ok();
    }
    const auto* k = static_cast<const float*>(t.data);             // k_b[h]: R rows of N
    const auto* v = static_cast<const float*>(v_b[i]->view.data);  // v_b[h]: Dv rows of R
    auto* out = reinterpret_cast<float*>(dst);
    for (int64_t h = 0; h < kH; ++h)
      for (int64_t r = 0; r < kR; ++r) {
        for (int64_t d = 0; d < kN; ++d)
          out[(h * (kN + kDv) + d) * kR + r] = k[(h * kR + r) * kN + d];
        for (int64_t d = 0; d < kDv; ++d)
          out[(h * (kN + kDv) + kN + d) * kR + r] = v[(h * kDv + d) * kR + r];
      }
    return Status::ok();
  };
  auto out = build_gguf_bytes(std::move(meta), plan, fill);
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  return out.is_ok() ? std::move(out).value() : nullptr;
}

std::vector<float> logits_of(std::shared_ptr<const std::vector<uint8_t>> bytes,
                             const std::vector<int32_t>& tokens) {
  auto file = GgufFile::parse_bytes(std::move(bytes));
  EXPECT_TRUE(file.is_ok());
  auto m = Model::from_gguf(std::move(file).value(), {2});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  if (!m.is_ok()) return {};
  auto kv = KvCache::create((*m)->config(), 4, 16, Dtype::kF32).value();
  auto logits = test::run_sequence(**m, *kv, tokens, 64);
  EXPECT_TRUE(logits.is_ok()) << logits.status().message();
  return logits.is_ok() ? *logits : std::vector<float>{};
}

TEST(MlaLegacy, UnsplitKvBLoadsAndGivesTheSplitFilesLogits) {
  const auto split = tiny_mla();
  ASSERT_TRUE(split);
  const auto legacy = as_legacy(split);
  ASSERT_TRUE(legacy);
  auto lf = GgufFile::parse_bytes(legacy);
  ASSERT_TRUE(lf.is_ok());
  ASSERT_TRUE(lf->find_tensor(n::layer_tensor(0, n::kAttnKvB)));
  ASSERT_FALSE(lf->find_tensor(n::layer_tensor(0, n::kAttnKB)));
  const auto tokens = test::random_tokens(20, 512, 3);
  const auto want = logits_of(split, tokens), got = logits_of(legacy, tokens);
  ASSERT_FALSE(want.empty());
  ASSERT_EQ(got.size(), want.size());
  EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
      << "rel err " << test::rel_err(got.data(), want.data(), got.size());
}

// A quantized attn_kv_b is dequantized (to F16: the keys are transposed, which a block format
// cannot be), each element where the split puts it.
TEST(MlaLegacy, QuantizedKvBSplitsToF16) {
  const int64_t rows = kH * (kN + kDv);
  std::vector<float> x(static_cast<size_t>(rows * kR));
  for (size_t i = 0; i < x.size(); ++i) x[i] = 0.01f * static_cast<float>((i * 37) % 101) - 0.5f;
  const uint64_t rb = *row_bytes(Dtype::kQ8_0, kR);
  std::vector<uint8_t> q(rows * rb);
  for (int64_t r = 0; r < rows; ++r)
    ASSERT_TRUE(kernels::quantize_row(Dtype::kQ8_0, &x[r * kR], q.data() + r * rb, kR).is_ok());
  TensorView kv_b;
  kv_b.dtype = Dtype::kQ8_0;
  kv_b.n_dims = 2;
  kv_b.ne = {kR, rows, 1, 1};
  kv_b.data = q.data();
  kv_b.nbytes = q.size();
  MlaConfig mla;
  mla.kv_lora_rank = kR;
  mla.qk_nope_head_dim = kN;
  mla.qk_rope_head_dim = kP;
  mla.v_head_dim = kDv;
  std::vector<float> deq(x.size());
  for (int64_t r = 0; r < rows; ++r)
    kernels::dequantize_row(Dtype::kQ8_0, q.data() + r * rb, &deq[r * kR], kR);
  std::vector<uint8_t> kb, vb;
  TensorView k, v;
  ASSERT_TRUE(split_kv_b(kv_b, mla, kH, true, &kb, &k));
  ASSERT_TRUE(split_kv_b(kv_b, mla, kH, false, &vb, &v));
  EXPECT_EQ(k.dtype, Dtype::kF16);
  EXPECT_EQ(k.ne, (std::array<int64_t, 4>{kN, kR, kH, 1}));
  EXPECT_EQ(v.ne, (std::array<int64_t, 4>{kR, kDv, kH, 1}));
  std::vector<float> kf(kb.size() / 2), vf(vb.size() / 2);
  kernels::dequantize_row(Dtype::kF16, kb.data(), kf.data(), kf.size());
  kernels::dequantize_row(Dtype::kF16, vb.data(), vf.data(), vf.size());
  for (int64_t h = 0; h < kH; ++h)
    for (int64_t r = 0; r < kR; ++r) {
      for (int64_t d = 0; d < kN; ++d)
        ASSERT_NEAR(kf[(h * kR + r) * kN + d], deq[(h * (kN + kDv) + d) * kR + r], 1e-3);
      for (int64_t d = 0; d < kDv; ++d)
        ASSERT_NEAR(vf[(h * kDv + d) * kR + r], deq[(h * (kN + kDv) + kN + d) * kR + r], 1e-3);
    }
  MlaConfig wrong = mla;
  wrong.v_head_dim = 8;
  EXPECT_FALSE(split_kv_b(kv_b, wrong, kH, true, &kb, &k));
}

}  // namespace
}  // namespace loom
