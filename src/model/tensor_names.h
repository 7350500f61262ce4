// The one table of GGUF metadata keys and tensor names loom reads and writes, plus the
// Hugging Face → GGUF tensor-name mapping. Canonical names inside loom are GGUF's; every other
// spelling (safetensors checkpoints) is translated here and nowhere else.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace loom {
struct ArchSpec;
}

namespace loom::names {

// ---- GGUF metadata keys -------------------------------------------------------------------
inline constexpr std::string_view kGeneralArchitecture = "general.architecture";
inline constexpr std::string_view kGeneralName = "general.name";
inline constexpr std::string_view kGeneralAlignment = "general.alignment";
inline constexpr std::string_view kGeneralFileType = "general.file_type";

// Per-architecture keys are "{arch}.{suffix}"; build them with arch_key().
inline constexpr std::string_view kVocabSize = "vocab_size";
inline constexpr std::string_view kContextLength = "context_length";
inline constexpr std::string_view kEmbeddingLength = "embedding_length";
inline constexpr std::string_view kBlockCount = "block_count";
inline constexpr std::string_view kFeedForwardLength = "feed_forward_length";
inline constexpr std::string_view kHeadCount = "attention.head_count";
inline constexpr std::string_view kHeadCountKv = "attention.head_count_kv";
inline constexpr std::string_view kKeyLength = "attention.key_length";
inline constexpr std::string_view kValueLength = "attention.value_length";
inline constexpr std::string_view kRmsEps = "attention.layer_norm_rms_epsilon";
inline constexpr std::string_view kRopeFreqBase = "rope.freq_base";
inline constexpr std::string_view kRopeDimensionCount = "rope.dimension_count";
inline constexpr std::string_view kRopeScalingType =
    "rope.scaling.type";  // "none", "linear", "llama3", ...
inline constexpr std::string_view kRopeScalingFactor = "rope.scaling.factor";
inline constexpr std::string_view kRopeScalingOrigCtx = "rope.scaling.original_context_length";
inline constexpr std::string_view kRopeScalingAttnFactor = "rope.scaling.attn_factor";  // LongRoPE
// Not written by llama.cpp's converter (it stores rope_freqs.weight instead); loom writes and
// reads them so a converted Llama 3.1 keeps its exact scaling parameters.
inline constexpr std::string_view kRopeScalingLowFreqFactor = "rope.scaling.low_freq_factor";
inline constexpr std::string_view kRopeScalingHighFreqFactor = "rope.scaling.high_freq_factor";

// Family-specific hyperparameters, as llama.cpp names them.
inline constexpr std::string_view kSlidingWindow = "attention.sliding_window";
inline constexpr std::string_view kAttnLogitSoftcap = "attn_logit_softcapping";    // gemma2
inline constexpr std::string_view kFinalLogitSoftcap = "final_logit_softcapping";  // gemma2
inline constexpr std::string_view kEmbeddingScale = "embedding_scale";             // granite
inline constexpr std::string_view kResidualScale = "residual_scale";               // granite
inline constexpr std::string_view kAttentionScale = "attention.scale";             // granite
inline constexpr std::string_view kLogitScale = "logit_scale";                     // granite
// Mixture of Experts.
inline constexpr std::string_view kExpertCount = "expert_count";
inline constexpr std::string_view kExpertUsedCount = "expert_used_count";
inline constexpr std::string_view kExpertFeedForwardLength = "expert_feed_forward_length";
inline constexpr std::string_view kExpertSharedFeedForwardLength =
    "expert_shared_feed_forward_length";
inline constexpr std::string_view kExpertWeightsNorm = "expert_weights_norm";  // bool
// DeepSeek-V3 (GGUF deepseek2): Multi-head Latent Attention's ranks and per-head sizes (the
// _mla keys in files whose key_length / value_length describe the latent row, llama.cpp's
// converter since its MLA support), its router and dense leading layers.
inline constexpr std::string_view kQLoraRank = "attention.q_lora_rank";
inline constexpr std::string_view kKvLoraRank = "attention.kv_lora_rank";
inline constexpr std::string_view kKeyLengthMla = "attention.key_length_mla";
inline constexpr std::string_view kValueLengthMla = "attention.value_length_mla";
inline constexpr std::string_view kExpertSharedCount = "expert_shared_count";
inline constexpr std::string_view kExpertWeightsScale = "expert_weights_scale";
inline constexpr std::string_view kExpertGatingFunc = "expert_gating_func";  // 1 softmax, 2 sigmoid
inline constexpr std::string_view kLeadingDenseBlockCount = "leading_dense_block_count";
// Multi-token prediction layers counted in block_count after the main ones (llama.cpp's
// LLM_KV_NEXTN_PREDICT_LAYERS).
inline constexpr std::string_view kNextnPredictLayers = "nextn_predict_layers";
inline constexpr std::string_view kExpertGroupCount = "expert_group_count";
inline constexpr std::string_view kExpertGroupUsedCount = "expert_group_used_count";
inline constexpr std::string_view kRopeScalingYarnLogMul = "rope.scaling.yarn_log_multiplier";
// YaRN RoPE (gpt-oss): llama.cpp's keys; absent, beta_fast 32 and beta_slow 1.
inline constexpr std::string_view kRopeScalingYarnBetaFast = "rope.scaling.yarn_beta_fast";
inline constexpr std::string_view kRopeScalingYarnBetaSlow = "rope.scaling.yarn_beta_slow";
// What cos and sin are multiplied by, where a config gives it (its rope attention_factor, which
// llama.cpp's converter writes here); absent, 0.1·ln(factor) + 1.
inline constexpr std::string_view kRopeScalingYarnAttnFactor = "rope.scaling.yarn_attn_factor";

// Gated DeltaNet hybrids (llama.cpp's qwen3next / qwen35): the recurrent layers' sizes, and
// which layers attend fully (every full_attention_interval-th, 1-based).
inline constexpr std::string_view kSsmConvKernel = "ssm.conv_kernel";
inline constexpr std::string_view kSsmStateSize = "ssm.state_size";         // d_k
inline constexpr std::string_view kSsmGroupCount = "ssm.group_count";       // key heads
inline constexpr std::string_view kSsmTimeStepRank = "ssm.time_step_rank";  // value heads
inline constexpr std::string_view kSsmInnerSize = "ssm.inner_size";         // value heads * d_v
inline constexpr std::string_view kFullAttentionInterval = "full_attention_interval";
// One bool per block (the multi-token prediction blocks false): which are recurrent. llama.cpp
// prefers it to the interval; its converter writes it from config.json's layer_types.
inline constexpr std::string_view kRecurrentLayers = "attention.recurrent_layers";
// Qwen3.5's multimodal RoPE sections (text alone rotates as plain RoPE; llama.cpp requires it).
inline constexpr std::string_view kRopeDimensionSections = "rope.dimension_sections";

// Embedding and reranking models (llama.cpp's LLM_KV_POOLING_TYPE,
// LLM_KV_CLASSIFIER_OUTPUT_LABELS).
inline constexpr std::string_view kPoolingType = "pooling_type";  // u32, PoolingType
inline constexpr std::string_view kClassifierOutputLabels = "classifier.output_labels";

std::string arch_key(std::string_view arch, std::string_view suffix);  // "llama.block_count"

inline constexpr std::string_view kTokenizerModel = "tokenizer.ggml.model";
inline constexpr std::string_view kTokenizerPre = "tokenizer.ggml.pre";
inline constexpr std::string_view kTokenizerTokens = "tokenizer.ggml.tokens";
inline constexpr std::string_view kTokenizerScores = "tokenizer.ggml.scores";
inline constexpr std::string_view kTokenizerTokenType = "tokenizer.ggml.token_type";
inline constexpr std::string_view kTokenizerMerges = "tokenizer.ggml.merges";
inline constexpr std::string_view kTokenizerBos = "tokenizer.ggml.bos_token_id";
inline constexpr std::string_view kTokenizerEos = "tokenizer.ggml.eos_token_id";
inline constexpr std::string_view kTokenizerPad = "tokenizer.ggml.padding_token_id";
inline constexpr std::string_view kTokenizerAddBos = "tokenizer.ggml.add_bos_token";
inline constexpr std::string_view kChatTemplate = "tokenizer.chat_template";
// A named template ("tokenizer.chat_template.NAME"): llama.cpp's converter stores a Qwen3
// reranker's prompt as "rerank", with {query} and {document} placeholders.
inline constexpr std::string_view kRerankTemplate = "tokenizer.chat_template.rerank";

// ---- Tensor names ---------------------------------------------------------------------------
// Shapes in ggml order (ne[0] first); E = n_embd, D = head_dim, V = n_vocab, F = n_ff.
inline constexpr std::string_view kTokenEmbd = "token_embd.weight";    // {E, V}
inline constexpr std::string_view kOutputNorm = "output_norm.weight";  // {E}
inline constexpr std::string_view kOutput = "output.weight";           // {E, V}; absent when tied
// A classifier head on the pooled hidden state (llama.cpp's CLS_OUT): a converted Qwen3
// reranker's holds the LM head's "yes" and "no" rows.
inline constexpr std::string_view kClsOut = "cls.output.weight";    // {E, n_cls_out}
inline constexpr std::string_view kClsOutBias = "cls.output.bias";  // {n_cls_out}
inline constexpr std::string_view kRopeFactorsShort = "rope_factors_short.weight";  // LongRoPE
inline constexpr std::string_view kRopeFactorsLong = "rope_factors_long.weight";    // LongRoPE
inline constexpr std::string_view kRopeFreqs =
    "rope_freqs.weight";  // {D/2} divisors of each frequency

// Per-layer suffixes; the full name is "blk.{layer}.{suffix}" (layer_tensor()).
inline constexpr std::string_view kAttnNorm = "attn_norm.weight";      // {E}
inline constexpr std::string_view kAttnQ = "attn_q.weight";            // {E, n_head * D}
inline constexpr std::string_view kAttnK = "attn_k.weight";            // {E, n_head_kv * D}
inline constexpr std::string_view kAttnV = "attn_v.weight";            // {E, n_head_kv * D}
inline constexpr std::string_view kAttnQBias = "attn_q.bias";          // {n_head * D}
inline constexpr std::string_view kAttnKBias = "attn_k.bias";          // {n_head_kv * D}
inline constexpr std::string_view kAttnVBias = "attn_v.bias";          // {n_head_kv * D}
inline constexpr std::string_view kAttnQNorm = "attn_q_norm.weight";   // {D}
inline constexpr std::string_view kAttnKNorm = "attn_k_norm.weight";   // {D}
inline constexpr std::string_view kAttnOutput = "attn_output.weight";  // {n_head * D, E}
inline constexpr std::string_view kAttnQkv =
    "attn_qkv.weight";  // {E, (n_head + 2 n_head_kv) * D}: q, k, v rows
inline constexpr std::string_view kAttnPostNorm =
    "post_attention_norm.weight";                                         // {E} (Gemma, OLMo 2)
inline constexpr std::string_view kFfnNorm = "ffn_norm.weight";           // {E}
inline constexpr std::string_view kFfnPostNorm = "post_ffw_norm.weight";  // {E} (Gemma, OLMo 2)
inline constexpr std::string_view kFfnGate = "ffn_gate.weight";           // {E, F}
inline constexpr std::string_view kFfnUp =
    "ffn_up.weight";  // {E, F}; {E, 2F} gate then up when fused (Phi-3)
inline constexpr std::string_view kFfnDown = "ffn_down.weight";  // {F, E}
// Mixture of Experts (X = n_expert, Fx = expert FFN width, Fs = shared expert's).
inline constexpr std::string_view kFfnGateInp = "ffn_gate_inp.weight";    // {E, X} router
inline constexpr std::string_view kFfnGateExps = "ffn_gate_exps.weight";  // {E, Fx, X}
inline constexpr std::string_view kFfnUpExps = "ffn_up_exps.weight";      // {E, Fx, X}
inline constexpr std::string_view kFfnDownExps = "ffn_down_exps.weight";  // {Fx, E, X}
// Gate and up fused (MoeConfig::fused_gate_up; llama.cpp's LLM_TENSOR_FFN_GATE_UP_EXPS, what
// its converter's --fuse-gate-up-exps writes): each expert's Fx gate rows, then its Fx up rows.
inline constexpr std::string_view kFfnGateUpExps = "ffn_gate_up_exps.weight";      // {E, 2 Fx, X}
inline constexpr std::string_view kFfnGateInpShexp = "ffn_gate_inp_shexp.weight";  // {E}
inline constexpr std::string_view kFfnGateShexp = "ffn_gate_shexp.weight";         // {E, Fs}
inline constexpr std::string_view kFfnUpShexp = "ffn_up_shexp.weight";             // {E, Fs}
inline constexpr std::string_view kFfnDownShexp = "ffn_down_shexp.weight";         // {Fs, E}
// gpt-oss: output-projection bias, attention sinks, router and expert biases.
inline constexpr std::string_view kAttnOutputBias = "attn_output.bias";     // {E}
inline constexpr std::string_view kAttnSinks = "attn_sinks.weight";         // {n_head}
inline constexpr std::string_view kFfnGateInpBias = "ffn_gate_inp.bias";    // {X}
inline constexpr std::string_view kFfnGateExpsBias = "ffn_gate_exps.bias";  // {Fx, X}
inline constexpr std::string_view kFfnUpExpsBias = "ffn_up_exps.bias";      // {Fx, X}
inline constexpr std::string_view kFfnDownExpsBias = "ffn_down_exps.bias";  // {E, X}

// Multi-head Latent Attention (R = kv_lora_rank, Rq = q_lora_rank, P = qk_rope_head_dim,
// N = qk_nope_head_dim, Dv = v_head_dim, H = n_head).
inline constexpr std::string_view kAttnQA = "attn_q_a.weight";             // {E, Rq}
inline constexpr std::string_view kAttnQANorm = "attn_q_a_norm.weight";    // {Rq}
inline constexpr std::string_view kAttnQB = "attn_q_b.weight";             // {Rq, H * (N + P)}
inline constexpr std::string_view kAttnKvAMqa = "attn_kv_a_mqa.weight";    // {E, R + P}
inline constexpr std::string_view kAttnKvANorm = "attn_kv_a_norm.weight";  // {R}
inline constexpr std::string_view kAttnKvB = "attn_kv_b.weight";           // {R, H * (N + Dv)}
inline constexpr std::string_view kAttnKB = "attn_k_b.weight";             // {N, R, H}
inline constexpr std::string_view kAttnVB = "attn_v_b.weight";             // {R, Dv, H}
inline constexpr std::string_view kFfnExpProbsB = "exp_probs_b.bias";      // {X} router bias
                                                                           // for choosing only

// Gated DeltaNet (LayerSpec::deltanet; C = conv_dim(), Hv value heads of d_v, K taps). The
// full-attention layers of these models use attn_q with a gate per head ({E, 2 * n_head * D}).
inline constexpr std::string_view kAttnGate = "attn_gate.weight";  // {E, Hv * d_v}: z
// attn_qkv.weight (kAttnQkv) {E, C}: the convolution's input, q then k then v heads.
inline constexpr std::string_view kSsmBa = "ssm_ba.weight";          // {E, 2 Hv} (Qwen3-Next)
inline constexpr std::string_view kSsmBeta = "ssm_beta.weight";      // {E, Hv}
inline constexpr std::string_view kSsmAlpha = "ssm_alpha.weight";    // {E, Hv}
inline constexpr std::string_view kSsmConv1d = "ssm_conv1d.weight";  // {K, C}
inline constexpr std::string_view kSsmA = "ssm_a";                   // {Hv}: -exp(A_log)
inline constexpr std::string_view kSsmDt = "ssm_dt.bias";            // {Hv}
inline constexpr std::string_view kSsmNorm = "ssm_norm.weight";      // {d_v}: w, not 1 + w
inline constexpr std::string_view kSsmOut = "ssm_out.weight";        // {Hv * d_v, E}

// Multi-token prediction modules ("blk.{n_layer + i}.nextn.*", llama.cpp's names), beside
// that block's ordinary attention and FFN tensors.
inline constexpr std::string_view kNextnEhProj = "nextn.eh_proj.weight";  // {2E, E}: embd, hidden
inline constexpr std::string_view kNextnEnorm = "nextn.enorm.weight";     // {E}
inline constexpr std::string_view kNextnHnorm = "nextn.hnorm.weight";     // {E}
inline constexpr std::string_view kNextnHeadNorm = "nextn.shared_head_norm.weight";  // {E}
inline constexpr std::string_view kNextnHead = "nextn.shared_head_head.weight";      // {E, V}
inline constexpr std::string_view kNextnEmbed = "nextn.embed_tokens.weight";         // {E, V}

std::string layer_tensor(int layer, std::string_view suffix);  // "blk.3.attn_q.weight"

// Splits "blk.3.attn_q.weight" into (3, "attn_q.weight"); nullopt for global names.
struct LayerTensorName {
  int layer;
  std::string suffix;
};
std::optional<LayerTensorName> parse_layer_tensor(std::string_view name);

// ---- Hugging Face names -----------------------------------------------------------------------
// "model.layers.3.self_attn.q_proj.weight" → "blk.3.attn_q.weight", "lm_head.weight" →
// "output.weight", by the architecture's per-layer table (ArchSpec::layer_tensors). nullopt
// for tensors loom does not use (e.g. rotary_emb.inv_freq). A GGUF tensor stacking the
// experts of a layer maps to an HF name with kExpertIndex where each expert's number goes
// ("model.layers.3.mlp.experts.{e}.gate_proj.weight"): see model/hf_tensors.h.
inline constexpr std::string_view kExpertIndex = "{e}";
// An HF name ending in one of these is derived from the tensor named before it (gpt-oss's
// experts: model/hf_tensors.h): the even (gate) or odd (up) columns of each expert's fused
// gate_up matrix [X][E][2F] or bias [X][2F], transposed to GGUF's rows for matrices; or each
// expert's matrix [X][F][E] transposed.
inline constexpr std::string_view kDeriveEvenCols = "#even";
inline constexpr std::string_view kDeriveOddCols = "#odd";
inline constexpr std::string_view kDeriveTransposed = "#t";
// DeepSeek's kv_b_proj [H * (N + Dv)][R] split per head as llama.cpp's converter splits it:
// "#kb" each head's N key rows transposed to attn_k_b {N, R, H}; "#vb" its Dv value rows as
// attn_v_b {R, Dv, H}.
inline constexpr std::string_view kDeriveMlaKeys = "#kb";
inline constexpr std::string_view kDeriveMlaValues = "#vb";
// Gated DeltaNet checkpoints as llama.cpp's converter writes them (model/hf_tensors.h):
// "#qkv" / "#z" Qwen3-Next's in_proj_qkvz (per key head: q, k, its value heads' v, their z)
// regrouped into all q, all k, all v rows, or the z rows; "#tile" the value heads' rows (the
// last n_v_heads · u rows, u = d_v or 1) from grouped to tiled order (DeltaNetConfig::
// v_heads_tiled), "#tile_cols" the same of each row's columns; "#neg_exp" -exp(x) (A_log to
// ssm_a), in F32.
inline constexpr std::string_view kDeriveQkvzQkv = "#qkv";
inline constexpr std::string_view kDeriveQkvzZ = "#z";
inline constexpr std::string_view kDeriveTileRows = "#tile";
inline constexpr std::string_view kDeriveTileCols = "#tile_cols";
inline constexpr std::string_view kDeriveNegExp = "#neg_exp";
std::optional<std::string> hf_to_gguf(const ArchSpec& arch, std::string_view hf_name);
// The inverse; nullopt for GGUF-only tensors (rope_freqs.weight). With n_layer (the main
// layers' count), blocks from n_layer on are multi-token prediction modules, named as the
// architecture's checkpoints name them (ArchSpec::hf_mtp_prefix).
std::optional<std::string> gguf_to_hf(const ArchSpec& arch, std::string_view gguf_name);
std::optional<std::string> gguf_to_hf(const ArchSpec& arch, std::string_view gguf_name,
                                      int32_t n_layer);
// The same with Llama's table (the names most architectures share).
std::optional<std::string> hf_to_gguf(std::string_view hf_name);
std::optional<std::string> gguf_to_hf(std::string_view gguf_name);

// True for the tensors whose rows GGUF `llama` files store permuted for interleaved-pair RoPE
// (attn_q / attn_k weights and biases).
bool is_rope_permuted_tensor(std::string_view gguf_name);

}  // namespace loom::names
