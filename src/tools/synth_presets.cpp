#include "tools/synth_presets.h"

#include <array>

namespace loom {
namespace {

// harmony's markers (gpt-oss's chat format), the control tokens of OpenAI's o200k_harmony.
constexpr std::string_view kHarmonyTokens[] = {"<|start|>",   "<|end|>",       "<|message|>",
                                               "<|channel|>", "<|constrain|>", "<|return|>",
                                               "<|call|>"};

// Published configs: Qwen3-0.6B / Qwen3-1.7B config.json (hidden 1024 / 2048, 28 layers,
// 16 heads, 8 KV heads, head_dim 128, intermediate 3072 / 6144, vocab 151936, tied,
// rope_theta 1e6, rms eps 1e-6, max positions 40960) and Llama-3.1-8B (hidden 4096, 32
// layers, 32 heads, 8 KV heads, intermediate 14336, vocab 128256, rope_theta 500000,
// llama3 rope scaling factor 8 / low 1 / high 4 / original 8192, 131072 positions).
constexpr std::array<SynthPreset, 26> kPresets = {{
    // name, arch, layers, embd, heads, kv, head_dim, ff, vocab, fixed, ctx, theta, eps, tied,
    // vocab fixture, rope scaling (factor, low, high, original)
    {"tiny", "llama", 2, 64, 4, 2, 16, 128, 512, false, 512, 0, 0, std::nullopt, "", 0, 1, 4, 0},
    // Like tiny but every matrix row is a multiple of 256, so K-quants apply everywhere.
    {"tiny-k", "llama", 2, 256, 4, 2, 64, 512, 512, false, 512, 0, 0, std::nullopt, "", 0, 1, 4, 0},
    // Tiny Gemma 3: windows of 8 on layers 0-4, layer 5 global (engine tests cross the window).
    {"tiny-swa", "gemma3", 6,    64, 4, 2, 16, 128, 512, false, 512,
     1e6f,       1e-6f,    true, "", 0, 1, 4,  0,   8,   0,     {}},
    // Tiny, with Qwen3's real 151,669-token vocabulary (padded to 151,936): constrained
    // generation tests need a real byte-level BPE vocabulary behind a fast random model.
    {"tiny-qwen3", "qwen3", 2, 64, 4, 2, 16, 128, 151936, true, 4096, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0},
    // tiny-qwen3 as an embedding model (last-token pooling, as Qwen3-Embedding) and as a
    // reranker converted by llama.cpp (pooling rank, cls.output = the yes/no rows).
    // clang-format off
    {"tiny-qwen3-embed", "qwen3", 2, 64, 4, 2, 16, 128, 151936, true, 4096, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0, 0, 0, {}, 0, 0, 0,
     0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0,  // not MLA, no MTP layers
     3, false},
    {"tiny-qwen3-rerank", "qwen3", 2, 64, 4, 2, 16, 128, 151936, true, 4096, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0, 0, 0, {}, 0, 0, 0,
     0, 0, 0, 0, 0, 0, 0, 0, 0.0f, 0,  // not MLA, no MTP layers
     4, true},
    // clang-format on
    {"llama-0.5b", "llama", 28, 1024, 16, 8, 128, 3072, 32000, false, 4096, 10000.0f, 1e-5f, false,
     "ggml-vocab-llama-spm.gguf", 0, 1, 4, 0},
    {"qwen3-0.6b", "qwen3", 28, 1024, 16, 8, 128, 3072, 151936, true, 40960, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0},
    {"qwen3-1.7b", "qwen3", 28, 2048, 16, 8, 128, 6144, 151936, true, 40960, 1e6f, 1e-6f, true,
     "ggml-vocab-qwen3.gguf", 0, 1, 4, 0},
    {"llama-8b", "llama", 32, 4096, 32, 8, 128, 14336, 128256, true, 131072, 500000.0f, 1e-5f,
     false, "", 8.0f, 1.0f, 4.0f, 8192},
    // The families of issue 15, from their published config.json files (context lengths cut
    // to 8192, synth models being for speed and shape, except Gemma 3's 32768: its windows
    // are measured at depth 8192):
    // gemma-2-2b: hidden 2304, 26 layers, 8 heads / 4 KV, head_dim 256, intermediate 9216,
    // vocab 256000, window 4096, soft-caps 50 / 30, tied.
    {"gemma2-2b", "gemma2",
     26,          2304,
     8,           4,
     256,         9216,
     256000,      true,
     8192,        10000.0f,
     1e-6f,       true,
     "",          0,
     1,           4,
     0,           4096,
     0,           {{{"attn_logit_softcapping", 50.0f}, {"final_logit_softcapping", 30.0f}}}},
    // gemma-3-1b-pt: hidden 1152, 26 layers, 4 heads / 1 KV, head_dim 256, intermediate 6912,
    // vocab 262144, window 512 (every sixth layer global), rope_theta 1e6, 32768 positions, tied.
    {"gemma3-1b", "gemma3", 26,   1152, 4, 1, 256, 6912, 262144, true, 32768,
     1e6f,        1e-6f,    true, "",   0, 1, 4,   0,    512,    0,    {}},
    // Phi-4-mini: hidden 3072, 32 layers, 24 heads / 8 KV, head_dim 128, intermediate 8192,
    // vocab 200064, partial_rotary_factor 0.75 (96 of 128 dims), tied (its LongRoPE factors
    // only matter past 4096 tokens and are left out).
    {"phi4-mini", "phi3", 32,   3072, 24, 8, 128, 8192, 200064, true, 8192,
     10000.0f,    1e-5f,  true, "",   0,  1, 4,   0,    0,      96,   {}},
    // granite-3.1-2b: hidden 2048, 40 layers, 32 heads / 8 KV, intermediate 8192, vocab
    // 49155, multipliers: embedding 12, residual 0.22, attention 0.015625, logits 8; tied.
    {"granite-2b",
     "granite",
     40,
     2048,
     32,
     8,
     64,
     8192,
     49155,
     true,
     8192,
     5e6f,
     1e-5f,
     true,
     "",
     0,
     1,
     4,
     0,
     0,
     0,
     {{{"embedding_scale", 12.0f},
       {"residual_scale", 0.22f},
       {"attention.scale", 0.015625f},
       {"logit_scale", 8.0f}}}},
    // OLMo-2-0425-1B: hidden 2048, 16 layers, 16 heads / 16 KV, intermediate 8192, vocab
    // 100352, rope_theta 500000, not tied.
    {"olmo2-1b", "olmo2", 16,    2048, 16, 16, 128, 8192, 100352, true, 8192,
     500000.0f,  1e-6f,   false, "",   0,  1,  4,   0,    0,      0,    {}},
    // SmolLM3-3B: hidden 2048, 36 layers, 16 heads / 4 KV, intermediate 11008, vocab 128256,
    // rope_theta 5e6, no RoPE in every fourth layer, tied.
    {"smollm3-3b", "smollm3", 36,   2048, 16, 4, 128, 11008, 128256, true, 8192,
     5e6f,         1e-6f,     true, "",   0,  1, 4,   0,     0,      0,    {}},
    // Mixture of Experts (issue 16). Tiny: 8 experts of width 32, 2 per token.
    {"tiny-moe", "qwen3moe", 2, 64, 4, 2, 16, 128, 512, false, 512, 1e6f, 1e-6f,
     false,      "",         0, 1,  4, 0, 0,  0,   {},  8,     2,   32},
    // The shape issue 16 measures llama.cpp on: 16 layers, n_embd 1024, 16 query / 4 KV heads
    // of 128, 64 experts of width 512, 8 per token, vocab 32000 (Qwen3-30B-A3B's proportions
    // at a size a 2-core machine runs).
    {"qwen3moe-2b", "qwen3moe", 16, 1024, 16, 4, 128, 3072, 32000, true, 4096, 1e6f, 1e-6f,
     false,         "",         0,  1,    4,  0, 0,   0,    {},    64,   8,    512},
    // Qwen3-30B-A3B's published config.json (48 layers, hidden 2048, 32 heads / 4 KV of 128,
    // 128 experts of width 768, 8 per token, vocab 151936, rope_theta 1e6, 40960 positions,
    // untied): 30.5B parameters, 3.3B active; a 17 GB file at Q4_K, for start-up at full size.
    {"qwen3moe-30b",
     "qwen3moe",
     48,
     2048,
     32,
     4,
     128,
     6144,
     151936,
     true,
     40960,
     1e6f,
     1e-6f,
     false,
     "ggml-vocab-qwen3.gguf",
     0,
     1,
     4,
     0,
     0,
     0,
     {},
     128,
     8,
     768},
    // gpt-oss (biases, attention sinks, windows on even layers, YaRN of factor 32 over 4096
    // positions, harmony's control tokens). Tiny: 4 experts of width 64, 2 per token, windows
    // of 8. Context 2048: the real gpt-oss template's system and tool prompt alone is 420-480
    // of the placeholder vocabulary's mostly one-character tokens, a tool call another ~60.
    {.name = "tiny-gpt-oss",
     .default_arch = "gpt-oss",
     .n_layer = 2,
     .n_embd = 64,
     .n_head = 4,
     .n_head_kv = 2,
     .head_dim = 16,
     .n_ff = 128,
     .n_vocab = 512,
     .context_length = 2048,
     .rope_theta = 150000.0f,
     .rms_eps = 1e-5f,
     .tied_embeddings = false,
     .rope_low_freq_factor = 1,
     .rope_high_freq_factor = 4,
     .sliding_window = 8,
     .n_expert = 4,
     .n_expert_used = 2,
     .n_ff_exp = 64,
     .yarn_factor = 32,
     .yarn_original_context = 4096,
     .control_tokens = kHarmonyTokens},
    // gpt-oss-20b's proportions (24 layers, hidden 2880, 64 heads of 64 / 8 KV, 32 experts of
    // width 2880, 4 per token, window 128) at half the depth and hidden 1024, vocab 32000:
    // 1.3B parameters, ~0.2B active.
    {.name = "gpt-oss-1b",
     .default_arch = "gpt-oss",
     .n_layer = 12,
     .n_embd = 1024,
     .n_head = 16,
     .n_head_kv = 2,
     .head_dim = 64,
     .n_ff = 1024,
     .n_vocab = 32000,
     .vocab_size_fixed = true,
     .context_length = 4096,
     .rope_theta = 150000.0f,
     .rms_eps = 1e-5f,
     .tied_embeddings = false,
     .rope_low_freq_factor = 1,
     .rope_high_freq_factor = 4,
     .sliding_window = 128,
     .n_expert = 32,
     .n_expert_used = 4,
     .n_ff_exp = 1024,
     .yarn_factor = 32,
     .yarn_original_context = 4096,
     .control_tokens = kHarmonyTokens},
    // DeepSeek-V3's layout (Multi-head Latent Attention, a leading dense layer, sigmoid routing
    // over expert groups, a shared expert). Tiny: a dense and a MoE layer, 4 heads of 16 + 8
    // (value 16), query rank 32, latent 32 + 8; 8 experts of width 32 in 4 groups (2 used),
    // 2 per token; one multi-token prediction module (a MoE block, as DeepSeek-V3's).
    {"tiny-mla", "deepseek2", 2,  64, 4,  4, 24, 128, 512, false, 512, 10000.0f,
     1e-6f,      false,       "", 0,  1,  4, 0,  0,   8,   {},    8,   2,
     32,         32,          32, 8,  16, 1, 1,  4,   2,   2.5f,  1},
    // DeepSeek-V3's proportions (61 layers, hidden 7168, 128 heads of 128 + 64, query rank
    // 1536, latent 512 + 64, 256 experts of 2048 in 8 groups, 8 per token, 1 shared, 3 dense)
    // at a size a 2-core machine runs: 16 layers, hidden 1024, 16 heads of 64 + 32 (value 64),
    // query rank 512, latent 256 + 32, 64 experts of 512 in 8 groups (4 used), 6 per token,
    // 1 shared, 1 dense layer of 4096, vocab 32000: 1.66B parameters, 0.30B active; and, as
    // DeepSeek-V3, one multi-token prediction module (one more MoE block, 0.11B parameters).
    // clang-format off
    {"deepseek3-2b", "deepseek2", 16, 1024, 16, 16, 96, 4096, 32000, true, 4096, 10000.0f, 1e-6f,
     false, "", 0, 1, 4, 0, 0, 32, {}, 64, 6, 512,
     512, 256, 32, 64, 1, 1, 8, 4, 2.5f, 1},
    // clang-format on
    // Gated DeltaNet hybrids (issue 18): three recurrent layers to one of gated full attention,
    // partial RoPE (a quarter of each head). Tiny: value heads twice the key heads (their
    // regrouping is exercised), 16-wide heads; tiny-qwen3next adds Qwen3-Next's experts (8 of
    // width 32, 2 per token, a shared one of 32). Each has one multi-token prediction module
    // (a gated full-attention block with the model's FFN), as the published checkpoints do.
    {.name = "tiny-qwen35",
     .default_arch = "qwen35",
     .n_layer = 4,
     .n_embd = 64,
     .n_head = 4,
     .n_head_kv = 2,
     .head_dim = 16,
     .n_ff = 128,
     .n_vocab = 512,
     .context_length = 512,
     .rope_low_freq_factor = 1,
     .rope_high_freq_factor = 4,
     .n_rot = 4,
     .n_mtp_layers = 1,
     .ssm_k_heads = 2,
     .ssm_v_heads = 4,
     .ssm_d_k = 16,
     .ssm_d_v = 16,
     .ssm_conv_kernel = 4,
     .full_attention_interval = 4},
    {.name = "tiny-qwen3next",
     .default_arch = "qwen3next",
     .n_layer = 4,
     .n_embd = 64,
     .n_head = 4,
     .n_head_kv = 2,
     .head_dim = 16,
     .n_ff = 128,
     .n_vocab = 512,
     .context_length = 512,
     .rope_low_freq_factor = 1,
     .rope_high_freq_factor = 4,
     .n_rot = 4,
     .n_expert = 8,
     .n_expert_used = 2,
     .n_ff_exp = 32,
     .n_mtp_layers = 1,
     .ssm_k_heads = 2,
     .ssm_v_heads = 4,
     .ssm_d_k = 16,
     .ssm_d_v = 16,
     .ssm_conv_kernel = 4,
     .full_attention_interval = 4,
     .n_ff_shexp = 32},
    // Qwen3.5-2B's shape: hidden 2048 (its published config), and as Qwen3.5-0.8B's published
    // config has them: 24 layers, every fourth full attention, heads of 256 with 2 KV heads,
    // partial_rotary_factor 0.25 (64 dimensions), rope_theta 1e7, linear attention of 16 key and
    // 16 value heads of 128, conv kernel 4, vocab 248320, tied; assumed: 16 query heads and
    // intermediate 6144 (context cut to 8192); one multi-token prediction module, as the
    // published checkpoints' mtp_num_hidden_layers (a gated attention block and a dense FFN).
    {.name = "qwen35-2b",
     .default_arch = "qwen35",
     .n_layer = 24,
     .n_embd = 2048,
     .n_head = 16,
     .n_head_kv = 2,
     .head_dim = 256,
     .n_ff = 6144,
     .n_vocab = 248320,
     .vocab_size_fixed = true,
     .context_length = 8192,
     .rope_theta = 1e7f,
     .rms_eps = 1e-6f,
     .tied_embeddings = true,
     .rope_low_freq_factor = 1,
     .rope_high_freq_factor = 4,
     .n_rot = 64,
     .n_mtp_layers = 1,
     .ssm_k_heads = 16,
     .ssm_v_heads = 16,
     .ssm_d_k = 128,
     .ssm_d_v = 128,
     .ssm_conv_kernel = 4,
     .full_attention_interval = 4},
}};

}  // namespace

const SynthPreset* find_synth_preset(std::string_view name) {
  for (const auto& p : kPresets)
    if (p.name == name) return &p;
  return nullptr;
}

std::vector<std::string_view> synth_preset_names() {
  std::vector<std::string_view> v;
  for (const auto& p : kPresets) v.push_back(p.name);
  return v;
}

}  // namespace loom
