#include "engine/memory_plan.h"

#include <algorithm>
#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <nlohmann/json.hpp>
#include <sstream>

#include "backend/cpu/cpu_model.h"
#include "base/format_bytes.h"
#include "base/system_memory.h"
#include "base/thread_pool.h"
#include "engine/scheduler.h"
#include "model/mtp_config.h"
#include "spec/draft_model.h"
#include "spec/spec_config.h"
#include "tools/model_spec.h"
#include "tools/synth.h"

namespace loom {
namespace {

constexpr int32_t kCpuDefaultBatchedTokens = 2048;
// Prompt tokens per step while requests share the engine. A CPU step is compute-bound, its
// time about proportional to its tokens (~0.3 s for 256 on 2 cores with a 0.5B model): 16
// prompts of 90 tokens in one step gave every one of them a first token only after ~1.5 s.
constexpr int32_t kCpuDefaultSharedPrefillTokens = 256;
constexpr double kGiB = double(uint64_t{1} << 30);

// Binds spec (GGUF file, Hugging Face directory or synth:PRESET): configuration and weight
// views, nothing read.
Result<BoundModel> bind_model_spec(const std::string& spec) {
  std::error_code ec;
  if (spec.rfind("synth:", 0) == 0) {
    // Its layout only: planning reads shapes and types, never the weights.
    LOOM_ASSIGN_OR_RETURN(SynthOptions so, parse_synth_spec(spec));
    LOOM_ASSIGN_OR_RETURN(GgufFile file, synth_layout_gguf(so));
    return bind_gguf(std::move(file));
  }
  if (std::filesystem::is_directory(spec, ec)) return bind_hf_dir(spec);
  if (!std::filesystem::exists(spec, ec)) return not_found("model not found: " + spec);
  LOOM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(spec));
  return bind_gguf(std::move(file));
}

}  // namespace

Status resolve_engine_config(const ModelConfig& mc, EngineConfig& c) {
  if (c.block_size <= 0 || c.block_size > 1024)
    return invalid_argument("--block-size must be in [1, 1024], got " +
                            std::to_string(c.block_size));
  if (c.max_num_seqs <= 0)
    return invalid_argument("--max-num-seqs must be positive, got " +
                            std::to_string(c.max_num_seqs));
  if (c.kv_dtype != Dtype::kF32 && c.kv_dtype != Dtype::kF16 && c.kv_dtype != Dtype::kBF16)
    return invalid_argument("KV cache dtype must be f32, f16 or bf16, got " +
                            std::string(dtype_name(c.kv_dtype)));
  // A file that does not give the context length (an absent key; a broken one is refused
  // when read) runs with the length the user names.
  if (mc.context_length <= 0 && c.max_model_len <= 0)
    return invalid_argument("the model does not give its context length (GGUF key " + mc.arch +
                            ".context_length, or config.json \"max_position_embeddings\", is "
                            "missing): pass --max-model-len");
  if (c.max_model_len <= 0) c.max_model_len = mc.context_length;
  if (mc.context_length > 0 && c.max_model_len > mc.context_length)
    return invalid_argument("--max-model-len " + std::to_string(c.max_model_len) +
                            " is over the model's context length " +
                            std::to_string(mc.context_length));
  if (c.max_num_batched_tokens <= 0) c.max_num_batched_tokens = kCpuDefaultBatchedTokens;
  if (c.shared_prefill_tokens < 0) c.shared_prefill_tokens = kCpuDefaultSharedPrefillTokens;
  return Status();
}

bool draft_shares_target(const std::string& target_spec, const SpeculativeConfig& s) {
  return s.method == SpeculativeConfig::Method::kDraftModel && !s.model.empty() &&
         tools::same_model_spec(target_spec, s.model);
}

