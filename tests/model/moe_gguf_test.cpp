// Mixture-of-Experts GGUF files as llama.cpp's loaders read them: what a file leaves out of its
// expert sizes (per architecture), synth's qwen2moe with its shared expert, experts whose gate
// and up are fused in one ffn_gate_up_exps tensor (llama.cpp's --fuse-gate-up-exps) giving the
// separate file's logits, and the per-token weight count (model/weight_footprint.h) the same
// from a file's tensor table as from the loaded weights.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "backend/cpu/cpu_model.h"
#include "format/gguf.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/model.h"
#include "model/tensor_names.h"
#include "model/tiny_model.h"
#include "model/weight_footprint.h"
#include "model/weights.h"
#include "tools/gguf_build.h"
#include "tools/synth.h"

namespace loom {
namespace {

namespace n = names;

// A file of metadata alone: a MoE config with the expert sizes left out.
Result<ModelConfig> moe_config(const std::string& arch, bool shared_key) {
  GgufWriter w;
  w.set_string(std::string(n::kGeneralArchitecture), arch);
  auto k = [&](std::string_view s) { return n::arch_key(arch, s); };
  w.set_u32(k(n::kEmbeddingLength), 64);
  w.set_u32(k(n::kBlockCount), 2);
  w.set_u32(k(n::kHeadCount), 4);
  w.set_u32(k(n::kHeadCountKv), 2);
  w.set_u32(k(n::kFeedForwardLength), 128);
  w.set_u32(k(n::kExpertCount), 8);
  w.set_u32(k(n::kExpertUsedCount), 2);
  if (shared_key) w.set_u32(k(n::kExpertSharedFeedForwardLength), 48);
  auto f = GgufFile::parse_bytes(std::make_shared<std::vector<uint8_t>>(w.to_bytes()));
  if (!f.is_ok()) return f.status();
  return config_from_gguf(*f);
}

// llama.cpp's qwen2moe: experts of feed_forward_length / expert_used_count, and a shared expert
// it always loads, of feed_forward_length; its qwen3moe never reads a shared expert's width.
TEST(MoeGguf, MissingExpertSizesAreWhatLlamaCppAssumes) {
  auto q2 = moe_config("qwen2moe", false);
  ASSERT_TRUE(q2.is_ok()) << q2.status().message();
  EXPECT_EQ(q2->moe.n_ff_exp, 64);
  EXPECT_EQ(q2->moe.n_ff_shexp, 128);
  EXPECT_TRUE(q2->moe.shexp_gate);
  auto q2_keyed = moe_config("qwen2moe", true);
  ASSERT_TRUE(q2_keyed.is_ok());
  EXPECT_EQ(q2_keyed->moe.n_ff_shexp, 48);
  auto q3 = moe_config("qwen3moe", true);
  ASSERT_TRUE(q3.is_ok()) << q3.status().message();
  EXPECT_EQ(q3->moe.n_ff_exp, 64);
  EXPECT_EQ(q3->moe.n_ff_shexp, 0);
  EXPECT_FALSE(q3->moe.shexp_gate);
  auto mixtral = moe_config("llama", false);
  ASSERT_TRUE(mixtral.is_ok());
  EXPECT_EQ(mixtral->moe.n_ff_exp, 128);  // llama.cpp's llama: experts of n_ff
  EXPECT_EQ(mixtral->moe.n_ff_shexp, 0);
}

std::shared_ptr<const std::vector<uint8_t>> synth(const std::string& preset,
                                                  const std::string& arch) {
  SynthOptions o;
  o.preset = preset;
  o.arch = arch;
  auto bytes = synth_model_bytes(o);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  return bytes.is_ok() ? std::move(bytes).value() : nullptr;
}

std::vector<float> logits_of(std::shared_ptr<const std::vector<uint8_t>> bytes,
                             const std::vector<int32_t>& tokens, std::string* error = nullptr) {
  auto file = GgufFile::parse_bytes(std::move(bytes));
  EXPECT_TRUE(file.is_ok());
  auto m = Model::from_gguf(std::move(file).value(), {2});
  if (!m.is_ok()) {
    if (error) *error = m.status().message();
    return {};
  }
  auto kv = KvCache::create((*m)->config(), 4, 16, Dtype::kF32).value();
  auto logits = test::run_sequence(**m, *kv, tokens, 64);
  EXPECT_TRUE(logits.is_ok()) << logits.status().message();
  return logits.is_ok() ? *logits : std::vector<float>{};
}

// qwen2moe as llama.cpp loads it has a gated shared expert in every layer: synth's file carries
// one (its width the fallback, feed_forward_length) and runs.
TEST(MoeGguf, SynthQwen2MoeHasItsSharedExpert) {
  const auto bytes = synth("tiny-moe", "qwen2moe");
  ASSERT_TRUE(bytes);
  auto file = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(file.is_ok());
  for (int l = 0; l < 2; ++l)
    for (std::string_view s :
         {n::kFfnGateInpShexp, n::kFfnGateShexp, n::kFfnUpShexp, n::kFfnDownShexp})
      EXPECT_TRUE(file->find_tensor(n::layer_tensor(l, s))) << n::layer_tensor(l, s);
  const GgufTensorInfo* shared = file->find_tensor(n::layer_tensor(0, n::kFfnGateShexp));
  ASSERT_TRUE(shared);
  EXPECT_EQ(shared->view.ne[1], 128);
  const auto logits = logits_of(bytes, test::random_tokens(12, 512, 1));
  ASSERT_FALSE(logits.empty());
  for (float x : logits) ASSERT_TRUE(std::isfinite(x));
}

// The file with every layer's ffn_gate_exps and ffn_up_exps replaced by one ffn_gate_up_exps
// {E, 2 Fx, X} of each expert's gate rows then its up rows, as llama.cpp's converter fuses them.
std::shared_ptr<const std::vector<uint8_t>> fuse_gate_up(
    std::shared_ptr<const std::vector<uint8_t>> bytes) {
  auto f = GgufFile::parse_bytes(std::move(bytes));
  EXPECT_TRUE(f.is_ok());
  GgufWriter meta;
  for (const auto& [k, v] : f->metadata()) meta.set(k, v);
  std::vector<PlannedTensor> plan;
  std::vector<const GgufTensorInfo*> gate, up;  // per planned tensor: the sources
  for (const auto& t : f->tensors()) {
    auto l = n::parse_layer_tensor(t.name);
    if (l && l->suffix == n::kFfnUpExps) continue;
    const GgufTensorInfo* u = l && l->suffix == n::kFfnGateExps
                                  ? f->find_tensor(n::layer_tensor(l->layer, n::kFfnUpExps))
                                  : nullptr;
    std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
    std::string name = t.name;
    if (u) {
      ne[1] *= 2;
      name = n::layer_tensor(l->layer, n::kFfnGateUpExps);
    }
    plan.push_back(plan_tensor(name, t.view.dtype, ne).value());
    gate.push_back(&t);
    up.push_back(u);
  }
  auto fill = [&](size_t i, uint8_t* dst) {
    const TensorView& g = gate[i]->view;
    if (!up[i]) {
      std::memcpy(dst, g.data, g.nbytes);
      return Status::ok();
    }
    const uint64_t each = g.nbytes / static_cast<uint64_t>(g.ne[2]);
    for (int64_t e = 0; e < g.ne[2]; ++e) {
      std::memcpy(dst, static_cast<const uint8_t*>(g.data) + e * each, each);
      std::memcpy(dst + each, static_cast<const uint8_t*>(up[i]->view.data) + e * each, each);
      dst += 2 * each;
    }
    return Status::ok();
  };
  auto out = build_gguf_bytes(std::move(meta), plan, fill);
  EXPECT_TRUE(out.is_ok()) << out.status().message();
  return out.is_ok() ? std::move(out).value() : nullptr;
}

// Where llama.cpp's loader takes ffn_gate_up_exps instead of the separate tensors (deepseek2,
// qwen3next, qwen35moe: its create_tensor_gate_up_exps), the fused file gives the separate
// file's logits bit for bit (the same experts' rows, bound as row ranges); elsewhere (qwen3moe)
// it is refused, as llama.cpp refuses it, naming the missing tensor.
TEST(MoeGguf, FusedGateUpExpertsGiveTheSeparateFilesLogits) {
  for (auto [preset, arch] :
       {std::pair{"tiny-mla", "deepseek2"}, {"tiny-qwen3next", "qwen3next"}}) {
    SCOPED_TRACE(arch);
    const auto separate = synth(preset, arch);
    ASSERT_TRUE(separate);
    const auto fused = fuse_gate_up(separate);
    ASSERT_TRUE(fused);
    auto ff = GgufFile::parse_bytes(fused);
    ASSERT_TRUE(ff.is_ok());
    int n_fused = 0;
    for (const auto& t : ff->tensors()) {
      n_fused += t.name.find("ffn_gate_up_exps") != std::string::npos;
      EXPECT_EQ(t.name.find("ffn_up_exps"), std::string::npos) << t.name;
    }
    EXPECT_GT(n_fused, 0);
    const auto tokens = test::random_tokens(20, 512, 7);
    const auto want = logits_of(separate, tokens);
    std::string error;
    const auto got = logits_of(fused, tokens, &error);
    ASSERT_EQ(got.size(), want.size()) << error;
    EXPECT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * sizeof(float)))
        << "rel err " << test::rel_err(got.data(), want.data(), got.size());
  }
  const auto fused_qwen3moe = fuse_gate_up(synth("tiny-moe", "qwen3moe"));
  ASSERT_TRUE(fused_qwen3moe);
  std::string error;
  EXPECT_TRUE(logits_of(fused_qwen3moe, test::random_tokens(4, 512, 1), &error).empty());
  EXPECT_NE(error.find("ffn_gate_exps"), std::string::npos) << error;
}

