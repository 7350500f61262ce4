// ModelConfig: every hyperparameter plus feature flags. Architectures differ only here;
// kernels and the forward pass never switch on an architecture name.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace loom {

enum class RopeStyle { kInterleaved, kNeox };  // pairs (2i, 2i+1) vs halves (i, i + d/2)

enum class RopeScalingType { kNone, kLinear, kLlama3, kLongRope, kYarn };

struct RopeScaling {  // factor == 0 means none
  RopeScalingType type = RopeScalingType::kNone;
  float factor = 0.0f;  // linear: positions divided by factor; llama3: low frequencies divided
  float low_freq_factor = 1.0f;
  float high_freq_factor = 4.0f;
  int32_t original_context = 8192;
  // LongRoPE (Phi-3/4 "longrope", formerly "su"): per-frequency divisors for contexts up to
  // original_context and beyond it (n_rot/2 each; from config.json, or the GGUF's
  // rope_factors_{short,long}.weight), and the factor cos and sin are multiplied by.
  std::vector<float> short_factor, long_factor;
  float attn_factor = 1.0f;
  // DeepSeek's YaRN: the softmax scale is multiplied by (1 + yarn_log_mul·ln(factor))²
  // (transformers: yarn_get_mscale(factor, mscale_all_dim)², yarn_log_mul = 0.1·mscale_all_dim;
  // llama.cpp's rope.scaling.yarn_log_multiplier); 0: none.
  float yarn_log_mul = 0.0f;
  // YaRN (gpt-oss): frequencies blend from interpolated (divided by factor) to extrapolated
  // between the dimensions that rotate beta_fast and beta_slow times over original_context;
  // attn_factor (0.1·ln(factor) + 1 unless given) multiplies cos and sin. truncate: the
  // blend's bounds are rounded out to whole dimensions (transformers' default; gpt-oss's
  // config says false).
  float beta_fast = 32.0f;
  float beta_slow = 1.0f;
  bool yarn_truncate = true;
  // YaRN: attn_factor is the config's own (attention_factor; GGUF rope.scaling.yarn_attn_factor),
  // not derived from factor (and mscale), so a converted file says it.
  bool attn_factor_given = false;
};

// Of the gated FFN: act(gate) * up. kSwigluOai (gpt-oss, llama.cpp's swiglu_oai): gate
// clamped to <= 7, up to [-7, 7], then gate·sigmoid(1.702·gate)·(up + 1).
enum class Activation { kSilu, kGeluTanh, kSwigluOai };

// Where a block's RMSNorms sit around attention and the FFN:
//   kPre      x += f(norm(x))                       (Llama, Qwen)
//   kSandwich x += post_norm(f(pre_norm(x)))        (Gemma 2/3)
//   kPost     x += post_norm(f(x))                  (OLMo 2)
enum class NormPlacement { kPre, kSandwich, kPost };

enum class QkNorm { kNone, kPerHead, kWhole };  // RMSNorm of q/k per head, or over all heads

// What varies from layer to layer (the per-layer pattern of an architecture).
struct LayerSpec {
  int32_t window = 0;       // sliding-window attention over the last `window` tokens; 0: full
  bool rope = true;         // false: no positional rotation in this layer (SmolLM3)
  float rope_theta = 0;     // 0: the model's rope_theta (Gemma 3's local layers differ)
  bool rope_scaled = true;  // the model's rope_scaling applies (not to Gemma 3's local layers)
  bool moe = false;         // the FFN is ModelConfig::moe's experts (else the dense n_ff one)
  bool mla = false;         // attention is ModelConfig::mla's latent attention (step "mla")
  // The layer is a Gated DeltaNet (step "gated_deltanet", ModelConfig::deltanet): linear
  // attention with a recurrent state per sequence instead of a KV cache.
  bool deltanet = false;
};

// Gated DeltaNet (Qwen3-Next, Qwen3.5): per token, q/k/v come out of a short causal depthwise
// convolution (conv_kernel taps, SiLU) over their projection; q and k are L2-normalised, q
// scaled by 1/sqrt(d_k). Each value head h keeps a state S_h (d_k x d_v), decayed by
// exp(g) (g = -exp(A_log) · softplus(alpha + dt_bias)) and updated by the delta rule with
// beta = sigmoid(b); the output S_h^T q goes through an RMSNorm gated by SiLU(z). Value heads
// are grouped over key heads (n_v_heads a multiple of n_k_heads).
struct DeltaNetConfig {
  int32_t n_k_heads = 0;  // 0: no Gated DeltaNet layers
  int32_t n_v_heads = 0;
  int32_t d_k = 0;
  int32_t d_v = 0;
  int32_t conv_kernel = 0;
  // How the file orders its value heads (both only matter when n_v_heads > n_k_heads):
  // fused_ba: one ssm_ba matrix (Qwen3-Next) holding, per key head, its value heads' b rows
  // then their a rows, instead of ssm_beta and ssm_alpha.
  // v_heads_tiled: value head j belongs to key head j % n_k_heads (llama.cpp's qwen35 files,
  // which reorder them so ggml broadcasts); else to key head j / (n_v_heads / n_k_heads), as
  // Hugging Face's checkpoints and the Gated DeltaNet step (backend/cpu/gated_deltanet.h) take
  // them. Every v-head-indexed tensor (ssm_qkv's v rows, ssm_z, ssm_beta, ssm_alpha, ssm_a,
  // ssm_dt, ssm_conv's v channels, ssm_out's columns) is in that order.
  bool fused_ba = false;
  bool v_heads_tiled = false;
  // q, k and v rows of the convolution's input: 2 · n_k_heads · d_k + n_v_heads · d_v.
  int32_t conv_dim() const { return 2 * n_k_heads * d_k + n_v_heads * d_v; }
};

