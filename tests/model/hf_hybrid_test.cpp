// The Gated DeltaNet hybrids' fixtures (tests/data/hf_reference/qwen3_next, qwen3_5_text: tiny
// models saved by transformers with its logits): loaded from safetensors and from the GGUF
// `loom convert` writes, the CPU model must reproduce transformers' logits and greedy
// continuations, and so must the independent reference forward pass (tests/reference).
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "backend/cpu/cpu_model.h"
#include "format/gguf.h"
#include "format/safetensors.h"
#include "model/bind.h"
#include "model/hf_cases.h"
#include "model/hf_shards.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"
#include "tools/convert.h"

namespace loom {
namespace {

using test::fixture;
using test::HfCase;
using test::read_cases;
using test::row_rel_err;

// A GGUF `loom convert` wrote from the fixture, removed with the object.
struct Converted {
  explicit Converted(const std::string& arch, Dtype type = Dtype::kF32) {
    path = std::filesystem::temp_directory_path() /
           ("loom_hybrid_" + arch + "_" + std::string(dtype_name(type)) + "_" +
            std::to_string(::getpid()) + ".gguf");
    ConvertOptions o;
    o.type = type;
    status = convert_hf_to_gguf(fixture(arch), path.string(), o);
  }
  ~Converted() { std::filesystem::remove(path); }
  std::filesystem::path path;
  Status status;
};

// One sequence's cache: 4 blocks of 16 and, the model being a hybrid, one state slot.
std::unique_ptr<KvCache> hybrid_cache(const ModelConfig& c) {
  return KvCache::create(c, 4, 16, Dtype::kF32).value();
}

// Every case within `tol` of transformers' logits (in one step and in chunks of 5 rows), and
// greedy_16 identical (the prompt in one step, then one token per step).
void check_model(Model& m, const std::string& dir, double tol) {
  const int32_t V = m.config().n_vocab;
  auto cases = read_cases(dir);
  ASSERT_EQ(cases.size(), 3u);
  for (size_t ci = 0; ci < cases.size(); ++ci) {
    const HfCase& c = cases[ci];
    for (int chunk : {64, 5}) {
      auto kv = hybrid_cache(m.config());
      auto got = test::run_sequence(m, *kv, c.tokens, chunk);
      ASSERT_TRUE(got.is_ok()) << got.status().message();
      const double err = row_rel_err(*got, c.logits, V);
      EXPECT_LT(err, tol) << dir << " case " << ci << " chunk " << chunk;
      std::printf("  %s case %zu chunk %d: row rel err %.3g\n", dir.c_str(), ci, chunk, err);
    }
    auto kv = hybrid_cache(m.config());
    const std::vector<int32_t> out = test::greedy_continuation(m, *kv, c.tokens, 16);
    EXPECT_EQ(out, c.greedy) << dir << " case " << ci;
  }
}

class HfHybrid : public ::testing::TestWithParam<std::string> {};

TEST_P(HfHybrid, ReferenceOnConvertedGgufMatchesTransformers) {
  Converted gguf(GetParam());
  ASSERT_TRUE(gguf.status.is_ok()) << gguf.status.message();
  auto file = GgufFile::open(gguf.path.string());
  ASSERT_TRUE(file.is_ok()) << file.status().message();
  auto bound = bind_gguf(std::move(*file));
  ASSERT_TRUE(bound.is_ok()) << bound.status().message();
  auto file2 = GgufFile::open(gguf.path.string());
  ASSERT_TRUE(file2.is_ok());
  for (const HfCase& c : read_cases(fixture(GetParam()))) {
    auto logits = reference::forward(bound->config, reference::gguf_lookup(*file2), c.tokens);
    ASSERT_TRUE(logits.is_ok()) << logits.status().message();
    const double err = row_rel_err(*logits, c.logits, bound->config.n_vocab);
    EXPECT_LT(err, 1e-4) << GetParam();
    std::printf("  reference %s: row rel err %.3g\n", GetParam().c_str(), err);
  }
}

TEST_P(HfHybrid, SafetensorsDirMatchesTransformers) {
  auto m = Model::load(fixture(GetParam()), {2});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  check_model(**m, fixture(GetParam()), 1e-4);
}

TEST_P(HfHybrid, ConvertedGgufMatchesTransformers) {
  Converted gguf(GetParam());
  ASSERT_TRUE(gguf.status.is_ok()) << gguf.status.message();
  auto m = Model::load(gguf.path.string(), {2});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  check_model(**m, fixture(GetParam()), 1e-4);
}

// Q8_0 matrices (the recurrent layers' 1-D tensors stay F32): close to transformers' logits;
// MoE routing near-ties move a few rows of qwen3_next.
TEST_P(HfHybrid, ConvertedQ8_0GgufIsCloseToTransformers) {
  Converted gguf(GetParam(), Dtype::kQ8_0);
  ASSERT_TRUE(gguf.status.is_ok()) << gguf.status.message();
  auto m = Model::load(gguf.path.string(), {2});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const int64_t V = (*m)->config().n_vocab;
  for (const HfCase& c : read_cases(fixture(GetParam()))) {
    auto kv = hybrid_cache((*m)->config());
    auto got = test::run_sequence(**m, *kv, c.tokens, 64);
    ASSERT_TRUE(got.is_ok()) << got.status().message();
    const double err = row_rel_err(*got, c.logits, V);
    int close = 0, rows = 0;
    for (size_t r = 0; r * V < c.logits.size(); ++r, ++rows)
      close += test::rel_err(&(*got)[r * V], &c.logits[r * V], V) < 0.15;
    std::printf("  %s q8_0: row rel err %.3g, %d of %d rows within 0.15\n", GetParam().c_str(), err,
                close, rows);
    EXPECT_GE(close, rows * 3 / 4);
    EXPECT_GT(err, 1e-6);  // quantized: not the f32 file by mistake
  }
}

// The converted files say what llama.cpp's converter writes: its keys, tensor names and
// shapes, and its transforms, checked against the checkpoint's own tensors (A_log → -exp, the
// value heads tiled for qwen35: value head g·r + i of key head g goes to i·Hk + g).
TEST(HfHybridGguf, LlamaCppKeysNamesAndTransforms) {
  for (const std::string arch : {"qwen3_next", "qwen3_5_text"}) {
    Converted gguf(arch);
    ASSERT_TRUE(gguf.status.is_ok()) << gguf.status.message();
    auto f = GgufFile::open(gguf.path.string());
    ASSERT_TRUE(f.is_ok());
    const bool next = arch == "qwen3_next";
    const std::string a = next ? "qwen3next" : "qwen35";
    auto key = [&](const std::string& k) { return f->get_int(a + "." + k).value_or(-1); };
    EXPECT_EQ(key("ssm.conv_kernel"), 4);
    EXPECT_EQ(key("ssm.state_size"), 16);
    EXPECT_EQ(key("ssm.group_count"), 2);
    EXPECT_EQ(key("ssm.time_step_rank"), 4);
    EXPECT_EQ(key("ssm.inner_size"), 64);
    EXPECT_EQ(key("full_attention_interval"), 2);
    const GgufValue* recurrent = f->find(a + ".attention.recurrent_layers");
    ASSERT_TRUE(recurrent && recurrent->as_int_array());
    EXPECT_EQ(*recurrent->as_int_array(), (std::vector<int64_t>{1, 0}));
    EXPECT_EQ(key("rope.dimension_count"), 4);
    EXPECT_EQ(f->find(a + ".rope.dimension_sections") != nullptr, !next);
    auto shape = [&](const std::string& name) {
      const GgufTensorInfo* t = f->find_tensor(name);
      std::vector<int64_t> ne;
      if (t)
        for (int d = 0; d < t->view.n_dims; ++d) ne.push_back(t->view.ne[d]);
      return ne;
    };
    using Ne = std::vector<int64_t>;
    EXPECT_EQ(shape("blk.0.attn_qkv.weight"), (Ne{64, 128}));
    EXPECT_EQ(shape("blk.0.attn_gate.weight"), (Ne{64, 64}));
    EXPECT_EQ(shape("blk.0.ssm_conv1d.weight"), (Ne{4, 128}));
    EXPECT_EQ(shape("blk.0.ssm_a"), (Ne{4}));
    EXPECT_EQ(shape("blk.0.ssm_dt.bias"), (Ne{4}));
    EXPECT_EQ(shape("blk.0.ssm_norm.weight"), (Ne{16}));
    EXPECT_EQ(shape("blk.0.ssm_out.weight"), (Ne{64, 64}));
    EXPECT_EQ(shape("blk.0.ssm_ba.weight"), next ? (Ne{64, 8}) : Ne{});
    EXPECT_EQ(shape("blk.0.ssm_beta.weight"), next ? Ne{} : (Ne{64, 4}));
    EXPECT_EQ(shape("blk.0.ssm_alpha.weight"), next ? Ne{} : (Ne{64, 4}));
    EXPECT_EQ(shape("blk.0.post_attention_norm.weight"), (Ne{64}));
    EXPECT_EQ(shape("blk.1.attn_q.weight"), (Ne{64, 128}));  // 4 heads of 16, and their gates
    EXPECT_EQ(shape("blk.0.ffn_norm.weight"), Ne{});
    EXPECT_EQ(shape("blk.0.attn_q.weight"), Ne{});  // a recurrent layer

    // ssm_a from the checkpoint's A_log.
    auto st = SafetensorsModel::open(fixture(arch));
    ASSERT_TRUE(st.is_ok());
    const TensorView* a_log = st->find("model.layers.0.linear_attn.A_log");
    ASSERT_NE(a_log, nullptr);
    const auto* src = static_cast<const float*>(a_log->data);
    const auto* got = static_cast<const float*>(f->find_tensor("blk.0.ssm_a")->view.data);
    for (int g = 0; g < 2; ++g)
      for (int i = 0; i < 2; ++i) {
        const int grouped = g * 2 + i, stored = next ? grouped : i * 2 + g;
        EXPECT_FLOAT_EQ(got[stored], -std::exp(src[grouped])) << arch << " head " << grouped;
      }
  }
}

// The fixture with its two layers swapped (full attention first, then the recurrent layer):
// a pattern no full_attention_interval says. The GGUF says it as llama.cpp's converter does,
// in recurrent_layers (one bool per block; the interval then transformers' default, which
// llama.cpp does not read), and loom reads the pattern back from there: the file gives the
// directory's logits.
std::filesystem::path write_swapped_layers(const std::string& from) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::temp_directory_path() / ("loom_hybrid_swapped_" + fs::path(from).filename().string() +
                                   "_" + std::to_string(getpid()));
  fs::create_directories(dir);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(fs::path(from) / "config.json"));
  config["layer_types"] = {"full_attention", "linear_attention"};
  std::ofstream(dir / "config.json") << config.dump(2);
  const test::SafetensorsContents st =
      test::read_safetensors_file((fs::path(from) / "model.safetensors").string());
  nlohmann::json out = nlohmann::json::object();
  for (auto it = st.header.begin(); it != st.header.end(); ++it) {
    std::string name = it.key();
    for (const auto& [a, b] : {std::pair{"model.layers.0.", "model.layers.1."},
                               std::pair{"model.layers.1.", "model.layers.0."}})
      if (it.key().rfind(a, 0) == 0) name = b + it.key().substr(std::strlen(a));
    out[name] = it.value();
  }
  test::write_safetensors_file((dir / "model.safetensors").string(), out, st.data);
  return dir;
}

