// synth: exact tensor names / shapes / dtypes / metadata per arch and type, determinism in the
// seed, bytes == file, value statistics, and the large presets' shapes.
#include "tools/synth.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iterator>
#include <map>
#include <set>

#include "base/fp16.h"
#include "format/gguf.h"
#include "kernels/quant.h"
#include "loom/tokenizer.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/model.h"
#include "model/tiny_model.h"
#include "tools/synth_presets.h"

namespace loom {
namespace {

struct Expect {
  std::vector<int64_t> ne;
  bool matrix;
};

// The tensor list written down independently of synth.cpp, from GGUF's naming convention.
std::map<std::string, Expect> expected_tensors(const std::string& arch, int n_layer, int64_t E,
                                               int64_t nh, int64_t nkv, int64_t D, int64_t F,
                                               int64_t V, bool tied) {
  std::map<std::string, Expect> m;
  m["token_embd.weight"] = {{E, V}, true};
  m["output_norm.weight"] = {{E}, false};
  if (!tied) m["output.weight"] = {{E, V}, true};
  for (int l = 0; l < n_layer; ++l) {
    const std::string b = "blk." + std::to_string(l) + ".";
    m[b + "attn_norm.weight"] = {{E}, false};
    m[b + "attn_q.weight"] = {{E, nh * D}, true};
    m[b + "attn_k.weight"] = {{E, nkv * D}, true};
    m[b + "attn_v.weight"] = {{E, nkv * D}, true};
    m[b + "attn_output.weight"] = {{nh * D, E}, true};
    m[b + "ffn_norm.weight"] = {{E}, false};
    m[b + "ffn_gate.weight"] = {{E, F}, true};
    m[b + "ffn_up.weight"] = {{E, F}, true};
    m[b + "ffn_down.weight"] = {{F, E}, true};
    if (arch == "qwen2") {
      m[b + "attn_q.bias"] = {{nh * D}, false};
      m[b + "attn_k.bias"] = {{nkv * D}, false};
      m[b + "attn_v.bias"] = {{nkv * D}, false};
    }
    if (arch == "qwen3") {
      m[b + "attn_q_norm.weight"] = {{D}, false};
      m[b + "attn_k_norm.weight"] = {{D}, false};
    }
  }
  return m;
}

GgufFile parse(const std::shared_ptr<std::vector<uint8_t>>& bytes) {
  auto f = GgufFile::parse_bytes(bytes);
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  return std::move(f).value();
}

std::shared_ptr<std::vector<uint8_t>> synth(const SynthOptions& o, SynthReport* r = nullptr) {
  auto b = synth_model_bytes(o, r);
  EXPECT_TRUE(b.is_ok()) << b.status().message();
  return b.is_ok() ? *b : std::make_shared<std::vector<uint8_t>>();
}

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
    } else if (v.dtype == Dtype::kBF16) {
      for (int64_t c = 0; c < v.cols(); ++c)
        dst[c] = bf16_to_f32(reinterpret_cast<const uint16_t*>(src)[c]);
    } else {
      kernels::dequantize_row(v.dtype, src, dst, v.cols());
    }
  }
  return out;
}

std::string tmp_path(const std::string& name) {
  return ::testing::TempDir() + "/synth_test_" + std::to_string(::getpid()) + "_" + name;
}

class SynthTinyTest : public ::testing::TestWithParam<std::tuple<std::string, Dtype>> {};

TEST_P(SynthTinyTest, TensorsShapesDtypesAndMetadata) {
  const auto& [arch, type] = GetParam();
  SynthOptions o;
  o.arch = arch;
  o.type = type;
  SynthReport report;
  auto bytes = synth(o, &report);
  GgufFile f = parse(bytes);
  EXPECT_EQ(report.n_bytes, bytes->size());

  EXPECT_EQ(f.get_string("general.architecture"), arch);
  EXPECT_EQ(f.get_int(arch + ".block_count"), 2);
  EXPECT_EQ(f.get_int(arch + ".embedding_length"), 64);
  EXPECT_EQ(f.get_int(arch + ".feed_forward_length"), 128);
  EXPECT_EQ(f.get_int(arch + ".attention.head_count"), 4);
  EXPECT_EQ(f.get_int(arch + ".attention.head_count_kv"), 2);
  EXPECT_EQ(f.get_int(arch + ".attention.key_length"), 16);
  EXPECT_EQ(f.get_int(arch + ".attention.value_length"), 16);
  EXPECT_EQ(f.get_int(arch + ".rope.dimension_count"), 16);
  EXPECT_EQ(f.get_int(arch + ".context_length"), 512);
  EXPECT_EQ(f.get_int(arch + ".vocab_size"), 512);
  ASSERT_TRUE(f.get_float(arch + ".attention.layer_norm_rms_epsilon"));
  EXPECT_NEAR(*f.get_float(arch + ".attention.layer_norm_rms_epsilon"),
              arch == "llama" ? 1e-5 : 1e-6, 1e-9);
  const GgufValue* tokens = f.find("tokenizer.ggml.tokens");
  ASSERT_NE(tokens, nullptr);
  EXPECT_EQ(tokens->array_size(), 512u);
  std::set<std::string> unique(tokens->as_string_array()->begin(),
                               tokens->as_string_array()->end());
  EXPECT_EQ(unique.size(), 512u) << "placeholder tokens must be distinct";
  EXPECT_EQ(f.get_int("general.file_type"), gguf_file_type_for(type));

  const bool tied = arch == "qwen3";
  auto want = expected_tensors(arch, 2, 64, 4, 2, 16, 128, 512, tied);
  ASSERT_EQ(f.tensors().size(), want.size());
  // K-quants cannot hold 64- or 128-element rows: synth falls back to Q8_0 for them.
  const Dtype matrix_type = dtype_info(type).block_size == 256 ? Dtype::kQ8_0 : type;
  for (const auto& t : f.tensors()) {
    auto it = want.find(t.name);
    ASSERT_NE(it, want.end()) << "unexpected tensor " << t.name;
    ASSERT_EQ(t.view.n_dims, static_cast<int>(it->second.ne.size())) << t.name;
    for (int d = 0; d < t.view.n_dims; ++d) EXPECT_EQ(t.view.ne[d], it->second.ne[d]) << t.name;
    EXPECT_EQ(t.view.dtype, it->second.matrix ? matrix_type : Dtype::kF32) << t.name;
  }
  if (matrix_type != type) {
    EXPECT_FALSE(report.notes.empty());
  }
}

