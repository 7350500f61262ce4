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
Result<std::vector<float>> forward(const ModelConfig& config, const TensorLookup& tensors,
                                   std::span<const int32_t> tokens,
                                   std::vector<float>* hidden = nullptr);

}  // namespace loom::reference
