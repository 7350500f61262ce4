// Binding and shape-checking of model tensors.
#include "model/weights.h"

#include <string>

#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "model/tensor_names.h"
#include "model/tensor_plan.h"
#include "model/weight_footprint.h"

namespace loom {
namespace {

std::string dims(std::initializer_list<int64_t> ne) {
  std::string s = "[";
  for (auto v : ne) {
    if (s.size() > 1) s += ", ";
    s += std::to_string(v);
  }
  return s + "]";
}

class Binder {
 public:
  Binder(const TensorLookup& find, const ExpertLookup& experts) : find_(find), experts_(experts) {}

  // A matrix with ne = {cols, rows}.
  Status matrix(std::string_view name, int64_t cols, int64_t rows, TensorView* out) {
    const TensorView* t = find_(name);
    if (!t) return missing(name);
    if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
      return invalid_file("tensor " + std::string(name) + " has shape " + shape_string(*t) +
                          ", expected " + dims({cols, rows}));
    LOOM_RETURN_IF_ERROR(computable(name, *t));
    *out = *t;
    return Status::ok();
  }

  // Experts stacked in one tensor with ne = {cols, rows, n}: one (rows, cols) view each.
  // A source with one tensor per expert binds those views as they are.
  Status stacked(std::string_view name, int64_t cols, int64_t rows, int64_t n,
                 std::vector<TensorView>* out) {
    if (std::vector<const TensorView*> each = experts(name); !each.empty()) {
      if (static_cast<int64_t>(each.size()) != n)
        return invalid_file("tensor " + std::string(name) + " has " + std::to_string(each.size()) +
                            " experts, expected " + std::to_string(n));
      out->clear();
      for (const TensorView* t : each) {
        if (t->n_dims != 2 || t->ne[0] != cols || t->ne[1] != rows)
          return invalid_file("an expert of tensor " + std::string(name) + " has shape " +
                              shape_string(*t) + ", expected " + dims({cols, rows}));
        LOOM_RETURN_IF_ERROR(computable(name, *t));
        out->push_back(*t);
      }
      return Status::ok();
    }
    const TensorView* t = find_(name);
    if (!t) return missing(name);
    if (t->n_dims != 3 || t->ne[0] != cols || t->ne[1] != rows || t->ne[2] != n)
      return invalid_file("tensor " + std::string(name) + " has shape " + shape_string(*t) +
                          ", expected " + dims({cols, rows, n}));
    LOOM_RETURN_IF_ERROR(computable(name, *t));
    out->assign(n, *t);
    const uint64_t each = t->nbytes / static_cast<uint64_t>(n);
    for (int64_t e = 0; e < n; ++e) {
      TensorView& v = (*out)[e];
      v.n_dims = 2;
      v.ne[2] = 1;
      v.nbytes = each;
      v.data = static_cast<const uint8_t*>(t->data) + e * each;
    }
    return Status::ok();
  }

  // A 1-D tensor of n elements (or {n, rows}: rows of n), converted to float. Absent +
  // !required → empty vector.
  Status vector(std::string_view name, int64_t n, bool required, std::vector<float>* out,
                int64_t rows = 1) {
    const TensorView* t = find_(name);
    if (!t) return required ? missing(name) : Status::ok();
    if (t->numel() != n * rows || (t->n_dims > 1 && t->ne[0] != n))
      return invalid_file("tensor " + std::string(name) + " has shape " + shape_string(*t) +
                          ", expected " + dims({n}));
    if (t->dtype != Dtype::kF32 && t->dtype != Dtype::kF16 && t->dtype != Dtype::kBF16)
      return unsupported("tensor " + std::string(name) + " has dtype " +
                         std::string(dtype_name(t->dtype)) +
                         "; 1-D tensors must be f32, f16 or bf16");
    out->resize(n * rows);
    kernels::load_kv(t->dtype, t->data, out->data(), n * rows);
    return Status::ok();
  }

  bool has(std::string_view name) const { return !experts(name).empty() || find_(name) != nullptr; }

  // A norm weight (n floats): 1 is added when the source stores the offset form.
  Status norm(std::string_view name, int64_t n, bool required, std::vector<float>* out) {
    LOOM_RETURN_IF_ERROR(vector(name, n, required, out));
    if (norm_plus_one)
      for (float& w : *out) w += 1.0f;
    return Status::ok();
  }
  bool norm_plus_one = false;

