// The shapes `loom synth` can build (tiny test models up to Llama-3.1-8B). What a family adds
// to a shape (optional tensor groups, RoPE base, norm epsilon, tying) is its ArchSpec's
// `defaults` (model/arch.h).
#pragma once

#include <array>
#include <cstdint>
#include <optional>
#include <span>
#include <string_view>
#include <vector>

namespace loom {

struct SynthPreset {
  std::string_view name;
  std::string_view default_arch;  // the family the preset's shape comes from
  int32_t n_layer;
  int32_t n_embd;
  int32_t n_head;
  int32_t n_head_kv;
  int32_t head_dim;
  int32_t n_ff;
  int32_t n_vocab;        // placeholder vocabulary size when no vocabulary file is used
  bool vocab_size_fixed;  // true: a vocabulary file is padded to n_vocab (published
                          // checkpoints pad their embedding); false: the file sets the size
  int32_t context_length;
  float rope_theta;                     // 0: the family default (ArchSpec::defaults)
  float rms_eps;                        // 0: the family default
  std::optional<bool> tied_embeddings;  // nullopt: the family default
  std::string_view vocab_fixture;       // file name under tests/data/vocab, "" for none
  float rope_scaling_factor;            // llama3-style; 0 = none
  float rope_low_freq_factor;
  float rope_high_freq_factor;
  int32_t rope_original_context;
  // Families past Llama's block (all zero for the presets above them):
  int32_t sliding_window = 0;  // of the layers the family's GGUF pattern makes local
  int32_t n_rot = 0;           // rotated dimensions per head (partial rotary); 0: head_dim
  // Family hyperparameters as "{arch}.SUFFIX" f32 keys (soft-caps, Granite's multipliers).
  struct Key {
    std::string_view suffix;
    float value;
  };
  std::array<Key, 4> keys = {};
  // Mixture of Experts (every layer): experts, experts per token, each one's FFN width.
  int32_t n_expert = 0;
  int32_t n_expert_used = 0;
  int32_t n_ff_exp = 0;
  // Multi-head Latent Attention (DeepSeek): the query and latent ranks and the per-head sizes
  // (head_dim is then qk_nope + qk_rope_head_dim, n_rot qk_rope_head_dim, n_head_kv n_head).
  int32_t q_lora_rank = 0;
  int32_t kv_lora_rank = 0;  // 0: not an MLA preset
  int32_t qk_rope_head_dim = 0;
  int32_t v_head_dim = 0;
  // DeepSeek's MoE: shared experts (each of n_ff_exp), leading dense layers (of n_ff), and the
  // sigmoid router's groups and scale.
  int32_t n_expert_shared = 0;
  int32_t n_dense_lead = 0;
  int32_t n_expert_group = 0;
  int32_t n_expert_group_used = 0;
  float expert_weights_scale = 0;
  // Multi-token prediction modules after the main layers (DeepSeek-V3 has one): llama.cpp's
  // nextn tensors plus an ordinary block of the family's pattern each.
  int32_t n_mtp_layers = 0;
  // Embedding / reranking models: {arch}.pooling_type (-1: not written, a generative model)
  // and, for a reranker, the head llama.cpp's converter gives a Qwen3-Reranker: cls.output
  // holding the LM head's "yes" and "no" rows, classifier.output_labels and the rerank prompt.
  int32_t pooling_type = -1;
  bool rerank_head = false;
  // Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5): the recurrent layers' key and value heads,
  // their sizes and the convolution's taps, every full_attention_interval-th layer attending
  // (0: no recurrent layers); and a shared expert of this width beside the routed ones.
  int32_t ssm_k_heads = 0;
  int32_t ssm_v_heads = 0;
  int32_t ssm_d_k = 0;
  int32_t ssm_d_v = 0;
  int32_t ssm_conv_kernel = 0;
  int32_t full_attention_interval = 0;
  int32_t n_ff_shexp = 0;
  // YaRN RoPE scaling, as llama.cpp's gpt-oss files say it: rope.scaling.type "yarn", its
  // factor and original_context_length (0: none).
  float yarn_factor = 0;
  int32_t yarn_original_context = 0;
  // Control tokens the family's chat format needs, the last ids of a placeholder vocabulary
  // (gpt-oss: harmony's markers), so tests can render and parse that format for real.
  std::span<const std::string_view> control_tokens = {};
};

const SynthPreset* find_synth_preset(std::string_view name);
std::vector<std::string_view> synth_preset_names();

}  // namespace loom
