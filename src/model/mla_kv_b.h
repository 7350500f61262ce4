// DeepSeek GGUF files from llama.cpp's converter before its MLA support store each layer's
// key/value up-projection unsplit (attn_kv_b {R, H * (N + Dv)}: per head its N key rows, then
// its Dv value rows); llama.cpp still loads them (and decompresses K/V per head at run time).
// loom binds the split form (attn_k_b {N, R, H}, attn_v_b {R, Dv, H}), made here once at load.
#pragma once

#include <cstdint>
#include <vector>

#include "format/tensor.h"
#include "model/config.h"

namespace loom {

// Per head, the key rows transposed (keys: {N, R, H}) or the value rows as they are ({R, Dv,
// H}), into `bytes` and `view` (whose data points into bytes). F32 / F16 / BF16 keep their
// type; a quantized kv_b is dequantized to F16 (the split transposes the keys, which a block
// format cannot). False when kv_b's shape does not fit the config.
bool split_kv_b(const TensorView& kv_b, const MlaConfig& mla, int64_t n_head, bool keys,
                std::vector<uint8_t>* bytes, TensorView* view);

}  // namespace loom
