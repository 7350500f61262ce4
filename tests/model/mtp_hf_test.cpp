// A DeepSeek-V3 Hugging Face checkpoint with its multi-token prediction layer: the fixture
// tests/data/hf_reference/deepseek_v3 (transformers saves no MTP weights, although its config
// counts one) plus a second safetensors shard holding model.layers.2.* as DeepSeek-V3's
// checkpoints name them (eh_proj, enorm, hnorm, shared_head.{norm,head}, embed_tokens and an
// ordinary MLA + MoE block), random values. Loading binds it and leaves the main logits those of
// transformers; `convert` writes llama.cpp's nextn tensors (block_count 3, nextn_predict_layers
// 1), and the GGUF's module computes what the checkpoint's does and what the reference does.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstring>
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

// The MTP layer's tensors as DeepSeek-V3's checkpoints name them, for the fixture's sizes.
std::vector<ShardTensor> mtp_tensors(const nlohmann::json& cfg) {
  const int64_t E = cfg["hidden_size"], H = cfg["num_attention_heads"], V = cfg["vocab_size"];
  const int64_t Rq = cfg["q_lora_rank"], R = cfg["kv_lora_rank"], N = cfg["qk_nope_head_dim"];
  const int64_t P = cfg["qk_rope_head_dim"], Dv = cfg["v_head_dim"];
  const int64_t X = cfg["n_routed_experts"], F = cfg["moe_intermediate_size"];
  const int64_t Fs = F * cfg["n_shared_experts"].get<int64_t>();
  const std::string l = "model.layers." + std::to_string(cfg["num_hidden_layers"].get<int>()) + ".";
  std::vector<ShardTensor> t = {
      {l + "eh_proj.weight", {E, 2 * E}},
      {l + "enorm.weight", {E}},
      {l + "hnorm.weight", {E}},
      {l + "shared_head.norm.weight", {E}},
      {l + "shared_head.head.weight", {V, E}},
      {l + "embed_tokens.weight", {V, E}},
      {l + "input_layernorm.weight", {E}},
      {l + "self_attn.q_a_proj.weight", {Rq, E}},
      {l + "self_attn.q_a_layernorm.weight", {Rq}},
      {l + "self_attn.q_b_proj.weight", {H * (N + P), Rq}},
      {l + "self_attn.kv_a_proj_with_mqa.weight", {R + P, E}},
      {l + "self_attn.kv_a_layernorm.weight", {R}},
      {l + "self_attn.kv_b_proj.weight", {H * (N + Dv), R}},
      {l + "self_attn.o_proj.weight", {E, H * Dv}},
      {l + "post_attention_layernorm.weight", {E}},
      {l + "mlp.gate.weight", {X, E}},
      {l + "mlp.gate.e_score_correction_bias", {X}},
      {l + "mlp.shared_experts.gate_proj.weight", {Fs, E}},
      {l + "mlp.shared_experts.up_proj.weight", {Fs, E}},
      {l + "mlp.shared_experts.down_proj.weight", {E, Fs}},
  };
  for (int64_t e = 0; e < X; ++e) {
    const std::string p = l + "mlp.experts." + std::to_string(e) + ".";
    t.push_back({p + "gate_proj.weight", {F, E}});
    t.push_back({p + "up_proj.weight", {F, E}});
    t.push_back({p + "down_proj.weight", {E, F}});
  }
  return t;
}

// The fixture plus the MTP shard and an index naming every tensor's file (sharded as large
// checkpoints are: a lone model.safetensors would hide the index).
std::string make_checkpoint(const std::string& dir) {
  const std::string src = test::fixture("deepseek_v3");
  std::ifstream cin(src + "/config.json");
  const nlohmann::json cfg = nlohmann::json::parse(cin);
  test::write_sharded_checkpoint(src, dir, cfg, mtp_tensors(cfg));
  return dir;
}

using test::module_logits;

TEST(MtpHf, CheckpointLoadsAndConvertsToNextnTensors) {
  const std::string dir =
      (fs::temp_directory_path() / ("loom_mtp_hf_" + std::to_string(::getpid()))).string();
  make_checkpoint(dir + "/hf");
  auto hf = Model::from_hf_dir(dir + "/hf", {2});
  ASSERT_TRUE(hf.is_ok()) << hf.status().message();
  const ModelConfig& c = (*hf)->config();
  EXPECT_EQ(c.n_layer, 2);
  ASSERT_EQ(c.n_mtp_layers, 1);
  EXPECT_TRUE(c.mtp_own_head && c.mtp_own_embed && c.mtp_own_norm);

  // The main pass is still transformers' (which never reads the MTP layer).
  const auto cases = test::read_cases(test::fixture("deepseek_v3"));
  auto kv = KvCache::create(c, 4, 16, Dtype::kF32).value();
  auto logits = test::run_sequence(**hf, *kv, cases[0].tokens, 24);
  ASSERT_TRUE(logits.is_ok());
  EXPECT_LT(test::row_rel_err(*logits, cases[0].logits, c.n_vocab), 1e-4);

  // Convert: llama.cpp's layout, and the same module.
  const std::string gguf = dir + "/mtp.gguf";
  ConvertOptions o;
  o.type = Dtype::kF32;
  ASSERT_TRUE(convert_hf_to_gguf(dir + "/hf", gguf, o, nullptr).is_ok());
  auto file = GgufFile::open(gguf);
  ASSERT_TRUE(file.is_ok());
  EXPECT_EQ(file->get_int("deepseek2.block_count").value_or(0), 3);
  EXPECT_EQ(file->get_int("deepseek2.nextn_predict_layers").value_or(0), 1);
  for (std::string_view t : {names::kNextnEhProj, names::kNextnEnorm, names::kNextnHnorm,
                             names::kNextnHeadNorm, names::kNextnHead, names::kNextnEmbed,
                             names::kAttnKvAMqa, names::kAttnKB, names::kFfnUpExps})
    EXPECT_NE(file->find_tensor(names::layer_tensor(2, t)), nullptr) << t;
  auto g = Model::load(gguf, {2});
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  ASSERT_EQ((*g)->config().n_mtp_layers, 1);

  const std::vector<int32_t> tokens(cases[1].tokens.begin(), cases[1].tokens.begin() + 9);
  std::mt19937 rng(3);
  std::normal_distribution<float> d(0.0f, 1.0f);
  std::vector<float> hidden(tokens.size() * c.n_embd);
  for (float& x : hidden) x = d(rng);
  const std::vector<float> from_hf = module_logits(**hf, tokens, hidden);
  const std::vector<float> from_gguf = module_logits(**g, tokens, hidden);
  ASSERT_EQ(from_hf.size(), from_gguf.size());
  EXPECT_LT(test::rel_err(from_gguf.data(), from_hf.data(), from_hf.size()), 1e-5);
  auto ref =
      reference::mtp_forward((*g)->config(), reference::gguf_lookup(*file), 0, tokens, hidden);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  EXPECT_LT(test::rel_err(from_gguf.data(), ref->data(), ref->size()), 1e-4);
  std::error_code ec;
  fs::remove_all(dir, ec);
}

}  // namespace
}  // namespace loom
