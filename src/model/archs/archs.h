// The rows of the architecture table (model/arch.cpp), one file each, and what their files
// share: the per-layer tensor names most architectures use and the readers of the
// hyperparameters several of them spell alike.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "format/gguf.h"
#include "model/arch.h"

namespace loom::archs {

extern const ArchSpec kLlama, kQwen2, kQwen3, kGemma2, kGemma3, kPhi3, kGranite, kOlmo2, kSmolLm3,
    kQwen2Moe, kQwen3Moe, kGptOss, kDeepseek2, kQwen3Next, kQwen35, kQwen35Moe;

// Llama's names (also Qwen, Granite, SmolLM3): pre-norms, separate q/k/v and gate/up.
extern const std::span<const LayerTensorName> kLlamaLayerTensors;
// Gemma 2/3: four norms around attention and FFN ("sandwich"), q/k norms (Gemma 3).
extern const std::span<const LayerTensorName> kGemmaLayerTensors;
// Llama's names plus Qwen2/3-MoE's experts (mlp.gate, mlp.experts.{e}.*, mlp.shared_expert*)
// and Mixtral's (block_sparse_moe.gate, block_sparse_moe.experts.{e}.w1/w2/w3).
extern const std::span<const LayerTensorName> kQwenMoeLayerTensors;
extern const std::span<const LayerTensorName> kMixtralLayerTensors;

// ---- Hugging Face config.json ----
// A number field (absent or null: nullopt); error when present with another type.
Result<std::optional<double>> hf_number(const nlohmann::json& j, const char* key);
// A string / boolean field (absent or null: def); error when present with another type.
Result<std::string> hf_string(const nlohmann::json& j, const char* key, std::string def);
Result<bool> hf_bool(const nlohmann::json& j, const char* key, bool def);
// config.layers[l].window from `layer_types` ("sliding_attention" / "full_attention") and
// `sliding_window`; without layer_types, every `pattern`-th layer (1-based) is full, the rest
// sliding. No sliding_window: every layer full.
Status hf_sliding_layers(const nlohmann::json& j, ModelConfig& c, int pattern);

// Mixture of Experts: num_experts (or num_local_experts), num_experts_per_tok,
// moe_intermediate_size (else intermediate_size), shared_expert_intermediate_size,
// norm_topk_prob (else norm_default), and which layers are MoE (decoder_sparse_step,
// mlp_only_layers). No experts: nothing changes, or an error when `required`.
Status hf_moe(const nlohmann::json& j, ModelConfig& c, bool norm_default, bool required = false);

// ---- GGUF ----
std::optional<double> gguf_float(const GgufFile& f, const ModelConfig& c, std::string_view suffix);
std::optional<int64_t> gguf_int(const GgufFile& f, const ModelConfig& c, std::string_view suffix);
// An integer key in [lo, hi]; `def` when absent. Present with another type or out of range:
// an error naming the key and its value (a broken file, not a reason to use the default).
Result<int64_t> gguf_int_in(const GgufFile& f, std::string_view key, int64_t def, int64_t lo,
                            int64_t hi);
// A number key in [lo, hi] and finite; `def` when absent; errors as gguf_int_in.
Result<double> gguf_float_in(const GgufFile& f, std::string_view key, double def, double lo,
                             double hi);
// The architecture's attention.sliding_window: 0 (none) when absent, at most INT32_MAX.
Result<int32_t> gguf_sliding_window(const GgufFile& f, const ModelConfig& c);
void gguf_set_f32(GgufWriter& w, const ModelConfig& c, std::string_view suffix, float v);
void gguf_set_u32(GgufWriter& w, const ModelConfig& c, std::string_view suffix, uint32_t v);
// The window of the sliding layers (0: none); an error if they differ, or if the layers
// that slide are not those `slides(l)` names (llama.cpp's fixed pattern for the family).
Result<int32_t> gguf_window(const ModelConfig& c, bool (*slides)(int layer, int n_layer));

// Mixture of Experts as llama.cpp's files say it: expert_count, expert_used_count,
// expert_feed_forward_length, expert_shared_feed_forward_length, expert_weights_norm; every
// layer MoE. What a file leaves out is what the architecture's llama.cpp loader assumes:
struct GgufMoe {
  bool norm_default = true;  // expert_weights_norm absent
  bool required = false;     // no expert_count: an error (else a dense model)
  // expert_feed_forward_length absent: feed_forward_length / expert_used_count (llama.cpp's
  // Qwen MoE loaders), else feed_forward_length (Mixtral's llama).
  bool ff_exp_per_used = false;
  // kNone: no shared expert, whatever the file says (the loader never reads the key);
  // kIfSized: one where expert_shared_feed_forward_length says so; kGated: always one, of
  // feed_forward_length when the key is absent (llama.cpp's qwen2moe, qwen3next, qwen35moe).
  // A shared expert is gated by sigmoid(x · ffn_gate_inp_shexp).
  enum class Shared { kNone, kIfSized, kGated } shared = Shared::kIfSized;
};
Status gguf_moe(const GgufFile& f, ModelConfig& c, const GgufMoe& rules);
// Writes those keys; an error for what llama.cpp's files cannot say (dense layers between MoE
// ones).
Status gguf_write_moe(GgufWriter& w, const ModelConfig& c, bool norm_default);

// ---- Gated DeltaNet hybrids (Qwen3-Next, Qwen3.5) ----
// The recurrent layers' sizes (linear_* keys / llama.cpp's ssm.* keys) and which layers they
// are (layer_types, else every full_attention_interval-th layer attends); sets the output gate
// of the full-attention layers and the pre-FFN norm's name (post_attention_norm).
extern const std::span<const LayerTensorName> kQwen3NextLayerTensors, kQwen35LayerTensors,
    kQwen35MoeLayerTensors;
// Their experts as llama.cpp's qwen3next / qwen35moe loaders read them: a gated shared expert
// always, widths from feed_forward_length where the file leaves them out.
inline constexpr GgufMoe kQwenHybridMoe = {.norm_default = true,
                                           .required = true,
                                           .ff_exp_per_used = true,
                                           .shared = GgufMoe::Shared::kGated};
// Their multi-token prediction modules' own tensors under "mtp." (ArchSpec::mtp_tensors).
extern const std::span<const LayerTensorName> kQwenMtpTensors;
Status hf_deltanet(const nlohmann::json& j, ModelConfig& c);
Status gguf_deltanet(const GgufFile& f, ModelConfig& c);
// Writes those keys; an error for a layer pattern llama.cpp's interval cannot say.
Status gguf_write_deltanet(GgufWriter& w, const ModelConfig& c);
// Their multi-token prediction modules' blocks (ModelConfig::mtp_layers): full attention
// whatever the layer pattern, with experts where the model has them, reading the target's
// final-norm hidden state (ModelConfig::mtp_hidden_after_norm). Called once the experts are read.
void hybrid_mtp_layers(ModelConfig& c);

}  // namespace loom::archs