TEST(HfHybridGguf, IrregularLayerPatternRoundTripsThroughRecurrentLayers) {
  for (const std::string arch : {"qwen3_next", "qwen3_5_text"}) {
    const std::filesystem::path dir = write_swapped_layers(fixture(arch));
    const std::filesystem::path gguf = dir / "model.gguf";
    auto st = convert_hf_to_gguf(dir.string(), gguf.string(), ConvertOptions());
    ASSERT_TRUE(st.is_ok()) << arch << ": " << st.message();
    auto f = GgufFile::open(gguf.string());
    ASSERT_TRUE(f.is_ok());
    const std::string a = arch == "qwen3_next" ? "qwen3next" : "qwen35";
    const GgufValue* recurrent = f->find(a + ".attention.recurrent_layers");
    ASSERT_NE(recurrent, nullptr) << arch;
    EXPECT_EQ(recurrent->array_type(), GgufType::kBool);
    ASSERT_NE(recurrent->as_int_array(), nullptr);
    EXPECT_EQ(*recurrent->as_int_array(), (std::vector<int64_t>{0, 1}));
    EXPECT_EQ(f->get_int(a + ".full_attention_interval").value_or(-1), 4);

    auto from_dir = Model::load(dir.string(), {2});
    auto from_gguf = Model::load(gguf.string(), {2});
    ASSERT_TRUE(from_dir.is_ok()) << from_dir.status().message();
    ASSERT_TRUE(from_gguf.is_ok()) << from_gguf.status().message();
    const ModelConfig& c = (*from_gguf)->config();
    EXPECT_FALSE(c.layers[0].deltanet);
    EXPECT_TRUE(c.layers[1].deltanet);
    const int64_t V = c.n_vocab;
    for (const HfCase& hc : read_cases(fixture(arch))) {
      auto run = [&](Model& m) {
        auto kv = hybrid_cache(m.config());
        return test::run_sequence(m, *kv, hc.tokens, 64).value();
      };
      const auto want = run(**from_dir), got = run(**from_gguf);
      EXPECT_LT(row_rel_err(got, want, V), 1e-5) << arch;
      EXPECT_GT(row_rel_err(want, hc.logits, V), 1e-3);  // the swap does change the model
    }
    std::filesystem::remove_all(dir);
  }
}