namespace {

Result<MemoryPlan> plan_memory_once(const std::string& model_name, const BoundModel& bound,
                                    EngineConfig c, uint64_t available) {
  const ModelConfig& mc = bound.config;
  LOOM_RETURN_IF_ERROR(resolve_engine_config(mc, c));
  // What the speculative method needs of the model, before anything is planned or loaded.
  if (c.speculative.method == SpeculativeConfig::Method::kMtp && mc.n_mtp_layers == 0)
    return invalid_argument("speculative method \"mtp\": the model " + model_name + " (" + mc.arch +
                            ") has no multi-token prediction (MTP / nextn) layers to propose with");
  LOOM_RETURN_IF_ERROR(spec::finalize_speculative_config(c.speculative, mc.n_mtp_layers));
  MemoryPlan p;
  p.model = model_name;
  p.arch = mc.arch;
  const Weights& w = bound.weights;
  p.weight_copies = CpuModel::weight_copy_bytes(w);
  // The embeddings stay in the mapping (rows read on lookup); a tied output matrix is copied.
  p.weights_mapped = w.token_embd.nbytes;
  p.weights_stored = w.total_bytes();  // every tensor once, the embeddings included
  p.weights_made_at_load = w.loader_made_bytes ? w.loader_made_bytes() : 0;
  LOOM_ASSIGN_OR_RETURN(p.kv, plan_kv_cache(mc, c));
  p.kv_bytes = p.kv.bytes;
  p.state_bytes = p.kv.state_bytes;
  p.kv_bytes_per_token =
      KvCache::bytes_per_block(mc, c.block_size, c.kv_dtype) / static_cast<uint64_t>(c.block_size);
  p.kv_tokens = static_cast<int64_t>(p.kv.groups[0].num_blocks) * c.block_size;
  p.kv_per_token_note = "every layer's K and V";
  if (mc.mla.kv_lora_rank > 0)
    p.kv_per_token_note = "MLA: one latent row per layer (" + std::to_string(mc.mla.kv_lora_rank) +
                          " latent + " + std::to_string(mc.mla.qk_rope_head_dim) + " rope values)";
  // A step's rows that need logits: one per running sequence, plus one per draft token, plus
  // the prompt rows of prompt-logprobs requests (the scheduler's bound for them all).
  const int64_t k = c.speculative.enabled() ? c.speculative.num_speculative_tokens : 0;
  const int64_t logits_rows = std::min<int64_t>(
      c.max_num_batched_tokens, int64_t{c.max_num_seqs} * (1 + k) + kPromptLogprobsTokensPerStep);
  const int threads = c.n_threads > 0 ? c.n_threads : ThreadPool::physical_cores();
  const uint64_t model_scratch =
      CpuModel::scratch_bytes(mc, c.max_num_batched_tokens, logits_rows, c.max_model_len, threads);
  p.scratch_bytes = model_scratch + static_cast<uint64_t>(logits_rows) * mc.n_vocab * sizeof(float);
  // A sampling draft's (or MTP module's) proposal distributions of a step: a vocabulary per
  // proposal (EngineCore's step_draft_probs_; spec/rejection.h).
  if (c.speculative.method == SpeculativeConfig::Method::kDraftModel ||
      c.speculative.method == SpeculativeConfig::Method::kMtp)
    p.scratch_bytes += static_cast<uint64_t>(std::min<int64_t>(c.max_num_batched_tokens,
                                                               int64_t{c.max_num_seqs} * k)) *
                       mc.n_vocab * sizeof(float);
  // MTP speculation: the module's K/V beside the target's (one more layer in group 0's
  // blocks), its block's kernel-ready copies (and its own LM head's), the scratch of a step
  // it runs over every row of a full target step.
  if (c.speculative.method == SpeculativeConfig::Method::kMtp && mc.n_mtp_layers > 0) {
    const ModelConfig m0 = mtp_module_config(mc, 0);
    p.kv_bytes += static_cast<uint64_t>(p.kv.groups[0].num_blocks) *
                  KvCache::bytes_per_block(m0, c.block_size, c.kv_dtype);
    Weights mw;
    mw.layers = {w.mtp[0].block};
    if (mc.mtp_own_head) mw.output = w.mtp[0].head;
    p.weight_copies += CpuModel::weight_copy_bytes(mw);
    p.scratch_bytes +=
        CpuModel::scratch_bytes(m0, c.max_num_batched_tokens, c.max_num_seqs, c.max_model_len,
                                threads) +
        static_cast<uint64_t>(c.max_num_batched_tokens) * 3 * mc.n_embd * sizeof(float) +
        static_cast<uint64_t>(c.max_num_seqs) * mc.n_vocab * sizeof(float);
  }
  // A draft model: its kernel-ready weights and embeddings (none when it is the target itself),
  // its K/V in as many blocks as the target's full-attention group, its recurrent states (a
  // slot per sequence that can run, taking back k tokens) and the scratch of its largest step
  // (a sequence's first proposal runs its whole prompt through the draft; a draft that is the
  // target grows the target's scratch to that step).
  if (c.speculative.method == SpeculativeConfig::Method::kDraftModel &&
      !c.speculative.model.empty()) {
    p.draft_model = c.speculative.model;
    p.draft_shares_weights = draft_shares_target(model_name, c.speculative);
    Result<BoundModel> draft = BoundModel{};
    if (!p.draft_shares_weights) {
      draft = bind_model_spec(c.speculative.model);
      if (!draft.is_ok())
        return Status(draft.status().code(), "draft model: " + draft.status().message());
      p.draft_bytes =
          CpuModel::weight_copy_bytes(draft->weights) + draft->weights.token_embd.nbytes;
    }
    const ModelConfig& dc = p.draft_shares_weights ? mc : draft->config;
    LOOM_RETURN_IF_ERROR(spec::check_draft_vocabulary(dc.n_vocab, mc.n_vocab));
    if (Status st = KvCache::check_state_rollback(dc, k); !st.is_ok())
      return Status(st.code(), "draft model: " + st.message());
    const int64_t rows = std::max(c.max_num_batched_tokens, c.max_model_len);
    // A shared model's scratch grows to the draft's largest step: only the growth is the draft's.
    const uint64_t draft_scratch =
        CpuModel::scratch_bytes(dc, rows, c.max_num_seqs, c.max_model_len, threads);
    p.draft_bytes +=
        static_cast<uint64_t>(p.kv.groups[0].num_blocks) *
            KvCache::bytes_per_block(dc, c.block_size, c.kv_dtype) +
        static_cast<uint64_t>(c.max_num_seqs) *
            KvCache::state_bytes_per_slot(dc, static_cast<int32_t>(k)) +
        (p.draft_shares_weights ? draft_scratch - std::min(draft_scratch, model_scratch)
                                : draft_scratch) +
        static_cast<uint64_t>(c.max_num_seqs) * dc.n_vocab * sizeof(float);
  }
  p.config = c;
  const SystemMemory machine = system_memory();  // a memory cgroup's limit where it is lower
  p.mem_total = machine.total;
  p.mem_available = machine.available;
  p.mem_limited_by = machine.limited_by;
  if (available > 0) p.mem_available = available;
  // What the loader made (already in use as this is measured) is freed as the kernel-ready
  // copies replace it, matrix by matrix (CpuModel), before the KV cache is committed: room for
  // the copies, not memory held beside them.
  if (p.mem_available > 0) p.mem_available += p.weights_made_at_load;
  return p;
}

}  // namespace