// Multi-head Latent Attention (DeepSeek-V2/V3): K and V come from one compressed latent per
// token (kv_lora_rank floats after kv_a_norm) plus a RoPE key shared by every head
// (qk_rope_head_dim); the cache stores that row alone. Queries go through an optional
// low-rank path (q_lora_rank). Each head's query is qk_nope_head_dim + qk_rope_head_dim
// (ModelConfig::head_dim) and its value v_head_dim.
struct MlaConfig {
  int32_t q_lora_rank = 0;   // 0: a full attn_q projection
  int32_t kv_lora_rank = 0;  // 0: not an MLA model
  int32_t qk_nope_head_dim = 0;
  int32_t qk_rope_head_dim = 0;  // ModelConfig::n_rot
  int32_t v_head_dim = 0;
  // Floats the cache keeps per token and layer: the latent, then the RoPE key.
  int32_t latent_row() const { return kv_lora_rank + qk_rope_head_dim; }
};

// Mixture of Experts: the FFN of the layers whose LayerSpec::moe is set. A router picks
// n_expert_used of n_expert gated FFNs per token; their outputs are summed with the router's
// weights. An optional shared expert runs for every token.
struct MoeConfig {
  int32_t n_expert = 0;       // 0: a dense model
  int32_t n_expert_used = 0;  // top-k
  int32_t n_ff_exp = 0;       // each expert's FFN width
  int32_t n_ff_shexp = 0;     // the shared expert's FFN width; 0: none
  bool shexp_gate = false;    // the shared expert's output is scaled by sigmoid(x · w) (Qwen2-MoE)
  // The chosen experts' softmax probabilities are renormalized to sum to 1 (Qwen3-MoE's
  // norm_topk_prob, Mixtral's softmax over the top-k); off, they stay as the softmax over all
  // experts gave them (Qwen2-MoE).
  bool norm_topk = true;
  // One ffn_gate_up_exps tensor holding each expert's gate rows, then its up rows (bound as two
  // views per expert), instead of ffn_gate_exps and ffn_up_exps; set from the file's tensors.
  bool fused_gate_up = false;
  bool router_bias = false;  // the router's logits get a bias (ffn_gate_inp.bias, gpt-oss)
  bool expert_bias = false;  // each expert's gate, up and down outputs get biases (gpt-oss)
  // DeepSeek-V3's router: each expert's score is sigmoid(logit) instead of a softmax; a
  // per-expert correction bias (exp_probs_b.bias) is added for choosing only; experts come in
  // n_group groups, of which the topk_group with the largest sum of their two best biased
  // scores are eligible; the chosen scores (unbiased, renormalized with norm_topk) are
  // multiplied by weights_scale (routed_scaling_factor).
  bool sigmoid_scores = false;
  bool score_bias = false;
  int32_t n_group = 1;
  int32_t topk_group = 1;
  float weights_scale = 1.0f;
  int32_t n_shared = 0;  // shared experts fused into one FFN of n_ff_shexp (DeepSeek); info only
};

// How an embedding or scoring model reduces a sequence's final hidden states, with llama.cpp's
// numbering of {arch}.pooling_type (LLAMA_POOLING_TYPE_*). kUnspecified: the file says nothing
// (a generative model).
enum class PoolingType : int32_t {
  kUnspecified = -1,
  kNone = 0,
  kMean = 1,
  kCls = 2,  // the first token's hidden state
  kLast = 3,
  kRank = 4,  // a reranker: the last token through the classifier head (cls.output)
};

