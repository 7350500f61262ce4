// ModelConfig: every hyperparameter plus feature flags. Architectures differ only here;
// kernels and the forward pass never switch on an architecture name.
#pragma once

#include <cstdint>
#include <string>

namespace loom {

enum class RopeStyle { kInterleaved, kNeox };  // pairs (2i, 2i+1) vs halves (i, i + d/2)

enum class RopeScalingType { kNone, kLinear, kLlama3 };

struct RopeScaling {  // factor == 0 means none
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 0.0f;  // linear: positions divided by factor; llama3: low frequencies divided
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int32_t original_context = 8192;
};

struct ModelConfig {
  std::string arch;  // registry name: "llama", "qwen2", "qwen3" (for display only)
  int32_t n_vocab = 0;
  int32_t n_embd = 0;
  int32_t n_layer = 0;
  int32_t n_head = 0;
  int32_t n_head_kv = 0;
  int32_t head_dim = 0;  // may differ from n_embd / n_head (qwen3)
  int32_t n_ff = 0;
  int32_t context_length = 0;
  float rms_eps = 1e-5f;
  float rope_theta = 10000.0f;
  RopeStyle rope_style = RopeStyle::kNeox;  // of the weights as loaded
  RopeScaling rope_scaling;
  bool qkv_bias = false;
  bool qk_norm = false;
  bool tied_embeddings = false;
  int32_t bos_token = -1;
  int32_t eos_token = -1;
};

}  // namespace loom
