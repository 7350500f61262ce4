// The architecture table.
#include "model/arch.h"

#include <string>

namespace loom {
namespace {

// Mistral checkpoints are llama-shaped (GGUF files say "llama"); sliding-window attention is
// not implemented, which only matters past the window (4096 tokens for Mistral 7B v0.1).
constexpr ArchSpec kArchs[] = {
    // name     HF model_type            GGUF RoPE layout          qkv bias              qk norm
    {"llama", {"llama", "mistral"}, RopeStyle::kInterleaved, TensorNeed::kOptional, TensorNeed::kAbsent},
    {"qwen2", {"qwen2"}, RopeStyle::kNeox, TensorNeed::kRequired, TensorNeed::kAbsent},
    {"qwen3", {"qwen3"}, RopeStyle::kNeox, TensorNeed::kOptional, TensorNeed::kRequired},
};

}  // namespace

std::span<const ArchSpec> all_archs() { return kArchs; }

const ArchSpec* find_arch(std::string_view gguf_name) {
  for (const auto& a : kArchs)
    if (a.name == gguf_name) return &a;
  return nullptr;
}

const ArchSpec* find_arch_hf(std::string_view model_type) {
  for (const auto& a : kArchs)
    for (auto t : a.hf_model_types)
      if (!t.empty() && t == model_type) return &a;
  return nullptr;
}

std::string supported_arch_list() {
  std::string s;
  for (const auto& a : kArchs) {
    if (!s.empty()) s += ", ";
    s += a.name;
  }
  return s;
}

}  // namespace loom