// What `loom inspect` counts from a file's tensor table and what the loaded weights count are
// one figure: total bytes and parameters, and what a token reads (one embedding row, 2 of the
// experts and of gpt-oss's per-expert biases, the rest whole; an MTP layer stored, not read).
TEST(MoeGguf, FileAndWeightsCountTheSameFootprint) {
  for (auto [preset, arch] : {std::pair{"tiny-gpt-oss", "gpt-oss"},
                              {"tiny-mla", "deepseek2"},
                              {"tiny-moe", "qwen2moe"},
                              {"tiny", "qwen3"}}) {
    SCOPED_TRACE(arch);
    const auto bytes = synth(preset, arch);
    ASSERT_TRUE(bytes);
    auto f = GgufFile::parse_bytes(bytes);
    ASSERT_TRUE(f.is_ok());
    auto c = config_from_gguf(*f);
    ASSERT_TRUE(c.is_ok());
    const int32_t used = c->moe.n_expert_used, first_mtp = c->n_layer;
    const bool tied = !f->find_tensor(n::kOutput);
    WeightFootprint file;
    for (const auto& t : f->tensors()) {
      auto l = n::parse_layer_tensor(t.name);
      const TokenShare share =
          l && l->layer >= first_mtp ? TokenShare::kNone : token_share(t.name, tied);
      file.add(share, t.view.numel(), t.view.nbytes, t.view.ne[t.view.n_dims - 1], used);
    }
    ModelConfig mc = *c;
    auto w = Weights::bind(mc, *find_arch(mc.arch), [&](std::string_view name) {
      const GgufTensorInfo* t = f->find_tensor(name);
      return t ? &t->view : nullptr;
    });
    ASSERT_TRUE(w.is_ok()) << w.status().message();
    const WeightFootprint loaded = w->footprint(used);
    EXPECT_EQ(loaded.params, file.params);
    EXPECT_EQ(loaded.bytes, file.bytes);
    EXPECT_EQ(loaded.active_params, file.active_params);
    EXPECT_EQ(loaded.active_bytes, file.active_bytes);
    EXPECT_EQ(w->bytes_per_token(used), file.active_bytes);
    EXPECT_EQ(w->total_bytes(), file.bytes);
    uint64_t all = 0;
    for (const auto& t : f->tensors()) all += t.view.nbytes;
    EXPECT_EQ(file.bytes, all);  // f32 synth files: every tensor as loaded
  }
  // tiny-gpt-oss by hand (E 64, V 512, 4 experts of 64, 2 used): a token reads one of the 512
  // embedding rows, and of each layer's gate/up/down expert biases (2 * 64 + 64 per expert)
  // 2 of the 4 experts' rows.
  const auto bytes = synth("tiny-gpt-oss", "gpt-oss");
  auto f = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(f.is_ok());
  WeightFootprint all_read, fp;
  for (const auto& t : f->tensors()) {
    fp.add(token_share(t.name, false), t.view.numel(), t.view.nbytes, t.view.ne[t.view.n_dims - 1],
           2);
    all_read.add(TokenShare::kWhole, t.view.numel(), t.view.nbytes, 1, 2);
  }
  const uint64_t experts_per_layer = 3 * 64 * 64 * 4 + (64 + 64 + 64) * 4;
  EXPECT_EQ(all_read.active_params - fp.active_params, (512 - 1) * 64 + 2 * experts_per_layer / 2);
}

