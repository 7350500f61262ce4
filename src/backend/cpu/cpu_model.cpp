// CPU forward pass. All weight products go through kernels::matmul; the element-wise and
// attention work is spread over the model's pool by row (and by (row, head) for attention).
//
// Batch invariance: every row's computation depends only on its own activations and on the
// K/V of its own sequence. Each layer first writes the K/V of all rows of the step into the
// cache, then every row attends over positions [0, pos] read back from the cache in order,
// so a position's contribution is summed identically whether it was computed in this step or
// an earlier one, and whatever else shares the batch.
#include "backend/cpu/cpu_model.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "backend/cpu/kv_storage.h"
#include "backend/cpu/weight_matrices.h"
#include "base/resize_exact.h"
#include "kernels/attention.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/config_reader.h"
#include "model/layers/deltanet_order.h"
#include "model/layers/steps.h"
#include "model/mtp_config.h"

namespace loom {

CpuModel::CpuModel(ModelConfig config, Weights weights, const ModelLoadOptions& options,
                   CpuModel* parent)
    : config_(std::move(config)),
      weights_(std::move(weights)),
      own_pool_(parent || options.thread_pool ? nullptr
                                              : std::make_unique<ThreadPool>(options.n_threads)),
      pool_(parent                ? parent->pool_
            : options.thread_pool ? *options.thread_pool
                                  : *own_pool_),
      repack_output_(!parent || config_.mtp_own_head) {
  if (options.disable_sliding_window)
    for (LayerSpec& s : config_.layers) s.window = 0;
  if (config_.mla.kv_lora_rank > 0)  // from the weights as loaded, so before their repacking
    mla_.enable_decompress(options.mla_decompress_rows, config_, weights_);
  // The Gated DeltaNet step takes value heads grouped by key head (layers/deltanet_order.h).
  for (int l = 0; l < config_.n_layer; ++l)
    if (l < static_cast<int>(config_.layers.size()) && config_.layers[l].deltanet)
      layers::deltanet_regroup_weights(config_.deltanet, weights_.layers[l]);
  // weight_bytes_: as the file has them until the copies are made (finish_repacking: Q4_K and
  // Q5_K grow a little, kernels/packed.h); a MoE layer reads its chosen experts only.
  count_weight_bytes();
  weight_stats_ = {weights_.total_bytes(), weights_.total_params(),
                   weights_.active_params(config_.moe.n_expert_used)};
  start_repacking(options.repack_in_background);
  // One table of RoPE frequencies per distinct layer variant (Gemma 3's local layers have
  // their own base); layers without RoPE get none.
  std::span<const float> factors = weights_.rope_freqs;
  const RopeScaling& rs = config_.rope_scaling;
  if (rs.type == RopeScalingType::kLongRope) {
    const int32_t ctx = options.max_context > 0 ? options.max_context : config_.context_length;
    factors = ctx > rs.original_context ? rs.long_factor : rs.short_factor;
    rope_scale_ = rs.attn_factor;
  }
  if (rs.type == RopeScalingType::kYarn) rope_scale_ = rs.attn_factor;
  layer_rope_.assign(config_.n_layer, -1);
  for (int l = 0; l < config_.n_layer; ++l) {
    const LayerSpec spec =
        l < static_cast<int>(config_.layers.size()) ? config_.layers[l] : LayerSpec{};
    if (!spec.rope) continue;
    std::vector<float> f = rope_inv_freq(config_, factors, spec);
    auto it = std::find(rope_tables_.begin(), rope_tables_.end(), f);
    layer_rope_[l] = static_cast<int>(it - rope_tables_.begin());
    if (it == rope_tables_.end()) rope_tables_.push_back(std::move(f));
  }
  n_rot_ = config_.n_rot > 0 ? config_.n_rot : config_.head_dim;
  const int32_t group = config_.n_head / config_.n_head_kv;
  attn_rows_per_task_ = std::max(1, 32 / group);
  attn_queries_per_task_ = std::max(attn_rows_per_task_ * group, config_.n_head);
  attn_queries_.resize(static_cast<size_t>(pool_.size()) * attn_queries_per_task_);
  attn_heads_.resize(static_cast<size_t>(pool_.size()) * 2 * config_.n_head_kv);
}

namespace {
// The dense FFN's width where some layer has one. In a model whose every FFN is experts,
// feed_forward_length sizes no tensor (so nothing checked it against the file), and it must
// size no buffer either.
int64_t dense_ff(const ModelConfig& c) {
  if (static_cast<int32_t>(c.layers.size()) < c.n_layer) return c.n_ff;  // unlisted: dense
  for (const LayerSpec& l : c.layers)
    if (!l.moe) return c.n_ff;
  return 0;
}
}  // namespace

void CpuModel::count_weight_bytes() {
  const WeightFootprint f = weights_.footprint(config_.moe.n_expert_used);
  weight_bytes_ = f.active_bytes;
  bytes_per_row_ = f.active_row_bytes;
  bytes_per_call_ = f.active_bytes - f.active_row_bytes - f.active_expert_bytes;
}

Model::WeightReads CpuModel::weight_reads() const {
  WeightReads r = weight_reads_;
  r.bytes += moe_.expert_bytes_read();
  r.moe_layer_runs = moe_.runs();
  r.experts_read = moe_.experts_read();
  return r;
}

// Keep in step with reserve() and CpuMoeFfn (MemoryPlan tests compare this with what a full
// step allocates).
uint64_t CpuModel::scratch_bytes(const ModelConfig& c, int64_t rows, int64_t logits_rows,
                                 int32_t max_kv, int n_threads) {
  const int64_t E = c.n_embd, D = c.head_dim;
  // One RoPE table per distinct (base, scaled) pair of the layers that rotate.
  std::vector<std::pair<float, bool>> variants;
  for (const LayerSpec& l : c.layers)
    if (l.rope && std::find(variants.begin(), variants.end(),
                            std::pair(l.rope_theta, l.rope_scaled)) == variants.end())
      variants.emplace_back(l.rope_theta, l.rope_scaled);
  const int64_t rope_tables = std::max<int64_t>(1, static_cast<int64_t>(variants.size()));
  const int64_t n_rot = c.n_rot > 0 ? c.n_rot : D;
  uint64_t floats = rows * (3 * E + 2 * c.n_head * D + 2 * c.n_head_kv * D + 2 * dense_ff(c) +
                            n_rot * rope_tables) +
                    logits_rows * E;
  if (c.attn_output_gate) floats += rows * 3 * c.n_head * D;  // qg_ and attn_gate_
  const int32_t group = c.n_head / c.n_head_kv;
  const int queries_per_task = std::max(std::max(1, 32 / group) * group, c.n_head);
  floats += static_cast<uint64_t>(n_threads) *
            kernels::attention_scratch_floats(queries_per_task, max_kv, D);
  if (c.moe.n_expert > 0) {
    const int64_t X = c.moe.n_expert, K = c.moe.n_expert_used, F = c.moe.n_ff_exp;
    const int64_t task_rows = std::min<int64_t>(rows * K, CpuMoeFfn::kRowsPerTask);
    // Router logits; per (row, slot) its expert id, weight and place in the expert-sorted
    // order (rows_of_expert: int32, the size of a float); each expert's first and next place in
    // that order (int32); the slots' outputs; shared experts.
    floats += rows * X + 3 * rows * K + (2 * X + 1) + rows * K * E + 2 * rows * c.moe.n_ff_shexp +
              static_cast<uint64_t>(n_threads) * task_rows * (2 * E + 2 * F);
  }
  return floats * sizeof(float) + CpuMlaAttention::scratch_bytes_for(c, rows, max_kv, n_threads) +
         CpuDeltaNetLayer::scratch_bytes_for(c, rows, n_threads);
}

Model::MemoryUse CpuModel::memory_use() const {
  MemoryUse m;
  if (weights_.loader_made_bytes) {
    std::lock_guard<std::mutex> no_release(views_mutex_);  // the repacker may be releasing
    m.loader_made = weights_.loader_made_bytes();
  }
  m.weight_copies = weight_arena_bytes_;  // allocated at once, made (committed) as packed
  uint64_t floats = 0;
  for (const std::vector<float>* v : {&x_, &xn_, &q_, &k_, &v_, &attn_, &qg_, &attn_gate_, &proj_,
                                      &gate_, &up_, &final_, &mtp_in_, &rope_cs_, &attn_scratch_})
    floats += v->capacity();
  m.scratch = floats * sizeof(float) + moe_.scratch_bytes() + mla_.scratch_bytes() +
              deltanet_.scratch_bytes();
  return m;
}

Status CpuModel::validate(const Batch& b, const KvCache& kv) const {
  const int32_t n = b.n_rows();
  if (b.pos.size() != static_cast<size_t>(n) || b.seq.size() != static_cast<size_t>(n))
    return invalid_argument("batch: tokens, pos and seq must have the same length");
  const int32_t n_seq = static_cast<int32_t>(b.sequences.size());
  for (const auto& s : b.sequences) {
    if (s.n_blocks < 0) return invalid_argument("batch: negative block count");
    for (int g = 0; g < kv.num_groups(); ++g) {
      const int32_t* table = s.table(g);
      if (s.n_blocks > 0 && !table)
        return invalid_argument("batch: sequence without a block table for KV group " +
                                std::to_string(g));
      for (int32_t i = 0; i < s.n_blocks; ++i)
        if (table[i] < 0 || table[i] >= kv.num_blocks(g))
          return invalid_argument("batch: block id " + std::to_string(table[i]) +
                                  " outside the KV cache (" + std::to_string(kv.num_blocks(g)) +
                                  " blocks)");
    }
  }
  for (int32_t i = 0; i < n; ++i) {
    if (b.tokens[i] < 0 || b.tokens[i] >= config_.n_vocab)
      return invalid_argument("batch: token id " + std::to_string(b.tokens[i]) +
                              " outside the vocabulary (" + std::to_string(config_.n_vocab) + ")");
    if (b.seq[i] < 0 || b.seq[i] >= n_seq)
      return invalid_argument("batch: row with a bad sequence index");
    const auto& s = b.sequences[b.seq[i]];
    if (b.pos[i] < 0 ||
        static_cast<int64_t>(b.pos[i]) >= static_cast<int64_t>(s.n_blocks) * kv.block_size())
      return invalid_argument("batch: position " + std::to_string(b.pos[i]) +
                              " not covered by the sequence's block table");
  }
  // Recurrent layers: every sequence reads and writes its state slot; the step's restores and
  // snapshots name slots and sequences that exist.
  bool recurrent = false;
  for (const LayerSpec& s : config_.layers) recurrent |= s.deltanet;
  if (recurrent) {
    const int32_t slots = kv.num_state_slots();
    auto bad_slot = [&](int32_t s) { return s < 0 || s >= slots; };
    for (const auto& s : b.sequences)
      if (bad_slot(s.state_slot))
        return invalid_argument("batch: state slot " + std::to_string(s.state_slot) +
                                " outside the cache's " + std::to_string(slots) +
                                " (a model with recurrent layers needs one per sequence)");
    for (const auto& r : b.state_restores)
      if (bad_slot(r.src) || bad_slot(r.dst))
        return invalid_argument("batch: state restore between slots outside the cache");
    for (const auto& s : b.state_snapshots)
      if (s.seq < 0 || s.seq >= n_seq || bad_slot(s.slot))
        return invalid_argument("batch: state snapshot of a bad sequence or into a bad slot");
  }
  for (int32_t r : b.logits_rows)
    if (r < 0 || r >= n) return invalid_argument("batch: logits row out of range");
  for (int32_t r : b.hidden_rows)
    if (r < 0 || r >= n) return invalid_argument("batch: hidden-state row out of range");
  return Status::ok();
}

void CpuModel::reserve(int64_t n_rows, int64_t n_logits, int32_t max_kv) {
  const auto& c = config_;
  const int64_t D = c.head_dim;
  if (n_rows > cap_rows_) {
    cap_rows_ = n_rows;
    resize_exact(x_, n_rows * c.n_embd);
    resize_exact(xn_, n_rows * c.n_embd);
    resize_exact(q_, n_rows * c.n_head * D);
    resize_exact(k_, n_rows * c.n_head_kv * D);
    resize_exact(v_, n_rows * c.n_head_kv * D);
    resize_exact(attn_, n_rows * c.n_head * D);
    if (c.attn_output_gate) {
      resize_exact(qg_, n_rows * 2 * c.n_head * D);
      resize_exact(attn_gate_, n_rows * c.n_head * D);
    }
    resize_exact(proj_, n_rows * c.n_embd);
    resize_exact(gate_, n_rows * dense_ff(c));
    resize_exact(up_, n_rows * dense_ff(c));
    resize_exact(rope_cs_, n_rows * n_rot_ * std::max<size_t>(1, rope_tables_.size()));
    if (c.mtp_module) resize_exact(mtp_in_, n_rows * 2 * c.n_embd);
  }
  if (n_logits > cap_logits_) {
    cap_logits_ = n_logits;
    resize_exact(final_, n_logits * c.n_embd);
  }
  if (max_kv > cap_kv_) {
    cap_kv_ = max_kv;
    attn_scratch_per_thread_ = kernels::attention_scratch_floats(attn_queries_per_task_, max_kv, D);
    resize_exact(attn_scratch_, static_cast<size_t>(pool_.size()) * attn_scratch_per_thread_);
  }
}

void CpuModel::plan_attention(const Batch& b) {
  const int32_t n_seq = static_cast<int32_t>(b.sequences.size());
  // Counting sort of the rows by sequence, keeping their order within a sequence.
  std::vector<int32_t>& start = seq_start_;
  start.assign(n_seq + 1, 0);
  for (int32_t s : b.seq) ++start[s + 1];
  for (int32_t s = 0; s < n_seq; ++s) start[s + 1] += start[s];
  rows_by_seq_.resize(b.seq.size());
  std::vector<int32_t>& fill = seq_fill_;
  fill.assign(start.begin(), start.end() - 1);
  for (int32_t i = 0; i < static_cast<int32_t>(b.seq.size()); ++i)
    rows_by_seq_[fill[b.seq[i]]++] = i;
  attn_tasks_.clear();
  bool one_row_each = true;
  for (int32_t s = 0; s < n_seq; ++s) one_row_each = one_row_each && start[s + 1] - start[s] == 1;
  // A decode step's tasks take several KV heads of a sequence, read tile by tile across them
  // (kernels::attention_multi_heads), as many as still leave ~4 tasks per thread.
  const int n_threads = pool_.size();
  const int32_t H = config_.n_head_kv;
  const int32_t heads_per_task =
      one_row_each ? std::clamp<int32_t>(H * n_seq / (4 * n_threads), 1, H) : 1;
  if (one_row_each) {
    for (int32_t s = 0; s < n_seq; ++s)
      for (int32_t hk = 0; hk < H; hk += heads_per_task)
        attn_tasks_.push_back({s, hk, std::min(H, hk + heads_per_task), start[s], start[s + 1]});
  } else {
    // Prefill: a KV head's chunks of rows one after the other, so the threads claiming them
    // find that head's K/V in their cache (a 512-token prompt's heads together overflow L2),
    // the longest chunks (latest rows) first so the last claims are short.
    for (int32_t hk = 0; hk < H; ++hk)
      for (int32_t s = 0; s < n_seq; ++s)
        for (int32_t r = start[s + 1]; r > start[s];) {
          const int32_t begin = std::max(start[s], r - attn_rows_per_task_);
          attn_tasks_.push_back({s, hk, hk + 1, begin, r});
          r = begin;
        }
  }
  // A decode step (every task one row) is split statically, one contiguous share of about
  // equal K/V length per thread, so each thread knows its next task and can prefetch it. So is
  // a step whose sequences each fit one task per KV head (a speculative verify: k + 1 rows): its
  // tasks read as many K/V bytes as decode's and compute little more. Prefill tasks are
  // compute-bound and uneven: they are claimed dynamically.
  bool few_rows = true;
  for (int32_t s = 0; s < n_seq; ++s)
    few_rows = few_rows && start[s + 1] - start[s] <= attn_rows_per_task_;
  attn_parts_.clear();
  attn_prepares_rows_ = false;
  if (!(one_row_each || few_rows) || n_threads == 1 ||
      attn_tasks_.size() < 2 * static_cast<size_t>(n_threads))
    return;
  attn_prepares_rows_ = one_row_each && heads_per_task == H;
  std::vector<int64_t>& cost = attn_cost_;  // prefix sums of the tasks' K/V lengths x rows
  cost.assign(attn_tasks_.size() + 1, 0);
  for (size_t i = 0; i < attn_tasks_.size(); ++i) {
    const AttentionTask& t = attn_tasks_[i];
    cost[i + 1] = cost[i] + (b.pos[rows_by_seq_[t.row_end - 1]] + 1) *
                                (t.kv_head_end - t.kv_head_begin) * (t.row_end - t.row_begin);
  }
  attn_parts_.push_back(0);
  for (int p = 1; p < n_threads; ++p) {
    const int64_t target = cost.back() * p / n_threads;
    attn_parts_.push_back(std::lower_bound(cost.begin(), cost.end(), target) - cost.begin());
  }
  attn_parts_.push_back(static_cast<int64_t>(attn_tasks_.size()));
}

// Row-wise element work (here RoPE and the K/V store; the norms and SwiGLU run inside the
// matmuls' activation pass) over n rows of about row_floats each: on the pool from a few rows
// on, else on the calling thread (a hand-off costs more than one row's work), the same
// threshold as that pass (kernels/matmul.cpp, for_each_token).
template <class F>
void CpuModel::for_rows(int64_t n, int64_t row_floats, F&& fn) {
  if (n > 1 && n * row_floats >= 8192)
    pool_.parallel_for(n, fn);
  else
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
}

Status CpuModel::classify(const float* hidden, float* out) const {
  const TensorView& w = weights_.cls_out;
  if (!w.data || config_.n_cls_out <= 0)
    return invalid_argument("this model has no classifier head (cls.output.weight)");
  const int64_t E = config_.n_embd;
  std::vector<float> row(E);
  for (int32_t j = 0; j < config_.n_cls_out; ++j) {
    kernels::dequantize_row(w.dtype, w.row(j), row.data(), E);
    double acc = weights_.cls_out_bias.empty() ? 0.0 : weights_.cls_out_bias[j];
    for (int64_t k = 0; k < E; ++k) acc += static_cast<double>(row[k]) * hidden[k];
    out[j] = static_cast<float>(acc);
  }
  return Status::ok();
}

Result<std::unique_ptr<Model>> CpuModel::mtp_module(int index) {
  if (index < 0 || index >= config_.n_mtp_layers)
    return invalid_argument("mtp_module: the model has " + std::to_string(config_.n_mtp_layers) +
                            " multi-token prediction modules, not " + std::to_string(index + 1));
  // A shared LM head is this model's copy: wait for it (a server making its copies in the
  // background waits here once, at start-up).
  std::unique_lock<std::mutex> no_step(views_mutex_, std::defer_lock);
  if (repack_pending_) {
    no_step.lock();
    if (repacker_.joinable()) repacker_.join();
    switch_to_copies();
  }
  mtp_module_made_.resize(weights_.mtp.size());
  if (mtp_module_made_[index] && release_loader_made_)
    return unsupported("mtp_module: module " + std::to_string(index) +
                       " was made already, and its weights went to it (this model was "
                       "loaded from a Hugging Face checkpoint whose loader made them)");
  const MtpWeights& m = weights_.mtp[index];
  ModelConfig mc = mtp_module_config(config_, index);
  Weights w;
  w.token_embd = m.embed;
  w.output_norm = m.head_norm;
  w.output = config_.mtp_own_head ? m.head : weights_.output;
  w.rope_freqs = weights_.rope_freqs;
  w.layers = {m.block};
  w.mtp = {m};
  w.mtp[0].block = LayerWeights{};  // the one in layers[0] runs
  w.keepalive = weights_.keepalive;
  ModelLoadOptions o;
  o.n_threads = pool_.size();  // copies made before the constructor returns (not background)
  auto module = std::unique_ptr<Model>(new CpuModel(std::move(mc), std::move(w), o, this));
  // The module has its copies of the block's matrices (and of its own head): what the loader
  // made for them goes, or a Hugging Face checkpoint's MTP layer (dequantized FP8, derived
  // tensors) would be held twice.
  if (release_loader_made_) {
    std::vector<const void*> copied;
    for_each_matrix(weights_.mtp[index].block, [&](TensorView& t) { copied.push_back(t.data); });
    if (config_.mtp_own_head) copied.push_back(weights_.mtp[index].head.data);
    mtp_module_made_[index] = true;
    release_loader_made_(copied, loader_views_in_use());
  }
  return module;
}

Status CpuModel::forward(const Batch& b, KvCache& kv_base, float* logits, float* hidden,
                         float* residual) {
  if (kv_base.backend() != KvBackend::kCpu)
    return invalid_argument("forward: KV cache was not created for the CPU model");
  auto* kv = static_cast<CpuKvCache*>(&kv_base);
  if (kv->n_layer() != config_.n_layer || kv->n_head_kv() != config_.n_head_kv ||
      kv->head_dim() != config_.head_dim)
    return invalid_argument("forward: KV cache shape does not match the model");
  LOOM_RETURN_IF_ERROR(validate(b, *kv));
  // While copies are being made, the repacker may switch views between steps: not during this one.
  std::unique_lock<std::mutex> no_switching(views_mutex_, std::defer_lock);
  if (repack_pending_) {
    no_switching.lock();
    switch_to_copies();
  }
  const int64_t n = b.n_rows();
  if (n == 0) return Status::ok();
  ++weight_reads_.calls;
  weight_reads_.bytes += bytes_per_call_ + static_cast<uint64_t>(n) * bytes_per_row_;

  const auto& c = config_;
  const int64_t E = c.n_embd, D = c.head_dim, F = c.n_ff;
  const int64_t q_dim = c.n_head * D, kv_dim = c.n_head_kv * D;
  const int64_t group = c.n_head / c.n_head_kv;
  const int64_t n_logits = static_cast<int64_t>(b.logits_rows.size());
  int32_t max_kv = 0;
  for (int64_t i = 0; i < n; ++i) max_kv = std::max(max_kv, b.pos[i] + 1);
  PhaseClock clock(profile_);
  reserve(n, n_logits, max_kv);
  plan_attention(b);
  // Sequences resuming from a prefix snapshot start from a copy of its recurrent state.
  for (const Batch::StateCopy& r : b.state_restores) kv->copy_state(r.src, r.dst);
  ThreadPool* pool = &pool_;
  const float scale = c.attn_scale > 0 ? c.attn_scale : 1.0f / std::sqrt(static_cast<float>(D));
  const int32_t bs = kv->block_size();
  const int64_t R = n_rot_, n_tables = static_cast<int64_t>(rope_tables_.size());
  // Row work costs no hand-off of its own: each layer's residual add and attention norm (the
  // first layer's with the embedding lookup and the RoPE angles), its FFN norm and its SwiGLU
  // run row by row inside the pass where the next matmul quantizes its activations
  // (kernels::RowFill); the last residual add goes with the output norm.
  const TensorView& embd = weights_.token_embd;
  if (c.mtp_module) {
    // "mtp_in": the residual stream starts as eh_proj([enorm(embedding), hnorm(hidden)]).
    if (b.prev_hidden.size() != static_cast<size_t>(n * E))
      return invalid_argument("forward: an MTP module needs one previous hidden state per row");
    const MtpWeights& m = weights_.mtp[0];
    const auto input_row = [&](int64_t i, float* row) {
      kernels::dequantize_row(embd.dtype, embd.row(b.tokens[i]), row, E);
      layers::mtp_input(c, m, &b.prev_hidden[i * E], b.pos[i] == 0, row);
    };
    kernels::matmul(m.eh_proj, mtp_in_.data(), n, x_.data(), pool, input_row);
    clock.end(ForwardProfile::kQkv);
  }
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = weights_.layers[l];
    const LayerSpec spec = l < static_cast<int>(c.layers.size()) ? c.layers[l] : LayerSpec{};
    const int kv_group = kv->group_of(l);  // whose block tables hold this layer's K/V
    const auto attn_norm_row = [&](int64_t i, float* xn) {
      float* x = &x_[i * E];
      if (l == 0) {
        if (!c.mtp_module) {  // an MTP module's x_ holds its input projection already
          kernels::dequantize_row(embd.dtype, embd.row(b.tokens[i]), x, E);
          layers::scale_embedding(c, x);
        }
        // RoPE angles of the row's position per frequency table, shared by every layer.
        for (int64_t t = 0; t < n_tables; ++t) {
          float* cs = &rope_cs_[(i * n_tables + t) * R];
          kernels::rope_angles(b.pos[i], rope_tables_[t].data(), R / 2, cs, cs + R / 2);
          if (rope_scale_ != 1.0f)  // LongRoPE's / YaRN's attention factor scales cos and sin
            for (int64_t j = 0; j < R; ++j) cs[j] *= rope_scale_;
        }
      } else {
        layers::add_block_output(c, x, &proj_[i * E], weights_.layers[l - 1].ffn_post_norm);
      }
      layers::block_input(c, x, L.attn_norm, xn);
    };
    if (spec.deltanet) {  // gated_deltanet: a recurrent layer (backend/cpu/deltanet_layer.h)
      deltanet_.project(c, L, n, xn_.data(), attn_norm_row, pool_);
      clock.end(ForwardProfile::kQkv);
      deltanet_.step(c, L, l, b, *kv, pool_);
      clock.end(ForwardProfile::kAttention);
      deltanet_.output(c, L, n, proj_.data(), pool_);
      clock.end(ForwardProfile::kWo);
    } else if (spec.mla) {  // mla: the latent attention (backend/cpu/mla_attention.h), then wo
      for_rows(n, E, [&](int64_t i, int) { attn_norm_row(i, &xn_[i * E]); });
      clock.end(ForwardProfile::kQkv);
      const int rope = layer_rope_[l];
      const float* heads = mla_.run(c, L, l, b, *kv, kv_group, xn_.data(), &rope_cs_[rope * R],
                                    n_tables * R, scale, pool_);
      clock.end(ForwardProfile::kAttention);
      kernels::matmul(L.wo, heads, n, proj_.data(), pool);
      clock.end(ForwardProfile::kWo);
    } else {
      const bool gated = c.attn_output_gate;  // attn_q also holds each head's output gate
      const kernels::MatmulTarget qkv[] = {
          {&L.wq, gated ? qg_.data() : q_.data()}, {&L.wk, k_.data()}, {&L.wv, v_.data()}};
      kernels::matmul_multi(qkv, 3, xn_.data(), n, pool, attn_norm_row);
      clock.end(ForwardProfile::kQkv);

      // Bias, qk-norm, RoPE; then this step's K/V go into the cache. A decode step whose
      // attention tasks are whole sequences does this in the row's attention task instead: the
      // K lines it stores (one per 2 dimensions in the dim-major cache) are then read by the
      // same core, and the step has one hand-off less per layer.
      auto prepare_row = [&](int64_t i) {
        float* q = &q_[i * q_dim];
        float* k = &k_[i * kv_dim];
        float* v = &v_[i * kv_dim];
        if (gated) layers::split_query_gate(c, &qg_[i * 2 * q_dim], q, &attn_gate_[i * q_dim]);
        const int rope = layer_rope_[l];
        layers::prepare_qkv(c, L, q, k, v,
                            rope >= 0 ? &rope_cs_[(i * n_tables + rope) * R] : nullptr, rope >= 0);
        const BatchSequence& s = b.sequences[b.seq[i]];
        kv->store_token(l, s.table(kv_group)[b.pos[i] / bs], b.pos[i] % bs, k, v);
      };
      if (!attn_prepares_rows_) {
        // In chunks of consecutive rows: a prompt's neighbouring tokens share the K cache lines
        // (16 tokens of 2 dimensions each), so rows dealt out one by one made the cores trade
        // every line (prefill, F16 llama-0.5b: 72 -> 22 ms per 512 tokens for this loop).
        const int64_t chunk = std::clamp<int64_t>(n / (4 * pool_.size()), 1, bs);
        for_rows((n + chunk - 1) / chunk, E * chunk, [&](int64_t task, int) {
          for (int64_t i = task * chunk; i < std::min(n, (task + 1) * chunk); ++i) prepare_row(i);
        });
      }
      clock.end(ForwardProfile::kRope);

      // Attention per (sequence, KV heads, chunk of rows): the chunk's query heads of each KV
      // head attend together over the sequence's cache, each row over positions [0, pos].
      auto run_task = [&](int64_t task, int thread) {
        const AttentionTask& t = attn_tasks_[task];
        const int32_t* table = b.sequences[t.seq].table(kv_group);
        kernels::PagedHead* k_heads = &attn_heads_[static_cast<size_t>(thread) * 2 * c.n_head_kv];
        kernels::PagedHead* v_heads = k_heads + c.n_head_kv;
        kernels::AttentionQuery* queries =
            &attn_queries_[static_cast<size_t>(thread) * attn_queries_per_task_];
        int n_q = 0;
        for (int32_t hk = t.kv_head_begin; hk < t.kv_head_end; ++hk) {
          k_heads[hk - t.kv_head_begin] = kv->k_head(l, hk, table);
          v_heads[hk - t.kv_head_begin] = kv->v_head(l, hk, table);
          for (int32_t r = t.row_begin; r < t.row_end; ++r) {
            const int32_t i = rows_by_seq_[r];
            const int32_t begin = layers::window_begin(spec, b.pos[i]);
            for (int64_t h = hk * group; h < (hk + 1) * group; ++h)
              queries[n_q++] = {&q_[i * q_dim + h * D], &attn_[i * q_dim + h * D], b.pos[i] + 1,
                                begin, L.attn_sinks.empty() ? -INFINITY : L.attn_sinks[h]};
          }
        }
        kernels::attention_multi_heads(
            queries, n_q, k_heads, v_heads, t.kv_head_end - t.kv_head_begin, D, scale,
            &attn_scratch_[static_cast<size_t>(thread) * attn_scratch_per_thread_], c.attn_softcap);
      };
      if (attn_parts_.empty()) {
        pool_.parallel_for(static_cast<int64_t>(attn_tasks_.size()), run_task);
      } else {
        // Decode (and few-row steps): each thread runs its share in order and prefetches its
        // next task's K/V (from DRAM, the cache is latency-bound otherwise): all of it for one
        // head, the first tile of each head for several (the kernel prefetches a tile ahead
        // from there).
        pool_.parallel_for(static_cast<int64_t>(attn_parts_.size()) - 1, [&](int64_t part,
                                                                             int thread) {
          for (int64_t task = attn_parts_[part]; task < attn_parts_[part + 1]; ++task) {
            if (task + 1 < attn_parts_[part + 1]) {
              const AttentionTask& next = attn_tasks_[task + 1];
              const int32_t* table = b.sequences[next.seq].table(kv_group);
              const int32_t n_kv = b.pos[rows_by_seq_[next.row_end - 1]] + 1;
              const int32_t begin = spec.window > 0 ? std::max(0, n_kv - spec.window) : 0;
              const bool one_head = next.kv_head_end - next.kv_head_begin == 1;
              for (int32_t hk = next.kv_head_begin; hk < next.kv_head_end; ++hk)
                kernels::prefetch_attention(kv->k_head(l, hk, table), kv->v_head(l, hk, table),
                                            one_head ? n_kv : std::min(n_kv, begin + 16), D, begin);
            }
            if (attn_prepares_rows_) prepare_row(rows_by_seq_[attn_tasks_[task].row_begin]);
            run_task(task, thread);
          }
        });
      }
      clock.end(ForwardProfile::kAttention);
      if (gated) {
        const auto gate_row = [&](int64_t i, float* a) {  // a is attn_'s row i: in place
          layers::apply_output_gate(a, &attn_gate_[i * q_dim], q_dim);
        };
        kernels::matmul(L.wo, attn_.data(), n, proj_.data(), pool, gate_row);
      } else {
        kernels::matmul(L.wo, attn_.data(), n, proj_.data(), pool);
      }
      clock.end(ForwardProfile::kWo);
    }

    const auto ffn_norm_row = [&](int64_t i, float* xn) {
      float* x = &x_[i * E];
      if (!L.bo.empty()) layers::add_bias(&proj_[i * E], L.bo.data(), E);
      layers::add_block_output(c, x, &proj_[i * E], L.attn_post_norm);
      layers::block_input(c, x, L.ffn_norm, xn);
    };
    if (spec.moe) {  // ffn_moe: the norm first, then the routed experts (backend/cpu/moe_ffn.h)
      for_rows(n, E, [&](int64_t i, int) { ffn_norm_row(i, &xn_[i * E]); });
      clock.end(ForwardProfile::kGateUp);
      moe_.run(c, L, xn_.data(), n, proj_.data(), pool_);
      clock.end(ForwardProfile::kDown);
      continue;
    }
    const kernels::MatmulTarget gate_up[] = {{&L.w_gate, gate_.data()}, {&L.w_up, up_.data()}};
    kernels::matmul_multi(gate_up, 2, xn_.data(), n, pool, ffn_norm_row);
    clock.end(ForwardProfile::kGateUp);
    const auto activation_row = [&](int64_t i, float* g) {  // g is gate_'s row i: in place
      layers::gated_activation(c, g, &up_[i * F], F);
    };
    kernels::matmul(L.w_down, gate_.data(), n, proj_.data(), pool, activation_row);
    clock.end(ForwardProfile::kDown);
  }

