// quantize_model: every weight of a synth f32 model dequantizes close to the original (error
// bound per type), 1-D tensors are untouched, metadata is copied, the _M mixes follow the
// documented rule, fallbacks and refusals behave.
#include "tools/quantize_model.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <fstream>
#include <iterator>
#include <set>

#include "base/fp16.h"
#include "kernels/quant.h"
#include "model/model.h"
#include "tools/synth.h"

namespace loom {
namespace {

std::vector<float> dequant(const TensorView& v) {
  std::vector<float> out(static_cast<size_t>(v.numel()));
  for (int64_t r = 0; r < v.rows(); ++r) {
    const uint8_t* src = v.row(r);
    float* dst = out.data() + r * v.cols();
    if (v.dtype == Dtype::kF32) {
      std::memcpy(dst, src, static_cast<size_t>(v.cols()) * 4);
    } else if (v.dtype == Dtype::kF16) {
      for (int64_t c = 0; c < v.cols(); ++c)
        dst[c] = fp16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
    } else {
      kernels::dequantize_row(v.dtype, src, dst, v.cols());
    }
  }
  return out;
}

GgufFile synth_file(const std::string& preset, const std::string& arch, Dtype type,
                    uint64_t seed = 5) {
  SynthOptions o;
  o.preset = preset;
  o.arch = arch;
  o.type = type;
  o.seed = seed;
  auto bytes = synth_model_bytes(o);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return std::move(f).value();
}

// Relative RMS error bounds for N(0, σ) data. Measured values are about 0.004 (Q8_0),
// 0.01 (Q6_K), 0.03 (Q5_K), 0.06 (Q4_K), 0.1 (Q4_0); the bounds leave headroom, and a lower
// bound catches "quantized" tensors that were merely copied.
double max_rel_rms(Dtype t) {
  switch (t) {
    case Dtype::kQ8_0:
      return 0.008;
    case Dtype::kQ6_K:
      return 0.02;
    case Dtype::kQ5_K:
      return 0.045;
    case Dtype::kQ4_K:
      return 0.09;
    case Dtype::kQ4_0:
      return 0.14;
    case Dtype::kIQ4_NL:
    case Dtype::kIQ4_XS:
      return 0.12;
    case Dtype::kF16:
      return 0.001;
    default:
      return 0;
  }
}

bool use_more_bits(int i, int n) {
  return i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2;
}

class QuantizeTypeTest : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(QuantizeTypeTest, WeightsCloseNormsUntouchedMetadataCopied) {
  const auto& [arch, type_name] = GetParam();
  // tiny-k: every row is a multiple of 256, so K-quants apply to every matrix.
  GgufFile in = synth_file("tiny-k", arch, Dtype::kF32);
  auto target = parse_quantize_target(type_name);
  ASSERT_TRUE(target.is_ok()) << target.status().message();
  QuantizeReport report;
  auto bytes = quantize_model_bytes(in, *target, {}, &report);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto out_r = GgufFile::parse_bytes(*bytes);
  ASSERT_TRUE(out_r.is_ok()) << out_r.status().message();
  const GgufFile& out = *out_r;
  EXPECT_TRUE(report.notes.empty());

  // Metadata: every key copied with its value, except the file type.
  for (const auto& [k, v] : in.metadata()) {
    const GgufValue* o = out.find(k);
    ASSERT_NE(o, nullptr) << k;
    if (k == "general.file_type") continue;
    EXPECT_EQ(o->to_display_string(1u << 30), v.to_display_string(1u << 30)) << k;
  }
  EXPECT_EQ(out.get_int("general.file_type"), static_cast<int64_t>(target->file_type));

