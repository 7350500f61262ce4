// CPU K/V storage. Per layer, K and V each live in one buffer of dtype (f32, f16 or bf16):
//   V: [num_blocks][n_head_kv][block_size][head_dim]  (a token's values adjacent)
//   K: [num_blocks][n_head_kv][head_dim][block_size]  (dim-major: one dimension of a block's
//      tokens adjacent, so attention scores 16 keys per vector load without transposing)
// One KV head of a block is contiguous either way (attention streams it in order), and so is
// a block (copying a block for copy-on-write is one memcpy per layer).
// A Multi-head Latent Attention layer (LayerSpec::mla) keeps one row per token instead, in its
// K buffer (no V): [num_blocks][block_size][kv_lora_rank + qk_rope_head_dim], the normed latent
// then the rotated RoPE key (ModelConfig::mla), read by every head.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "base/huge_buffer.h"
#include "kernels/ops.h"
#include "model/model.h"

namespace loom {

class CpuKvCache : public KvCache {
 public:
  CpuKvCache(const ModelConfig& config, const KvLayout& layout, int32_t block_size, Dtype dtype,
             std::function<bool()> commit_when = nullptr);

  int32_t n_layer() const { return static_cast<int32_t>(k_.size()); }
  uint8_t* k(int layer) { return k_[layer].get(); }
  uint8_t* v(int layer) { return v_[layer].get(); }
  const uint8_t* k(int layer) const { return k_[layer].get(); }
  const uint8_t* v(int layer) const { return v_[layer].get(); }
  uint64_t head_stride() const { return head_stride_; }    // bytes: block_size tokens of a head
  uint64_t block_stride() const { return block_stride_; }  // bytes: n_head_kv heads

  // K or V of one KV head of a sequence (its block table) in `layer`, for the kernels.
  kernels::PagedHead k_head(int layer, int kv_head, const int32_t* block_table) const;
  kernels::PagedHead v_head(int layer, int kv_head, const int32_t* block_table) const;
  // Stores one token's K and V (n_head_kv * head_dim floats each) at slot `offset` of block
  // `block` in `layer`.
  void store_token(int layer, int32_t block, int32_t offset, const float* k, const float* v);

  // An MLA layer's latent rows: the rows of a sequence (its block table) as one PagedHead
  // of latent_row() values per token, and the store of one token's row.
  bool is_latent(int layer) const { return latent_[layer]; }
  int32_t latent_row() const { return latent_row_; }
  kernels::PagedHead latent_head(int layer, const int32_t* block_table) const;
  void store_latent(int layer, int32_t block, int32_t offset, const float* row);
  // Bytes of one block of `layer` (K and V, or the latent rows).
  uint64_t layer_block_bytes(int layer) const {
    return latent_[layer] ? latent_block_stride_ : 2 * block_stride_;
  }
  int32_t n_head_kv() const { return n_head_kv_; }
  int32_t head_dim() const { return head_dim_; }

  // A recurrent layer's (LayerSpec::deltanet) state in slot `slot`: state_floats_per_layer
  // floats, f32 whatever the KV dtype; its layout is the Gated DeltaNet step's
  // (backend/cpu/gated_deltanet.h).
  float* state(int layer, int32_t slot);
  static uint64_t state_floats_per_layer(const ModelConfig& config, int32_t rollback = 0);
  void copy_state(int32_t src, int32_t dst) override;

  // Copies block src to block dst in every layer (copy-on-write of a shared prefix block; a
  // cache with one group).
  void copy_block(int32_t src, int32_t dst);

  void wait_committed() override;
  uint64_t bytes() const override { return bytes_; }
  uint64_t state_bytes() const override { return state_bytes_; }

 private:
  int32_t n_head_kv_ = 0;
  int32_t head_dim_ = 0;
  uint64_t elem_bytes_ = 0;
  uint64_t head_stride_ = 0;
  uint64_t block_stride_ = 0;
  std::vector<HugeBuffer> k_, v_;  // v_[l] empty for a latent layer, both for a recurrent one
  std::vector<HugeBuffer> state_;  // [n_layer] recurrent layers' state slots (else empty)
  uint64_t state_layer_floats_ = 0;
  uint64_t state_bytes_ = 0;
  std::vector<bool> latent_;  // [n_layer] MLA layers
  int32_t latent_row_ = 0;
  uint64_t latent_block_stride_ = 0;  // bytes: block_size latent rows
  uint64_t bytes_ = 0;
  std::unique_ptr<BackgroundCommit> commit_;  // after k_ and v_: stopped before they are freed
};

}  // namespace loom