Result<MemoryPlan> plan_memory(const std::string& model_name, const BoundModel& bound,
                               EngineConfig c, uint64_t available) {
  LOOM_ASSIGN_OR_RETURN(MemoryPlan p, plan_memory_once(model_name, bound, c, available));
  // The KV cache's default size (max_num_seqs sequences, at most a quarter of RAM) gives way
  // to the weights: a 17 GB model on a 24 GB machine runs with what is left, as llama.cpp's
  // and vLLM's would, instead of asking for --kv-cache-memory. What is left is 95% of what is
  // available, less the rest (kv_room): room for what the plan does not see (the server, the
  // page cache of the embeddings read in place). A default that only fit in 100% left the
  // 30B-shaped MoE 0.6 GiB for all of that. A few rounds, as a draft model's K/V shrink with
  // the target's.
  auto roomy = [](const MemoryPlan& q) {
    return q.mem_available == 0 || static_cast<double>(q.kv_bytes) <= q.kv_room();
  };
  if (c.kv_cache_memory_gib > 0 || roomy(p)) return p;
  const double kGiB = double(1ull << 30);
  const uint64_t default_kv = p.kv_bytes;
  for (int round = 0; round < 4 && !roomy(p); ++round) {
    const uint64_t fixed = p.total() - p.kv_bytes;
    if (p.kv_room() <= 0 || p.total() == fixed) break;
    const double share = p.kv_room() / static_cast<double>(p.total() - fixed);
    c.kv_cache_memory_gib = static_cast<double>(p.kv_bytes) * std::min(share, 0.99) / kGiB;
    Result<MemoryPlan> smaller = plan_memory_once(model_name, bound, c, available);
    // No block, or not one max_model_len sequence: the first plan's advice stands.
    if (!smaller.is_ok() || smaller->kv_tokens < smaller->config.max_model_len) break;
    smaller->kv_shrunk_from = default_kv;
    p = std::move(*smaller);
  }
  return p;
}

