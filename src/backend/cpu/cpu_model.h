// The CPU transformer: one Model::forward over a flat Batch with a paged KV cache.
// Decoder-only: per layer, attention (GQA, optional qkv bias / qk norm, RoPE per the layer's
// spec, sliding window, soft-capping) and a gated FFN (SiLU or GELU-tanh), each with RMSNorms
// where ModelConfig::norm_placement puts them and a (scaled) residual add; final RMSNorm;
// logits for the wanted rows (scaled, soft-capped where the architecture says).
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <span>
#include <thread>
#include <vector>

#include "backend/cpu/deltanet_layer.h"
#include "backend/cpu/mla_attention.h"
#include "backend/cpu/moe_ffn.h"
#include "kernels/attention.h"
#include "kernels/packed.h"
#include "model/model.h"
#include "model/weights.h"

namespace loom {

class CpuModel final : public Model {
 public:
  // parent: the model whose multi-token prediction module this is (Model::mtp_module): it runs
  // on the parent's thread pool and uses the parent's copy of a shared LM head.
  CpuModel(ModelConfig config, Weights weights, const ModelLoadOptions& options,
           CpuModel* parent = nullptr);
  ~CpuModel() override;

  const ModelConfig& config() const override { return config_; }
  using Model::forward;
  Status forward(const Batch& batch, KvCache& kv, float* logits, float* hidden,
                 float* residual) override;
  Result<std::unique_ptr<Model>> mtp_module(int index) override;
  Status classify(const float* hidden, float* out) const override;
  ThreadPool& thread_pool() override { return pool_; }
  uint64_t weight_bytes() const override { return weight_bytes_; }
  // As loaded (the file's sizes), taken before the copies: server threads ask for it while the
  // repacker may be switching views.
  WeightStats weight_stats() const override { return weight_stats_; }
  WeightReads weight_reads() const override;
  const Weights& weights() const { return weights_; }
  MemoryUse memory_use() const override;
  std::function<bool()> weight_copies_made() const override {
    return [made = copies_made_] { return made->load(std::memory_order_acquire); };
  }

  // What loading `weights` will allocate for kernel-ready copies, and the scratch of a step of
  // `rows` tokens of which `logits_rows` need logits, attending over at most max_kv positions.
  static uint64_t weight_copy_bytes(const Weights& weights);
  // A matrix's place in the copies' arena: its kernel-ready bytes, rounded up to 64 KiB.
  static uint64_t arena_slot_bytes(const TensorView& w);
  static uint64_t scratch_bytes(const ModelConfig& config, int64_t rows, int64_t logits_rows,
                                int32_t max_kv, int n_threads);

 private:
  Status validate(const Batch& batch, const KvCache& kv) const;
  void reserve(int64_t n_rows, int64_t n_logits, int32_t max_kv);

  ModelConfig config_;
  Weights weights_;
  // Null for an MTP module (it runs on its parent's) and where options.thread_pool was given.
  std::unique_ptr<ThreadPool> own_pool_;
  ThreadPool& pool_;
  bool repack_output_ = true;  // false: output is the parent's copy (an MTP module's head)
  uint64_t weight_bytes_ = 0;
  // weight_bytes_ as a call reads it (Model::weight_reads): bytes_per_call_ once, one
  // embedding row of bytes_per_row_ a token, and the routed experts (moe_ counts those).
  uint64_t bytes_per_call_ = 0, bytes_per_row_ = 0;
  void count_weight_bytes();  // the three from the weights' footprint as they are now
  WeightReads weight_reads_;  // bytes and calls outside the routed experts
  WeightStats weight_stats_;
  // RoPE: the distinct frequency tables (n_rot/2 pairs each, scaling folded in) and each
  // layer's (-1: no RoPE in that layer).
  std::vector<std::vector<float>> rope_tables_;
  std::vector<int> layer_rope_;
  int64_t n_rot_ = 0;        // dimensions rotated per head
  float rope_scale_ = 1.0f;  // cos and sin multiplied by it (LongRoPE's attention factor)

