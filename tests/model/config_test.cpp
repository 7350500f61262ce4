// Hyperparameter readers (GGUF metadata, HF config.json), the tensor-name table, weight
// binding errors, RoPE frequency scaling and the llama Q/K row permutation.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "model/arch.h"
#include "model/config_reader.h"
#include "model/model.h"
#include "model/pooling_config.h"
#include "model/tensor_names.h"
#include "model/tiny_model.h"
#include "model/weights.h"
#include "reference/reference_model.h"
#include "tools/convert.h"
#include "tools/model_spec.h"
#include "tools/synth.h"

namespace loom {
namespace {

TEST(ConfigTest, HfRopeParametersLlama3) {
  auto c = config_from_hf_json(R"({
    "model_type": "llama", "vocab_size": 1000, "hidden_size": 256, "num_hidden_layers": 3,
    "num_attention_heads": 8, "num_key_value_heads": 2, "intermediate_size": 512,
    "max_position_embeddings": 131072, "rms_norm_eps": 1e-5, "tie_word_embeddings": true,
    "bos_token_id": 128000, "eos_token_id": [128001, 128008],
    "rope_parameters": {"rope_theta": 500000.0, "rope_type": "llama3", "factor": 8.0,
      "low_freq_factor": 1.0, "high_freq_factor": 4.0, "original_max_position_embeddings": 8192}
  })",
                               "config.json");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->head_dim, 32);
  EXPECT_EQ(c->n_head_kv, 2);
  EXPECT_EQ(c->rope_style, RopeStyle::kNeox);  // HF never permutes
  EXPECT_FLOAT_EQ(c->rope_theta, 500000.0f);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLlama3);
  EXPECT_FLOAT_EQ(c->rope_scaling.factor, 8.0f);
  EXPECT_EQ(c->rope_scaling.original_context, 8192);
  EXPECT_TRUE(c->tied_embeddings);
  EXPECT_EQ(c->bos_token, 128000);
  EXPECT_EQ(c->eos_token, 128001);
}

TEST(ConfigTest, HfOldStyleRopeAndMistral) {
  auto c = config_from_hf_json(R"({
    "model_type": "mistral", "vocab_size": 100, "hidden_size": 64, "num_hidden_layers": 1,
    "num_attention_heads": 4, "intermediate_size": 128, "rope_theta": 1000000.0,
    "head_dim": null, "rope_scaling": {"type": "linear", "factor": 2.0}})",
                               "c");
  ASSERT_TRUE(c.is_ok()) << c.status().message();
  EXPECT_EQ(c->arch, "llama");
  EXPECT_EQ(c->n_head_kv, 4);
  EXPECT_EQ(c->head_dim, 16);
  EXPECT_FLOAT_EQ(c->rope_theta, 1e6f);
  EXPECT_EQ(c->rope_scaling.type, RopeScalingType::kLinear);
}

TEST(ConfigTest, HfErrorsNameTheProblem) {
  auto a = config_from_hf_json(R"({"model_type": "gpt2"})", "x/config.json");
  ASSERT_FALSE(a.is_ok());
  EXPECT_NE(a.status().message().find("gpt2"), std::string::npos);
  auto b = config_from_hf_json(R"({"model_type": "llama", "vocab_size": 10})", "x/config.json");
  ASSERT_FALSE(b.is_ok());
  EXPECT_NE(b.status().message().find("hidden_size"), std::string::npos) << b.status().message();
  auto d = config_from_hf_json(R"({"model_type": "qwen2", "vocab_size": 10, "hidden_size": 64,
    "num_hidden_layers": 1, "num_attention_heads": 4, "intermediate_size": 8,
    "rope_parameters": {"rope_type": "yarn", "factor": 4.0}})",
                               "c");
  ASSERT_FALSE(d.is_ok());
  EXPECT_NE(d.status().message().find("yarn"), std::string::npos);
  EXPECT_FALSE(config_from_hf_json("not json", "c").is_ok());
}

TEST(ConfigTest, HfFixtureDirs) {
  auto q3 = config_from_hf_dir(std::string(LOOM_TEST_DATA) + "/hf_reference/qwen3");
  ASSERT_TRUE(q3.is_ok()) << q3.status().message();
  EXPECT_EQ(q3->arch, "qwen3");
  EXPECT_EQ(q3->head_dim, 32);  // != 64 / 4
  EXPECT_FLOAT_EQ(q3->rms_eps, 1e-6f);
  EXPECT_TRUE(q3->tied_embeddings);
}