// The file without its output.weight: a model whose LM head is its embedding (llama.cpp's
// loaders fall back to token_embd).
std::shared_ptr<const std::vector<uint8_t>> without_output(
    std::shared_ptr<const std::vector<uint8_t>> bytes) {
  auto f = GgufFile::parse_bytes(std::move(bytes));
  EXPECT_TRUE(f.is_ok());
  GgufWriter w;
  for (const auto& [k, v] : f->metadata()) w.set(k, v);
  for (const auto& t : f->tensors()) {
    if (t.name == n::kOutput) continue;
    std::vector<int64_t> ne(t.view.ne.begin(), t.view.ne.begin() + t.view.n_dims);
    EXPECT_TRUE(w.add_tensor(t.name, t.view.dtype, ne, t.view.data, t.view.nbytes).is_ok());
  }
  return std::make_shared<const std::vector<uint8_t>>(w.to_bytes());
}

// The loaded weights' footprint of a GGUF file, with the file's tensor-table count beside it.
struct Footprints {
  WeightFootprint file, loaded;
};
Footprints footprints(std::shared_ptr<const std::vector<uint8_t>> bytes) {
  Footprints out;
  auto f = GgufFile::parse_bytes(std::move(bytes));
  EXPECT_TRUE(f.is_ok());
  auto c = config_from_gguf(*f);
  EXPECT_TRUE(c.is_ok()) << c.status().message();
  const int32_t used = c->moe.n_expert_used;
  const bool tied = !f->find_tensor(n::kOutput);
  for (const auto& t : f->tensors())
    out.file.add(token_share(t.name, tied), t.view.numel(), t.view.nbytes,
                 t.view.ne[t.view.n_dims - 1], used);
  ModelConfig mc = *c;
  auto w = Weights::bind(mc, *find_arch(mc.arch), [&](std::string_view name) {
    const GgufTensorInfo* t = f->find_tensor(name);
    return t ? &t->view : nullptr;
  });
  EXPECT_TRUE(w.is_ok()) << w.status().message();
  if (w.is_ok()) out.loaded = w->footprint(used);
  return out;
}