// A checkpoint's mrope_section (Qwen3.5's rope_parameters) is what the converted file says in
// rope.dimension_sections, padded to four as llama.cpp's converter pads it; without one the
// file has transformers' default (llama.cpp's qwen35 loader requires the key); a malformed one
// is an error naming it.
TEST(HfHybridGguf, RopeSectionsAreTheCheckpointsOwn) {
  namespace fs = std::filesystem;
  const fs::path from = fixture("qwen3_5_text");
  const fs::path dir =
      fs::temp_directory_path() / ("loom_qwen35_mrope_" + std::to_string(getpid()));
  fs::create_directories(dir);
  fs::copy_file(from / "model.safetensors", dir / "model.safetensors",
                fs::copy_options::overwrite_existing);
  const nlohmann::json config = nlohmann::json::parse(std::ifstream(from / "config.json"));
  auto sections_after_convert = [&](const nlohmann::json& mrope) -> Result<std::vector<int64_t>> {
    nlohmann::json c = config;
    c["rope_parameters"]["mrope_section"] = mrope;
    std::ofstream(dir / "config.json") << c.dump(2);
    const fs::path gguf = dir / "model.gguf";
    LOOM_RETURN_IF_ERROR(convert_hf_to_gguf(dir.string(), gguf.string(), ConvertOptions()));
    auto f = GgufFile::open(gguf.string());
    if (!f.is_ok()) return f.status();
    const GgufValue* v = f->find("qwen35.rope.dimension_sections");
    if (!v || !v->as_int_array()) return internal_error("no rope.dimension_sections");
    return *v->as_int_array();
  };
  using Ints = std::vector<int64_t>;
  auto own = sections_after_convert({1, 1});
  ASSERT_TRUE(own.is_ok()) << own.status().message();
  EXPECT_EQ(*own, (Ints{1, 1, 0, 0}));
  auto four = sections_after_convert({0, 1, 1, 0});
  ASSERT_TRUE(four.is_ok()) << four.status().message();
  EXPECT_EQ(*four, (Ints{0, 1, 1, 0}));
  // Without one: transformers' default 11, 11, 10 needs 32 rotated pairs; this head rotates 2
  // (llama.cpp aborts on sections past them), which go round-robin to the first two.
  auto none = sections_after_convert(nullptr);
  ASSERT_TRUE(none.is_ok()) << none.status().message();
  EXPECT_EQ(*none, (Ints{1, 1, 0, 0}));
  EXPECT_EQ(ModelConfig::text_rope_sections(32), (Ints{11, 11, 10, 0}));  // Qwen3.5's 64 dims
  EXPECT_EQ(ModelConfig::text_rope_sections(64), (Ints{11, 11, 10, 0}));
  EXPECT_EQ(ModelConfig::text_rope_sections(8), (Ints{3, 3, 2, 0}));
  for (const nlohmann::json& bad : {nlohmann::json("11,11,10"), nlohmann::json({1, -1}),
                                    nlohmann::json({1, 1, 0, 0, 0}), nlohmann::json({1.5})}) {
    auto got = sections_after_convert(bad);
    ASSERT_FALSE(got.is_ok()) << bad.dump();
    EXPECT_NE(got.status().message().find("\"mrope_section\" must be"), std::string::npos)
        << got.status().message();
  }
  fs::remove_all(dir);
}