Result<MemoryPlan> plan_memory(const std::string& spec, const EngineConfig& c) {
  LOOM_ASSIGN_OR_RETURN(const BoundModel bound, bind_model_spec(spec));
  return plan_memory(spec, bound, c);
}

double MemoryPlan::kv_room() const {
  return 0.95 * static_cast<double>(mem_available) - static_cast<double>(total() - kv_bytes);
}

std::string MemoryPlan::advice() const {
  if (fits()) return "";
  const uint64_t fixed = weight_copies + weights_mapped + state_bytes + scratch_bytes + draft_bytes;
  std::ostringstream s;
  s << "this configuration needs " << format_bytes(total()) << " but the machine has "
    << format_bytes(mem_available) << " available";
  if (fixed >= mem_available) {
    s << ": the weights and a step's scratch alone take " << format_bytes(fixed)
      << "; use a smaller quantization of the model (loom quantize --type q4_0)";
    if (config.max_num_batched_tokens > 512) s << " or a lower --max-num-batched-tokens";
    return s.str();
  }
  // What the KV cache may take, and the settings that keep it within that.
  const uint64_t kv_budget = mem_available - fixed;
  const double share = static_cast<double>(kv_budget) / static_cast<double>(kv_bytes);
  char gib[32];  // a little under the budget, rounded down to 0.01 GiB
  std::snprintf(gib, sizeof gib, "%.2f",
                std::floor(static_cast<double>(kv_budget) / kGiB * 0.95 * 100) / 100);
  s << "; the KV cache (" << format_bytes(kv_bytes) << ") may take at most "
    << format_bytes(kv_budget) << ".";
  if (config.kv_cache_memory_gib > 0) {
    s << " Set --kv-cache-memory " << gib;
  } else {
    // The default size shrinks to what is left as long as one max_model_len sequence fits
    // (plan_memory): here not even that, so the length is what to change: the longest
    // sequence the room holds (a tenth kept for the plan's rounding).
    const int64_t len =
        static_cast<int64_t>(0.9 * std::max(kv_room(), 0.0) /
                             static_cast<double>(std::max<uint64_t>(kv_bytes_per_token, 1))) /
        config.block_size * config.block_size;
    if (len >= config.block_size)
      s << " Set --max-model-len " << std::min<int64_t>(len, config.max_model_len);
    else
      s << " The weights leave no room for the KV cache: use a smaller quantization of the model";
  }
  if (config.kv_dtype == Dtype::kF32 && share >= 0.5) s << ", or use --kv-cache-dtype f16";
  return s.str();
}

