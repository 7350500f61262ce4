// Architecture registry: one row per architecture. A row says how the architecture is named
// in GGUF and in Hugging Face configs, which RoPE layout its GGUF files store, and which
// optional tensor groups it has. Everything else (hyperparameter keys, tensor names) is shared
// (model/tensor_names.h); the forward pass only sees the resulting ModelConfig flags.
#pragma once

#include <span>
#include <string_view>

#include "model/config.h"

namespace loom {

enum class TensorNeed { kAbsent, kOptional, kRequired };

struct ArchSpec {
  std::string_view name;                  // GGUF general.architecture and ModelConfig::arch
  std::string_view hf_model_types[4];     // config.json model_type values (empty = unused slot)
  RopeStyle gguf_rope_style;              // layout of Q/K rows in GGUF files of this arch
  TensorNeed qkv_bias;                    // blk.N.attn_{q,k,v}.bias
  TensorNeed qk_norm;                     // blk.N.attn_{q,k}_norm.weight (per-head RMSNorm)
};

std::span<const ArchSpec> all_archs();
const ArchSpec* find_arch(std::string_view gguf_name);      // nullptr if unknown
const ArchSpec* find_arch_hf(std::string_view model_type);  // nullptr if unknown
std::string supported_arch_list();  // "llama, qwen2, qwen3" for error messages

}  // namespace loom