  // Final hidden states (embedding models): the last residual add in place, then the output
  // norm, the same two steps the logits rows take below (so they agree bit for bit).
  // With `residual`, every row's last residual add is done here and the rows copied out
  // before the norm, or normed as the logits rows are (mtp_hidden_after_norm): what a
  // multi-token prediction module reads.
  residual_done_.clear();
  if (!b.hidden_rows.empty() || residual) {
    if (!b.hidden_rows.empty() && !hidden)
      return invalid_argument("forward: hidden rows asked for without an output buffer");
    residual_done_.assign(n, residual ? 1 : 0);
    const int64_t n_hidden = static_cast<int64_t>(b.hidden_rows.size());
    for (int64_t r = 0; r < n_hidden; ++r) residual_done_[b.hidden_rows[r]] = 1;
    for (int64_t i = 0; i < n; ++i) {  // each row once, even when listed twice
      if (!residual_done_[i]) continue;
      float* x = &x_[i * E];
      if (c.n_layer == 0)
        kernels::dequantize_row(embd.dtype, embd.row(b.tokens[i]), x, E);
      else
        layers::add_block_output(c, x, &proj_[i * E], weights_.layers[c.n_layer - 1].ffn_post_norm);
    }
    if (residual && c.mtp_hidden_after_norm) {
      for_rows(n, E, [&](int64_t i, int) {
        kernels::rms_norm(&x_[i * E], weights_.output_norm.data(), residual + i * E, E, c.rms_eps);
      });
    } else if (residual) {
      std::copy_n(x_.data(), n * E, residual);
    }
    for_rows(n_hidden, E, [&](int64_t r, int) {
      kernels::rms_norm(&x_[static_cast<int64_t>(b.hidden_rows[r]) * E],
                        weights_.output_norm.data(), hidden + r * E, E, c.rms_eps);
    });
    clock.end(ForwardProfile::kOutput);
  }

  if (n_logits == 0) return Status::ok();
  const auto output_norm_row = [&](int64_t r, float* xn) {
    const int64_t i = b.logits_rows[r];
    float* x = &x_[i * E];
    if (!residual_done_.empty() && residual_done_[i]) {
      // already added by the hidden-state pass
    } else if (c.n_layer == 0) {
      kernels::dequantize_row(embd.dtype, embd.row(b.tokens[i]), x, E);
    } else {
      layers::add_block_output(c, x, &proj_[i * E], weights_.layers[c.n_layer - 1].ffn_post_norm);
    }
    kernels::rms_norm(x, weights_.output_norm.data(), xn, E, c.rms_eps);
  };
  kernels::matmul(weights_.output, final_.data(), n_logits, logits, pool, output_norm_row);
  if (c.logit_scale != 1.0f || c.final_softcap > 0) {
    const int64_t V = c.n_vocab;
    for_rows(n_logits, V, [&](int64_t r, int) { layers::finish_logits(c, logits + r * V); });
  }
  clock.end(ForwardProfile::kOutput);
  return Status::ok();
}

}  // namespace loom
