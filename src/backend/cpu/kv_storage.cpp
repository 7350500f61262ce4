// KvCache factory and the CPU storage.
#include "backend/cpu/kv_storage.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <new>
#include <string>

#include "backend/cpu/gated_deltanet.h"
#include "base/checked.h"

namespace loom {
namespace {

bool kv_dtype_ok(Dtype d) {
  return d == Dtype::kF32 || d == Dtype::kF16 || d == Dtype::kBF16;
}
uint64_t elem_size(Dtype d) {
  return d == Dtype::kF32 ? 4 : 2;
}

}  // namespace

uint64_t KvCache::bytes_per_block(const ModelConfig& c, int32_t block_size, Dtype dtype) {
  uint64_t per_token = 0;
  for (int l = 0; l < c.n_layer; ++l) per_token += layer_elems_per_token(c, l);
  return per_token * block_size * elem_size(dtype);
}

uint64_t KvCache::layer_elems_per_token(const ModelConfig& c, int layer) {
  if (layer < static_cast<int>(c.layers.size()) && c.layers[layer].deltanet) return 0;
  const bool latent = layer < static_cast<int>(c.layers.size()) && c.layers[layer].mla;
  return latent ? static_cast<uint64_t>(c.mla.latent_row())
                : 2ull * c.n_head_kv * static_cast<uint64_t>(c.head_dim);
}

uint64_t CpuKvCache::state_floats_per_layer(const ModelConfig& c, int32_t rollback) {
  if (c.deltanet.n_v_heads == 0) return 0;
  return static_cast<uint64_t>(DeltaNetStateLayout(c.deltanet, rollback).total);
}

uint64_t KvCache::state_bytes_per_slot(const ModelConfig& c, int32_t rollback) {
  int recurrent = 0;
  for (const LayerSpec& s : c.layers) recurrent += s.deltanet;
  return recurrent * CpuKvCache::state_floats_per_layer(c, rollback) * sizeof(float);
}

Status KvCache::check_state_rollback(const ModelConfig& c, int64_t rollback) {
  if (rollback < kRecurrentChunk || state_bytes_per_slot(c) == 0) return Status::ok();
  return invalid_argument("num_speculative_tokens " + std::to_string(rollback) +
                          ": a model with recurrent layers (" + c.arch +
                          ") can take back at most " + std::to_string(kRecurrentChunk - 1) +
                          " proposals a step");
}

Result<std::unique_ptr<KvCache>> KvCache::create(const ModelConfig& config, int32_t num_blocks,
                                                 int32_t block_size, Dtype dtype) {
  KvLayout layout = KvLayout::single(config.n_layer, num_blocks);
  if (state_bytes_per_slot(config) > 0) layout.num_state_slots = 1;
  return create(config, layout, block_size, dtype);
}

Result<std::unique_ptr<KvCache>> KvCache::create(const ModelConfig& config, const KvLayout& layout,
                                                 int32_t block_size, Dtype dtype,
                                                 std::function<bool()> commit_when) {
  if (!kv_dtype_ok(dtype))
    return invalid_argument("KV cache dtype must be f32, f16 or bf16, not " +
                            std::string(dtype_name(dtype)));
  if (config.n_layer <= 0 || config.n_head_kv <= 0 || config.head_dim <= 0)
    return invalid_argument("KV cache: model config has no layers / heads");
  const int n_groups = static_cast<int>(layout.num_blocks.size());
  if (static_cast<int>(layout.layer_group.size()) != config.n_layer || n_groups < 1 ||
      n_groups > kMaxKvGroups)
    return invalid_argument("KV cache layout: one group per layer, 1.." +
                            std::to_string(kMaxKvGroups) + " groups");
  for (int32_t g : layout.layer_group)
    if (g < 0 || g >= n_groups) return invalid_argument("KV cache layout: bad layer group");
  if (block_size <= 0) return invalid_argument("KV cache needs block_size > 0");
  for (int32_t num_blocks : layout.num_blocks) {
    if (num_blocks <= 0) return invalid_argument("KV cache needs num_blocks > 0");
    // Per-layer buffer size, with overflow checked before allocating.
    auto per_layer = checked_product(static_cast<uint64_t>(num_blocks), block_size,
                                     config.n_head_kv, config.head_dim, elem_size(dtype));
    if (config.mla.kv_lora_rank > 0)  // a latent row can be longer than a layer's K heads
      per_layer = checked_product(static_cast<uint64_t>(num_blocks), block_size,
                                  config.mla.latent_row() + config.n_head_kv * config.head_dim,
                                  elem_size(dtype));
    if (!per_layer || *per_layer > (1ull << 46))
      return Status(StatusCode::kResourceExhausted,
                    "KV cache too large: reduce the number of blocks");
  }
  try {
    return std::unique_ptr<KvCache>(
        new CpuKvCache(config, layout, block_size, dtype, std::move(commit_when)));
  } catch (const std::bad_alloc&) {
    return Status(StatusCode::kResourceExhausted, "cannot allocate the KV cache");
  }
}

CpuKvCache::CpuKvCache(const ModelConfig& c, const KvLayout& layout, int32_t block_size,
                       Dtype dtype, std::function<bool()> commit_when)
    : n_head_kv_(c.n_head_kv), head_dim_(c.head_dim), latent_row_(c.mla.latent_row()) {
  layout_ = layout;
  backend_ = KvBackend::kCpu;
  block_size_ = block_size;
  dtype_ = dtype;
  elem_bytes_ = elem_size(dtype);
  head_stride_ = elem_bytes_ * c.head_dim * block_size;
  block_stride_ = head_stride_ * c.n_head_kv;
  latent_block_stride_ = elem_bytes_ * latent_row_ * block_size;
  std::vector<BackgroundCommit::Range> ranges;
  state_layer_floats_ = state_floats_per_layer(c, layout.state_rollback_tokens);
  for (int l = 0; l < c.n_layer; ++l) {
    const int32_t blocks = layout.num_blocks[layout.layer_group[l]];
    const bool recurrent = l < static_cast<int>(c.layers.size()) && c.layers[l].deltanet;
    latent_.push_back(l < static_cast<int>(c.layers.size()) && c.layers[l].mla);
    state_.emplace_back();
    if (recurrent) {  // no K/V: one state per slot
      k_.emplace_back();
      v_.emplace_back();
      const uint64_t bytes = state_layer_floats_ * sizeof(float) * layout.num_state_slots;
      if (bytes == 0) continue;
      state_.back() = allocate_huge(bytes, /*commit=*/false);
      ranges.push_back({state_.back().get(), bytes});
      state_bytes_ += bytes;
      continue;
    }
    if (latent_.back()) {
      const uint64_t bytes = latent_block_stride_ * blocks;
      k_.push_back(allocate_huge(bytes, /*commit=*/false));
      v_.emplace_back();
      ranges.push_back({k_.back().get(), bytes});
      bytes_ += bytes;
      continue;
    }
    const uint64_t bytes = block_stride_ * blocks;
    k_.push_back(allocate_huge(bytes, /*commit=*/false));
    v_.push_back(allocate_huge(bytes, /*commit=*/false));
    ranges.push_back({k_.back().get(), bytes});
    ranges.push_back({v_.back().get(), bytes});
    bytes_ += 2 * bytes;
  }
  // Committed in the background from now on, as vLLM and llama.cpp commit theirs up front but
  // without making start-up wait for it (6 GiB took 15 s to fault in): left to the first
  // write, the zeroing of fresh pages landed in whichever step first reached a new block (one
  // step of a 32-sequence run took 265 ms instead of 55); committed in the background, only
  // steps of the first seconds can meet a page not committed yet.
  commit_ =
      std::make_unique<BackgroundCommit>(std::move(ranges), "KV cache", std::move(commit_when));
}

void CpuKvCache::wait_committed() {
  commit_->wait();
}

kernels::PagedHead CpuKvCache::k_head(int layer, int kv_head, const int32_t* block_table) const {
  return {k_[layer].get() + kv_head * head_stride_,
          dtype_,
          block_table,
          block_size_,
          block_stride_,
          /*token_stride=*/elem_bytes_,
          /*dim_stride=*/elem_bytes_ * block_size_};
}

kernels::PagedHead CpuKvCache::v_head(int layer, int kv_head, const int32_t* block_table) const {
  return {v_[layer].get() + kv_head * head_stride_,
          dtype_,
          block_table,
          block_size_,
          block_stride_,
          /*token_stride=*/elem_bytes_ * head_dim_,
          /*dim_stride=*/0};
}

void CpuKvCache::store_token(int layer, int32_t block, int32_t offset, const float* k,
                             const float* v) {
  uint8_t* kb = k_[layer].get() + block * block_stride_ + offset * elem_bytes_;
  uint8_t* vb = v_[layer].get() + block * block_stride_ + offset * elem_bytes_ * head_dim_;
  for (int h = 0; h < n_head_kv_; ++h) {
    kernels::store_kv_strided(dtype_, k + h * head_dim_, kb + h * head_stride_, head_dim_,
                              elem_bytes_ * block_size_);
    kernels::store_kv(dtype_, v + h * head_dim_, vb + h * head_stride_, head_dim_);
  }
}

kernels::PagedHead CpuKvCache::latent_head(int layer, const int32_t* block_table) const {
  return {k_[layer].get(),
          dtype_,
          block_table,
          block_size_,
          latent_block_stride_,
          /*token_stride=*/elem_bytes_ * latent_row_,
          /*dim_stride=*/0};
}

void CpuKvCache::store_latent(int layer, int32_t block, int32_t offset, const float* row) {
  kernels::store_kv(
      dtype_, row,
      k_[layer].get() + block * latent_block_stride_ + offset * elem_bytes_ * latent_row_,
      latent_row_);
}

float* CpuKvCache::state(int layer, int32_t slot) {
  LOOM_CHECK(slot >= 0 && slot < num_state_slots() && state_[layer]);
  return reinterpret_cast<float*>(state_[layer].get()) + slot * state_layer_floats_;
}

void CpuKvCache::copy_state(int32_t src, int32_t dst) {
  LOOM_CHECK(src >= 0 && src < num_state_slots() && dst >= 0 && dst < num_state_slots());
  if (src == dst) return;
  const uint64_t bytes = state_layer_floats_ * sizeof(float);
  for (HugeBuffer& b : state_)
    if (b) std::memcpy(b.get() + dst * bytes, b.get() + src * bytes, bytes);
}

void CpuKvCache::copy_block(int32_t src, int32_t dst) {
  LOOM_CHECK(num_groups() == 1);
  LOOM_CHECK(src >= 0 && src < num_blocks() && dst >= 0 && dst < num_blocks());
  if (src == dst) return;
  for (size_t l = 0; l < k_.size(); ++l) {
    if (!k_[l]) continue;  // a recurrent layer
    if (latent_[l]) {
      std::memcpy(k_[l].get() + dst * latent_block_stride_,
                  k_[l].get() + src * latent_block_stride_, latent_block_stride_);
      continue;
    }
    std::memcpy(k_[l].get() + dst * block_stride_, k_[l].get() + src * block_stride_,
                block_stride_);
    std::memcpy(v_[l].get() + dst * block_stride_, v_[l].get() + src * block_stride_,
                block_stride_);
  }
}

}  // namespace loom
