#include "model/tensor_plan.h"

#include "model/tensor_names.h"

namespace loom {

std::vector<PlannedWeight> tensor_plan(const ModelConfig& c, const TensorPlanOptions& o) {
  namespace n = names;
  const int64_t E = c.n_embd, D = c.head_dim, F = c.n_ff, V = c.n_vocab;
  const int64_t QD = int64_t{c.n_head} * D, KD = int64_t{c.n_head_kv} * D;
  const int64_t R = c.n_rot > 0 ? c.n_rot : D;
  const bool pre_norms = c.norm_placement != NormPlacement::kPost;
  const bool post_norms = c.norm_placement != NormPlacement::kPre;
  const bool whole_qk = c.qk_norm_kind == QkNorm::kWhole;
  std::vector<PlannedWeight> plan;
  auto global = [&](std::string_view name, std::vector<int64_t> ne, TensorKind k, TensorRole r) {
    plan.push_back({std::string(name), std::move(ne), k, r, -1});
  };
  global(n::kTokenEmbd, {E, V}, TensorKind::kMatrix, TensorRole::kTokenEmbd);
  if (o.rope_freqs) global(n::kRopeFreqs, {R / 2}, TensorKind::kRopeFreqs, TensorRole::kRopeFreqs);
  if (c.rope_scaling.type == RopeScalingType::kLongRope) {
    global(n::kRopeFactorsLong, {R / 2}, TensorKind::kRopeFreqs, TensorRole::kRopeFactorsLong);
    global(n::kRopeFactorsShort, {R / 2}, TensorKind::kRopeFreqs, TensorRole::kRopeFactorsShort);
  }
  // One block's tensors: blk.{l}.*, by its spec.
  auto add_block = [&](int32_t l, const LayerSpec& spec) {
    auto add = [&](std::string_view suffix, std::vector<int64_t> ne, TensorKind k, TensorRole r) {
      plan.push_back({n::layer_tensor(l, suffix), std::move(ne), k, r, l});
    };
    if (pre_norms) add(n::kAttnNorm, {E}, TensorKind::kNorm, TensorRole::kAttnNorm);
    const bool mla = spec.mla;
    const bool deltanet = spec.deltanet;
    if (deltanet) {  // llama.cpp's qwen3next / qwen35 tensors; the 1-D ones stay F32
      const DeltaNetConfig& d = c.deltanet;
      const int64_t Hv = d.n_v_heads, Z = int64_t{d.n_v_heads} * d.d_v;
      add(n::kAttnQkv, {E, d.conv_dim()}, TensorKind::kMatrix, TensorRole::kSsmQkv);
      add(n::kAttnGate, {E, Z}, TensorKind::kMatrix, TensorRole::kSsmZ);
      if (d.fused_ba) {
        add(n::kSsmBa, {E, 2 * Hv}, TensorKind::kMatrix, TensorRole::kSsmBa);
      } else {
        add(n::kSsmBeta, {E, Hv}, TensorKind::kMatrix, TensorRole::kSsmBeta);
        add(n::kSsmAlpha, {E, Hv}, TensorKind::kMatrix, TensorRole::kSsmAlpha);
      }
      add(n::kSsmConv1d, {d.conv_kernel, d.conv_dim()}, TensorKind::kBias, TensorRole::kSsmConv);
      add(n::kSsmA, {Hv}, TensorKind::kBias, TensorRole::kSsmA);
      add(n::kSsmDt, {Hv}, TensorKind::kBias, TensorRole::kSsmDt);
      // The gated norm's weight multiplies as it is (no 1 + w form, whatever the checkpoint).
      add(n::kSsmNorm, {d.d_v}, TensorKind::kBias, TensorRole::kSsmNorm);
      add(n::kSsmOut, {Z, E}, TensorKind::kMatrix, TensorRole::kSsmOut);
    } else if (mla) {  // llama.cpp's deepseek2 tensors (the split k_b / v_b of its MLA converter)
      const MlaConfig& a = c.mla;
      const int64_t H = c.n_head, R = a.kv_lora_rank, N = a.qk_nope_head_dim;
      if (a.q_lora_rank > 0) {
        add(n::kAttnQA, {E, a.q_lora_rank}, TensorKind::kMatrix, TensorRole::kWqA);
        add(n::kAttnQANorm, {a.q_lora_rank}, TensorKind::kNorm, TensorRole::kQANorm);
        add(n::kAttnQB, {a.q_lora_rank, QD}, TensorKind::kMatrix, TensorRole::kWqB);
      } else {
        add(n::kAttnQ, {E, QD}, TensorKind::kMatrix, TensorRole::kWq);
      }
      add(n::kAttnKvAMqa, {E, a.latent_row()}, TensorKind::kMatrix, TensorRole::kWkvA);
      add(n::kAttnKvANorm, {R}, TensorKind::kNorm, TensorRole::kKvANorm);
      add(n::kAttnKB, {N, R, H}, TensorKind::kMatrix, TensorRole::kWkB);
      add(n::kAttnVB, {R, a.v_head_dim, H}, TensorKind::kMatrix, TensorRole::kWvB);
      add(n::kAttnOutput, {H * a.v_head_dim, E}, TensorKind::kMatrix, TensorRole::kWo);
    } else if (c.fused_qkv) {
      add(n::kAttnQkv, {E, QD + 2 * KD}, TensorKind::kMatrix, TensorRole::kWqkv);
    } else {
      // With an output gate each head's query rows are followed by its gate's.
      add(n::kAttnQ, {E, c.attn_output_gate ? 2 * QD : QD}, TensorKind::kMatrix, TensorRole::kWq);
      add(n::kAttnK, {E, KD}, TensorKind::kMatrix, TensorRole::kWk);
      add(n::kAttnV, {E, KD}, TensorKind::kMatrix, TensorRole::kWv);
    }
    const bool attention = !mla && !deltanet;  // the standard q/k/v projections
    if (c.qkv_bias && attention) {
      add(n::kAttnQBias, {QD}, TensorKind::kBias, TensorRole::kBq);
      add(n::kAttnKBias, {KD}, TensorKind::kBias, TensorRole::kBk);
      add(n::kAttnVBias, {KD}, TensorKind::kBias, TensorRole::kBv);
    }
    if (c.qk_norm && attention) {
      add(n::kAttnQNorm, {whole_qk ? QD : D}, TensorKind::kNorm, TensorRole::kQNorm);
      add(n::kAttnKNorm, {whole_qk ? KD : D}, TensorKind::kNorm, TensorRole::kKNorm);
    }
    if (attention) add(n::kAttnOutput, {QD, E}, TensorKind::kMatrix, TensorRole::kWo);
    if (c.attn_out_bias && !deltanet)
      add(n::kAttnOutputBias, {E}, TensorKind::kBias, TensorRole::kBo);
    if (c.attn_sinks && !deltanet)
      add(n::kAttnSinks, {c.n_head}, TensorKind::kBias, TensorRole::kSinks);
    if (post_norms) add(n::kAttnPostNorm, {E}, TensorKind::kNorm, TensorRole::kAttnPostNorm);
    if (pre_norms)
      add(c.ffn_norm_named_post_attention ? n::kAttnPostNorm : n::kFfnNorm, {E}, TensorKind::kNorm,
          TensorRole::kFfnNorm);
    if (spec.moe) {
      const MoeConfig& m = c.moe;
      const int64_t X = m.n_expert, Fx = m.n_ff_exp, Fs = m.n_ff_shexp;
      add(n::kFfnGateInp, {E, X}, TensorKind::kMatrix, TensorRole::kRouter);
      if (m.fused_gate_up) {
        add(n::kFfnGateUpExps, {E, 2 * Fx, X}, TensorKind::kMatrix, TensorRole::kGateUpExps);
        add(n::kFfnDownExps, {Fx, E, X}, TensorKind::kMatrix, TensorRole::kDownExps);
      } else {
        add(n::kFfnGateExps, {E, Fx, X}, TensorKind::kMatrix, TensorRole::kGateExps);
        add(n::kFfnDownExps, {Fx, E, X}, TensorKind::kMatrix, TensorRole::kDownExps);
        add(n::kFfnUpExps, {E, Fx, X}, TensorKind::kMatrix, TensorRole::kUpExps);
      }
      if (m.router_bias) add(n::kFfnGateInpBias, {X}, TensorKind::kBias, TensorRole::kRouterBias);
      if (m.score_bias) add(n::kFfnExpProbsB, {X}, TensorKind::kBias, TensorRole::kExpProbsB);
      if (m.expert_bias) {
        add(n::kFfnGateExpsBias, {Fx, X}, TensorKind::kBias, TensorRole::kGateExpsBias);
        add(n::kFfnDownExpsBias, {E, X}, TensorKind::kBias, TensorRole::kDownExpsBias);
        add(n::kFfnUpExpsBias, {Fx, X}, TensorKind::kBias, TensorRole::kUpExpsBias);
      }
      if (m.shexp_gate) add(n::kFfnGateInpShexp, {E}, TensorKind::kBias, TensorRole::kShexpGate);
      if (Fs > 0) {
        add(n::kFfnGateShexp, {E, Fs}, TensorKind::kMatrix, TensorRole::kWGateShexp);
        add(n::kFfnDownShexp, {Fs, E}, TensorKind::kMatrix, TensorRole::kWDownShexp);
        add(n::kFfnUpShexp, {E, Fs}, TensorKind::kMatrix, TensorRole::kWUpShexp);
      }
      if (post_norms) add(n::kFfnPostNorm, {E}, TensorKind::kNorm, TensorRole::kFfnPostNorm);
      return;
    }
    if (c.fused_gate_up) {
      add(n::kFfnUp, {E, 2 * F}, TensorKind::kMatrix, TensorRole::kWGateUp);
    } else {
      add(n::kFfnGate, {E, F}, TensorKind::kMatrix, TensorRole::kWGate);
      add(n::kFfnUp, {E, F}, TensorKind::kMatrix, TensorRole::kWUp);
    }
    add(n::kFfnDown, {F, E}, TensorKind::kMatrix, TensorRole::kWDown);
    if (post_norms) add(n::kFfnPostNorm, {E}, TensorKind::kNorm, TensorRole::kFfnPostNorm);
  };
  for (int32_t l = 0; l < c.n_layer; ++l)
    add_block(l, l < static_cast<int32_t>(c.layers.size()) ? c.layers[l] : LayerSpec{});
  // Multi-token prediction modules: the input projection and norms, the head's (optional)
  // norm, head and embedding, then the block, in llama.cpp's nextn names.
  for (int32_t i = 0; i < c.n_mtp_layers && i < static_cast<int32_t>(c.mtp_layers.size()); ++i) {
    const int32_t l = c.n_layer + i;
    auto add = [&](std::string_view suffix, std::vector<int64_t> ne, TensorKind k, TensorRole r) {
      plan.push_back({n::layer_tensor(l, suffix), std::move(ne), k, r, l});
    };
    add(n::kNextnEhProj, {2 * E, E}, TensorKind::kMatrix, TensorRole::kMtpEhProj);
    add(n::kNextnEnorm, {E}, TensorKind::kNorm, TensorRole::kMtpEnorm);
    add(n::kNextnHnorm, {E}, TensorKind::kNorm, TensorRole::kMtpHnorm);
    if (c.mtp_own_norm) add(n::kNextnHeadNorm, {E}, TensorKind::kNorm, TensorRole::kMtpHeadNorm);
    if (c.mtp_own_head) add(n::kNextnHead, {E, V}, TensorKind::kMatrix, TensorRole::kMtpHead);
    if (c.mtp_own_embed) add(n::kNextnEmbed, {E, V}, TensorKind::kMatrix, TensorRole::kMtpEmbed);
    add_block(l, c.mtp_layers[i]);
  }
  global(n::kOutputNorm, {E}, TensorKind::kNorm, TensorRole::kOutputNorm);
  if (!c.tied_embeddings) global(n::kOutput, {E, V}, TensorKind::kMatrix, TensorRole::kOutput);
  if (c.n_cls_out > 0) {
    global(n::kClsOut, {E, c.n_cls_out}, TensorKind::kMatrix, TensorRole::kClsOut);
    if (c.cls_out_bias)
      global(n::kClsOutBias, {c.n_cls_out}, TensorKind::kBias, TensorRole::kClsOutBias);
  }
  return plan;
}

}  // namespace loom