  const bool tied = arch == "qwen3";
  ASSERT_EQ(out.tensors().size(), in.tensors().size());
  for (size_t i = 0; i < in.tensors().size(); ++i) {
    const auto& a = in.tensors()[i];
    const GgufTensorInfo* b = out.find_tensor(a.name);
    ASSERT_NE(b, nullptr) << a.name;
    ASSERT_EQ(b->view.ne, a.view.ne) << a.name;
    if (a.view.n_dims == 1) {
      EXPECT_EQ(b->view.dtype, Dtype::kF32) << a.name;
      ASSERT_EQ(b->view.nbytes, a.view.nbytes);
      EXPECT_EQ(std::memcmp(a.view.data, b->view.data, a.view.nbytes), 0) << a.name;
      continue;
    }
    // The expected type, from the rule in quantize_model.h restated here.
    Dtype want = target->base;
    if (target->mix_m) {
      const bool output = a.name == "output.weight" || (tied && a.name == "token_embd.weight");
      int layer = -1;
      if (a.name.rfind("blk.", 0) == 0) layer = std::stoi(a.name.substr(4));
      const bool v_or_down = a.name.find("attn_v.weight") != std::string::npos ||
                             a.name.find("ffn_down.weight") != std::string::npos;
      if (output || (v_or_down && use_more_bits(layer, 2))) want = Dtype::kQ6_K;
    }
    EXPECT_EQ(b->view.dtype, want) << a.name;
    std::vector<float> x = dequant(a.view), y = dequant(b->view);
    double err = 0, ref = 0;
    for (size_t k = 0; k < x.size(); ++k) {
      err += (double(y[k]) - x[k]) * (double(y[k]) - x[k]);
      ref += double(x[k]) * x[k];
    }
    const double rel = std::sqrt(err / ref);
    EXPECT_LT(rel, max_rel_rms(b->view.dtype)) << a.name << " " << dtype_name(b->view.dtype);
    EXPECT_GT(rel, max_rel_rms(b->view.dtype) / 50) << a.name << " looks copied, not quantized";
  }
}

INSTANTIATE_TEST_SUITE_P(
    Types, QuantizeTypeTest,
    ::testing::Combine(::testing::Values("llama", "qwen3"),
                       ::testing::Values("Q8_0", "Q4_0", "Q4_K", "Q5_K", "Q6_K", "Q4_K_M", "Q5_K_M",
                                         "IQ4_NL", "IQ4_XS", "F16")),
    [](const auto& info) { return std::get<0>(info.param) + "_" + std::get<1>(info.param); });

// The ternary targets write what llama.cpp's llama-quantize writes from the same F32 file
// (tests/data/llamacpp_quants/TQ*.gguf, made by make.sh there from `synth --preset tiny-k
// --seed 11`): every tensor of the same type, the ternary ones byte for byte (its reference
// quantizer: d the block's largest magnitude, trits rounded half away from zero, TQ1_0's base-3
// bytes rounded up), and the file type named as llama.cpp names it.
TEST(QuantizeModelTest, TernaryTargetsWriteWhatLlamaQuantizeWrites) {
  GgufFile in = synth_file("tiny-k", "llama", Dtype::kF32, 11);
  for (const char* type : {"TQ1_0", "TQ2_0"}) {
    SCOPED_TRACE(type);
    auto want = GgufFile::open(std::string(LOOM_TEST_DATA) + "/llamacpp_quants/" + type + ".gguf");
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    auto bytes = quantize_model_bytes(in, parse_quantize_target(type).value(), {}, nullptr);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    auto got = GgufFile::parse_bytes(*bytes);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    EXPECT_EQ(got->get_int("general.file_type"), want->get_int("general.file_type"));
    int ternary = 0;
    for (const auto& t : want->tensors()) {
      const GgufTensorInfo* g = got->find_tensor(t.name);
      ASSERT_NE(g, nullptr) << t.name;
      EXPECT_EQ(g->view.dtype, t.view.dtype) << t.name;
      if (t.view.dtype != Dtype::kTQ1_0 && t.view.dtype != Dtype::kTQ2_0) continue;
      ++ternary;
      ASSERT_EQ(g->view.nbytes, t.view.nbytes) << t.name;
      EXPECT_EQ(std::memcmp(g->view.data, t.view.data, t.view.nbytes), 0) << t.name;
    }
    EXPECT_EQ(ternary, 14);  // 2 layers x 7 matrices
  }
}

TEST(QuantizeModelTest, MixRuleForTwentyEightLayers) {
  // A 28-layer model reduced to the tensors the rule looks at (one 256-wide row each).
  std::vector<float> row(256, 0.5f);
  GgufWriter w;
  w.set_string("general.architecture", "llama");
  for (int l = 0; l < 28; ++l)
    for (const char* s : {"attn_q.weight", "attn_v.weight", "ffn_down.weight"})
      ASSERT_TRUE(w.add_tensor("blk." + std::to_string(l) + "." + s, Dtype::kF32, {256, 1},
                               row.data(), 1024)
                      .is_ok());
  ASSERT_TRUE(w.add_tensor("token_embd.weight", Dtype::kF32, {256, 1}, row.data(), 1024).is_ok());
  ASSERT_TRUE(w.add_tensor("output.weight", Dtype::kF32, {256, 1}, row.data(), 1024).is_ok());
  auto bytes = std::make_shared<std::vector<uint8_t>>(w.to_bytes());
  GgufFile f = GgufFile::parse_bytes(bytes).value();
  auto plan = plan_quantization(f, parse_quantize_target("Q4_K_M").value(), {}, nullptr);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  // llama.cpp's use_more_bits(i, 28): i < 3, i >= 24, or (i - 3) % 3 == 2.
  const std::set<int> more = {0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 24, 25, 26, 27};
  for (const auto& t : *plan) {
    Dtype want = Dtype::kQ4_K;
    if (t.name == "output.weight") want = Dtype::kQ6_K;
    if (t.name.rfind("blk.", 0) == 0 && t.name.find("attn_q") == std::string::npos &&
        more.count(std::stoi(t.name.substr(4))))
      want = Dtype::kQ6_K;
    EXPECT_EQ(t.to, want) << t.name;
  }
  // Q5_K_M: the same upgrades over a Q5_K base.
  auto plan5 = plan_quantization(f, parse_quantize_target("Q5_K_M").value(), {}, nullptr).value();
  for (const auto& t : plan5) EXPECT_TRUE(t.to == Dtype::kQ5_K || t.to == Dtype::kQ6_K) << t.name;
}

TEST(QuantizeModelTest, UnfitRowsFallBackWithANote) {
  GgufFile in = synth_file("tiny", "llama", Dtype::kF32);  // rows of 64 and 128
  QuantizeReport report;
  auto bytes = quantize_model_bytes(in, parse_quantize_target("q4_k").value(), {}, &report);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  EXPECT_FALSE(report.notes.empty());
  auto out = GgufFile::parse_bytes(*bytes).value();
  for (const auto& t : out.tensors())
    EXPECT_EQ(t.view.dtype, t.view.n_dims == 2 ? Dtype::kQ8_0 : Dtype::kF32) << t.name;
}

// IQ4_XS needs rows of 256 like the K-quants; llama-quantize then takes IQ4_NL (32-blocks,
// the same grid), not Q8_0. tiny's rows are 64 and 128 columns.
TEST(QuantizeModelTest, Iq4XsFallsBackToIq4Nl) {
  GgufFile in = synth_file("tiny", "llama", Dtype::kF32);
  QuantizeReport report;
  auto bytes = quantize_model_bytes(in, parse_quantize_target("iq4_xs").value(), {}, &report);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  EXPECT_FALSE(report.notes.empty());
  auto out = GgufFile::parse_bytes(*bytes).value();
  EXPECT_EQ(out.get_int("general.file_type"), 30);  // LLAMA_FTYPE_MOSTLY_IQ4_XS
  for (const auto& t : out.tensors())
    EXPECT_EQ(t.view.dtype, t.view.n_dims == 2 ? Dtype::kIQ4_NL : Dtype::kF32) << t.name;
  auto m = Model::from_gguf(std::move(out));
  ASSERT_TRUE(m.is_ok()) << m.status().message();
}

// A Gated DeltaNet hybrid: its projections are quantized, the convolution's taps, decay
// rates, dt biases and gated norms stay F32 (as llama.cpp's quantizer leaves ssm_conv1d), and
// the result loads.
TEST(QuantizeModelTest, RecurrentLayersKeepTheirSmallTensorsF32) {
  GgufFile in = synth_file("tiny-qwen35", "qwen35", Dtype::kF32);
  auto bytes = quantize_model_bytes(in, parse_quantize_target("q8_0").value(), {}, nullptr);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto out = GgufFile::parse_bytes(*bytes).value();
  for (const char* name :
       {"blk.0.ssm_conv1d.weight", "blk.0.ssm_a", "blk.0.ssm_dt.bias", "blk.0.ssm_norm.weight"})
    EXPECT_EQ(out.find_tensor(name)->view.dtype, Dtype::kF32) << name;
  for (const char* name : {"blk.0.attn_qkv.weight", "blk.0.attn_gate.weight",
                           "blk.0.ssm_out.weight", "blk.3.attn_q.weight"})
    EXPECT_EQ(out.find_tensor(name)->view.dtype, Dtype::kQ8_0) << name;
  EXPECT_TRUE(Model::from_gguf(std::move(out), {1}).is_ok());
}

TEST(QuantizeModelTest, RefusesQuantizedInputUnlessAllowed) {
  GgufFile in = synth_file("tiny-k", "llama", Dtype::kQ8_0);
  auto target = parse_quantize_target("Q4_K").value();
  auto refused = quantize_model_bytes(in, target);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("already quantized"), std::string::npos);
  QuantizeOptions o;
  o.allow_requantize = true;
  auto ok = quantize_model_bytes(in, target, o);
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  auto out = GgufFile::parse_bytes(*ok).value();
  EXPECT_EQ(out.find_tensor("blk.0.ffn_up.weight")->view.dtype, Dtype::kQ4_K);
}

TEST(QuantizeModelTest, F16InputAndFileMatchesBytes) {
  GgufFile in16 = synth_file("tiny-k", "qwen2", Dtype::kF16);
  auto target = parse_quantize_target("q8_0").value();
  auto bytes = quantize_model_bytes(in16, target);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  // Same model through files.
  const std::string dir = ::testing::TempDir() + "/qm_" + std::to_string(::getpid());
  const std::string src = dir + "_in.gguf", dst = dir + "_out.gguf";
  SynthOptions o;
  o.preset = "tiny-k";
  o.arch = "qwen2";
  o.type = Dtype::kF16;
  o.seed = 5;
  ASSERT_TRUE(synth_model_file(o, src).is_ok());
  QuantizeReport report;
  ASSERT_TRUE(quantize_model_file(src, dst, target, {}, &report).is_ok());
  std::ifstream f(dst, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  std::remove(src.c_str());
  std::remove(dst.c_str());
  EXPECT_EQ(file, **bytes);
  EXPECT_GT(report.bytes_in, report.bytes_out);
  EXPECT_FALSE(quantize_model_file(src, dst, target).is_ok());  // input gone: an error, not a crash
}

TEST(QuantizeModelTest, ParseTargets) {
  EXPECT_EQ(parse_quantize_target("q4_k_m")->file_type, 15u);
  EXPECT_TRUE(parse_quantize_target("Q5_K_M")->mix_m);
  EXPECT_EQ(parse_quantize_target("Q6_K")->base, Dtype::kQ6_K);
  EXPECT_EQ(parse_quantize_target("Q3_K").status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom
