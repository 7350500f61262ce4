#include "engine/kv_plan.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>

#include "base/system_memory.h"

namespace loom {
namespace {

int64_t blocks_for(int64_t tokens, int32_t block_size) {
  return (tokens + block_size - 1) / block_size;
}

// Hybrid models: a live state slot per sequence that can run, and the prefix snapshots' budget.
Status plan_state_slots(const ModelConfig& mc, const EngineConfig& c, KvPlan& plan) {
  if (KvCache::state_bytes_per_slot(mc) == 0) return Status::ok();
  // Speculative verifies take back rejected proposals: the states keep what that needs.
  const int32_t rollback = c.speculative.enabled() ? c.speculative.num_speculative_tokens : 0;
  LOOM_RETURN_IF_ERROR(KvCache::check_state_rollback(mc, rollback));
  plan.layout.state_rollback_tokens = rollback;
  plan.state_slot_bytes = KvCache::state_bytes_per_slot(mc, rollback);
  if (c.block_size % kRecurrentChunk != 0)
    return invalid_argument("--block-size " + std::to_string(c.block_size) +
                            ": a model with recurrent layers needs a multiple of " +
                            std::to_string(kRecurrentChunk) +
                            " (its state is exact at those positions only)");
  StateGroupConfig& s = plan.states;
  s.snapshot_every_blocks = c.state_snapshot_every;
  if (c.enable_prefix_caching) {
    // An explicit budget is filled; the default (1 GiB) holds at most 8 snapshots per sequence
    // that can run (a small model's states are tiny: 1 GiB of them would be thousands).
    const bool given = c.state_cache_memory_gib > 0;
    const double budget = (given ? c.state_cache_memory_gib : 1.0) * double(1ull << 30);
    const double most = given ? 16384.0 : std::min(16384.0, 8.0 * c.max_num_seqs);
    s.max_snapshots = static_cast<int32_t>(std::clamp<double>(
        std::floor(budget / static_cast<double>(plan.state_slot_bytes)), 2.0, most));
  }
  s.num_slots = c.max_num_seqs + s.max_snapshots;
  plan.layout.num_state_slots = s.num_slots;
  plan.state_bytes = plan.state_slot_bytes * static_cast<uint64_t>(s.num_slots);
  return Status::ok();
}

}  // namespace

std::vector<KvGroupConfig> kv_layer_groups(const ModelConfig& mc, int32_t max_model_len,
                                           std::vector<int32_t>* layer_group) {
  // A group per (window, latent): full attention first, MLA latent layers beside it.
  std::map<std::pair<int32_t, bool>, int32_t> layers_per_kind;
  auto kind_of = [&](int l) {
    const bool known = l < static_cast<int>(mc.layers.size());
    const int32_t w = known ? mc.layers[l].window : 0;
    return std::pair(w >= max_model_len ? 0 : w, known && mc.layers[l].mla);
  };
  auto recurrent = [&](int l) {
    return l < static_cast<int>(mc.layers.size()) && mc.layers[l].deltanet;
  };
  for (int l = 0; l < mc.n_layer; ++l)
    if (!recurrent(l)) ++layers_per_kind[kind_of(l)];
  std::vector<KvGroupConfig> groups;
  std::map<std::pair<int32_t, bool>, int32_t> group_of_kind;
  for (const auto& [kind, n] : layers_per_kind) {
    group_of_kind[kind] = static_cast<int32_t>(groups.size());
    groups.push_back({kind.first, 0, n, kind.second});
  }
  layer_group->assign(mc.n_layer, 0);
  for (int l = 0; l < mc.n_layer; ++l)
    if (!recurrent(l)) (*layer_group)[l] = group_of_kind[kind_of(l)];
  return groups;
}

Result<KvPlan> plan_kv_cache(const ModelConfig& mc, const EngineConfig& c) {
  KvPlan plan;
  plan.groups = kv_layer_groups(mc, c.max_model_len, &plan.layout.layer_group);
  if (plan.groups.empty())
    return unsupported(
        "a model whose every layer is recurrent (no attention layer) is not supported");
  if (plan.groups.size() > static_cast<size_t>(kMaxKvGroups))
    return invalid_argument("the model has " + std::to_string(plan.groups.size()) +
                            " different attention windows; loom handles at most " +
                            std::to_string(kMaxKvGroups - 1));
  // Bytes of one block of each group, all of its layers (an MLA layer's latent rows are
  // smaller than another's K and V).
  std::vector<uint64_t> group_block_bytes(plan.groups.size(), 0);
  const uint64_t elem = dtype_info(c.kv_dtype).block_bytes;
  for (int l = 0; l < mc.n_layer; ++l)
    group_block_bytes[plan.layout.layer_group[l]] +=
        KvCache::layer_elems_per_token(mc, l) * c.block_size * elem;
  const uint64_t block_bytes = KvCache::bytes_per_block(mc, c.block_size, c.kv_dtype);
  const int64_t per_seq = blocks_for(c.max_model_len, c.block_size);
  // A sliding-window group's blocks when the full-attention group has n: as many sequences'
  // windows as n blocks hold full-length sequences (each window: the 7 tokens before a query
  // plus 2 blocks), and one step's prompt chunk on top; never fewer than one sequence's peak,
  // never more than max_num_seqs windows, nor more than n.
  const int64_t chunk = blocks_for(c.max_num_batched_tokens, c.block_size);
  auto window_blocks = [&](size_t g, int64_t n) {
    const int32_t w = plan.groups[g].window;
    if (w == 0) return n;
    const int64_t per_window = std::min(per_seq, blocks_for(w - 1, c.block_size) + 2);
    const int64_t one_seq =
        std::min(per_seq, blocks_for(c.max_num_batched_tokens + w - 1, c.block_size) + 1);
    const int64_t seqs = std::min<int64_t>(c.max_num_seqs, (n + per_seq - 1) / per_seq);
    return std::min(n, std::max(one_seq, seqs * per_window + chunk));
  };
  // Bytes when the full-attention group has n blocks (null blocks aside: one per sliding group).
  auto bytes_for = [&](int64_t n) {
    uint64_t b = 0;
    for (size_t g = 0; g < plan.groups.size(); ++g)
      b += static_cast<uint64_t>(window_blocks(g, n)) * group_block_bytes[g];
    return b;
  };
  // The most blocks a budget pays for (bytes_for grows with n).
  auto blocks_within = [&](double budget) {
    int64_t lo = 0, hi = int64_t{1} << 30;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo + 1) / 2;
      if (static_cast<double>(bytes_for(mid)) <= budget)
        lo = mid;
      else
        hi = mid - 1;
    }
    return lo;
  };

  int64_t n;
  if (c.kv_cache_memory_gib > 0) {
    n = blocks_within(c.kv_cache_memory_gib * double(1ull << 30));
  } else {
    n = per_seq * c.max_num_seqs;
    // Blocks are taken as sequences grow, so a pool smaller than max_num_seqs full-length
    // sequences still serves them (preempting when it runs out). Without an explicit budget,
    // never take more than a quarter of memory (a memory cgroup's limit where it is lower than
    // the machine's: a container's): 256 sequences of a long context would otherwise ask for
    // more memory than the machine has.
    const double ram = static_cast<double>(system_memory().total);
    const int64_t capped = blocks_within(ram * 0.25);
    if (ram > 0 && n > capped && capped >= per_seq) {
      char gib[32];
      std::snprintf(gib, sizeof gib, "%.1f",
                    static_cast<double>(bytes_for(n)) / double(1ull << 30));
      plan.warning = "KV cache for " + std::to_string(c.max_num_seqs) + " sequences of " +
                     std::to_string(c.max_model_len) + " tokens would need " + gib +
                     " GiB; using a quarter of RAM. Set --kv-cache-memory to choose.";
      n = capped;
    }
  }
  if (n < 1)
    return invalid_argument("KV cache budget holds no block of " + std::to_string(block_bytes) +
                            " bytes; raise --kv-cache-memory");
  if (n >= (int64_t{1} << 30))
    return invalid_argument("KV cache of " + std::to_string(n) + " blocks is too large");
  for (size_t g = 0; g < plan.groups.size(); ++g) {
    KvGroupConfig& gc = plan.groups[g];
    gc.num_blocks = static_cast<int32_t>(window_blocks(g, n));
    plan.layout.num_blocks.push_back(gc.num_blocks + (gc.window > 0 ? 1 : 0));
    plan.bytes += static_cast<uint64_t>(plan.layout.num_blocks.back()) * group_block_bytes[g];
  }
  LOOM_RETURN_IF_ERROR(plan_state_slots(mc, c, plan));
  return plan;
}

}  // namespace loom