INSTANTIATE_TEST_SUITE_P(ArchTypes, SynthTinyTest,
                         ::testing::Combine(::testing::Values("llama", "qwen2", "qwen3"),
                                            ::testing::Values(Dtype::kF32, Dtype::kF16,
                                                              Dtype::kBF16, Dtype::kQ8_0,
                                                              Dtype::kQ4_0, Dtype::kQ4_K)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  std::string(dtype_name(std::get<1>(info.param)));
                         });

// A real forward pass over synth weights: finite logits that vary across the vocabulary and
// across positions (the scales keep activations sane), for every arch and a quantized type.
class SynthForwardTest
    : public ::testing::TestWithParam<std::tuple<std::string, std::string, Dtype>> {};

TEST_P(SynthForwardTest, LogitsAreFiniteAndNonDegenerate) {
  const auto& [arch, preset, type] = GetParam();
  SynthOptions o;
  o.arch = arch;
  o.preset = preset;
  o.type = type;
  auto file = GgufFile::parse_bytes(synth(o));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto model = Model::from_gguf(std::move(file).value());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  EXPECT_EQ(c.n_vocab, 512);
  EXPECT_EQ(c.qkv_bias, arch == "qwen2");
  EXPECT_EQ(c.qk_norm, arch == "qwen3");
  auto kv = KvCache::create(c, 2, 16, Dtype::kF32);
  ASSERT_TRUE(kv.is_ok()) << kv.status().message();
  const int n = 12;
  std::vector<int32_t> blocks = {0, 1};
  Batch b;
  for (int i = 0; i < n; ++i) {
    b.tokens.push_back((i * 37 + 5) % c.n_vocab);
    b.pos.push_back(i);
    b.seq.push_back(0);
    b.logits_rows.push_back(i);
  }
  b.sequences.push_back({blocks.data(), 2, 0, n, 0});
  std::vector<float> logits(static_cast<size_t>(n) * c.n_vocab);
  ASSERT_TRUE((*model)->forward(b, **kv, logits.data()).is_ok());
  std::set<int> argmaxes;
  for (int r = 0; r < n; ++r) {
    const float* l = logits.data() + static_cast<size_t>(r) * c.n_vocab;
    double sum = 0, sq = 0;
    int best = 0;
    for (int v = 0; v < c.n_vocab; ++v) {
      ASSERT_TRUE(std::isfinite(l[v])) << r << " " << v;
      sum += l[v];
      sq += double(l[v]) * l[v];
      if (l[v] > l[best]) best = v;
    }
    const double mean = sum / c.n_vocab, sd = std::sqrt(sq / c.n_vocab - mean * mean);
    EXPECT_GT(sd, 0.05) << "row " << r;
    EXPECT_LT(sd, 10.0) << "row " << r;
    argmaxes.insert(best);
  }
  EXPECT_GT(argmaxes.size(), 3u) << "every position predicts nearly the same token";
}

INSTANTIATE_TEST_SUITE_P(Archs, SynthForwardTest,
                         ::testing::Values(std::make_tuple("llama", "tiny", Dtype::kF32),
                                           std::make_tuple("qwen2", "tiny", Dtype::kF32),
                                           std::make_tuple("qwen3", "tiny", Dtype::kF32),
                                           std::make_tuple("llama", "tiny", Dtype::kQ8_0),
                                           std::make_tuple("qwen3", "tiny-k", Dtype::kQ4_K)),
                         [](const auto& info) {
                           return std::get<0>(info.param) + "_" +
                                  (std::get<1>(info.param) == std::string("tiny") ? "tiny"
                                                                                  : "tinyk") +
                                  "_" + std::string(dtype_name(std::get<2>(info.param)));
                         });