  // A weight matrix of a type no matmul kernel computes (the file's reader accepts every GGUF
  // type, so inspect and tokenize still work) is refused here, not at the first forward pass.
  static Status computable(std::string_view name, const TensorView& t) {
    if (kernels::matmul_supported(t.dtype)) return Status::ok();
    return unsupported("tensor " + std::string(name) + " has type " +
                       std::string(dtype_name(t.dtype)) +
                       ", which loom cannot compute with (weight matrices must be f32, f16, "
                       "bf16, Q4_0/1, Q5_0/1, Q8_0, Q2_K..Q6_K or MXFP4)");
  }

 private:
  static Status missing(std::string_view name) {
    return invalid_file("required tensor " + std::string(name) + " is missing");
  }
  std::vector<const TensorView*> experts(std::string_view name) const {
    return experts_ ? experts_(name) : std::vector<const TensorView*>{};
  }
  const TensorLookup& find_;
  const ExpertLookup& experts_;
};

// Rows [first, first + n) of a row-major matrix view.
TensorView row_range(const TensorView& t, int64_t first, int64_t n) {
  TensorView v = t;
  v.ne[1] = n;
  v.data = t.row(first);
  v.nbytes = t.row_stride() * static_cast<uint64_t>(n);
  return v;
}

}  // namespace

Result<Weights> Weights::bind(ModelConfig& c, const ArchSpec& arch, const TensorLookup& find,
                              bool norm_plus_one, const ExpertLookup& experts) {
  namespace n = names;
  Binder b(find, experts);
  b.norm_plus_one = norm_plus_one;
  Weights w;
  const TensorView* embd = find(n::kTokenEmbd);
  if (!embd) return invalid_file("required tensor " + std::string(n::kTokenEmbd) + " is missing");
  if (embd->n_dims != 2 || embd->ne[0] != c.n_embd)
    return invalid_file("tensor " + std::string(n::kTokenEmbd) + " has shape " +
                        shape_string(*embd) + ", expected [" + std::to_string(c.n_embd) +
                        ", n_vocab]");
  if (c.n_vocab > 0 && c.n_vocab != embd->ne[1])
    return invalid_file("vocabulary size " + std::to_string(c.n_vocab) + " in the config but " +
                        std::string(n::kTokenEmbd) + " has " + std::to_string(embd->ne[1]) +
                        " rows");
  LOOM_RETURN_IF_ERROR(Binder::computable(n::kTokenEmbd, *embd));
  c.n_vocab = static_cast<int32_t>(embd->ne[1]);
  w.token_embd = *embd;
  // Optional groups are decided by what the file holds (layer 0 for per-layer groups), then
  // required everywhere by the plan.
  if (!c.tied_embeddings && !b.has(n::kOutput)) c.tied_embeddings = true;
  // A classifier head: as many outputs as the file's cls.output has rows.
  if (const TensorView* cls = find(n::kClsOut); cls && cls->n_dims == 2) {
    c.n_cls_out = static_cast<int32_t>(cls->ne[1]);
    c.cls_out_bias = b.has(n::kClsOutBias);
  }
  auto group_present = [&](TensorNeed need, std::string_view suffix) {
    return need == TensorNeed::kRequired ||
           (need == TensorNeed::kOptional && b.has(n::layer_tensor(0, suffix)));
  };
  c.qkv_bias = group_present(arch.qkv_bias, n::kAttnQBias);
  c.qk_norm = group_present(arch.qk_norm, n::kAttnQNorm);
  // Fused expert gate / up, as the first MoE layer holds them.
  if (arch.fused_gate_up_exps != TensorNeed::kAbsent) {
    int32_t first_moe = 0;
    while (first_moe < c.n_layer && !c.layers[first_moe].moe) ++first_moe;
    c.moe.fused_gate_up = arch.fused_gate_up_exps == TensorNeed::kRequired ||
                          b.has(n::layer_tensor(first_moe, n::kFfnGateUpExps));
  }
  TensorPlanOptions po;
  po.rope_freqs = b.has(n::kRopeFreqs);
  // LongRoPE factors: GGUF files carry them as tensors (the config then learns of them
  // here); a Hugging Face config.json has them already.
  if (b.has(n::kRopeFactorsLong) || b.has(n::kRopeFactorsShort))
    c.rope_scaling.type = RopeScalingType::kLongRope;

  // Multi-token prediction modules run when the file has them (a checkpoint's config may
  // count modules its weights left out, as transformers' save_pretrained does) and the
  // architecture says what their blocks are; their own head, norm and embedding are optional.
  if (c.n_mtp_layers > 0) {
    auto mtp_tensor = [&](std::string_view suffix) {
      return b.has(n::layer_tensor(c.n_layer, suffix));
    };
    if (!mtp_tensor(n::kNextnEhProj) ||
        c.mtp_layers.size() != static_cast<size_t>(c.n_mtp_layers)) {
      c.n_mtp_layers = 0;
      c.mtp_layers.clear();
    } else {
      c.mtp_own_head = mtp_tensor(n::kNextnHead);
      c.mtp_own_embed = mtp_tensor(n::kNextnEmbed);
      c.mtp_own_norm = mtp_tensor(n::kNextnHeadNorm);
    }
  }

  const int64_t D = c.head_dim, F = c.n_ff;
  const int64_t q_dim = c.n_head * D, kv_dim = c.n_head_kv * D;
  w.layers.resize(c.n_layer);
  w.mtp.resize(c.n_mtp_layers);
  for (const PlannedWeight& t : tensor_plan(c, po)) {
    MtpWeights* M = t.layer >= c.n_layer ? &w.mtp[t.layer - c.n_layer] : nullptr;
    LayerWeights* L = M ? &M->block : t.layer >= 0 ? &w.layers[t.layer] : nullptr;
    if (t.kind == TensorKind::kMatrix && t.ne.size() == 3) {
      std::vector<TensorView>* dst = t.role == TensorRole::kGateExps   ? &L->gate_exp
                                     : t.role == TensorRole::kUpExps   ? &L->up_exp
                                     : t.role == TensorRole::kDownExps ? &L->down_exp
                                     : t.role == TensorRole::kWkB      ? &L->k_b
                                     : t.role == TensorRole::kWvB      ? &L->v_b
                                                                       : nullptr;
      if (t.role == TensorRole::kGateUpExps) {  // each expert's gate rows, then its up rows
        std::vector<TensorView> both;
        LOOM_RETURN_IF_ERROR(b.stacked(t.name, t.ne[0], t.ne[1], t.ne[2], &both));
        const int64_t Fx = t.ne[1] / 2;
        for (const TensorView& e : both) {
          L->gate_exp.push_back(row_range(e, 0, Fx));
          L->up_exp.push_back(row_range(e, Fx, Fx));
        }
        continue;
      }
      if (!dst) return internal_error("tensor plan: " + t.name + " is not an expert role");
      LOOM_RETURN_IF_ERROR(b.stacked(t.name, t.ne[0], t.ne[1], t.ne[2], dst));
      continue;
    }
    if (t.kind == TensorKind::kMatrix) {
      TensorView m;
      LOOM_RETURN_IF_ERROR(b.matrix(t.name, t.ne[0], t.ne[1], &m));
      switch (t.role) {
        case TensorRole::kTokenEmbd:
          break;  // bound above
        case TensorRole::kOutput:
          w.output = m;
          break;
        case TensorRole::kWq:
          L->wq = m;
          break;
        case TensorRole::kWk:
          L->wk = m;
          break;
        case TensorRole::kWv:
          L->wv = m;
          break;
        case TensorRole::kWqkv:  // q, k, v rows of one matrix
          L->wq = row_range(m, 0, q_dim);
          L->wk = row_range(m, q_dim, kv_dim);
          L->wv = row_range(m, q_dim + kv_dim, kv_dim);
          break;
        case TensorRole::kWo:
          L->wo = m;
          break;
        case TensorRole::kWGate:
          L->w_gate = m;
          break;
        case TensorRole::kWUp:
          L->w_up = m;
          break;
        case TensorRole::kWGateUp:  // gate rows, then up rows
          L->w_gate = row_range(m, 0, F);
          L->w_up = row_range(m, F, F);
          break;
        case TensorRole::kWDown:
          L->w_down = m;
          break;
        case TensorRole::kRouter:
          L->router = m;
          break;
        case TensorRole::kClsOut:
          w.cls_out = m;
          break;
        case TensorRole::kWGateShexp:
          L->w_gate_shexp = m;
          break;
        case TensorRole::kWUpShexp:
          L->w_up_shexp = m;
          break;
        case TensorRole::kWDownShexp:
          L->w_down_shexp = m;
          break;
        case TensorRole::kWqA:
          L->wq_a = m;
          break;
        case TensorRole::kWqB:
          L->wq_b = m;
          break;
        case TensorRole::kWkvA:
          L->wkv_a = m;
          break;
        case TensorRole::kSsmQkv:
          L->ssm_qkv = m;
          break;
        case TensorRole::kSsmZ:
          L->ssm_z = m;
          break;
        case TensorRole::kSsmBa:
          L->ssm_ba = m;
          break;
        case TensorRole::kSsmBeta:
          L->ssm_beta = m;
          break;
        case TensorRole::kSsmAlpha:
          L->ssm_alpha = m;
          break;
        case TensorRole::kSsmOut:
          L->ssm_out = m;
          break;
        case TensorRole::kMtpEhProj:
          M->eh_proj = m;
          break;
        case TensorRole::kMtpHead:
          M->head = m;
          break;
        case TensorRole::kMtpEmbed:
          M->embed = m;
          break;
        default:
          return internal_error("tensor plan: " + t.name + " is not a matrix role");
      }
      continue;
    }
    std::vector<float>* dst = nullptr;
    switch (t.role) {
      case TensorRole::kRopeFactorsLong:
      case TensorRole::kRopeFactorsShort: {
        auto& f = t.role == TensorRole::kRopeFactorsLong ? c.rope_scaling.long_factor
                                                         : c.rope_scaling.short_factor;
        if (b.has(t.name) || f.empty()) LOOM_RETURN_IF_ERROR(b.vector(t.name, t.ne[0], true, &f));
        continue;
      }
      case TensorRole::kOutputNorm:
        dst = &w.output_norm;
        break;
      case TensorRole::kClsOutBias:
        dst = &w.cls_out_bias;
        break;
      case TensorRole::kRopeFreqs:
        dst = &w.rope_freqs;
        break;
      case TensorRole::kAttnNorm:
        dst = &L->attn_norm;
        break;
      case TensorRole::kBq:
        dst = &L->bq;
        break;
      case TensorRole::kBk:
        dst = &L->bk;
        break;
      case TensorRole::kBv:
        dst = &L->bv;
        break;
      case TensorRole::kQNorm:
        dst = &L->q_norm;
        break;
      case TensorRole::kKNorm:
        dst = &L->k_norm;
        break;
      case TensorRole::kAttnPostNorm:
        dst = &L->attn_post_norm;
        break;
      case TensorRole::kFfnNorm:
        dst = &L->ffn_norm;
        break;
      case TensorRole::kFfnPostNorm:
        dst = &L->ffn_post_norm;
        break;
      case TensorRole::kShexpGate:
        dst = &L->shexp_gate;
        break;
      case TensorRole::kBo:
        dst = &L->bo;
        break;
      case TensorRole::kSinks:
        dst = &L->attn_sinks;
        break;
      case TensorRole::kRouterBias:
        dst = &L->router_bias;
        break;
      case TensorRole::kGateExpsBias:
        dst = &L->gate_exp_bias;
        break;
      case TensorRole::kUpExpsBias:
        dst = &L->up_exp_bias;
        break;
      case TensorRole::kDownExpsBias:
        dst = &L->down_exp_bias;
        break;
      case TensorRole::kQANorm:
        dst = &L->q_a_norm;
        break;
      case TensorRole::kKvANorm:
        dst = &L->kv_a_norm;
        break;
      case TensorRole::kExpProbsB:
        dst = &L->exp_probs_b;
        break;
      case TensorRole::kSsmConv:
        dst = &L->ssm_conv;
        break;
      case TensorRole::kSsmA:
        dst = &L->ssm_a;
        break;
      case TensorRole::kSsmDt:
        dst = &L->ssm_dt;
        break;
      case TensorRole::kSsmNorm:
        dst = &L->ssm_norm;
        break;
      case TensorRole::kMtpEnorm:
        dst = &M->enorm;
        break;
      case TensorRole::kMtpHnorm:
        dst = &M->hnorm;
        break;
      case TensorRole::kMtpHeadNorm:
        dst = &M->head_norm;
        break;
      default:
        return internal_error("tensor plan: " + t.name + " is not a vector role");
    }
    if (t.kind == TensorKind::kNorm)
      LOOM_RETURN_IF_ERROR(b.norm(t.name, t.ne[0], true, dst));
    else
      LOOM_RETURN_IF_ERROR(b.vector(t.name, t.ne[0], true, dst, t.ne.size() > 1 ? t.ne[1] : 1));
  }
  if (c.tied_embeddings) w.output = w.token_embd;
  for (MtpWeights& m : w.mtp) {
    if (!m.head.data) m.head = w.output;
    if (!m.embed.data) m.embed = w.token_embd;
    if (m.head_norm.empty()) m.head_norm = w.output_norm;
  }
  return w;
}

namespace {

// A layer's tensors as model/weight_footprint.h counts them (`share` kNone: a multi-token
// prediction module's block).
void add_layer(WeightFootprint& f, const LayerWeights& L, int64_t used, bool main_pass) {
  const TokenShare whole = main_pass ? TokenShare::kWhole : TokenShare::kNone;
  const TokenShare experts = main_pass ? TokenShare::kExperts : TokenShare::kNone;
  auto matrix = [&](const TensorView& t) {
    if (t.data) f.add(whole, static_cast<uint64_t>(t.numel()), t.nbytes, 1, used);
  };
  auto vector = [&](const std::vector<float>& v, TokenShare share, int64_t slices) {
    f.add(share, v.size(), v.size() * sizeof(float), slices, used);
  };
  for (const TensorView* t :
       {&L.wq,           &L.wk,     &L.wv,       &L.wo,           &L.w_gate,
        &L.w_up,         &L.w_down, &L.router,   &L.w_gate_shexp, &L.w_up_shexp,
        &L.w_down_shexp, &L.wq_a,   &L.wq_b,     &L.wkv_a,        &L.ssm_qkv,
        &L.ssm_z,        &L.ssm_ba, &L.ssm_beta, &L.ssm_alpha,    &L.ssm_out})
    matrix(*t);
  for (const auto* heads : {&L.k_b, &L.v_b})
    for (const TensorView& h : *heads) matrix(h);
  for (const std::vector<float>* v : {&L.attn_norm,
                                      &L.bq,
                                      &L.bk,
                                      &L.bv,
                                      &L.q_norm,
                                      &L.k_norm,
                                      &L.attn_post_norm,
                                      &L.ffn_norm,
                                      &L.ffn_post_norm,
                                      &L.shexp_gate,
                                      &L.bo,
                                      &L.attn_sinks,
                                      &L.router_bias,
                                      &L.q_a_norm,
                                      &L.kv_a_norm,
                                      &L.exp_probs_b,
                                      &L.ssm_conv,
                                      &L.ssm_a,
                                      &L.ssm_dt,
                                      &L.ssm_norm})
    vector(*v, whole, 1);
  const int64_t n_expert = static_cast<int64_t>(L.gate_exp.size());
  for (const auto* stack : {&L.gate_exp, &L.up_exp, &L.down_exp}) {
    uint64_t numel = 0, nbytes = 0;
    for (const TensorView& e : *stack) {
      numel += static_cast<uint64_t>(e.numel());
      nbytes += e.nbytes;
    }
    if (!stack->empty()) f.add(experts, numel, nbytes, n_expert, used);
  }
  for (const auto* bias : {&L.gate_exp_bias, &L.up_exp_bias, &L.down_exp_bias})
    if (!bias->empty()) vector(*bias, experts, n_expert);
}

}  // namespace

WeightFootprint Weights::footprint(int32_t n_expert_used) const {
  WeightFootprint f;
  const int64_t used = n_expert_used;
  // The LM head, all of it; a tied one is the embedding, stored once and read whole.
  const bool tied = output.data && output.data == token_embd.data;
  if (token_embd.data)
    f.add(tied ? TokenShare::kWhole : TokenShare::kOneRow,
          static_cast<uint64_t>(token_embd.numel()), token_embd.nbytes, token_embd.rows(), used);
  if (output.data && !tied)
    f.add(TokenShare::kWhole, static_cast<uint64_t>(output.numel()), output.nbytes, 1, used);
  if (cls_out.data)
    f.add(TokenShare::kWhole, static_cast<uint64_t>(cls_out.numel()), cls_out.nbytes, 1, used);
  for (const std::vector<float>* v : {&output_norm, &rope_freqs, &cls_out_bias})
    f.add(TokenShare::kWhole, v->size(), v->size() * sizeof(float), 1, used);
  for (const LayerWeights& L : layers) add_layer(f, L, used, true);
  for (const MtpWeights& m : mtp) {
    add_layer(f, m.block, used, false);
    for (const TensorView* t : {&m.eh_proj, &m.head, &m.embed})
      if (t->data && t->data != output.data && t->data != token_embd.data)
        f.add(TokenShare::kNone, static_cast<uint64_t>(t->numel()), t->nbytes, 1, used);
    for (const std::vector<float>* v : {&m.enorm, &m.hnorm})
      f.add(TokenShare::kNone, v->size(), v->size() * sizeof(float), 1, used);
    if (m.head_norm.data() != output_norm.data())
      f.add(TokenShare::kNone, m.head_norm.size(), m.head_norm.size() * sizeof(float), 1, used);
  }
  return f;
}

uint64_t Weights::bytes_per_token(int32_t n_expert_used) const {
  return footprint(n_expert_used).active_bytes;
}
uint64_t Weights::total_bytes() const {
  return footprint(0).bytes;
}
uint64_t Weights::total_params() const {
  return footprint(0).params;
}
uint64_t Weights::active_params(int32_t n_expert_used) const {
  return footprint(n_expert_used).active_params;
}

}  // namespace loom