// A tied LM head is the embedding: stored once and read whole by every token, so it counts
// once in what a token reads, and a token never reads more than the model stores (before, the
// embedding counted as one row plus the whole head: a dense tied model read more than all of
// its parameters).
TEST(MoeGguf, TiedHeadCountsOnceAndATokenReadsAtMostEverything) {
  // tiny-moe counted by hand (tests/cli/inspect_test): per layer 12,960 parameters outside the
  // experts and 3 x 64 x 32 per expert (2 of 8 read); the embedding 32,768 (read whole as the
  // head); the output norm 64.
  const Footprints moe = footprints(without_output(synth("tiny-moe", "qwen3moe")));
  EXPECT_EQ(moe.file.params, 2u * (12960 + 8 * 6144) + 32768 + 64);
  EXPECT_EQ(moe.file.active_params, 2u * (12960 + 2 * 6144) + 32768 + 64);
  EXPECT_EQ(moe.file.active_bytes, 4 * moe.file.active_params);  // f32
  EXPECT_EQ(moe.loaded.params, moe.file.params);
  EXPECT_EQ(moe.loaded.active_params, moe.file.active_params);
  EXPECT_EQ(moe.loaded.active_bytes, moe.file.active_bytes);
  // Dense and tied (Gemma 2's files never hold an LM head): a token reads every weight once.
  const Footprints dense = footprints(synth("tiny", "gemma2"));
  EXPECT_EQ(dense.file.active_params, dense.file.params);
  EXPECT_EQ(dense.file.active_bytes, dense.file.bytes);
  EXPECT_EQ(dense.loaded.active_params, dense.loaded.params);
  EXPECT_EQ(dense.loaded.active_bytes, dense.loaded.bytes);
  EXPECT_EQ(dense.loaded.params, dense.file.params);
  // Untied: one embedding row and the whole head.
  const Footprints untied = footprints(synth("tiny-moe", "qwen3moe"));
  EXPECT_EQ(untied.loaded.active_params, 2u * (12960 + 2 * 6144) + 64 + 32768 + 64);
  EXPECT_EQ(untied.file.active_params, untied.loaded.active_params);
}

}  // namespace
}  // namespace loom