// The fixture rewritten the way Qwen3.5's published checkpoints are laid out: model_type
// qwen3_5 with the language model's config in text_config (tie_word_embeddings at the top),
// its tensors under model.language_model., lm_head at the top, a vision tower (model.visual.*)
// and an MTP head (mtp.*) that text generation does not read. Written with its own safetensors
// header (the data bytes are the fixture's, the dummies appended after them).
std::filesystem::path write_vision_language_layout(const std::string& from) {
  namespace fs = std::filesystem;
  const fs::path dir = fs::temp_directory_path() / ("loom_qwen3_5_vl_" + std::to_string(getpid()));
  fs::create_directories(dir);
  nlohmann::json text = nlohmann::json::parse(std::ifstream(fs::path(from) / "config.json"));
  const bool tied = text.value("tie_word_embeddings", false);
  text.erase("tie_word_embeddings");
  text.erase("architectures");
  const nlohmann::json config = {
      {"architectures", {"Qwen3_5ForConditionalGeneration"}},
      {"model_type", "qwen3_5"},
      {"text_config", text},
      {"tie_word_embeddings", tied},
      {"vision_config", {{"model_type", "qwen3_5"}, {"depth", 1}, {"hidden_size", 8}}},
      {"image_token_id", 500}};
  std::ofstream(dir / "config.json") << config.dump(2);

  test::SafetensorsContents st =
      test::read_safetensors_file((fs::path(from) / "model.safetensors").string());
  std::string& data = st.data;
  nlohmann::json out = nlohmann::json::object();
  for (auto it = st.header.begin(); it != st.header.end(); ++it) {
    std::string name = it.key();
    if (name.rfind("model.", 0) == 0) name = "model.language_model." + name.substr(6);
    out[name] = it.value();
  }
  for (const char* extra : {"model.visual.patch_embed.proj.weight", "mtp.fc.weight"}) {
    const uint64_t begin = data.size();
    for (int i = 0; i < 16; ++i) {
      const float v = 0.5f * static_cast<float>(i);
      data.append(reinterpret_cast<const char*>(&v), 4);
    }
    out[extra] = {{"dtype", "F32"}, {"shape", {4, 4}}, {"data_offsets", {begin, data.size()}}};
  }
  test::write_safetensors_file((dir / "model.safetensors").string(), out, data);
  return dir;
}