std::string MemoryPlan::table() const {
  std::ostringstream s;
  auto line = [&](const char* what, uint64_t bytes, const std::string& note) {
    char buf[64];
    std::snprintf(buf, sizeof buf, "  %-26s %12s", what, format_bytes(bytes).c_str());
    s << buf << (note.empty() ? "" : "  " + note) << "\n";
  };
  s << "memory plan for " << model << " (" << arch << ")\n";
  line("weights in the file", weights_stored, "");
  line("kernel-ready weights", weight_copies, "resident copies made at load");
  line("embeddings", weights_mapped, "read from the file mapping");
  if (weights_made_at_load > 0)
    line("made at load", weights_made_at_load,
         "dequantized FP8 / derived tensors, freed as the copies replace them (available below)");
  line("KV cache per token", kv_bytes_per_token,
       std::string(dtype_name(config.kv_dtype)) + ", " + kv_per_token_note);
  line("KV cache", kv_bytes,
       std::to_string(kv_tokens) + " tokens in blocks of " + std::to_string(config.block_size) +
           " (max_num_seqs " + std::to_string(config.max_num_seqs) + ", max_model_len " +
           std::to_string(config.max_model_len) + ")");
  line("recurrent states", state_bytes, "");
  line("scratch", scratch_bytes,
       "a step of " + std::to_string(config.max_num_batched_tokens) + " tokens");
  if (!draft_model.empty())
    line("draft model", draft_bytes,
         draft_model + (draft_shares_weights ? ": the target's weights; its K/V, states, scratch"
                                             : ": weights, K/V, states, scratch"));
  line("total", total(), "");
  line("machine available", mem_available,
       "of " + format_bytes(mem_total) +
           (mem_limited_by.empty() ? "" : " (the memory cgroup's limit: " + mem_limited_by + ")"));
  s << "  fits: " << (fits() ? "yes" : "no") << "\n";
  if (!kv.warning.empty() && kv_shrunk_from == 0) s << "  note: " << kv.warning << "\n";
  if (kv_shrunk_from > 0)
    s << "  note: the KV cache's default size (" << format_bytes(kv_shrunk_from)
      << ") did not fit beside the weights with 5% of memory to spare: it takes what is left. Set "
         "--kv-cache-memory to choose.\n";
  if (!fits()) s << "  " << advice() << "\n";
  return s.str();
}

std::string MemoryPlan::to_json() const {
  nlohmann::json j = {
      {"model", model},
      {"arch", arch},
      {"weights",
       {{"stored_bytes", weights_stored},
        {"kernel_copy_bytes", weight_copies},
        {"mapped_bytes", weights_mapped},
        {"made_at_load_bytes", weights_made_at_load}}},
      {"kv_cache",
       {{"dtype", std::string(dtype_name(config.kv_dtype))},
        {"bytes_per_token", kv_bytes_per_token},
        {"per_token", kv_per_token_note},
        {"tokens", kv_tokens},
        {"block_size", config.block_size},
        {"bytes", kv_bytes}}},
      {"recurrent_state_bytes", state_bytes},
      {"scratch_bytes", scratch_bytes},
      {"draft_model",
       {{"model", draft_model},
        {"bytes", draft_bytes},
        {"shares_target_weights", draft_shares_weights}}},
      {"total_bytes", total()},
      {"config",
       {{"max_model_len", config.max_model_len},
        {"max_num_seqs", config.max_num_seqs},
        {"max_num_batched_tokens", config.max_num_batched_tokens},
        {"kv_cache_memory_gib", config.kv_cache_memory_gib}}},
      {"machine",
       {{"total_bytes", mem_total},
        {"available_bytes", mem_available},
        {"limited_by",
         mem_limited_by.empty() ? nlohmann::json() : nlohmann::json(mem_limited_by)}}},
      {"fits", fits()},
  };
  if (!fits()) j["advice"] = advice();
  if (!kv.warning.empty() && kv_shrunk_from == 0) j["note"] = kv.warning;
  if (kv_shrunk_from > 0) j["kv_default_bytes_shrunk_from"] = kv_shrunk_from;
  return j.dump(2);
}

}  // namespace loom
