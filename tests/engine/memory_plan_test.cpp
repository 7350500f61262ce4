// The memory plan (engine/memory_plan.h) against what the engine then allocates, and its
// advice when a configuration does not fit: each suggested setting must make the plan fit.
#include "engine/memory_plan.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "backend/cpu/cpu_model.h"
#include "loom/engine.h"
#include "model/model.h"
#include "tools/synth.h"

namespace loom {
namespace {

BoundModel bind_synth(const std::string& preset) {
  auto so = parse_synth_spec("synth:" + preset);
  EXPECT_TRUE(so.is_ok());
  auto bytes = synth_model_bytes(*so);
  EXPECT_TRUE(bytes.is_ok());
  auto file = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(file.is_ok());
  auto bound = bind_gguf(std::move(*file));
  EXPECT_TRUE(bound.is_ok()) << bound.status().message();
  return std::move(*bound);
}

// A small engine (`seqs` sequences of 128 tokens) speculating k tokens with a draft model.
EngineConfig draft_config(int32_t seqs, int32_t k, const std::string& draft) {
  EngineConfig c;
  c.max_num_seqs = seqs;
  c.max_model_len = 128;
  c.speculative.num_speculative_tokens = k;
  c.speculative.method = SpeculativeConfig::Method::kDraftModel;
  c.speculative.model = draft;
  return c;
}

// The value written after `flag ` in `text` (-1 when absent).
double suggested(const std::string& text, const std::string& flag) {
  const size_t at = text.find(flag + " ");
  if (at == std::string::npos) return -1;
  return std::strtod(text.c_str() + at + flag.size() + 1, nullptr);
}

class MemoryPlanMatches : public ::testing::TestWithParam<const char*> {};

// Weights' copies and the KV cache exactly, scratch within 1% (a full-length prompt in full
// chunks reaches the step the plan sizes for), and the total within 1%; for MoE an upper bound.
TEST_P(MemoryPlanMatches, WhatTheEngineAllocates) {
  const std::string spec = std::string("synth:") + GetParam();
  EngineConfig c;
  c.max_num_seqs = 3;
  c.max_model_len = 192;
  c.max_num_batched_tokens = 64;
  c.n_threads = 2;
  auto plan = plan_memory(spec, c);
  ASSERT_TRUE(plan.is_ok()) << plan.status().message();
  ASSERT_TRUE(plan->fits());
  auto engine = Engine::load(spec, c);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  Engine& e = **engine;

  // Three sequences, one of them max_model_len long: steps of 64 rows, attention over 192; the
  // long one asks for prompt logprobs, so its chunks' steps need logits for all 64 rows.
  for (int s = 0; s < 3; ++s) {
    GenerateRequest r;
    r.request_id = "r" + std::to_string(s);
    const int len = s == 0 ? c.max_model_len - 1 : 20 + s;
    for (int i = 0; i < len; ++i) r.prompt.push_back((i * 7 + s * 13 + 1) % 500);
    r.params.max_tokens = 1;
    r.params.temperature = 0;
    if (s == 0) r.params.prompt_logprobs = 1;
    ASSERT_TRUE(e.add_request(std::move(r)).is_ok());
  }
  while (e.has_unfinished()) ASSERT_TRUE(e.step().is_ok());

  const Model::MemoryUse use = e.model().memory_use();
  EXPECT_EQ(use.weight_copies, plan->weight_copies);
  EXPECT_EQ(e.metrics().kv_cache_bytes, plan->kv_bytes);
  EXPECT_EQ(e.metrics().state_cache_bytes, plan->state_bytes);
  if (e.model().config().deltanet.n_v_heads > 0) {  // a hybrid: live slots + snapshots
    EXPECT_GT(plan->state_bytes, 0u);
    EXPECT_EQ(plan->state_bytes % (c.max_num_seqs + plan->kv.states.max_snapshots), 0u);
  }
  const uint64_t logits =
      static_cast<uint64_t>(c.max_num_batched_tokens) * e.model().config().n_vocab * 4;
  const double scratch = static_cast<double>(use.scratch + logits);
  const double total = static_cast<double>(use.weight_copies + e.metrics().kv_cache_bytes +
                                           e.metrics().state_cache_bytes + use.scratch + logits +
                                           plan->weights_mapped);
  if (e.model().config().moe.n_expert == 0) {
    EXPECT_NEAR(scratch / static_cast<double>(plan->scratch_bytes), 1.0, 0.01)
        << "allocated " << use.scratch + logits << ", planned " << plan->scratch_bytes;
    EXPECT_NEAR(total / static_cast<double>(plan->total()), 1.0, 0.01);
  } else {
    // An expert's task scratch depends on how many rows the router sends it: the plan takes
    // the most a task can have, so it bounds what a step uses.
    EXPECT_LE(scratch, static_cast<double>(plan->scratch_bytes));
    EXPECT_GT(scratch, 0.9 * static_cast<double>(plan->scratch_bytes));
    EXPECT_LE(total, static_cast<double>(plan->total()));
    EXPECT_GT(total, 0.97 * static_cast<double>(plan->total()));
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, MemoryPlanMatches,
                         ::testing::Values("tiny", "tiny-moe", "tiny-mla", "tiny-qwen35",
                                           "tiny-qwen3next"));

// Multi-head Latent Attention: each layer caches one row per token, kv_lora_rank +
// qk_rope_head_dim values (tiny-mla: 32 + 8), in a latent group of its own; the plan, the
// cache the model allocates and the table agree on it, and it is far below full K and V.
// "weights in the file": every tensor once, the untied output and the embeddings each once.
TEST(MemoryPlan, StoredWeightsAreTheFilesTensors) {
  for (const char* preset : {"tiny", "tiny-moe", "tiny-swa", "tiny-mla", "tiny-gpt-oss"}) {
    auto so = parse_synth_spec(std::string("synth:") + preset);
    ASSERT_TRUE(so.is_ok());
    auto bytes = synth_model_bytes(*so);
    ASSERT_TRUE(bytes.is_ok());
    auto file = GgufFile::parse_bytes(*bytes);
    ASSERT_TRUE(file.is_ok());
    uint64_t in_file = 0;
    for (const GgufTensorInfo& t : file->tensors()) in_file += t.view.nbytes;
    const BoundModel b = bind_synth(preset);
    EngineConfig c;
    c.max_num_seqs = 1;
    c.max_model_len = 64;
    auto plan = plan_memory(preset, b, c, 0);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    EXPECT_EQ(plan->weights_stored, in_file) << preset;
  }
}

// A Hugging Face MoE checkpoint holds one tensor per expert: they are bound in place (views of
// the mapped file), so loading makes nothing (it used to stack every expert in memory, held
// beside the kernel-ready copies until they were all made). gpt-oss's fused experts are
// transposed at load: the plan says how much that makes (the loader's own count) and counts it
// as available (the copies replace it), and a GGUF file's views need nothing of the kind.
TEST(MemoryPlan, MadeAtLoadIsWhatTheLoaderMakes) {
  EngineConfig c;
  c.max_num_seqs = 1;
  c.max_model_len = 64;
  auto expert_bytes = [](const BoundModel& b) {
    uint64_t n = 0;
    for (const LayerWeights& L : b.weights.layers)
      for (const auto* list : {&L.gate_exp, &L.up_exp, &L.down_exp})
        for (const TensorView& v : *list) n += v.nbytes;
    return n;
  };
  for (const char* fixture : {"qwen3_moe", "gpt_oss"}) {
    const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/" + fixture;
    auto bound = bind_hf_dir(dir);
    ASSERT_TRUE(bound.is_ok()) << bound.status().message();
    const uint64_t made = bound->weights.loader_made_bytes(), experts = expert_bytes(*bound);
    EXPECT_GT(experts, 0u) << fixture;
    if (std::string(fixture) == "qwen3_moe")
      EXPECT_EQ(made, 0u);
    else
      EXPECT_GE(made, experts);
    auto plan = plan_memory(fixture, *bound, c, 0);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    EXPECT_EQ(plan->weights_made_at_load, made) << fixture;
    EXPECT_EQ(plan->table().find("\n  made at load") != std::string::npos, made > 0)
        << plan->table();
    // What the loader made counts as available: it is freed as the copies replace it.
    EngineConfig same = c;
    same.kv_cache_memory_gib = static_cast<double>(plan->kv_bytes) / double(1ull << 30);
    auto short_by_half = plan_memory(fixture, *bound, same, plan->total() - made / 2 - 1);
    ASSERT_TRUE(short_by_half.is_ok()) << short_by_half.status().message();
    EXPECT_EQ(short_by_half->total(), plan->total());
    EXPECT_EQ(short_by_half->fits(), made > 0) << short_by_half->table();
  }
  auto gguf = plan_memory("tiny-moe", bind_synth("tiny-moe"), c, 0);
  ASSERT_TRUE(gguf.is_ok());
  EXPECT_EQ(gguf->weights_made_at_load, 0u);
}

TEST(MemoryPlan, MlaCachesOneLatentRowPerTokenAndLayer) {
  const BoundModel b = bind_synth("tiny-mla");
  const ModelConfig& mc = b.config;
  ASSERT_EQ(mc.mla.kv_lora_rank, 32);
  ASSERT_EQ(mc.mla.qk_rope_head_dim, 8);
  for (Dtype dt : {Dtype::kF16, Dtype::kF32}) {
    EngineConfig c;
    c.kv_dtype = dt;
    c.max_num_seqs = 2;
    c.max_model_len = 128;
    auto plan = plan_memory("tiny-mla", b, c, 0);
    ASSERT_TRUE(plan.is_ok()) << plan.status().message();
    const uint64_t elem = dt == Dtype::kF16 ? 2 : 4;
    EXPECT_EQ(plan->kv_bytes_per_token, mc.n_layer * (32 + 8) * elem);
    ASSERT_EQ(plan->kv.groups.size(), 1u);
    EXPECT_TRUE(plan->kv.groups[0].latent);
    EXPECT_EQ(plan->kv.groups[0].n_layers, mc.n_layer);
    const uint64_t blocks = plan->kv.layout.num_blocks[0];
    EXPECT_EQ(plan->kv_bytes, blocks * c.block_size * plan->kv_bytes_per_token);
    auto cache = KvCache::create(mc, plan->kv.layout, c.block_size, dt);
    ASSERT_TRUE(cache.is_ok());
    EXPECT_EQ((*cache)->bytes(), plan->kv_bytes);
    // Full K and V of every head would be 2 * 4 heads * 24 per layer: 4.8x more.
    EXPECT_LT(plan->kv_bytes_per_token * 4, 2ull * mc.n_layer * mc.n_head * mc.head_dim * elem);
    EXPECT_NE(plan->table().find("MLA: one latent row per layer (32 latent + 8 rope values)"),
              std::string::npos)
        << plan->table();
  }
}

// MTP speculation adds the module's latent rows (one more MLA layer in the same blocks: 3/2 of
// tiny-mla's two layers), its block's weight copies and its step's scratch.
TEST(MemoryPlan, MtpModuleIsPlanned) {
  const BoundModel b = bind_synth("tiny-mla");
  ASSERT_EQ(b.config.n_mtp_layers, 1);
  EngineConfig c;
  c.max_num_seqs = 2;
  c.max_model_len = 128;
  auto plain = plan_memory("tiny-mla", b, c, 0);
  c.speculative.method = SpeculativeConfig::Method::kMtp;
  c.speculative.num_speculative_tokens = 2;
  auto mtp = plan_memory("tiny-mla", b, c, 0);
  ASSERT_TRUE(plain.is_ok() && mtp.is_ok());
  EXPECT_EQ(mtp->kv_bytes * 2, plain->kv_bytes * 3);
  EXPECT_GT(mtp->weight_copies, plain->weight_copies);
  EXPECT_GT(mtp->scratch_bytes, plain->scratch_bytes);
}

// A draft model's weights, K/V (as many blocks as the target's), recurrent states (a slot
// per sequence, taking back k tokens) and scratch are planned beside the target's.
TEST(MemoryPlan, DraftModelIsPlanned) {
  const BoundModel b = bind_synth("tiny");
  EngineConfig c = draft_config(3, 3, "");
  c.speculative.method = SpeculativeConfig::Method::kNgram;  // the target's share as with a draft
  auto plain = plan_memory("tiny", b, c, 0);
  ASSERT_TRUE(plain.is_ok());
  EXPECT_EQ(plain->draft_bytes, 0u);
  c.speculative.method = SpeculativeConfig::Method::kDraftModel;
  c.speculative.model = "synth:tiny";
  auto dense = plan_memory("tiny", b, c, 0);
  c.speculative.model = "synth:tiny-qwen35";
  auto hybrid = plan_memory("tiny", b, c, 0);
  ASSERT_TRUE(dense.is_ok() && hybrid.is_ok());
  const BoundModel d = bind_synth("tiny");
  const uint64_t draft_kv = static_cast<uint64_t>(plain->kv.groups[0].num_blocks) *
                            KvCache::bytes_per_block(d.config, c.block_size, c.kv_dtype);
  EXPECT_GT(dense->draft_bytes, draft_kv + CpuModel::weight_copy_bytes(d.weights));
  // Beside the draft's own share, a step's sampled proposals' distributions: a vocabulary for
  // each of 3 sequences x 3 proposals (n-gram proposals are point masses: none).
  const uint64_t proposal_dists = 3ull * 3 * b.config.n_vocab * sizeof(float);
  EXPECT_EQ(dense->total(), plain->total() + dense->draft_bytes + proposal_dists);
  EXPECT_EQ(dense->scratch_bytes, plain->scratch_bytes + proposal_dists);
  EXPECT_EQ(dense->kv_bytes, plain->kv_bytes);
  EXPECT_NE(dense->table().find("draft model"), std::string::npos);
  const BoundModel h = bind_synth("tiny-qwen35");
  EXPECT_GT(hybrid->draft_bytes, 3 * KvCache::state_bytes_per_slot(h.config, 3));
  c.speculative.num_speculative_tokens = 16;
  auto too_many = plan_memory("tiny", b, c, 0);
  ASSERT_FALSE(too_many.is_ok());
  EXPECT_NE(too_many.status().message().find("num_speculative_tokens 16"), std::string::npos);
  c.speculative.model = "/nonexistent/draft.gguf";
  auto missing = plan_memory("tiny", b, c, 0);
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("draft model"), std::string::npos);
}

// What a speculative method needs of the models is refused by the plan, before any weights
// are loaded: a draft with another vocabulary, MTP on a model without MTP layers.
TEST(MemoryPlan, SpeculationTheModelsCannotDoIsRefused) {
  const BoundModel b = bind_synth("tiny");
  // Qwen3's 151,936 tokens against tiny's 512.
  EngineConfig c = draft_config(2, 2, "synth:tiny-qwen3");
  auto vocab = plan_memory("tiny", b, c, 0);
  ASSERT_FALSE(vocab.is_ok());
  EXPECT_NE(vocab.status().message().find("must share the target's vocabulary"), std::string::npos)
      << vocab.status().message();
  c.speculative.model.clear();
  c.speculative.method = SpeculativeConfig::Method::kMtp;
  auto mtp = plan_memory("tiny", b, c, 0);
  ASSERT_FALSE(mtp.is_ok());
  EXPECT_NE(mtp.status().message().find("has no multi-token prediction"), std::string::npos)
      << mtp.status().message();
  EXPECT_TRUE(plan_memory("tiny-mla", bind_synth("tiny-mla"), c, 0).is_ok());
}

// The target as its own draft (the draft spec names the target's): the draft's share is its
// K/V, states and the growth of the target's scratch, without a second copy of the weights.
TEST(MemoryPlan, DraftThatIsTheTargetSharesItsWeights) {
  const BoundModel b = bind_synth("tiny");
  const EngineConfig c = draft_config(3, 3, "synth:tiny");
  auto copy = plan_memory("tiny", b, c, 0);  // not the same spec: the draft loads its own
  auto shared = plan_memory("synth:tiny", b, c, 0);
  ASSERT_TRUE(copy.is_ok() && shared.is_ok());
  EXPECT_FALSE(copy->draft_shares_weights);
  EXPECT_TRUE(shared->draft_shares_weights);
  // Without the weights, and without the scratch the target already holds (a shared model's
  // scratch only grows to the draft's largest step); its K/V remain.
  EXPECT_LT(shared->draft_bytes, copy->draft_bytes - CpuModel::weight_copy_bytes(b.weights) -
                                     b.weights.token_embd.nbytes);
  EXPECT_GE(shared->draft_bytes, static_cast<uint64_t>(shared->kv.groups[0].num_blocks) *
                                     KvCache::bytes_per_block(b.config, c.block_size, c.kv_dtype));
  EXPECT_NE(shared->table().find("the target's weights"), std::string::npos) << shared->table();
  EXPECT_NE(shared->to_json().find("\"shares_target_weights\": true"), std::string::npos);
}

// Which drafts share: the same file through any path (a link, ./), the same synth spec; not a
// copy of the file, another spec or another method. (Sliding windows do not matter: a draft
// keeps its own; SpeculativeEngine.SlidingWindowSelfDraftKeepsEveryProposal checks one.)
TEST(MemoryPlan, WhichDraftsShareTheTargetsWeights) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("loom_draft_share_" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  const std::string a = (dir / "a.gguf").string(), link = (dir / "link.gguf").string(),
                    copy = (dir / "copy.gguf").string();
  std::ofstream(a) << "weights";
  std::ofstream(copy) << "weights";
  std::filesystem::create_symlink(a, link);
  SpeculativeConfig s;
  s.method = SpeculativeConfig::Method::kDraftModel;
  auto shares = [&](const std::string& target, const std::string& draft) {
    s.model = draft;
    return draft_shares_target(target, s);
  };
  EXPECT_TRUE(shares(a, a));
  EXPECT_TRUE(shares(a, link));
  EXPECT_TRUE(shares(a, (dir / "." / "a.gguf").string()));
  EXPECT_FALSE(shares(a, copy));
  EXPECT_FALSE(shares(a, (dir / "missing.gguf").string()));
  EXPECT_FALSE(shares("", a));
  EXPECT_TRUE(shares("synth:tiny", "synth:tiny"));
  EXPECT_FALSE(shares("synth:tiny", "synth:tiny-qwen3"));
  s.model = a;
  s.method = SpeculativeConfig::Method::kNgram;
  EXPECT_FALSE(draft_shares_target(a, s));
  std::filesystem::remove_all(dir);
}

TEST(MemoryPlan, AdviceMakesAnExplicitKvBudgetFit) {
  const BoundModel b = bind_synth("tiny");
  EngineConfig c;
  c.kv_cache_memory_gib = 2.0;
  const uint64_t available = uint64_t{1} << 30;
  auto plan = plan_memory("tiny", b, c, available);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_FALSE(plan->fits());
  const std::string advice = plan->advice();
  const double gib = suggested(advice, "--kv-cache-memory");
  ASSERT_GT(gib, 0.5) << advice;
  EXPECT_LT(gib, 1.0) << advice;
  c.kv_cache_memory_gib = gib;
  auto fixed = plan_memory("tiny", b, c, available);
  ASSERT_TRUE(fixed.is_ok());
  EXPECT_TRUE(fixed->fits()) << fixed->table();
}

// 512 sequences of 512 tokens, f32: a default KV cache far larger than tiny's weights.
EngineConfig many_long_sequences() {
  EngineConfig c;
  c.max_num_seqs = 512;
  c.max_model_len = 512;
  c.kv_dtype = Dtype::kF32;
  return c;
}

// Without --kv-cache-memory, a default KV size that does not fit beside the weights takes
// what is left instead (as vLLM sizes its cache from free memory): a 17 GB model on a 24 GB
// machine runs. It still holds at least one max_model_len sequence.
TEST(MemoryPlan, DefaultKvSizeGivesWayToTheWeights) {
  const BoundModel b = bind_synth("tiny");
  const EngineConfig c = many_long_sequences();
  auto full = plan_memory("tiny", b, c, 0);
  ASSERT_TRUE(full.is_ok());
  ASSERT_EQ(full->kv_shrunk_from, 0u);
  // A machine with room for the weights and scratch and a third of that KV cache.
  const uint64_t fixed = full->total() - full->kv_bytes;
  const uint64_t available =
      static_cast<uint64_t>(static_cast<double>(fixed + full->kv_bytes / 3) / 0.95);
  auto plan = plan_memory("tiny", b, c, available);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_TRUE(plan->fits());
  EXPECT_EQ(plan->kv_shrunk_from, full->kv_bytes);
  EXPECT_LE(plan->kv_bytes, full->kv_bytes / 3);
  EXPECT_GT(plan->kv_bytes, full->kv_bytes / 3 * 8 / 10);  // not needlessly small
  EXPECT_GE(plan->kv_tokens, c.max_model_len);
  EXPECT_GT(plan->config.kv_cache_memory_gib, 0.0);  // what the engine is then given
  EXPECT_NE(plan->table().find("did not fit beside the weights"), std::string::npos);
}

// Room for less than one max_model_len sequence: not shrunk; the advice names a length and
// the number of sequences that fit, and they do.
TEST(MemoryPlan, AdviceForDefaultSizingNamesSeqsAndLength) {
  const BoundModel b = bind_synth("tiny");
  const EngineConfig c = many_long_sequences();
  auto full = plan_memory("tiny", b, c, 0);
  ASSERT_TRUE(full.is_ok());
  const uint64_t one_seq = full->kv_bytes_per_token * c.max_model_len;
  // Room for the KV cache (95% of what is available, less the rest): half a sequence.
  const uint64_t available = static_cast<uint64_t>(
      static_cast<double>(full->total() - full->kv_bytes + one_seq / 2) / 0.95);
  auto plan = plan_memory("tiny", b, c, available);
  ASSERT_TRUE(plan.is_ok());
  ASSERT_FALSE(plan->fits());
  EXPECT_EQ(plan->kv_shrunk_from, 0u);
  const std::string advice = plan->advice();
  const double len = suggested(advice, "--max-model-len");
  ASSERT_GE(len, 16) << advice;
  ASSERT_LT(len, c.max_model_len) << advice;
  EngineConfig by_len = c;
  by_len.max_model_len = static_cast<int32_t>(len);
  EXPECT_TRUE(plan_memory("tiny", b, by_len, available)->fits()) << advice;
}

TEST(MemoryPlan, WeightsThatCannotFitSayTheModelIsTooLarge) {
  const BoundModel b = bind_synth("tiny");
  EngineConfig c;
  c.max_num_seqs = 1;
  c.max_model_len = 64;
  auto plan = plan_memory("tiny", b, c, /*available=*/4096);
  ASSERT_TRUE(plan.is_ok());
  EXPECT_FALSE(plan->fits());
  EXPECT_NE(plan->advice().find("smaller quantization"), std::string::npos) << plan->advice();
}

// A file that does not give its context length (the key absent; a broken one is refused when
// read) needs --max-model-len, and says so instead of planning a KV cache of no blocks.
TEST(MemoryPlan, UnknownContextLengthAsksForMaxModelLen) {
  ModelConfig mc;
  mc.arch = "llama";
  EngineConfig c;
  Status s = resolve_engine_config(mc, c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("llama.context_length"), std::string::npos) << s.message();
  EXPECT_NE(s.message().find("pass --max-model-len"), std::string::npos) << s.message();
  c.max_model_len = 100;
  ASSERT_TRUE(resolve_engine_config(mc, c).is_ok());
  EXPECT_EQ(c.max_model_len, 100);
  mc.context_length = 50;
  s = resolve_engine_config(mc, c);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.message().find("over the model's context length 50"), std::string::npos)
      << s.message();
}

}  // namespace
}  // namespace loom
