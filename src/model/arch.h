// Architecture registry: one row per architecture, each defined in its own file under
// model/archs/. A row names the architecture in GGUF and in Hugging Face configs, says which
// RoPE layout its GGUF files store and which optional tensor groups it has, maps its
// Hugging Face tensor names to GGUF's, and reads the hyperparameters only it has into
// ModelConfig (its per-layer pattern of LayerSpecs included). The forward pass only ever sees
// the resulting ModelConfig.
#pragma once

#include <array>
#include <nlohmann/json_fwd.hpp>
#include <span>
#include <string_view>

#include "base/status.h"
#include "model/config.h"

namespace loom {

class GgufFile;
class GgufWriter;

enum class TensorNeed { kAbsent, kOptional, kRequired };

// One per-layer tensor: HF "model.layers.N.{hf}" ↔ GGUF "blk.N.{gguf}".
struct LayerTensorName {
  std::string_view hf;
  std::string_view gguf;
};

// What the family's published checkpoints usually have: defaults for a model built from a shape
// alone (loom synth), never used to read a file.
struct ArchDefaults {
  bool qkv_bias = false;  // the optional groups present (TensorNeed::kOptional ones)
  bool qk_norm = false;
  float rope_theta = 10000.0f;
  float rms_eps = 1e-5f;
  bool tied_embeddings = false;
  // "{arch}.SUFFIX" f32 keys llama.cpp reads for the family (some it requires), with values
  // that leave the block plain; 0 stands for 1/√head_dim, the softmax scale without a
  // multiplier. Written where a synth preset does not set the key.
  struct Key {
    std::string_view suffix;
    float value;
  };
  std::array<Key, 4> keys = {};
};

struct ArchSpec {
  std::string_view name;               // GGUF general.architecture and ModelConfig::arch
  std::string_view hf_model_types[4];  // config.json model_type values (empty = unused slot)
  RopeStyle gguf_rope_style;           // layout of Q/K rows in GGUF files of this arch
  TensorNeed qkv_bias;                 // blk.N.attn_{q,k,v}.bias
  TensorNeed qk_norm;                  // blk.N.attn_{q,k}_norm.weight
  // blk.N.ffn_gate_up_exps.weight instead of ffn_gate_exps + ffn_up_exps (MoeConfig::
  // fused_gate_up): kOptional where llama.cpp's loader accepts either (its
  // create_tensor_gate_up_exps), kAbsent elsewhere.
  TensorNeed fused_gate_up_exps = TensorNeed::kAbsent;
  std::span<const LayerTensorName> layer_tensors;  // this architecture's per-layer names
  // HF checkpoints store RMSNorm weights w of x·(1 + w); GGUF files store 1 + w (Gemma).
  bool hf_norm_plus_one = false;
  // llama.cpp's files of this architecture never hold output.weight: its loader always takes
  // the LM head from token_embd and its converter drops lm_head (Gemma 2). loom convert does
  // the same, refusing a checkpoint whose lm_head differs from its embeddings.
  bool gguf_head_is_embedding = false;
  // Where an HF checkpoint keeps its multi-token prediction modules. Empty: as ordinary layers
  // model.layers.{n_layer + i}. (DeepSeek-V3; their own tensors are in layer_tensors). Else
  // this prefix (Qwen3-Next's and Qwen3.5's "mtp."): module i's block under
  // "{prefix}layers.{i}." with layer_tensors' names, and the tensors the modules share under
  // "{prefix}{mtp_tensors[k].hf}" (every module's blk.N.nextn.* maps to the same one, as
  // llama.cpp's converter writes them).
  std::string_view hf_mtp_prefix;
  std::span<const LayerTensorName> mtp_tensors;
  // The hyperparameters only this architecture has, after the shared ones are read (null:
  // none). They fill ModelConfig's flags and config.layers (already n_layer default specs).
  Status (*read_hf)(const nlohmann::json& j, ModelConfig& c) = nullptr;
  Status (*read_gguf)(const GgufFile& f, ModelConfig& c) = nullptr;
  // Writes those hyperparameters as llama.cpp's converter does (loom convert); an error when
  // the config holds what llama.cpp's GGUF for this architecture cannot say (null: none).
  Status (*write_gguf)(GgufWriter& w, const ModelConfig& c) = nullptr;
  ArchDefaults defaults;
};

std::span<const ArchSpec* const> all_archs();
const ArchSpec* find_arch(std::string_view gguf_name);      // nullptr if unknown
const ArchSpec* find_arch_hf(std::string_view model_type);  // nullptr if unknown
std::string supported_arch_list();  // "llama, qwen2, qwen3, ..." for error messages

}  // namespace loom
