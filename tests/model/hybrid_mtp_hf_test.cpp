// Qwen3-Next and Qwen3.5 Hugging Face checkpoints with their multi-token prediction layer:
// the fixtures tests/data/hf_reference/qwen3_next and qwen3_5_text (transformers saves no MTP
// weights) with the config's module count (num_nextn_predict_layers, mtp_num_hidden_layers)
// and a second shard holding mtp.* as the published checkpoints name them (fc, the two
// pre_fc norms, norm, and layers.0: gated full attention with the model's FFN), random
// values. Loading binds them and leaves the main logits those of transformers; `convert`
// writes llama.cpp's nextn tensors (blk.2.nextn.*, the norms as 1 + w like the model's), and
// the GGUF's module computes what the checkpoint's does and what the reference does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "model/hf_cases.h"
#include "model/hf_shards.h"
#include "model/model.h"
#include "model/mtp_check.h"
#include "model/tensor_names.h"
#include "reference/reference_model.h"
#include "tools/convert.h"

namespace loom {
namespace {

namespace fs = std::filesystem;
using test::ShardTensor;

// mtp.* for the fixture's sizes: experts and a gated shared expert when it has experts.
std::vector<ShardTensor> mtp_tensors(const nlohmann::json& cfg) {
  const int64_t E = cfg["hidden_size"], H = cfg["num_attention_heads"];
  const int64_t Hkv = cfg["num_key_value_heads"], D = cfg["head_dim"];
  const std::string l = "mtp.layers.0.";
  std::vector<ShardTensor> t = {
      {"mtp.fc.weight", {E, 2 * E}},
      {"mtp.pre_fc_norm_embedding.weight", {E}},
      {"mtp.pre_fc_norm_hidden.weight", {E}},
      {"mtp.norm.weight", {E}},
      {l + "input_layernorm.weight", {E}},
      {l + "self_attn.q_proj.weight", {2 * H * D, E}},  // each head's query, then its gate
      {l + "self_attn.k_proj.weight", {Hkv * D, E}},
      {l + "self_attn.v_proj.weight", {Hkv * D, E}},
      {l + "self_attn.q_norm.weight", {D}},
      {l + "self_attn.k_norm.weight", {D}},
      {l + "self_attn.o_proj.weight", {E, H * D}},
      {l + "post_attention_layernorm.weight", {E}},
  };
  if (cfg.value("num_experts", 0) > 0) {
    const int64_t X = cfg["num_experts"], F = cfg["moe_intermediate_size"];
    const int64_t Fs = cfg["shared_expert_intermediate_size"];
    t.push_back({l + "mlp.gate.weight", {X, E}});
    t.push_back({l + "mlp.shared_expert_gate.weight", {1, E}});
    t.push_back({l + "mlp.shared_expert.gate_proj.weight", {Fs, E}});
    t.push_back({l + "mlp.shared_expert.up_proj.weight", {Fs, E}});
    t.push_back({l + "mlp.shared_expert.down_proj.weight", {E, Fs}});
    for (int64_t e = 0; e < X; ++e) {
      const std::string p = l + "mlp.experts." + std::to_string(e) + ".";
      t.push_back({p + "gate_proj.weight", {F, E}});
      t.push_back({p + "up_proj.weight", {F, E}});
      t.push_back({p + "down_proj.weight", {E, F}});
    }
  } else {
    const int64_t F = cfg["intermediate_size"];
    t.push_back({l + "mlp.gate_proj.weight", {F, E}});
    t.push_back({l + "mlp.up_proj.weight", {F, E}});
    t.push_back({l + "mlp.down_proj.weight", {E, F}});
  }
  return t;
}

using test::module_logits;

// (fixture, the config key that counts the modules; "" for none)
class HybridMtpHf : public ::testing::TestWithParam<std::pair<const char*, const char*>> {};

TEST_P(HybridMtpHf, CheckpointLoadsAndConvertsToNextnTensors) {
  const auto [fixture, key] = GetParam();
  const std::string dir =
      (fs::temp_directory_path() / ("loom_hybrid_mtp_hf_" + std::string(fixture) +
                                    (*key ? "_" : "_n_") + std::to_string(::getpid())))
          .string();
  const std::string src = test::fixture(fixture);
  std::ifstream cin(src + "/config.json");
  nlohmann::json cfg = nlohmann::json::parse(cin);
  if (*key) cfg[key] = 1;  // else counted from the index, as Qwen3-Next's config says nothing
  const std::vector<ShardTensor> extra = mtp_tensors(cfg);
  test::write_sharded_checkpoint(src, dir + "/hf", cfg, extra);

  auto hf = Model::from_hf_dir(dir + "/hf", {2});
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const ModelConfig& c = (*hf)->config();
  EXPECT_EQ(c.n_layer, 2);
  ASSERT_EQ(c.n_mtp_layers, 1);
  ASSERT_EQ(c.mtp_layers.size(), 1u);
  EXPECT_FALSE(c.mtp_layers[0].deltanet);
  EXPECT_EQ(c.mtp_layers[0].moe, c.moe.n_expert > 0);
  EXPECT_TRUE(c.mtp_own_norm);
  EXPECT_FALSE(c.mtp_own_head || c.mtp_own_embed);

  // The main pass is still transformers' (which never reads the MTP layer).
  const auto cases = test::read_cases(src);
  auto kv = KvCache::create(c, 4, 16, Dtype::kF32).value();
  auto logits = test::run_sequence(**hf, *kv, cases[0].tokens, 24);
  ASSERT_TRUE(logits.is_ok()) << logits.status().message();
  EXPECT_LT(test::row_rel_err(*logits, cases[0].logits, c.n_vocab), 1e-4);

  // Convert: llama.cpp's layout (block_count counting the module), and the same module.
  const std::string gguf = dir + "/mtp.gguf";
  ConvertOptions o;
  o.type = Dtype::kF32;
  ASSERT_TRUE(convert_hf_to_gguf(dir + "/hf", gguf, o, nullptr).is_ok());
  auto file = GgufFile::open(gguf);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ(file->get_int(c.arch + ".block_count").value_or(0), 3);
  EXPECT_EQ(file->get_int(c.arch + ".nextn_predict_layers").value_or(0), 1);
  for (std::string_view t :
       {names::kNextnEhProj, names::kNextnEnorm, names::kNextnHnorm, names::kNextnHeadNorm,
        names::kAttnQ, names::kAttnKNorm, names::kAttnPostNorm,
        c.moe.n_expert > 0 ? names::kFfnGateInpShexp : names::kFfnDown})
    EXPECT_NE(file->find_tensor(names::layer_tensor(2, t)), nullptr) << t;
  for (std::string_view t : {names::kNextnHead, names::kNextnEmbed, names::kSsmConv1d})
    EXPECT_EQ(file->find_tensor(names::layer_tensor(2, t)), nullptr) << t;
  // Zero-centred norms are written as 1 + w, as llama.cpp's converter writes every one of
  // these models' norms but the gated one.
  {
    std::ifstream in(dir + "/hf/model-extra.safetensors", std::ios::binary);
    uint64_t len = 0;
    in.read(reinterpret_cast<char*>(&len), 8);
    std::string h(len, '\0');
    in.read(h.data(), static_cast<std::streamsize>(len));
    const nlohmann::json header = nlohmann::json::parse(h);
    const uint64_t begin = header["mtp.pre_fc_norm_embedding.weight"]["data_offsets"][0];
    std::vector<float> w(c.n_embd);
    in.seekg(static_cast<std::streamoff>(8 + len + begin));
    in.read(reinterpret_cast<char*>(w.data()), static_cast<std::streamsize>(w.size() * 4));
    const GgufTensorInfo* enorm = file->find_tensor(names::layer_tensor(2, names::kNextnEnorm));
    ASSERT_NE(enorm, nullptr);
    ASSERT_EQ(enorm->view.dtype, Dtype::kF32);
    const auto* g = static_cast<const float*>(enorm->view.data);
    for (int64_t i = 0; i < c.n_embd; ++i) EXPECT_FLOAT_EQ(g[i], 1.0f + w[i]) << i;
  }
  auto g = Model::load(gguf, {2});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ((*g)->config().n_mtp_layers, 1);

  const std::vector<int32_t> tokens(cases[1].tokens.begin(), cases[1].tokens.begin() + 9);
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> hidden(tokens.size() * c.n_embd);
  for (float& x : hidden) x = d(rng);
  // The MTP layer's experts are bound in place as every layer's are (views of the mapped
  // file): the loader holds less than one layer's experts (it used to stack them all). What it
  // made for the module is held until the module has its copies, then freed: not held twice.
  // The module, made once, runs on its copies.
  const uint64_t made_before = (*hf)->memory_use().loader_made;
  const std::vector<float> from_hf = module_logits(**hf, tokens, hidden);
  const uint64_t made_after = (*hf)->memory_use().loader_made;
  if (c.moe.n_expert > 0) {
    const int64_t X = c.moe.n_expert, F = c.moe.n_ff_exp, E = c.n_embd;
    EXPECT_LT(made_before, static_cast<uint64_t>(3 * X * F * E) * sizeof(float));
  }
  EXPECT_LE(made_after, made_before);
  if (made_after < made_before) {
    auto again = (*hf)->mtp_module(0);
    ASSERT_FALSE(again.is_ok());
    EXPECT_NE(again.status().message().find("made already"), std::string::npos);
  }
  const std::vector<float> from_gguf = module_logits(**g, tokens, hidden);
  ASSERT_EQ(from_hf.size(), from_gguf.size());
  const double hf_err = test::rel_err(from_gguf.data(), from_hf.data(), from_hf.size());
  EXPECT_LT(hf_err, 1e-5);
  auto ref =
      reference::mtp_forward((*g)->config(), reference::gguf_lookup(*file), 0, tokens, hidden);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  const double ref_err = test::rel_err(from_gguf.data(), ref->data(), ref->size());
  EXPECT_LT(ref_err, 1e-4);
  std::printf("  %s: module from HF vs GGUF %.3g, GGUF vs reference %.3g\n", fixture, hf_err,
              ref_err);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, HybridMtpHf,
                         ::testing::Values(std::pair{"qwen3_next", "num_nextn_predict_layers"},
                                           std::pair{"qwen3_next", ""},
                                           std::pair{"qwen3_5_text", "mtp_num_hidden_layers"}),
                         [](const auto& info) {
                           return std::string(info.param.first) +
                                  (*info.param.second ? "" : "_counted_from_index");
                         });

}  // namespace
}  // namespace loom
