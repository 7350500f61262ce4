// CPU K/V storage. Per layer, K and V each live in one buffer laid out as
//   [num_blocks][n_head_kv][block_size][head_dim]  of dtype (f32, f16 or bf16),
// so the tokens of one KV head in a block are contiguous (attention streams them in order)
// and a block is contiguous (copying a block for copy-on-write is one memcpy per layer).
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "base/huge_buffer.h"
#include "model/model.h"

namespace loom {

class CpuKvCache : public KvCache {
 public:
  CpuKvCache(const ModelConfig& config, int32_t num_blocks, int32_t block_size, Dtype dtype);

  int32_t n_layer() const { return static_cast<int32_t>(k_.size()); }
  uint8_t* k(int layer) { return k_[layer].get(); }
  uint8_t* v(int layer) { return v_[layer].get(); }
  const uint8_t* k(int layer) const { return k_[layer].get(); }
  const uint8_t* v(int layer) const { return v_[layer].get(); }
  uint64_t token_stride() const { return token_stride_; }  // bytes: head_dim values
  uint64_t head_stride() const { return head_stride_; }    // bytes: block_size tokens of a head
  uint64_t block_stride() const { return block_stride_; }  // bytes: n_head_kv heads
  int32_t n_head_kv() const { return n_head_kv_; }
  int32_t head_dim() const { return head_dim_; }

  // Copies block src to block dst in every layer (copy-on-write of a shared prefix block).
  void copy_block(int32_t src, int32_t dst);

 private:
  int32_t n_head_kv_ = 0;
  int32_t head_dim_ = 0;
  uint64_t token_stride_ = 0;
  uint64_t head_stride_ = 0;
  uint64_t block_stride_ = 0;
  std::vector<HugeBuffer> k_, v_;
};

}  // namespace loom
