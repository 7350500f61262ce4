// Hyperparameters from GGUF metadata or a Hugging Face config.json → ModelConfig, and the
// RoPE frequency table a config implies. Tensor-derived fields (n_vocab, tied embeddings,
// qkv bias, qk norm) are filled in when the weights are bound (model/weights.h).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "model/config.h"

namespace loom {

// Reads general.architecture and the "{arch}.*" / tokenizer keys. rope_style is the layout
// GGUF files of that architecture store.
Result<ModelConfig> config_from_gguf(const GgufFile& file);

// `json_text` is the content of config.json; rope_style is kNeox (HF never permutes).
// `source` names the file in error messages.
Result<ModelConfig> config_from_hf_json(std::string_view json_text, const std::string& source);
Result<ModelConfig> config_from_hf_dir(const std::string& dir);

// YaRN's attention factor when the config gives none: 0.1·ln(factor) + 1 (1 for factor <= 1).
float yarn_default_attn_factor(float factor);

// Angular frequency of each rotated pair i < n_rot/2 of `layer`, scaling folded in.
// freq_factors (a GGUF rope_freqs.weight, may be empty) divides each frequency and then
// replaces the config's scaling, as llama.cpp does for Llama 3.1 files; neither applies to a
// layer that is not rope_scaled.
std::vector<float> rope_inv_freq(const ModelConfig& config, std::span<const float> freq_factors,
                                 const LayerSpec& layer = {});

}  // namespace loom
