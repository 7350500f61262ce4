// The KV cache's memory plan: which layers form which group (full attention; one group per
// sliding window; Multi-head Latent Attention layers, whose blocks hold latent rows) and how many
// blocks each group gets from the budget (--kv-cache-memory, or max_num_seqs sequences of
// max_model_len tokens, at most a quarter of RAM).
//
// A sliding-window group never needs more than its windows: each running sequence holds at
// most the window's blocks plus one being filled, and a step's prompt chunk a few more. Its
// pool is sized to as many windows as the full-attention group holds full-length sequences
// (at most max_num_seqs) plus one chunk, and what that saves goes to the full-attention group:
// with Gemma 3's five local layers to one global and long contexts, the same memory holds
// several times the tokens of a cache that keeps every layer's whole sequence.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "base/status.h"
#include "kv/kv_coordinator.h"
#include "loom/engine.h"
#include "model/config.h"
#include "model/model.h"

namespace loom {

struct KvPlan {
  std::vector<KvGroupConfig> groups;  // for the KvCoordinator
  KvLayout layout;                    // for the KvCache (a sliding group's null block included)
  uint64_t bytes = 0;                 // K and V memory of every group
  // Hybrid models: the recurrent state slots (live ones for max_num_seqs sequences, then the
  // prefix snapshots) and their memory.
  StateGroupConfig states;
  uint64_t state_slot_bytes = 0;
  uint64_t state_bytes = 0;
  std::string warning;  // set when the default size was capped to a quarter of RAM
};

// The layer groups of `mc` (window 0 first when some layer attends over everything; a window
// as long as max_model_len is full attention) with their layers, before sizing. Recurrent
// layers (Gated DeltaNet) keep no K/V and belong to no group (their layer_group entry is 0,
// never read).
std::vector<KvGroupConfig> kv_layer_groups(const ModelConfig& mc, int32_t max_model_len,
                                           std::vector<int32_t>* layer_group);

// `c` has its defaults filled in (max_model_len, max_num_batched_tokens).
Result<KvPlan> plan_kv_cache(const ModelConfig& mc, const EngineConfig& c);

}  // namespace loom