TEST(ConfigTest, GgufMetadataAndRopeStylePerArch) {
  for (std::string arch : {"llama", "qwen2", "qwen3"}) {
    auto bytes = test::build_tiny_gguf(test::tiny_spec(arch));
    auto f = GgufFile::parse_bytes(bytes);
    ASSERT_TRUE(f.is_ok());
    auto c = config_from_gguf(*f);
    ASSERT_TRUE(c.is_ok()) << c.status().message();
    EXPECT_EQ(c->arch, arch);
    EXPECT_EQ(c->n_layer, 2);
    EXPECT_EQ(c->n_head_kv, 2);
    EXPECT_EQ(c->head_dim, arch == "qwen3" ? 32 : 16);
    EXPECT_EQ(c->rope_style, arch == "llama" ? RopeStyle::kInterleaved : RopeStyle::kNeox);
  }
}

TEST(ConfigTest, Llama3ScalingEqualsEquivalentRopeFreqsFactors) {
  // llama.cpp stores Llama 3.1's scaling as per-frequency divisors; both routes must agree.
  ModelConfig c;
  c.head_dim = 128;
  c.rope_theta = 500000.0f;
  c.rope_scaling = {RopeScalingType::kLlama3, 8.0f, 1.0f, 4.0f, 8192};
  auto scaled = rope_inv_freq(c, {});
  ModelConfig plain = c;
  plain.rope_scaling = {};
  auto base = rope_inv_freq(plain, {});
  std::vector<float> factors(64);
  int n_low = 0, n_mid = 0, n_high = 0;
  for (int i = 0; i < 64; ++i) {
    double wavelen = 2 * M_PI / base[i];
    if (wavelen < 8192 / 4.0)
      factors[i] = 1.0f, ++n_high;
    else if (wavelen > 8192 / 1.0)
      factors[i] = 8.0f, ++n_low;
    else {
      double s = (8192 / wavelen - 1.0) / (4.0 - 1.0);
      factors[i] = static_cast<float>(1.0 / ((1 - s) / 8.0 + s));
      ++n_mid;
    }
  }
  EXPECT_GT(n_low, 0);
  EXPECT_GT(n_mid, 0);
  EXPECT_GT(n_high, 0);
  auto via_factors = rope_inv_freq(plain, factors);
  for (int i = 0; i < 64; ++i) EXPECT_NEAR(via_factors[i], scaled[i], 1e-6 * base[i]) << i;
  // And the factors tensor wins over the config's scaling when both are present.
  auto both = rope_inv_freq(c, factors);
  EXPECT_EQ(both, via_factors);
}

TEST(TensorNamesTest, HfMappingRoundTrips) {
  EXPECT_EQ(names::hf_to_gguf("model.layers.11.self_attn.q_proj.weight"), "blk.11.attn_q.weight");
  EXPECT_EQ(names::hf_to_gguf("model.layers.0.self_attn.k_norm.weight"),
            "blk.0.attn_k_norm.weight");
  EXPECT_EQ(names::hf_to_gguf("lm_head.weight"), "output.weight");
  EXPECT_EQ(names::hf_to_gguf("model.layers.0.self_attn.rotary_emb.inv_freq"), std::nullopt);
  EXPECT_EQ(names::hf_to_gguf("model.layers.x.mlp.up_proj.weight"), std::nullopt);
  for (const char* g : {"token_embd.weight", "output_norm.weight", "blk.3.ffn_down.weight",
                        "blk.2.attn_v.bias", "blk.7.post_attention_layernorm.weight"}) {
    auto hf = names::gguf_to_hf(g);
    if (std::string(g).find("post_attention") != std::string::npos) {
      EXPECT_EQ(hf, std::nullopt);
      continue;
    }
    ASSERT_TRUE(hf) << g;
    EXPECT_EQ(names::hf_to_gguf(*hf), g);
  }
  EXPECT_TRUE(names::is_rope_permuted_tensor("blk.0.attn_k.weight"));
  EXPECT_TRUE(names::is_rope_permuted_tensor("blk.0.attn_q.bias"));
  EXPECT_FALSE(names::is_rope_permuted_tensor("blk.0.attn_v.weight"));
}

