#include "tools/synth_presets.h"

#include <array>

namespace loom {
namespace {

// Published configs: Qwen3-0.6B / Qwen3-1.7B config.json (hidden 1024 / 2048, 28 layers,
// 16 heads, 8 KV heads, head_dim 128, intermediate 3072 / 6144, vocab 151936, tied,
// rope_theta 1e6, rms eps 1e-6, max positions 40960) and Llama-3.1-8B (hidden 4096, 32
// layers, 32 heads, 8 KV heads, intermediate 14336, vocab 128256, rope_theta 500000,
// llama3 rope scaling factor 8 / low 1 / high 4 / original 8192, 131072 positions).
constexpr std::array<SynthPreset, 7> kPresets = {{
    // name, arch, layers, embd, heads, kv, head_dim, ff, vocab, fixed, ctx, theta, eps, tied,
    // vocab fixture, rope scaling (factor, low, high, original)
    {"tiny", "llama", 2, 64, 4, 2, 16, 128, 512, false, 512, 0, 0, std::nullopt, "", 0, 1, 4, 0},
    // Like tiny but every matrix row is a multiple of 256, so K-quants apply everywhere.
    {"tiny-k", "llama", 2, 256, 4, 2, 64, 512, 512, false, 512, 0, 0, std::nullopt, "", 0, 1, 4, 0},
    // Tiny, with Qwen3's real 151,669-token vocabulary (padded to 151,936): constrained
    // generation tests need a real byte-level BPE vocabulary behind a fast random model.
    {"tiny-qwen3", "qwen3", 2, 64, 4, 2, 16, 128, 151936, true, 4096, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0},
    {"llama-0.5b", "llama", 28, 1024, 16, 8, 128, 3072, 32000, false, 4096, 10000.0f, 1e-5f, false,
     "ggml-vocab-llama-spm.gguf", 0, 1, 4, 0},
    {"qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, 151936, true, 40960, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0},
    {"qwen3-1.7b", "qwen3", 28, 2048, 16, 8, 128, 6144, 151936, true, 40960, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0},
    {"llama-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, true, 131072, 500000.0f, 1e-5f,
     false, "", 8.0f, 1.0f, 4.0f, 8192},
}};

// Qwen2 / Qwen3 small checkpoints tie their embeddings; Llama ones do not.
constexpr std::array<SynthArch, 3> kArchs = {{
    {"llama", false, false, 10000.0f, 1e-5f, false},
    {"qwen2", true, false, 1e6f, 1e-6f, false},
    {"qwen3", false, true, 1e6f, 1e-6f, true},
}};

}  // namespace

const SynthPreset* find_synth_preset(std::string_view name) {
  for (const auto& p : kPresets)
    if (p.name == name) return &p;
  return nullptr;
}

const SynthArch* find_synth_arch(std::string_view name) {
  for (const auto& a : kArchs)
    if (a.name == name) return &a;
  return nullptr;
}

std::vector<std::string_view> synth_preset_names() {
  std::vector<std::string_view> v;
  for (const auto& p : kPresets) v.push_back(p.name);
  return v;
}

std::vector<std::string_view> synth_arch_names() {
  std::vector<std::string_view> v;
  for (const auto& a : kArchs) v.push_back(a.name);
  return v;
}

}  // namespace loom