  // Scratch, grown on demand and reused (no allocation per step in steady state).
  int64_t cap_rows_ = 0, cap_logits_ = 0, cap_kv_ = 0;
  std::vector<float> x_;     // (rows, E) residual stream
  std::vector<float> xn_;    // (rows, E) normed input of the current sub-block
  std::vector<float> q_;     // (rows, n_head * D)
  std::vector<float> k_;     // (rows, n_head_kv * D)
  std::vector<float> v_;     // (rows, n_head_kv * D)
  std::vector<float> attn_;  // (rows, n_head * D) attention output before wo
  // With an output gate (ModelConfig::attn_output_gate): attn_q's output (rows, 2 n_head D),
  // each head's query then its gate, and the gates (rows, n_head * D). Empty without.
  std::vector<float> qg_, attn_gate_;
  std::vector<float> proj_;    // (rows, E) output of wo / w_down
  std::vector<float> gate_;    // (rows, F)
  std::vector<float> up_;      // (rows, F)
  std::vector<float> final_;   // (logits rows, E)
  std::vector<float> mtp_in_;  // (rows, 2E) an MTP module's eh_proj input; empty otherwise
  // Per row of the step: its last residual add was done by the hidden-state pass (so the
  // logits pass must not add it again). Empty in steps without hidden rows.
  std::vector<uint8_t> residual_done_;
  std::vector<float>
      rope_cs_;  // (rows, tables, n_rot) cos then sin of each RoPE pair at the row's position
  std::vector<float> attn_scratch_;  // per thread: kernels::attention_scratch_floats
  size_t attn_scratch_per_thread_ = 0;
  // Attention work of one step: rows grouped by sequence, then (sequence, KV heads, row chunk)
  // tasks, each one kernels::attention_multi_heads call. Prefill tasks take one KV head; a
  // decode step's take several (all of a sequence's when there are enough sequences).
  struct AttentionTask {
    int32_t seq, kv_head_begin, kv_head_end;  // KV heads [begin, end)
    int32_t row_begin, row_end;               // [row_begin, row_end) index rows_by_seq_
  };
  // Repacked copies of the Q8_0/Q4_0 matrices (kernels/packed.h); weights_ views point here.
  HugeBuffer weight_arena_;  // every kernel-ready copy (packed_ are views into it)
  uint64_t weight_arena_bytes_ = 0;
  std::vector<kernels::PackedMatrix> packed_;
  // ModelLoadOptions::repack_in_background: the copies are made by repacker_, in
  // repack_todo_'s order, while the model already runs on the file's layout; forward calls
  // point the views at the copies made so far (on the engine's thread, between steps, so no
  // step sees a view change).
  std::vector<TensorView*> repack_todo_;
  std::vector<const void*> copied_from_;  // [i]: what repack_todo_[i] pointed at in the file
  std::thread repacker_;
  std::atomic<size_t> repack_made_{0};  // copies made (the repacker's count)
  // All made (weight_copies_made): shared, so that it outlives the model.
  std::shared_ptr<std::atomic<bool>> copies_made_ = std::make_shared<std::atomic<bool>>(false);
  size_t repack_switched_ = 0;  // views pointing at their copies
  std::atomic<bool> repack_stop_{false};
  bool repack_pending_ = false;  // some views not yet switched
  void start_repacking(bool background);
  // Held by a forward call (and mtp_module, memory_use) while copies are pending: the repacker
  // switches views and releases the loader's memory only between steps.
  mutable std::mutex views_mutex_;
  // The repacker switches views and the loader's memory is released each time this many bytes
  // of copies are made (not per matrix: a MoE model has tens of thousands).
  static constexpr uint64_t kSwitchEvery = 64ull << 20;
  uint64_t switched_unreleased_ = 0;  // bytes of copies switched since the last release
  bool try_switch_between_steps();
  void switch_to_copies();
  void switch_made_copies();
  void release_switched_loader_memory();
  void finish_repacking();
  // The loader's hook that frees what it made in memory (Weights::release_copied), kept past
  // this model's own copies for the MTP modules' weights, which only their modules copy; and
  // which modules were made (their loader-made weights are gone from here then).
  std::function<void(std::span<const void* const>, std::span<const void* const>)>
      release_loader_made_;
  std::vector<bool> mtp_module_made_;
  std::vector<const void*> loader_views_in_use();
  CpuMoeFfn moe_;              // the Mixture-of-Experts FFN's routing and scratch
  CpuMlaAttention mla_;        // Multi-head Latent Attention's projections and scratch
  CpuDeltaNetLayer deltanet_;  // the Gated DeltaNet layers' projections, step and scratch
  // Decode steps: task ranges [attn_parts_[p], attn_parts_[p + 1]) per thread (empty: claim
  // tasks dynamically).
  std::vector<int64_t> attn_parts_;
  // Decode step with one task per sequence: each task first prepares its row (RoPE, K/V store).
  bool attn_prepares_rows_ = false;
  std::vector<int64_t> attn_cost_;     // scratch for the split
  int32_t attn_rows_per_task_ = 1;     // rows per prefill task: ~32 query heads per call
  int32_t attn_queries_per_task_ = 1;  // most queries in one task (prefill or decode)
  std::vector<kernels::AttentionQuery> attn_queries_;  // per thread: attn_queries_per_task_
  std::vector<kernels::PagedHead> attn_heads_;  // per thread: n_head_kv K heads, then V heads
  std::vector<int32_t> rows_by_seq_;
  std::vector<int32_t> seq_start_, seq_fill_;  // plan_attention's counting sort (reused: a
                                               // warm step allocates nothing)
  std::vector<AttentionTask> attn_tasks_;
  void plan_attention(const Batch& b);
  template <class F>
  void for_rows(int64_t n, int64_t row_floats, F&& fn);
};

}  // namespace loom