TEST(ConvertTest, RopePermutationIsPerHeadPairInterleave) {
  const int D = 8;
  std::set<int64_t> seen;
  for (int r = 0; r < 2 * D; ++r) seen.insert(rope_permuted_source_row(r, D));
  EXPECT_EQ(seen.size(), 2u * D);
  // Head 1: GGUF rows (8, 9) = HF rows (8, 12): the pair i = 0 of the halves layout.
  EXPECT_EQ(rope_permuted_source_row(8, D), 8);
  EXPECT_EQ(rope_permuted_source_row(9, D), 12);
  EXPECT_EQ(rope_permuted_source_row(11, D), 13);
}

TEST(WeightsTest, MissingOrMisshapenTensorIsNamed) {
  auto bytes = test::build_tiny_gguf(test::tiny_spec("qwen2"));
  auto f = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(f.is_ok());
  auto c0 = config_from_gguf(*f);
  ASSERT_TRUE(c0.is_ok());
  const ArchSpec& arch = *find_arch("qwen2");
  // Missing required bias (qwen2 requires it).
  TensorLookup hide = [&](std::string_view n) -> const TensorView* {
    if (n == "blk.1.attn_k.bias") return nullptr;
    auto* t = f->find_tensor(n);
    return t ? &t->view : nullptr;
  };
  ModelConfig c = *c0;
  auto w = Weights::bind(c, arch, hide);
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("blk.1.attn_k.bias"), std::string::npos)
      << w.status().message();
  // Wrong shape.
  TensorView bad = f->find_tensor("blk.0.ffn_up.weight")->view;
  bad.ne[1] -= 1;
  TensorLookup reshape = [&](std::string_view n) -> const TensorView* {
    if (n == "blk.0.ffn_up.weight") return &bad;
    auto* t = f->find_tensor(n);
    return t ? &t->view : nullptr;
  };
  c = *c0;
  w = Weights::bind(c, arch, reshape);
  ASSERT_FALSE(w.is_ok());
  EXPECT_NE(w.status().message().find("blk.0.ffn_up.weight"), std::string::npos)
      << w.status().message();
  // Everything present: binds, and the flags follow the tensors.
  c = *c0;
  TensorLookup all = [&](std::string_view n) -> const TensorView* {
    auto* t = f->find_tensor(n);
    return t ? &t->view : nullptr;
  };
  w = Weights::bind(c, arch, all);
  ASSERT_TRUE(w.is_ok()) << w.status().message();
  EXPECT_TRUE(c.qkv_bias);
  EXPECT_FALSE(c.qk_norm);
  EXPECT_FALSE(c.tied_embeddings);
  EXPECT_EQ(c.n_vocab, 97);
}

