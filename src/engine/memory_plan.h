// The memory plan: what a model and an engine configuration will take, computed before
// anything large is allocated (weights are bound to the mapped file, not read), so that a
// configuration that cannot fit is refused with the option to change, and `loom plan`,
// `loom serve --dry-run` and the top of `loom serve`'s log can show it.
//
// Lines: weights as stored in the file and the backend's kernel-ready copies of them; the KV
// cache per token and in total; recurrent states (none for attention-only models); scratch
// (a full step's activations and logits); a draft model's share; and the machine's memory.
#pragma once

#include <cstdint>
#include <memory>
#include <string>

#include "base/log.h"
#include "base/status.h"
#include "engine/kv_plan.h"
#include "loom/engine.h"
#include "model/bind.h"

namespace loom {

// Fills `c`'s defaults from the model (max_model_len, max_num_batched_tokens) and checks its
// ranges; what EngineCore::create and the plan both start from.
Status resolve_engine_config(const ModelConfig& mc, EngineConfig& c);

// Whether a draft model runs on the target's loaded weights instead of a copy of its own: its
// spec names the target's (tools::same_model_spec). A draft computes what its checkpoint does,
// sliding windows included (its K/V follow the target's full-attention tables, which hold
// every position a window reads), so the target's loaded model is that draft.
bool draft_shares_target(const std::string& target_spec, const SpeculativeConfig& s);

struct MemoryPlan {
  std::string model;
  std::string arch;
  EngineConfig config;  // resolved
  // Weights.
  uint64_t weights_stored = 0;  // matrices and embeddings as the file stores them
  uint64_t weight_copies = 0;   // the kernel-ready copies loading makes (resident)
  uint64_t weights_mapped = 0;  // read from the file mapping (embeddings): page cache
  // What loading a Hugging Face checkpoint makes in memory besides (dequantized FP8, derived
  // tensors), freed as the copies replace it: counted in mem_available, which it will be.
  uint64_t weights_made_at_load = 0;
  // KV cache.
  uint64_t kv_bytes_per_token = 0;  // every layer's K and V (or MLA latent row) for one token
  std::string kv_per_token_note;    // what a token's bytes are, for the table
  int64_t kv_tokens = 0;            // tokens the full-attention pool holds
  uint64_t kv_bytes = 0;            // every group's blocks
  // Without --kv-cache-memory, when the default KV size did not fit beside the weights: that
  // size (the plan then gives the KV cache what is left: config.kv_cache_memory_gib); else 0.
  uint64_t kv_shrunk_from = 0;
  KvPlan kv;
  uint64_t state_bytes = 0;  // recurrent states (per sequence x max_num_seqs)
  uint64_t scratch_bytes = 0;
  // A draft model's weights, K/V, states and scratch (speculative "model"; else 0 and "").
  // The target as its own draft runs on the target's weights: its K/V, states and scratch.
  std::string draft_model;
  uint64_t draft_bytes = 0;
  bool draft_shares_weights = false;
  // The machine, or the memory cgroup whose lower limit applies (base/system_memory.h).
  uint64_t mem_total = 0;
  uint64_t mem_available = 0;
  std::string mem_limited_by;  // empty: the machine's memory; else the cgroup's limit file

  // What the process will hold: copies, KV, states, scratch, the mapped embeddings, a draft.
  uint64_t total() const {
    return weight_copies + weights_mapped + kv_bytes + state_bytes + scratch_bytes + draft_bytes;
  }
  bool fits() const { return mem_available == 0 || total() <= mem_available; }
  // What the KV cache may take: 95% of what is available (room for what the plan does not
  // see), less everything else; may be negative.
  double kv_room() const;
  // Why it does not fit and which option, set to which value, would make it fit.
  std::string advice() const;

  std::string table() const;    // human-readable, one line per figure
  std::string to_json() const;  // the same figures, for --json
};

// `available`: bytes the plan may take (0: read MemAvailable from /proc/meminfo). Without an
// explicit kv_cache_memory_gib, a default KV size that does not fit beside the weights is
// shrunk to what is left (MemoryPlan::kv_shrunk_from; the engine must then use the plan's
// config.kv_cache_memory_gib).
Result<MemoryPlan> plan_memory(const std::string& model_name, const BoundModel& bound,
                               EngineConfig c, uint64_t available = 0);

// Binds spec (GGUF file, Hugging Face directory or synth:PRESET) and plans it.
Result<MemoryPlan> plan_memory(const std::string& spec, const EngineConfig& c);

// Engine::load, logging the memory plan at `plan_log_level` (serve shows it at info, other
// commands at debug) and refusing a plan that does not fit before loading the weights.
Result<std::unique_ptr<Engine>> load_engine(const std::string& spec, const EngineConfig& config,
                                            LogLevel plan_log_level);

}  // namespace loom