// The families of the layer-spec forward pass: a tiny model of each loads with its family's
// flags (read back through the architecture's own GGUF reader) and gives finite, varied logits.
class SynthFamilyTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SynthFamilyTest, TinyModelLoadsWithItsFamilyFlagsAndRuns) {
  SynthOptions o;
  o.arch = GetParam();
  o.preset = "tiny";
  auto file = GgufFile::parse_bytes(synth(o));
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto model = Model::from_gguf(std::move(file).value());
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  const ModelConfig& c = (*model)->config();
  const std::string& a = GetParam();
  EXPECT_EQ(c.arch, a);
  EXPECT_EQ(c.norm_placement, a == "gemma2" || a == "gemma3" ? NormPlacement::kSandwich
                              : a == "olmo2"                 ? NormPlacement::kPost
                                                             : NormPlacement::kPre);
  EXPECT_EQ(c.activation, a.rfind("gemma", 0) == 0 ? Activation::kGeluTanh : Activation::kSilu);
  EXPECT_EQ(c.fused_qkv, a == "phi3");
  EXPECT_EQ(c.qk_norm, a == "gemma3" || a == "olmo2");
  // llama.cpp rotates interleaved pairs (LLAMA_ROPE_TYPE_NORM) for granite and smollm3.
  EXPECT_EQ(c.rope_style,
            a == "granite" || a == "smollm3" ? RopeStyle::kInterleaved : RopeStyle::kNeox);
  auto kv = KvCache::create(c, 2, 16, Dtype::kF32);
  ASSERT_TRUE(kv.is_ok());
  std::vector<int32_t> tokens;
  for (int i = 0; i < 12; ++i) tokens.push_back((i * 37 + 5) % c.n_vocab);
  auto logits = test::run_sequence(**model, **kv, tokens, 32);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  for (size_t r = 0; r < tokens.size(); ++r) {
    const float* l = logits->data() + r * c.n_vocab;
    double sum = 0, sq = 0;
    for (int v = 0; v < c.n_vocab; ++v) {
      ASSERT_TRUE(std::isfinite(l[v])) << r << " " << v;
      sum += l[v];
      sq += double(l[v]) * l[v];
    }
    const double mean = sum / c.n_vocab;
    EXPECT_GT(std::sqrt(sq / c.n_vocab - mean * mean), 1e-3) << "row " << r;
  }
}

INSTANTIATE_TEST_SUITE_P(Families, SynthFamilyTest,
                         ::testing::Values("gemma2", "gemma3", "phi3", "granite", "olmo2",
                                           "smollm3"));

TEST(SynthTest, SameSeedSameBytesOtherSeedDiffers) {
  SynthOptions o;
  o.arch = "qwen2";
  o.type = Dtype::kQ8_0;
  auto a = synth(o), b = synth(o);
  EXPECT_EQ(*a, *b);
  o.seed = 43;
  auto c = synth(o);
  ASSERT_EQ(a->size(), c->size());  // same layout
  EXPECT_NE(*a, *c);
  // Every tensor changes with the seed, not just some.
  GgufFile fa = parse(a), fc = parse(c);
  for (size_t i = 0; i < fa.tensors().size(); ++i)
    EXPECT_NE(std::memcmp(fa.tensors()[i].view.data, fc.tensors()[i].view.data,
                          fa.tensors()[i].view.nbytes),
              0)
        << fa.tensors()[i].name;
}