TEST(HfHybridVisionLanguage, Qwen3_5CheckpointServesItsTextModel) {
  const std::filesystem::path dir = write_vision_language_layout(fixture("qwen3_5_text"));
  {
    auto m = Model::load(dir.string(), {2});
    ASSERT_TRUE(m.is_ok()) << m.status().message();
    EXPECT_EQ((*m)->config().arch, "qwen35");
    check_model(**m, fixture("qwen3_5_text"), 1e-4);
    // loom convert reads the same layout, and its GGUF (llama.cpp's text-model file) too.
    const std::filesystem::path gguf = dir / "model.gguf";
    ASSERT_TRUE(convert_hf_to_gguf(dir.string(), gguf.string(), ConvertOptions()).is_ok());
    auto g = Model::load(gguf.string(), {2});
    ASSERT_TRUE(g.is_ok()) << g.status().message();
    check_model(**g, fixture("qwen3_5_text"), 1e-4);
  }
  // A wrapper whose text model loom does not know is still an unsupported model_type, named.
  nlohmann::json bad = nlohmann::json::parse(std::ifstream(dir / "config.json"));
  bad["text_config"]["model_type"] = "qwen9_text";
  std::ofstream(dir / "config.json") << bad.dump();
  auto m = Model::load(dir.string(), {2});
  ASSERT_FALSE(m.is_ok());
  EXPECT_NE(m.status().message().find("qwen3_5"), std::string::npos) << m.status().message();
  std::filesystem::remove_all(dir);
}

INSTANTIATE_TEST_SUITE_P(All, HfHybrid, ::testing::Values("qwen3_next", "qwen3_5_text"));

}  // namespace
}  // namespace loom