TEST(LoadTest, UnknownSpecsAreErrors) {
  EXPECT_EQ(Model::load("/nonexistent/x.gguf").status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(tools::load_model("synth:no-such-preset").is_ok());
}

TEST(LoadTest, SynthSpecMatchesReference) {
  auto m = tools::load_model("synth:tiny", {2});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const ModelConfig& c = (*m)->config();
  auto tokens = test::random_tokens(12, c.n_vocab, 5);
  auto kv = KvCache::create(c, 1, 16, Dtype::kF32).value();
  auto fast = test::run_sequence(**m, *kv, tokens, 5);
  ASSERT_TRUE(fast.is_ok()) << fast.status().message();
  // The same bytes, parsed again for the reference.
  SynthOptions so = parse_synth_spec("synth:tiny").value();
  auto bytes = synth_model_bytes(so).value();
  auto f = GgufFile::parse_bytes(bytes).value();
  auto ref = reference::forward(c, reference::gguf_lookup(f), tokens);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  EXPECT_LT(test::rel_err(fast->data(), ref->data(), ref->size()), 1e-4);
}

// Embedding metadata from GGUF: pooling_type, classifier labels, the rerank prompt, and the
// classifier head bound from cls.output (synth's tiny-qwen3-rerank, as llama.cpp's converter
// writes a Qwen3-Reranker); an out-of-range pooling_type names its key.
TEST(PoolingConfig, GgufPoolingTypeLabelsAndHead) {
  SynthOptions so;
  so.preset = "tiny-qwen3-rerank";
  so.arch = "qwen3";
  auto bytes = synth_model_bytes(so);
  ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto f = GgufFile::parse_bytes(*bytes);
  ASSERT_TRUE(f.is_ok());
  auto m = Model::from_gguf(std::move(*f), {1});
  ASSERT_TRUE(m.is_ok()) << m.status().message();
  const ModelConfig& c = (*m)->config();
  EXPECT_EQ(c.pooling, PoolingType::kRank);
  EXPECT_EQ(c.n_cls_out, 2);
  EXPECT_EQ(c.classifier_labels, (std::vector<std::string>{"yes", "no"}));
  EXPECT_NE(c.rerank_template.find("{query}"), std::string::npos);

  auto g = GgufFile::parse_bytes(*bytes);
  GgufWriter w;
  for (const auto& [k, v] : g->metadata())
    if (k.rfind("tokenizer.", 0) != 0) w.set(k, v);
  w.set_u32("qwen3.pooling_type", 7);
  auto bad = GgufFile::parse_bytes(std::make_shared<std::vector<uint8_t>>(w.to_bytes()));
  ASSERT_TRUE(bad.is_ok());
  auto cfg = config_from_gguf(*bad);
  ASSERT_FALSE(cfg.is_ok());
  EXPECT_NE(cfg.status().message().find("qwen3.pooling_type"), std::string::npos);
}

// Hugging Face directories: sentence-transformers' Pooling module, and a Qwen3-Reranker known
// by its name only.
TEST(PoolingConfig, HfSentenceTransformersAndRerankerName) {
  namespace fs = std::filesystem;
  const fs::path root = fs::temp_directory_path() / ("loom_pooling_" + std::to_string(::getpid()));
  const fs::path src = fs::path(LOOM_TEST_DATA) / "hf_reference" / "qwen3" / "config.json";
  auto make_dir = [&](const std::string& name, const std::string& pooling) {
    const fs::path d = root / name;
    fs::create_directories(d / "1_Pooling");
    fs::copy_file(src, d / "config.json", fs::copy_options::overwrite_existing);
    if (!pooling.empty()) {
      std::ofstream(d / "modules.json")
          << R"([{"idx": 0, "name": "0", "path": "", "type": "sentence_transformers.models.Transformer"},
                {"idx": 1, "name": "1", "path": "1_Pooling", "type": "sentence_transformers.models.Pooling"},
                {"idx": 2, "name": "2", "path": "2_Normalize", "type": "sentence_transformers.models.Normalize"}])";
      std::ofstream(d / "1_Pooling" / "config.json")
          << R"({"word_embedding_dimension": 64, "pooling_mode_cls_token": false, )"
          << R"("pooling_mode_mean_tokens": false, "pooling_mode_max_tokens": false, )" << pooling
          << "}";
    }
    return d.string();
  };
  struct Case {
    std::string dir, pooling;
    PoolingType want;
  };
  const Case cases[] = {
      {"Qwen3-Embedding-0.6B", R"("pooling_mode_lasttoken": true)", PoolingType::kLast},
      {"gte", R"("pooling_mode_mean_tokens": true)", PoolingType::kMean},
      {"bge", R"("pooling_mode_cls_token": true)", PoolingType::kCls},
      {"Qwen3-Reranker-0.6B", "", PoolingType::kRank},
      {"Qwen3-0.6B", "", PoolingType::kUnspecified},
  };
  for (const Case& k : cases) {
    auto c = config_from_hf_dir(make_dir(k.dir, k.pooling));
    ASSERT_TRUE(c.is_ok()) << k.dir << ": " << c.status().message();
    EXPECT_EQ(c->pooling, k.want) << k.dir;
  }
  auto max = config_from_hf_dir(make_dir("maxpool", R"("pooling_mode_max_tokens": true)"));
  EXPECT_FALSE(max.is_ok());
  EXPECT_EQ(parse_pooling_type("last"), PoolingType::kLast);
  EXPECT_EQ(pooling_type_name(PoolingType::kRank), "rank");
  fs::remove_all(root);
}

}  // namespace
}  // namespace loom