TEST(SynthTest, BytesAndFileAreIdentical) {
  SynthOptions o;
  o.arch = "qwen3";
  o.type = Dtype::kF16;
  o.seed = 7;
  auto bytes = synth(o);
  const std::string path = tmp_path("file.gguf");
  ASSERT_TRUE(synth_model_file(o, path).is_ok());
  std::ifstream in(path, std::ios::binary);
  std::vector<uint8_t> file((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::remove(path.c_str());
  EXPECT_EQ(file, *bytes);
}

// Weight statistics: matrices ~ N(0, 0.02), norms ~ 1 ± 0.02, biases small but nonzero; and
// every type is the same floats rounded (f16 exactly, q8_0 within its step).
TEST(SynthTest, ValueScalesAndTypesShareTheSameFloats) {
  SynthOptions o;
  o.arch = "qwen2";
  GgufFile f32 = parse(synth(o));
  o.type = Dtype::kF16;
  GgufFile f16 = parse(synth(o));
  o.type = Dtype::kQ8_0;
  GgufFile q8 = parse(synth(o));
  for (size_t i = 0; i < f32.tensors().size(); ++i) {
    const auto& t = f32.tensors()[i];
    std::vector<float> x = dequant(t.view);
    double sum = 0, sq = 0;
    for (float v : x) {
      ASSERT_TRUE(std::isfinite(v));
      sum += v;
      sq += double(v) * v;
    }
    const double mean = sum / x.size(), sd = std::sqrt(sq / x.size() - mean * mean);
    const bool norm = t.name.find("norm") != std::string::npos;
    if (norm) {
      EXPECT_NEAR(mean, 1.0, 0.01) << t.name;
      EXPECT_NEAR(sd, 0.02, 0.01) << t.name;
    } else {
      EXPECT_NEAR(mean, 0.0, 0.005) << t.name;
      EXPECT_NEAR(sd, 0.02, t.view.numel() > 1000 ? 0.002 : 0.008) << t.name;
    }
    std::vector<float> h = dequant(f16.tensors()[i].view);
    std::vector<float> q = dequant(q8.tensors()[i].view);
    for (size_t k = 0; k < x.size(); ++k) {
      if (t.view.n_dims == 2) {
        ASSERT_EQ(h[k], fp16_to_f32(f32_to_fp16(x[k]))) << t.name << " " << k;
        ASSERT_NEAR(q[k], x[k], 0.0005) << t.name << " " << k;  // q8_0 step is max|x|/127 per 32
      } else {
        ASSERT_EQ(h[k], x[k]) << t.name;  // 1-D tensors stay f32 in every type
      }
    }
  }
}

TEST(SynthTest, VocabFileSetsTinyVocabulary) {
  SynthOptions o;
  o.vocab_path = std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-qwen3.gguf";
  o.arch = "qwen3";
  SynthLayout l = synth_layout(o).value();
  EXPECT_EQ(l.report.n_vocab, 151669);
  bool found = false;
  for (const auto& t : l.tensors)
    if (t.name == "token_embd.weight") {
      found = true;
      EXPECT_EQ(t.ne, (std::vector<int64_t>{64, 151669}));
    }
  EXPECT_TRUE(found);
}

TEST(SynthTest, BadOptionsAreErrors) {
  SynthOptions o;
  o.preset = "huge";
  EXPECT_EQ(synth_model_bytes(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.arch = "gpt2";
  EXPECT_EQ(synth_model_bytes(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.type = Dtype::kQ8_1;
  EXPECT_EQ(synth_model_bytes(o).status().code(), StatusCode::kInvalidArgument);
  o = {};
  o.vocab_path = "/nonexistent/vocab.gguf";
  EXPECT_FALSE(synth_model_bytes(o).is_ok());
}

TEST(SynthTest, ParseSynthSpec) {
  auto a = parse_synth_spec("synth:qwen3-0.6b:q8_0");
  ASSERT_TRUE(a.is_ok()) << a.status().message();
  EXPECT_EQ(a->arch, "qwen3");
  EXPECT_EQ(a->preset, "qwen3-0.6b");
  EXPECT_EQ(a->type, Dtype::kQ8_0);
  auto b = parse_synth_spec("synth:tiny");
  ASSERT_TRUE(b.is_ok());
  EXPECT_EQ(b->arch, "llama");
  EXPECT_EQ(b->type, Dtype::kF32);
  EXPECT_FALSE(parse_synth_spec("synth:tiny:q9_9").is_ok());
  EXPECT_FALSE(parse_synth_spec("synth:nope").is_ok());
  EXPECT_FALSE(parse_synth_spec("tiny").is_ok());
}

std::map<std::string, const GgufValue*> metadata_map(
    const std::vector<std::pair<std::string, GgufValue>>& kv) {
  std::map<std::string, const GgufValue*> m;
  for (const auto& [k, v] : kv) m[k] = &v;
  return m;
}

TEST(SynthTest, Qwen3PresetShapesWithoutGenerating) {
  for (const char* preset : {"qwen3-0.6b", "qwen3-1.7b"}) {
    SynthOptions o;
    o.arch = "qwen3";
    o.preset = preset;
    o.type = Dtype::kQ4_K;
    auto l = synth_layout(o);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    auto m = metadata_map(l->metadata);
    const int64_t E = std::string(preset) == "qwen3-0.6b" ? 1024 : 2048;
    const int64_t F = E == 1024 ? 3072 : 6144;
    EXPECT_EQ(m["qwen3.embedding_length"]->as_int(), E);
    EXPECT_EQ(m["qwen3.feed_forward_length"]->as_int(), F);
    EXPECT_EQ(m["qwen3.block_count"]->as_int(), 28);
    EXPECT_EQ(m["qwen3.attention.head_count"]->as_int(), 16);
    EXPECT_EQ(m["qwen3.attention.head_count_kv"]->as_int(), 8);
    EXPECT_EQ(m["qwen3.attention.key_length"]->as_int(), 128);
    EXPECT_EQ(m["qwen3.vocab_size"]->as_int(), 151936);
    EXPECT_NEAR(*m["qwen3.rope.freq_base"]->as_float(), 1e6, 1);
    EXPECT_NEAR(*m["qwen3.attention.layer_norm_rms_epsilon"]->as_float(), 1e-6, 1e-10);
    EXPECT_EQ(m["tokenizer.ggml.tokens"]->array_size(), 151936u);
    EXPECT_EQ(m["tokenizer.ggml.token_type"]->array_size(), 151936u);
    EXPECT_EQ(m["tokenizer.ggml.tokens"]->as_string_array()->back(), "[PAD151935]");
    EXPECT_EQ(m["tokenizer.ggml.merges"]->array_size(), 151387u);  // copied from the fixture
    EXPECT_NE(m.count("tokenizer.chat_template"), 0u);
    auto want = expected_tensors("qwen3", 28, E, 16, 8, 128, F, 151936, /*tied=*/true);
    ASSERT_EQ(l->tensors.size(), want.size());
    uint64_t params = 0;
    for (const auto& t : l->tensors) {
      ASSERT_TRUE(want.count(t.name)) << t.name;
      EXPECT_EQ(t.ne, want[t.name].ne) << t.name;
      EXPECT_EQ(t.dtype, want[t.name].matrix ? Dtype::kQ4_K : Dtype::kF32) << t.name;
      uint64_t n = 1;
      for (auto d : t.ne) n *= d;
      params += n;
    }
    EXPECT_EQ(l->report.n_params, params);
    // Published sizes: 0.6B (0.596B with tied embeddings) and 1.7B (1.72B).
    EXPECT_NEAR(params / 1e9, E == 1024 ? 0.596 : 1.72, 0.01);
  }
}

TEST(SynthTest, Llama8bPresetShapeAndRopeScaling) {
  SynthOptions o;
  o.preset = "llama-8b";
  o.type = Dtype::kQ4_K;
  auto l = synth_layout(o);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  auto m = metadata_map(l->metadata);
  EXPECT_EQ(m["llama.block_count"]->as_int(), 32);
  EXPECT_EQ(m["llama.embedding_length"]->as_int(), 4096);
  EXPECT_EQ(m["llama.feed_forward_length"]->as_int(), 14336);
  EXPECT_EQ(m["llama.attention.head_count"]->as_int(), 32);
  EXPECT_EQ(m["llama.attention.head_count_kv"]->as_int(), 8);
  EXPECT_EQ(m["llama.vocab_size"]->as_int(), 128256);
  EXPECT_NEAR(*m["llama.rope.freq_base"]->as_float(), 500000, 1);
  EXPECT_EQ(*m["llama.rope.scaling.type"]->as_string(), "llama3");
  EXPECT_NEAR(*m["llama.rope.scaling.factor"]->as_float(), 8, 1e-6);
  EXPECT_NEAR(*m["llama.rope.scaling.low_freq_factor"]->as_float(), 1, 1e-6);
  EXPECT_NEAR(*m["llama.rope.scaling.high_freq_factor"]->as_float(), 4, 1e-6);
  EXPECT_EQ(m["llama.rope.scaling.original_context_length"]->as_int(), 8192);
  EXPECT_EQ(m["tokenizer.ggml.tokens"]->array_size(), 128256u);
  EXPECT_NE(m["loom.synth.vocab"]->as_string()->find("placeholder"), std::string::npos);
  bool has_rope_freqs = false;
  for (const auto& t : l->tensors) has_rope_freqs |= t.name == "rope_freqs.weight";
  EXPECT_TRUE(has_rope_freqs);
  EXPECT_NEAR(l->report.n_params / 1e9, 8.03, 0.01);  // Llama-3.1-8B: 8.03B parameters
}

TEST(SynthTest, Llama3RopeDivisorsFollowMetasRule) {
  // Llama 3.1: head_dim 128, theta 500000, factor 8, low 1, high 4, original context 8192.
  std::vector<float> d = llama3_rope_freq_divisors(128, 500000.0f, 8.0f, 1.0f, 4.0f, 8192);
  ASSERT_EQ(d.size(), 64u);
  int ones = 0, eights = 0, between = 0;
  for (int i = 0; i < 64; ++i) {
    const double freq = std::pow(500000.0, -2.0 * i / 128.0);
    const double wavelen = 2 * M_PI / freq;
    double want;
    if (wavelen < 8192.0 / 4) {
      want = 1, ++ones;
    } else if (wavelen > 8192.0 / 1) {
      want = 8, ++eights;
    } else {
      // scaled freq = (1 - s) * freq / 8 + s * freq, as a divisor of freq
      const double s = (8192.0 / wavelen - 1) / (4 - 1);
      want = freq / ((1 - s) * freq / 8 + s * freq), ++between;
    }
    EXPECT_NEAR(d[i], want, 1e-5 * want) << i;
    if (i) {
      EXPECT_GE(d[i], d[i - 1]);
    }
  }
  EXPECT_GT(ones, 0);
  EXPECT_GT(eights, 0);
  EXPECT_GT(between, 0);
}

TEST(SynthTest, Llama05bQ8_0IsFastAndHasTheSpmVocabulary) {
  SynthOptions o;
  o.preset = "llama-0.5b";
  o.type = Dtype::kQ8_0;
  const auto start = std::chrono::steady_clock::now();
  SynthReport report;
  auto bytes = synth(o, &report);
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf("llama-0.5b q8_0: %.1f MiB in %.2f s\n", bytes->size() / 1048576.0, secs);
  EXPECT_LT(secs, 60.0);
  GgufFile f = parse(bytes);
  EXPECT_EQ(f.get_int("llama.block_count"), 28);
  EXPECT_EQ(f.get_int("llama.embedding_length"), 1024);
  EXPECT_EQ(f.get_int("llama.attention.head_count"), 16);
  EXPECT_EQ(f.get_int("llama.attention.head_count_kv"), 8);
  EXPECT_EQ(f.get_int("llama.attention.key_length"), 128);
  EXPECT_EQ(f.get_int("llama.feed_forward_length"), 3072);
  EXPECT_EQ(f.get_int("llama.context_length"), 4096);
  EXPECT_NEAR(*f.get_float("llama.rope.freq_base"), 10000, 1e-3);
  EXPECT_NEAR(*f.get_float("llama.attention.layer_norm_rms_epsilon"), 1e-5, 1e-10);
  // The tokenizer is the fixture's, key for key.
  auto vocab = GgufFile::open(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(vocab.is_ok());
  int copied = 0;
  for (const auto& [k, v] : vocab->metadata()) {
    if (k.rfind("tokenizer.", 0) != 0) continue;
    const GgufValue* mine = f.find(k);
    ASSERT_NE(mine, nullptr) << k;
    EXPECT_EQ(mine->type(), v.type()) << k;
    EXPECT_EQ(mine->to_display_string(1u << 30), v.to_display_string(1u << 30)) << k;
    ++copied;
  }
  EXPECT_GE(copied, 9);
  auto want = expected_tensors("llama", 28, 1024, 16, 8, 128, 3072, 32000, false);
  ASSERT_EQ(f.tensors().size(), want.size());
  for (const auto& t : f.tensors()) {
    ASSERT_TRUE(want.count(t.name)) << t.name;
    EXPECT_EQ(t.view.dtype, want[t.name].matrix ? Dtype::kQ8_0 : Dtype::kF32) << t.name;
  }
  // Spot-check a late layer's weights are random, not the zeros the layout started from.
  std::vector<float> w = dequant(f.find_tensor("blk.27.ffn_down.weight")->view);
  double sq = 0;
  for (float v : w) sq += double(v) * v;
  EXPECT_NEAR(std::sqrt(sq / w.size()), 0.02, 0.002);
}

// The hybrids' files say which blocks are recurrent as llama.cpp's converter writes it (one
// bool per block, the multi-token prediction block not), and a file whose recurrent_layers
// say a pattern the interval does not is read by that key (llama.cpp prefers it too).
TEST(SynthTest, HybridRecurrentLayersAreWrittenAndPreferredToTheInterval) {
  for (const char* preset : {"tiny-qwen35", "tiny-qwen3next"}) {
    SynthOptions o;
    o.preset = preset;
    o.arch = std::string(find_synth_preset(preset)->default_arch);
    auto l = synth_layout(o);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    const std::string key = o.arch + ".attention.recurrent_layers";
    GgufWriter w;
    bool found = false;
    for (const auto& [k, v] : l->metadata) {
      if (k != key) {
        w.set(k, v);
        continue;
      }
      found = true;
      EXPECT_EQ(v.array_type(), GgufType::kBool);
      ASSERT_NE(v.as_int_array(), nullptr);
      EXPECT_EQ(*v.as_int_array(), (std::vector<int64_t>{1, 1, 1, 0, 0})) << preset;
      w.set(k, GgufValue::of_bool_array({false, true, true, false, false}));
    }
    EXPECT_TRUE(found) << preset;
    auto bytes = build_gguf_bytes(std::move(w), {}, {});
    ASSERT_TRUE(bytes.is_ok());
    auto f = GgufFile::parse_bytes(*bytes);
    ASSERT_TRUE(f.is_ok());
    EXPECT_EQ(f->get_int(o.arch + ".full_attention_interval").value_or(0), 4);
    auto c = config_from_gguf(*f);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    ASSERT_EQ(c->n_layer, 4);
    std::vector<bool> got;
    for (int i = 0; i < c->n_layer; ++i) got.push_back(c->layers[i].deltanet);
    EXPECT_EQ(got, (std::vector<bool>{false, true, true, false})) << preset;
  }
}

// llama.cpp's gemma2 files hold no output.weight (its loader always uses token_embd): synth
// writes none even for a preset whose head is untied.
TEST(SynthTest, Gemma2NeverWritesAnOutputHead) {
  SynthOptions o;
  o.preset = "llama-0.5b";  // untied
  o.arch = "gemma2";
  auto l = synth_layout(o);
  ASSERT_TRUE(l.is_ok()) << l.status().message();
  for (const auto& t : l->tensors) EXPECT_NE(t.name, "output.weight");
  o.arch = "llama";
  l = synth_layout(o);
  ASSERT_TRUE(l.is_ok());
  bool head = false;
  for (const auto& t : l->tensors) head |= t.name == "output.weight";
  EXPECT_TRUE(head);
}

// A preset with experts and an architecture whose files cannot hold them: an error naming
// both, never a file of dense tensors beside expert keys that loads as a dense model.
TEST(SynthTest, ExpertPresetNeedsAnArchitectureWithExperts) {
  SynthOptions o;
  o.preset = "tiny-moe";
  o.arch = "gemma2";
  auto bad = synth_model_bytes(o);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("'gemma2'"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("'tiny-moe'"), std::string::npos) << bad.status().message();
  // Every expert preset under every architecture: refused, or written with its experts.
  for (std::string_view preset : synth_preset_names()) {
    const SynthPreset* ps = find_synth_preset(preset);
    ASSERT_NE(ps, nullptr);
    if (ps->n_expert == 0) continue;
    for (const ArchSpec* arch : all_archs()) {
      o.preset = std::string(preset);
      o.arch = std::string(arch->name);
      auto l = synth_layout(o);
      if (!l.is_ok()) continue;
      int64_t experts = 0;
      for (const auto& t : l->tensors)
        if (t.name.find("_exps.weight") != std::string::npos) experts = t.ne.back();
      EXPECT_EQ(experts, ps->n_expert) << preset << " as " << arch->name;
    }
  }
}

// gpt-oss presets carry what the real files have for harmony and RoPE: harmony's control
// tokens (the vocabulary's last ids, parsed as single tokens; <|return|> and <|call|> end a
// generation, <|end|> only a message) and YaRN as llama.cpp's converter writes gpt-oss's
// (type yarn, factor 32, original context 4096), read back as YaRN.
TEST(SynthTest, GptOssPresetsHaveHarmonyTokensAndYarn) {
  const std::vector<std::string> harmony = {"<|start|>",   "<|end|>",       "<|message|>",
                                            "<|channel|>", "<|constrain|>", "<|return|>",
                                            "<|call|>"};
  for (const char* preset : {"tiny-gpt-oss", "gpt-oss-1b"}) {
    SCOPED_TRACE(preset);
    SynthOptions o;
    o.preset = preset;
    o.arch = "gpt-oss";
    auto l = synth_layout(o);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    std::map<std::string, const GgufValue*> m;
    for (const auto& [k, v] : l->metadata) m[k] = &v;
    ASSERT_TRUE(m.count("gpt-oss.rope.scaling.type"));
    EXPECT_EQ(m["gpt-oss.rope.scaling.type"]->to_display_string(), "\"yarn\"");
    ASSERT_TRUE(m.count("gpt-oss.rope.scaling.factor"));
    EXPECT_EQ(m["gpt-oss.rope.scaling.factor"]->as_float(), 32.0);
    ASSERT_TRUE(m.count("gpt-oss.rope.scaling.original_context_length"));
    EXPECT_EQ(m["gpt-oss.rope.scaling.original_context_length"]->as_int(), 4096);
    for (const auto& t : l->tensors) EXPECT_NE(t.name, "rope_freqs.weight");
    const std::vector<std::string>* tokens = m["tokenizer.ggml.tokens"]->as_string_array();
    ASSERT_NE(tokens, nullptr);
    ASSERT_GE(tokens->size(), harmony.size());
    EXPECT_EQ(std::vector<std::string>(tokens->end() - harmony.size(), tokens->end()), harmony);
  }
  SynthOptions o;
  o.preset = "tiny-gpt-oss";
  o.arch = "gpt-oss";
  auto bytes = synth_model_bytes(o);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse_bytes(*bytes);
  ASSERT_TRUE(f.is_ok());
  auto c = config_from_gguf(*f);
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kYarn);
  EXPECT_EQ(c->rope_scaling.factor, 32.0f);
  EXPECT_EQ(c->rope_scaling.original_context, 4096);
  auto tok = Tokenizer::from_gguf(*f);
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  std::vector<int32_t> ids;
  for (const std::string& t : harmony) {
    auto id = (*tok)->find_token(t);
    ASSERT_TRUE(id) << t;
    EXPECT_TRUE((*tok)->is_control(*id)) << t;
    ids.push_back(*id);
  }
  // <|start|>assistant<|channel|>final<|message|>Hi<|return|>: the markers as single tokens.
  const std::vector<int32_t> enc =
      (*tok)->encode("<|start|>assistant<|channel|>final<|message|>Hi<|return|>", false, true);
  ASSERT_GE(enc.size(), 5u);
  EXPECT_EQ(enc.front(), ids[0]);
  EXPECT_EQ(enc.back(), ids[5]);
  EXPECT_EQ(std::count(enc.begin(), enc.end(), ids[3]), 1);
  EXPECT_EQ(std::count(enc.begin(), enc.end(), ids[2]), 1);
  EXPECT_EQ((*tok)->decode(enc), "<|start|>assistant<|channel|>final<|message|>Hi<|return|>");
  EXPECT_TRUE((*tok)->is_eog(ids[5]));   // <|return|>
  EXPECT_TRUE((*tok)->is_eog(ids[6]));   // <|call|>
  EXPECT_FALSE((*tok)->is_eog(ids[1]));  // <|end|>: a message ends, the turn goes on
}

// llama.cpp's vocabulary loader looks up <|endoftext|> in a file whose name says phi3 and
// fails to load one without it: a Phi-3 placeholder vocabulary has it, as a control token
// that ends generation; other families' do not.
TEST(SynthTest, Phi3PlaceholderVocabularyHasEndOfText) {
  for (const char* arch : {"phi3", "llama"}) {
    SCOPED_TRACE(arch);
    SynthOptions o;
    o.arch = arch;
    auto f = GgufFile::parse_bytes(synth(o));
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    auto tok = Tokenizer::from_gguf(*f);
    ASSERT_TRUE(tok.is_ok()) << tok.status().message();
    const auto id = (*tok)->find_token("<|endoftext|>");
    if (std::string(arch) == "llama") {
      EXPECT_FALSE(id);
      continue;
    }
    ASSERT_TRUE(id);
    EXPECT_TRUE((*tok)->is_control(*id));
    EXPECT_TRUE((*tok)->is_eog(*id));
    EXPECT_EQ((*tok)->n_vocab(), 512);  // the preset's size: the token takes a text token's place
  }
}

// Qwen3.5's rope.dimension_sections fit the preset's rotary dims as llama.cpp needs them
// (their sum, in pairs, within the head; it asserts so): tiny-qwen35 rotates 4 of its 16
// dims (2 pairs), qwen35-2b 64 of 256 (transformers' default sections).
TEST(SynthTest, Qwen35RopeSectionsFitTheRotaryDims) {
  for (const auto& [preset, want] : {std::pair{"tiny-qwen35", std::vector<int64_t>{1, 1, 0, 0}},
                                     std::pair{"qwen35-2b", std::vector<int64_t>{11, 11, 10, 0}}}) {
    SynthOptions o;
    o.preset = preset;
    o.arch = "qwen35";
    auto l = synth_layout(o);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    auto m = metadata_map(l->metadata);
    ASSERT_TRUE(m["qwen35.rope.dimension_sections"]);
    const std::vector<int64_t>* got = m["qwen35.rope.dimension_sections"]->as_int_array();
    ASSERT_NE(got, nullptr);
    EXPECT_EQ(*got, want) << preset;
    int64_t sum = 0;
    for (int64_t x : *got) sum += x;
    EXPECT_EQ(sum * 2, m["qwen35.rope.dimension_count"]->as_int().value_or(0)) << preset;
  }
}

// llama.cpp's granite requires granite.logit_scale and reads the other multipliers: a preset
// that sets none gets all four with values that change nothing (attention.scale 1/√head_dim);
// granite-2b keeps its own.
TEST(SynthTest, GraniteWritesEveryMultiplierLlamaCppReads) {
  for (const char* preset : {"tiny", "granite-2b"}) {
    SynthOptions o;
    o.preset = preset;
    o.arch = "granite";
    auto l = synth_layout(o);
    ASSERT_TRUE(l.is_ok()) << l.status().message();
    auto m = metadata_map(l->metadata);
    const bool tiny = std::string(preset) == "tiny";
    for (const auto& [k, v] : {std::pair{"embedding_scale", tiny ? 1.0 : 12.0},
                               std::pair{"residual_scale", tiny ? 1.0 : 0.22},
                               std::pair{"attention.scale", tiny ? 0.25 : 0.015625},
                               std::pair{"logit_scale", tiny ? 1.0 : 8.0}}) {
      const GgufValue* got = m["granite." + std::string(k)];
      ASSERT_NE(got, nullptr) << preset << " " << k;
      EXPECT_EQ(got->type(), GgufType::kF32);
      EXPECT_NEAR(got->as_float().value_or(-1), v, 1e-6) << preset << " " << k;
    }
  }
}

// The realistic presets have their published checkpoints' parameter counts and hyperparameters.
TEST(SynthTest, FamilyPresetsHavePublishedShapes) {
  struct Want {
    const char* preset;
    double params_b;
  };
  for (const Want& w :
       {Want{"gemma2-2b", 2.614}, Want{"gemma3-1b", 1.000}, Want{"phi4-mini", 3.836},
        Want{"granite-2b", 2.534}, Want{"olmo2-1b", 1.485}, Want{"smollm3-3b", 3.075}}) {
    SynthOptions o;
    o.preset = w.preset;
    o.arch = std::string(find_synth_preset(w.preset)->default_arch);
    o.type = Dtype::kQ8_0;
    auto l = synth_layout(o);
    ASSERT_TRUE(l.is_ok()) << w.preset << ": " << l.status().message();
    EXPECT_NEAR(l->report.n_params / 1e9, w.params_b, 0.002) << w.preset;
  }
  SynthOptions o;
  o.preset = "gemma3-1b";
  o.arch = "gemma3";
  auto l = synth_layout(o);
  auto m = metadata_map(l->metadata);
  EXPECT_EQ(m["gemma3.attention.sliding_window"]->as_int(), 512);
  EXPECT_EQ(m["gemma3.context_length"]->as_int(), 32768);
  o.preset = "phi4-mini";
  o.arch = "phi3";
  l = synth_layout(o);
  m = metadata_map(l->metadata);
  EXPECT_EQ(m["phi3.rope.dimension_count"]->as_int(), 96);
  bool fused = false;
  for (const auto& t : l->tensors) fused |= t.name == "blk.0.attn_qkv.weight";
  EXPECT_TRUE(fused);
}

}  // namespace
}  // namespace loom