struct ModelConfig {
  std::string arch;        // registry name: "llama", "qwen2", "qwen3" (for display only)
  int32_t file_type = -1;  // a GGUF's general.file_type (llama_ftype); -1: none (HF checkpoint)
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
  int32_t n_rot = 0;  // dimensions of each head that RoPE rotates (partial rotary); 0: head_dim
  // Multimodal RoPE's sections (config.json's mrope_section; GGUF rope.dimension_sections):
  // how many rotated pairs follow the temporal, height and width positions. Text gives all
  // three the same position, which makes it plain RoPE, so loom only carries them into the
  // files it converts. Empty when the checkpoint has none.
  std::vector<int32_t> rope_sections;
  // What a file says without a checkpoint's own: transformers' default 11, 11, 10 pairs of the
  // temporal, height and width positions where the head rotates that many (every Qwen3.5),
  // else its rotated pairs dealt round-robin to the three (tiny test models): llama.cpp's rope
  // aborts on sections past the rotated dimensions.
  static std::vector<int64_t> text_rope_sections(int64_t rotated_pairs) {
    const int64_t p = rotated_pairs < 32 ? rotated_pairs : 32;
    return {(p + 2) / 3, (p + 1) / 3, p / 3, 0};
  }
  bool qkv_bias = false;
  bool qk_norm = false;  // set from the weights; qk_norm_kind says how (kPerHead when unset)
  QkNorm qk_norm_kind = QkNorm::kPerHead;
  bool tied_embeddings = false;
  bool fused_qkv = false;      // one attn_qkv matrix: q, k, v rows (bound as three views)
  bool fused_gate_up = false;  // ffn_up holds gate then up rows (bound as two views)
  Activation activation = Activation::kSilu;
  NormPlacement norm_placement = NormPlacement::kPre;
  float embd_scale = 1.0f;      // token embeddings are multiplied by it (Gemma: sqrt(n_embd))
  float residual_scale = 1.0f;  // x += residual_scale * block output (Granite)
  float attn_scale = 0.0f;      // softmax scale of q·k; 0: 1/sqrt(head_dim)
  float attn_softcap = 0.0f;    // scores become c·tanh(s/c) (Gemma 2); 0: off
  float final_softcap = 0.0f;   // the same on the logits
  float logit_scale = 1.0f;     // logits are divided by it (Granite's logits_scaling)
  bool attn_out_bias = false;   // the attention output projection has a bias (gpt-oss)
  // Attention sinks (gpt-oss): a learned logit per query head joins each softmax as one more
  // term of its denominator, with no value (attn_sinks.weight, n_head floats).
  bool attn_sinks = false;
  // llama.cpp names the pre-FFN RMSNorm post_attention_norm.weight (gpt-oss), not ffn_norm.
  bool ffn_norm_named_post_attention = false;
  std::vector<LayerSpec> layers;  // n_layer entries (filled by the config readers)
  MoeConfig moe;
  MlaConfig mla;
  DeltaNetConfig deltanet;
  // Full-attention layers with an output gate (Qwen3-Next, Qwen3.5): attn_q holds, per head,
  // the query's head_dim rows then the gate's; the attention output is multiplied by
  // sigmoid(gate) before wo.
  bool attn_output_gate = false;
  // Multi-token prediction (DeepSeek-V3's MTP modules; llama.cpp's "nextn" layers): module i
  // turns the main model's last hidden state h_p (before the final norm) at position p and
  // the next token t_{p+1} into a prediction of t_{p+2}: one transformer block (mtp_layers[i])
  // on eh_proj([enorm(embed(t_{p+1})), hnorm(h_p)]) at position p, then its own norm and the
  // LM head. Never part of the main forward pass: a speculative proposer runs them
  // (spec/mtp_proposer.h). GGUF counts them in block_count after the main layers.
  int32_t n_mtp_layers = 0;           // 0 when the checkpoint has none (or loom runs none)
  std::vector<LayerSpec> mtp_layers;  // n_mtp_layers entries: each module's block
  bool mtp_own_head = false;          // the modules have their own shared_head.head (else output)
  bool mtp_own_embed = false;         // their own embed_tokens (else token_embd)
  bool mtp_own_norm = false;          // their own shared_head.norm (else output_norm)
  // The token's embedding is zeroed at position 0 (vLLM's DeepSeek MTP); Qwen3-Next's and
  // Qwen3.5's modules read it there too (vLLM's qwen3_next_mtp).
  bool mtp_zero_embedding_at_start = false;
  // The modules read the target's hidden state after its final norm (what its LM head reads)
  // instead of before it, and a chained step reads the module's own normed output: Qwen3-Next
  // and Qwen3.5 (vLLM's qwen3_next_mtp; llama.cpp's qwen35 since its PR 24025, which measured
  // the higher acceptance), and DeepSeek-V3 (vLLM's and SGLang's deepseek MTP read the normed
  // target state; SGLang chains the module's normed output, vLLM its state before the norm).
  bool mtp_hidden_after_norm = false;
  // This model IS one MTP module (Model::mtp_module): its layer 0 reads the rows of
  // Batch::prev_hidden through Weights::mtp[0]'s input projection instead of an embedding.
  bool mtp_module = false;
  int32_t bos_token = -1;
  int32_t eos_token = -1;
  // Embedding / reranking metadata: {arch}.pooling_type, the classifier head's outputs
  // (cls.output.weight rows, set from the weights), {arch}.classifier.output_labels, and the
  // reranker's prompt (tokenizer.chat_template.rerank, with {query} and {document}).
  PoolingType pooling = PoolingType::kUnspecified;
  int32_t n_cls_out = 0;
  bool cls_out_bias = false;
  std::vector<std::string> classifier_labels;
  std::string rerank_template;
};

}  // namespace loom
