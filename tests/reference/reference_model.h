// An independent reference forward pass for tiny models, used only by tests. Written apart
// from src/backend/cpu/cpu_model.cpp on purpose: plain scalar loops, every weight dequantized to
// float, double accumulation everywhere, a contiguous K/V history, one sequence. The fast
// path's logits must match it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.h"
#include "format/gguf.h"
#include "format/tensor.h"
#include "model/config.h"

namespace loom::reference {

// GGUF tensor name → view (nullptr when absent).
using TensorLookup = std::function<const TensorView*(std::string_view name)>;

TensorLookup gguf_lookup(const GgufFile& file);

// Logits for every position of `tokens` (positions 0..n-1): [n][n_vocab] row-major.
// Uses the config's hyperparameters and feature flags; computes RoPE frequencies (including
// llama3 scaling and a rope_freqs.weight tensor) itself.
// hidden (optional): the final-norm hidden states, [n][n_embd] (what embedding models pool).
// pre_norm (optional): the hidden states before the final norm, [n][n_embd] (what a
// multi-token prediction module reads).
Result<std::vector<float>> forward(const ModelConfig& config, const TensorLookup& tensors,
                                   std::span<const int32_t> tokens,
                                   std::vector<float>* hidden = nullptr,
                                   std::vector<float>* pre_norm = nullptr);

// Multi-token prediction module `index` (ModelConfig::n_mtp_layers) over one sequence: row t,
// at position t, combines tokens[t] with hidden[t] (the main model's state before its final
// norm, [n][n_embd]; for DeepSeek-V3's use, tokens[t] is the token after the one hidden[t]
// was computed for; with ModelConfig::mtp_hidden_after_norm, hidden[t] is the state after the
// final norm). Returns logits [n][n_vocab]; out_hidden (optional) gets the block's output
// before the module's norm, or after it with mtp_hidden_after_norm, [n][n_embd] (what a second
// step chains on).
Result<std::vector<float>> mtp_forward(const ModelConfig& config, const TensorLookup& tensors,
                                       int index, std::span<const int32_t> tokens,
                                       std::span<const float> hidden,
                                       std::vector<float>* out_hidden = nullptr);

}  // namespace loom::reference
