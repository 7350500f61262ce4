// Reference forward pass (see reference_model.h).
#include "reference/reference_model.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <string>

#include "kernels/quant.h"
#include "model/tensor_plan.h"

namespace loom::reference {
namespace {

using Vec = std::vector<double>;

// A dequantized matrix: rows x cols floats.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
};

// The model's tensors as its tensor plan names them (model/tensor_plan.h: the list the loader,
// synth and convert read too), by role and layer. Only the names are shared: everything the
// reference computes with them is its own.
class PlannedTensors {
 public:
  static Result<PlannedTensors> bind(const ModelConfig& c, const TensorLookup& find) {
    TensorPlanOptions o;
    o.rope_freqs = find("rope_freqs.weight") != nullptr;
    PlannedTensors out;
    for (const PlannedWeight& w : tensor_plan(c, o)) {
      const TensorView* t = find(w.name);
      if (!t) return not_found("reference: missing tensor " + w.name);
      out.views_[{w.layer, w.role}] = t;
    }
    return out;
  }
  const TensorView* find(TensorRole role, int layer = -1) const {
    auto it = views_.find({layer, role});
    return it == views_.end() ? nullptr : it->second;
  }
  Result<Mat> mat(TensorRole role, int layer = -1) const {
    const TensorView* t = find(role, layer);
    if (!t)
      return not_found("reference: the tensor plan has no tensor of role " +
                       std::to_string(static_cast<int>(role)) + " in layer " +
                       std::to_string(layer));
    Mat m{t->rows(), t->cols(), {}};
    m.w.resize(m.rows * m.cols);
    for (int64_t r = 0; r < m.rows; ++r)
      kernels::dequantize_row(t->dtype, t->row(r), &m.w[r * m.cols], m.cols);
    return m;
  }
  Result<Vec> vec(TensorRole role, int layer = -1) const {
    LOOM_ASSIGN_OR_RETURN(Mat m, mat(role, layer));
    return Vec(m.w.begin(), m.w.end());
  }

 private:
  std::map<std::pair<int, TensorRole>, const TensorView*> views_;
};

Vec matvec(const Mat& m, const Vec& x) {
  Vec y(m.rows);
  for (int64_t r = 0; r < m.rows; ++r) {
    double acc = 0;
    const float* row = &m.w[r * m.cols];
    for (int64_t k = 0; k < m.cols; ++k) acc += static_cast<double>(row[k]) * x[k];
    y[r] = acc;
  }
  return y;
}

// RMSNorm of x[off, off + n) in place with weight w.
void rmsnorm(Vec& x, int64_t off, int64_t n, const Vec& w, double eps) {
  double ss = 0;
  for (int64_t i = 0; i < n; ++i) ss += x[off + i] * x[off + i];
  double s = 1.0 / std::sqrt(ss / n + eps);
  for (int64_t i = 0; i < n; ++i) x[off + i] = x[off + i] * s * w[i];
}

// Frequencies of each rotated pair, from the config alone (plus rope_freqs.weight if present).
Vec rope_freqs(const ModelConfig& c, const PlannedTensors& w) {
  const int64_t n_rot = c.n_rot > 0 ? c.n_rot : c.head_dim;
  const int64_t half = n_rot / 2;
  Vec f(half);
  const TensorView* factors = w.find(TensorRole::kRopeFreqs);
  std::vector<float> fac;
  if (factors) {
    fac.resize(factors->numel());
    kernels::dequantize_row(factors->dtype, factors->data, fac.data(), factors->numel());
  }
  for (int64_t i = 0; i < half; ++i) {
    double base = std::pow(static_cast<double>(c.rope_theta), -static_cast<double>(2 * i) / n_rot);
    const auto& s = c.rope_scaling;
    if (factors) {
      base /= fac[i];
    } else if (s.type == RopeScalingType::kLinear) {
      base /= s.factor;
    } else if (s.type == RopeScalingType::kLlama3) {
      double wavelen = 2 * M_PI / base;
      double lo = s.original_context / static_cast<double>(s.low_freq_factor);
      double hi = s.original_context / static_cast<double>(s.high_freq_factor);
      if (wavelen < hi) {
        // high frequency: unchanged
      } else if (wavelen > lo) {
        base /= s.factor;
      } else {
        double t = (s.original_context / wavelen - s.low_freq_factor) /
                   (static_cast<double>(s.high_freq_factor) - s.low_freq_factor);
        base = (1 - t) * base / s.factor + t * base;
      }
    }
    f[i] = base;
  }
  return f;
}

// Rotates the first n_rot dimensions of each head of d (partial rotary: the rest stay).
void apply_rope(Vec& x, int64_t n_heads, int64_t d, int64_t n_rot, int64_t pos, const Vec& freqs,
                bool neox) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < n_rot / 2; ++i) {
      int64_t a = h * d + (neox ? i : 2 * i);
      int64_t b = h * d + (neox ? i + n_rot / 2 : 2 * i + 1);
      double th = pos * freqs[i];
      double x0 = x[a], x1 = x[b];
      x[a] = x0 * std::cos(th) - x1 * std::sin(th);
      x[b] = x0 * std::sin(th) + x1 * std::cos(th);
    }
  }
}

double sigmoid(double x) {
  return 1 / (1 + std::exp(-x));
}
double silu(double x) {
  return x * sigmoid(x);
}

// A Gated DeltaNet layer over the whole sequence, in its plain recurrent form (one state
// update per token, as transformers' torch_recurrent_gated_delta_rule): h is every position's
// normed input, the result every position's output after ssm_out.
Result<std::vector<Vec>> gated_deltanet(const ModelConfig& c, const PlannedTensors& w, int l,
                                        const std::vector<Vec>& h) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t Hk = d.n_k_heads, Hv = d.n_v_heads, dk = d.d_k, dv = d.d_v, K = d.conv_kernel;
  const int64_t C = d.conv_dim(), r = Hv / Hk, T = static_cast<int64_t>(h.size());
  LOOM_ASSIGN_OR_RETURN(Mat wqkv, w.mat(TensorRole::kSsmQkv, l));
  LOOM_ASSIGN_OR_RETURN(Mat wz, w.mat(TensorRole::kSsmZ, l));
  LOOM_ASSIGN_OR_RETURN(Mat conv, w.mat(TensorRole::kSsmConv, l));
  LOOM_ASSIGN_OR_RETURN(Vec a_neg, w.vec(TensorRole::kSsmA, l));
  LOOM_ASSIGN_OR_RETURN(Vec dt_bias, w.vec(TensorRole::kSsmDt, l));
  LOOM_ASSIGN_OR_RETURN(Vec norm_w, w.vec(TensorRole::kSsmNorm, l));
  LOOM_ASSIGN_OR_RETURN(Mat wout, w.mat(TensorRole::kSsmOut, l));
  Mat wb, wa, wba;
  if (d.fused_ba) {
    LOOM_ASSIGN_OR_RETURN(wba, w.mat(TensorRole::kSsmBa, l));
  } else {
    LOOM_ASSIGN_OR_RETURN(wb, w.mat(TensorRole::kSsmBeta, l));
    LOOM_ASSIGN_OR_RETURN(wa, w.mat(TensorRole::kSsmAlpha, l));
  }
  // The key head value head j reads, in the file's order of value heads.
  auto key_head = [&](int64_t j) { return d.v_heads_tiled ? j % Hk : j / r; };
  std::vector<Vec> pre(T), out(T);
  for (int64_t t = 0; t < T; ++t) pre[t] = matvec(wqkv, h[t]);
  std::vector<Vec> S(Hv, Vec(dk * dv, 0.0));  // S[j][a * dv + b]: key dim a, value dim b
  for (int64_t t = 0; t < T; ++t) {
    // Causal depthwise convolution over the last K positions (zeros before the first), SiLU.
    Vec x(C);
    for (int64_t ch = 0; ch < C; ++ch) {
      double acc = 0;
      for (int64_t k = 0; k < K; ++k) {
        const int64_t src = t - (K - 1) + k;
        if (src >= 0) acc += conv.w[ch * K + k] * pre[src][ch];
      }
      x[ch] = silu(acc);
    }
    Vec z = matvec(wz, h[t]);
    Vec b, a;
    if (d.fused_ba) {  // per key head g: its r value heads' b rows, then their a rows
      Vec ba = matvec(wba, h[t]);
      b.resize(Hv), a.resize(Hv);
      for (int64_t g = 0; g < Hk; ++g)
        for (int64_t i = 0; i < r; ++i) {
          b[g * r + i] = ba[g * 2 * r + i];
          a[g * r + i] = ba[g * 2 * r + r + i];
        }
    } else {
      b = matvec(wb, h[t]);
      a = matvec(wa, h[t]);
    }
    // q and k L2-normalised per head (eps 1e-6 inside the root), q scaled by 1/sqrt(dk).
    auto l2 = [&](int64_t off, double scale) {
      double ss = 0;
      for (int64_t i = 0; i < dk; ++i) ss += x[off + i] * x[off + i];
      const double inv = scale / std::sqrt(ss + 1e-6);
      for (int64_t i = 0; i < dk; ++i) x[off + i] *= inv;
    };
    for (int64_t g = 0; g < Hk; ++g) {
      l2(g * dk, 1 / std::sqrt(static_cast<double>(dk)));
      l2(Hk * dk + g * dk, 1.0);
    }
    Vec o(Hv * dv);
    for (int64_t j = 0; j < Hv; ++j) {
      const double* q = &x[key_head(j) * dk];
      const double* k = &x[Hk * dk + key_head(j) * dk];
      const double* v = &x[2 * Hk * dk + j * dv];
      const double beta = sigmoid(b[j]);
      const double sp =
          a[j] + dt_bias[j] > 20 ? a[j] + dt_bias[j] : std::log1p(std::exp(a[j] + dt_bias[j]));
      const double decay = std::exp(a_neg[j] * sp);
      Vec& s = S[j];
      for (double& e : s) e *= decay;
      for (int64_t bb = 0; bb < dv; ++bb) {
        double kv = 0;  // (S^T k)[bb]
        for (int64_t aa = 0; aa < dk; ++aa) kv += s[aa * dv + bb] * k[aa];
        const double delta = (v[bb] - kv) * beta;
        for (int64_t aa = 0; aa < dk; ++aa) s[aa * dv + bb] += k[aa] * delta;
      }
      for (int64_t bb = 0; bb < dv; ++bb) {
        double acc = 0;
        for (int64_t aa = 0; aa < dk; ++aa) acc += s[aa * dv + bb] * q[aa];
        o[j * dv + bb] = acc;
      }
      // RMSNorm over the head's values (weight as it is), gated by SiLU(z).
      rmsnorm(o, j * dv, dv, norm_w, c.rms_eps);
      for (int64_t bb = 0; bb < dv; ++bb) o[j * dv + bb] *= silu(z[j * dv + bb]);
    }
    out[t] = matvec(wout, o);
  }
  return out;
}

// Multi-head Latent Attention over every position in its decompressed form (transformers'
// DeepseekV3Attention): each head's key is [W_k,h · latent ; the shared RoPE key], its value
// W_v,h · latent, with the latent kv_a_norm(kv_a · x) of each position; h is every position's
// normed input, the result every position's output after wo.
Result<std::vector<Vec>> mla_attention(const ModelConfig& c, const PlannedTensors& w, int l,
                                       const std::vector<Vec>& h, const Vec& freqs) {
  const MlaConfig& a = c.mla;
  const int64_t H = c.n_head, N = a.qk_nope_head_dim, P = a.qk_rope_head_dim;
  const int64_t R = a.kv_lora_rank, Dv = a.v_head_dim, Dq = N + P;
  const int64_t T = static_cast<int64_t>(h.size());
  const bool neox = c.rope_style == RopeStyle::kNeox;
  Mat wq, wq_a, wq_b;
  Vec q_a_norm;
  if (a.q_lora_rank > 0) {
    LOOM_ASSIGN_OR_RETURN(wq_a, w.mat(TensorRole::kWqA, l));
    LOOM_ASSIGN_OR_RETURN(q_a_norm, w.vec(TensorRole::kQANorm, l));
    LOOM_ASSIGN_OR_RETURN(wq_b, w.mat(TensorRole::kWqB, l));
  } else {
    LOOM_ASSIGN_OR_RETURN(wq, w.mat(TensorRole::kWq, l));
  }
  LOOM_ASSIGN_OR_RETURN(Mat wkv_a, w.mat(TensorRole::kWkvA, l));
  LOOM_ASSIGN_OR_RETURN(Vec kv_norm, w.vec(TensorRole::kKvANorm, l));
  LOOM_ASSIGN_OR_RETURN(Mat k_b, w.mat(TensorRole::kWkB, l));  // per head (R, N): W_k,h^T
  LOOM_ASSIGN_OR_RETURN(Mat v_b, w.mat(TensorRole::kWvB, l));  // per head (Dv, R): W_v,h
  LOOM_ASSIGN_OR_RETURN(Mat wo, w.mat(TensorRole::kWo, l));
  std::vector<Vec> q(T), k(T), v(T);  // q, k: (H, N + P); v: (H, Dv)
  for (int64_t t = 0; t < T; ++t) {
    if (a.q_lora_rank > 0) {
      Vec qa = matvec(wq_a, h[t]);
      rmsnorm(qa, 0, a.q_lora_rank, q_a_norm, c.rms_eps);
      q[t] = matvec(wq_b, qa);
    } else {
      q[t] = matvec(wq, h[t]);
    }
    Vec kv = matvec(wkv_a, h[t]);  // latent (R), then the RoPE key (P)
    rmsnorm(kv, 0, R, kv_norm, c.rms_eps);
    Vec q_rope(H * P), k_rope(kv.begin() + R, kv.end());
    for (int64_t hh = 0; hh < H; ++hh)
      for (int64_t i = 0; i < P; ++i) q_rope[hh * P + i] = q[t][hh * Dq + N + i];
    apply_rope(q_rope, H, P, P, t, freqs, neox);
    apply_rope(k_rope, 1, P, P, t, freqs, neox);
    k[t].assign(H * Dq, 0.0);
    v[t].assign(H * Dv, 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
      for (int64_t i = 0; i < P; ++i) {
        q[t][hh * Dq + N + i] = q_rope[hh * P + i];
        k[t][hh * Dq + N + i] = k_rope[i];
      }
      for (int64_t n = 0; n < N; ++n) {
        double acc = 0;
        for (int64_t r = 0; r < R; ++r) acc += k_b.w[(hh * R + r) * N + n] * kv[r];
        k[t][hh * Dq + n] = acc;
      }
      for (int64_t d = 0; d < Dv; ++d) {
        double acc = 0;
        for (int64_t r = 0; r < R; ++r) acc += v_b.w[(hh * Dv + d) * R + r] * kv[r];
        v[t][hh * Dv + d] = acc;
      }
    }
  }
  const double scale = c.attn_scale > 0 ? c.attn_scale : 1 / std::sqrt(static_cast<double>(Dq));
  std::vector<Vec> out(T);
  for (int64_t t = 0; t < T; ++t) {
    Vec att(H * Dv, 0.0);
    for (int64_t hh = 0; hh < H; ++hh) {
      Vec sc(t + 1);
      double mx = -INFINITY;
      for (int64_t j = 0; j <= t; ++j) {
        double d = 0;
        for (int64_t i = 0; i < Dq; ++i) d += q[t][hh * Dq + i] * k[j][hh * Dq + i];
        sc[j] = d * scale;
        mx = std::max(mx, sc[j]);
      }
      double sum = 0;
      for (auto& e : sc) sum += e = std::exp(e - mx);
      for (int64_t j = 0; j <= t; ++j)
        for (int64_t d = 0; d < Dv; ++d) att[hh * Dv + d] += sc[j] / sum * v[j][hh * Dv + d];
    }
    out[t] = matvec(wo, att);
  }
  return out;
}

// The softmax-routed Mixture-of-Experts FFN (Qwen2/3-MoE, Qwen3-Next): the top n_expert_used
// experts' SwiGLU outputs weighted by their (renormalised) probabilities, plus the shared
// expert scaled by sigmoid(x · gate).
Result<Vec> moe_ffn(const ModelConfig& c, const PlannedTensors& w, int l, const Vec& h) {
  const MoeConfig& m = c.moe;
  const int64_t X = m.n_expert, F = m.n_ff_exp, E = c.n_embd;
  LOOM_ASSIGN_OR_RETURN(Mat router, w.mat(TensorRole::kRouter, l));
  LOOM_ASSIGN_OR_RETURN(Mat gate, w.mat(TensorRole::kGateExps, l));
  LOOM_ASSIGN_OR_RETURN(Mat up, w.mat(TensorRole::kUpExps, l));
  LOOM_ASSIGN_OR_RETURN(Mat down, w.mat(TensorRole::kDownExps, l));
  Vec logits = matvec(router, h), p(X);
  std::vector<int64_t> order(X);
  for (int64_t e = 0; e < X; ++e) order[e] = e;
  if (m.sigmoid_scores) {
    // DeepSeek-V3 (transformers' DeepseekV3MoE): sigmoid scores; experts are chosen by score +
    // correction bias, within the topk_group groups whose two best biased scores sum highest
    // (the other groups' experts compete at 0, as transformers' masked_fill(~mask, 0.0) leaves
    // them: they win only over chosen experts biased below 0); they weigh by their plain
    // scores (renormalised), times routed_scaling_factor.
    Vec choice(X);
    Vec bias(X, 0.0);
    if (m.score_bias) {
      LOOM_ASSIGN_OR_RETURN(bias, w.vec(TensorRole::kExpProbsB, l));
    }
    for (int64_t e = 0; e < X; ++e) {
      p[e] = sigmoid(logits[e]);
      choice[e] = p[e] + bias[e];
    }
    std::vector<bool> allowed(X, true);
    if (m.n_group > 1 && m.topk_group < m.n_group) {
      const int64_t per = X / m.n_group;
      std::vector<std::pair<double, int64_t>> groups;
      for (int64_t g = 0; g < m.n_group; ++g) {
        Vec in(choice.begin() + g * per, choice.begin() + (g + 1) * per);
        std::sort(in.begin(), in.end(), std::greater<double>());
        groups.push_back({in[0] + (per > 1 ? in[1] : 0.0), g});
      }
      std::stable_sort(groups.begin(), groups.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      allowed.assign(X, false);
      for (int64_t k = 0; k < m.topk_group; ++k)
        for (int64_t e = 0; e < per; ++e) allowed[groups[k].second * per + e] = true;
      for (int64_t e = 0; e < X; ++e)
        if (!allowed[e]) choice[e] = 0.0;
    }
    std::stable_sort(order.begin(), order.end(),
                     [&](int64_t a, int64_t b) { return choice[a] > choice[b]; });
  } else {
    double mx = -INFINITY, sum = 0;
    for (double v : logits) mx = std::max(mx, v);
    for (int64_t e = 0; e < X; ++e) sum += p[e] = std::exp(logits[e] - mx);
    for (double& v : p) v /= sum;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  }
  double chosen = m.sigmoid_scores ? 1e-20 : 0.0;
  for (int64_t k = 0; k < m.n_expert_used; ++k) chosen += p[order[k]];
  Vec out(E, 0.0);
  auto expert = [&](const float* g, const float* u, const float* dn, int64_t f, double weight) {
    Vec act(f);
    for (int64_t i = 0; i < f; ++i) {
      double gg = 0, uu = 0;
      for (int64_t j = 0; j < E; ++j) gg += g[i * E + j] * h[j], uu += u[i * E + j] * h[j];
      act[i] = silu(gg) * uu;
    }
    for (int64_t o = 0; o < E; ++o) {
      double acc = 0;
      for (int64_t i = 0; i < f; ++i) acc += dn[o * f + i] * act[i];
      out[o] += weight * acc;
    }
  };
  for (int64_t k = 0; k < m.n_expert_used; ++k) {
    const int64_t e = order[k];
    expert(&gate.w[e * F * E], &up.w[e * F * E], &down.w[e * E * F], F,
           (m.norm_topk ? p[e] / chosen : p[e]) * m.weights_scale);
  }
  if (m.n_ff_shexp > 0) {
    LOOM_ASSIGN_OR_RETURN(Mat sg, w.mat(TensorRole::kWGateShexp, l));
    LOOM_ASSIGN_OR_RETURN(Mat su, w.mat(TensorRole::kWUpShexp, l));
    LOOM_ASSIGN_OR_RETURN(Mat sd, w.mat(TensorRole::kWDownShexp, l));
    double scale = 1;
    if (m.shexp_gate) {
      LOOM_ASSIGN_OR_RETURN(Vec g, w.vec(TensorRole::kShexpGate, l));
      double dot = 0;
      for (int64_t j = 0; j < E; ++j) dot += g[j] * h[j];
      scale = sigmoid(dot);
    }
    expert(sg.w.data(), su.w.data(), sd.w.data(), m.n_ff_shexp, scale);
  }
  return out;
}

// The Llama block (pre-norm RMSNorm, SwiGLU, full causal attention, optional qkv biases and
// per-head q/k norms, partial rotary, an output gate per head) with softmax-routed MoE FFNs
// and Gated DeltaNet layers is what this reference implements; the other families are checked
// against transformers' logits (tests/model/hf_reference_test.cpp).
Status check_supported(const ModelConfig& c) {
  std::string what;
  if (c.activation != Activation::kSilu) what = "a GELU FFN";
  if (c.norm_placement != NormPlacement::kPre) what = "norms other than pre-norm";
  if (c.fused_qkv || c.fused_gate_up) what = "fused projections";
  if (c.qk_norm && c.qk_norm_kind != QkNorm::kPerHead) what = "whole-projection q/k norms";
  if (c.embd_scale != 1.0f || c.residual_scale != 1.0f ||
      (c.attn_scale != 0.0f && c.mla.kv_lora_rank == 0) || c.logit_scale != 1.0f ||
      c.attn_softcap != 0.0f || c.final_softcap != 0.0f)
    what = "scales or soft-caps";
  for (const LayerSpec& s : c.layers)
    if (s.window != 0 || !s.rope || s.rope_theta != 0) what = "per-layer attention variants";
  if (c.rope_scaling.type == RopeScalingType::kLongRope) what = "LongRoPE";
  const MoeConfig& m = c.moe;
  if (m.n_expert > 0 && (m.router_bias || m.expert_bias ||
                         (!m.sigmoid_scores && (m.score_bias || m.weights_scale != 1.0f))))
    what = "Mixture-of-Experts routing other than softmax top-k or DeepSeek's sigmoid routing";
  if (c.rope_scaling.type == RopeScalingType::kYarn) what = "YaRN";
  if (what.empty()) return Status::ok();
  return invalid_argument("reference: " + c.arch + " uses " + what +
                          ", which the reference does not implement");
}

// One block (layer l's tensors, laid out by spec) over every position 0..T-1 of x, in place.
Status run_block(const ModelConfig& c, const PlannedTensors& w, int l, const LayerSpec& spec,
                 const Vec& freqs, std::vector<Vec>& x) {
  const int64_t E = c.n_embd, D = c.head_dim, H = c.n_head, HK = c.n_head_kv;
  const int64_t T = static_cast<int64_t>(x.size());
  const bool neox = c.rope_style == RopeStyle::kNeox;
  const int64_t n_rot = c.n_rot > 0 ? c.n_rot : D;
  // The FFN half of a block: x += ffn(norm(x)).
  auto ffn = [&](Vec& xt) -> Status {
    LOOM_ASSIGN_OR_RETURN(Vec ffn_norm, w.vec(TensorRole::kFfnNorm, l));
    Vec h = xt;
    rmsnorm(h, 0, E, ffn_norm, c.rms_eps);
    Vec dn;
    if (spec.moe) {
      LOOM_ASSIGN_OR_RETURN(dn, moe_ffn(c, w, l, h));
    } else {
      LOOM_ASSIGN_OR_RETURN(Mat wg, w.mat(TensorRole::kWGate, l));
      LOOM_ASSIGN_OR_RETURN(Mat wu, w.mat(TensorRole::kWUp, l));
      LOOM_ASSIGN_OR_RETURN(Mat wd, w.mat(TensorRole::kWDown, l));
      Vec g = matvec(wg, h), u = matvec(wu, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = silu(g[i]) * u[i];
      dn = matvec(wd, g);
    }
    for (int64_t i = 0; i < E; ++i) xt[i] += dn[i];
    return Status::ok();
  };
  {
    LOOM_ASSIGN_OR_RETURN(Vec attn_norm, w.vec(TensorRole::kAttnNorm, l));
    if (spec.mla) {
      std::vector<Vec> h(T);
      for (int64_t t = 0; t < T; ++t) {
        h[t] = x[t];
        rmsnorm(h[t], 0, E, attn_norm, c.rms_eps);
      }
      LOOM_ASSIGN_OR_RETURN(std::vector<Vec> o, mla_attention(c, w, l, h, freqs));
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < E; ++i) x[t][i] += o[t][i];
        LOOM_RETURN_IF_ERROR(ffn(x[t]));
      }
      return Status::ok();
    }
    if (spec.deltanet) {
      std::vector<Vec> h(T);
      for (int64_t t = 0; t < T; ++t) {
        h[t] = x[t];
        rmsnorm(h[t], 0, E, attn_norm, c.rms_eps);
      }
      LOOM_ASSIGN_OR_RETURN(std::vector<Vec> o, gated_deltanet(c, w, l, h));
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < E; ++i) x[t][i] += o[t][i];
        LOOM_RETURN_IF_ERROR(ffn(x[t]));
      }
      return Status::ok();
    }
    LOOM_ASSIGN_OR_RETURN(Mat wq, w.mat(TensorRole::kWq, l));
    LOOM_ASSIGN_OR_RETURN(Mat wk, w.mat(TensorRole::kWk, l));
    LOOM_ASSIGN_OR_RETURN(Mat wv, w.mat(TensorRole::kWv, l));
    LOOM_ASSIGN_OR_RETURN(Mat wo, w.mat(TensorRole::kWo, l));
    Vec bq, bk, bv, qn, kn;
    if (c.qkv_bias) {
      LOOM_ASSIGN_OR_RETURN(bq, w.vec(TensorRole::kBq, l));
      LOOM_ASSIGN_OR_RETURN(bk, w.vec(TensorRole::kBk, l));
      LOOM_ASSIGN_OR_RETURN(bv, w.vec(TensorRole::kBv, l));
    }
    if (c.qk_norm) {
      LOOM_ASSIGN_OR_RETURN(qn, w.vec(TensorRole::kQNorm, l));
      LOOM_ASSIGN_OR_RETURN(kn, w.vec(TensorRole::kKNorm, l));
    }
    std::vector<Vec> q(T), k(T), v(T), gate(T);
    for (int64_t t = 0; t < T; ++t) {
      Vec h = x[t];
      rmsnorm(h, 0, E, attn_norm, c.rms_eps);
      q[t] = matvec(wq, h);
      if (c.attn_output_gate) {  // per head: D query rows, then D gate rows
        Vec qg = std::move(q[t]);
        q[t].assign(H * D, 0.0);
        gate[t].assign(H * D, 0.0);
        for (int64_t hh = 0; hh < H; ++hh)
          for (int64_t i = 0; i < D; ++i) {
            q[t][hh * D + i] = qg[hh * 2 * D + i];
            gate[t][hh * D + i] = qg[hh * 2 * D + D + i];
          }
      }
      k[t] = matvec(wk, h);
      v[t] = matvec(wv, h);
      if (c.qkv_bias) {
        for (size_t i = 0; i < q[t].size(); ++i) q[t][i] += bq[i];
        for (size_t i = 0; i < k[t].size(); ++i) k[t][i] += bk[i], v[t][i] += bv[i];
      }
      if (c.qk_norm) {
        for (int64_t hh = 0; hh < H; ++hh) rmsnorm(q[t], hh * D, D, qn, c.rms_eps);
        for (int64_t hh = 0; hh < HK; ++hh) rmsnorm(k[t], hh * D, D, kn, c.rms_eps);
      }
      apply_rope(q[t], H, D, n_rot, t, freqs, neox);
      apply_rope(k[t], HK, D, n_rot, t, freqs, neox);
    }
    for (int64_t t = 0; t < T; ++t) {
      Vec att(H * D, 0.0);
      for (int64_t hh = 0; hh < H; ++hh) {
        const int64_t kh = hh / (H / HK);
        Vec s(t + 1);
        double mx = -INFINITY;
        for (int64_t j = 0; j <= t; ++j) {
          double d = 0;
          for (int64_t i = 0; i < D; ++i) d += q[t][hh * D + i] * k[j][kh * D + i];
          s[j] = d / std::sqrt(static_cast<double>(D));
          mx = std::max(mx, s[j]);
        }
        double sum = 0;
        for (auto& e : s) sum += e = std::exp(e - mx);
        for (int64_t j = 0; j <= t; ++j)
          for (int64_t i = 0; i < D; ++i) att[hh * D + i] += s[j] / sum * v[j][kh * D + i];
      }
      if (c.attn_output_gate)
        for (int64_t i = 0; i < H * D; ++i) att[i] *= sigmoid(gate[t][i]);
      Vec o = matvec(wo, att);
      for (int64_t i = 0; i < E; ++i) x[t][i] += o[i];
      LOOM_RETURN_IF_ERROR(ffn(x[t]));
    }
  }
  return Status::ok();
}

}  // namespace

TensorLookup gguf_lookup(const GgufFile& file) {
  return [&file](std::string_view name) -> const TensorView* {
    const GgufTensorInfo* t = file.find_tensor(name);
    return t ? &t->view : nullptr;
  };
}

Result<std::vector<float>> forward(const ModelConfig& c, const TensorLookup& find,
                                   std::span<const int32_t> tokens, std::vector<float>* hidden,
                                   std::vector<float>* pre_norm) {
  LOOM_RETURN_IF_ERROR(check_supported(c));
  LOOM_ASSIGN_OR_RETURN(const PlannedTensors w, PlannedTensors::bind(c, find));
  const int64_t E = c.n_embd;
  const int64_t T = static_cast<int64_t>(tokens.size());
  LOOM_ASSIGN_OR_RETURN(Mat embd, w.mat(TensorRole::kTokenEmbd));
  const int64_t V = embd.rows;
  const Vec freqs = rope_freqs(c, w);

  // Residual stream for all positions, then layer by layer (K/V history per layer).
  std::vector<Vec> x(T, Vec(E));
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) return invalid_argument("reference: token out of range");
    for (int64_t i = 0; i < E; ++i) x[t][i] = embd.w[tokens[t] * E + i];
  }
  for (int l = 0; l < c.n_layer; ++l)
    LOOM_RETURN_IF_ERROR(run_block(
        c, w, l, l < static_cast<int>(c.layers.size()) ? c.layers[l] : LayerSpec{}, freqs, x));
  if (pre_norm) {
    pre_norm->assign(T * E, 0.0f);
    for (int64_t t = 0; t < T; ++t)
      for (int64_t i = 0; i < E; ++i) (*pre_norm)[t * E + i] = static_cast<float>(x[t][i]);
  }
  LOOM_ASSIGN_OR_RETURN(Vec out_norm, w.vec(TensorRole::kOutputNorm));
  Mat out_w;
  if (!w.find(TensorRole::kOutput)) {
    out_w = std::move(embd);
  } else {
    LOOM_ASSIGN_OR_RETURN(out_w, w.mat(TensorRole::kOutput));
  }
  std::vector<float> logits(T * V);
  if (hidden) hidden->assign(T * E, 0.0f);
  for (int64_t t = 0; t < T; ++t) {
    rmsnorm(x[t], 0, E, out_norm, c.rms_eps);
    if (hidden)
      for (int64_t i = 0; i < E; ++i) (*hidden)[t * E + i] = static_cast<float>(x[t][i]);
    Vec lg = matvec(out_w, x[t]);
    for (int64_t i = 0; i < V; ++i) logits[t * V + i] = static_cast<float>(lg[i]);
  }
  return logits;
}

Result<std::vector<float>> mtp_forward(const ModelConfig& c, const TensorLookup& find, int index,
                                       std::span<const int32_t> tokens,
                                       std::span<const float> hidden,
                                       std::vector<float>* out_hidden) {
  LOOM_RETURN_IF_ERROR(check_supported(c));
  if (index < 0 || index >= c.n_mtp_layers || index >= static_cast<int>(c.mtp_layers.size()))
    return invalid_argument("reference: no multi-token prediction module " + std::to_string(index));
  LOOM_ASSIGN_OR_RETURN(const PlannedTensors w, PlannedTensors::bind(c, find));
  const int64_t E = c.n_embd;
  const int64_t T = static_cast<int64_t>(tokens.size());
  if (hidden.size() != static_cast<size_t>(T * E))
    return invalid_argument("reference: one hidden state per token expected");
  const int l = c.n_layer + index;
  // The module's own embedding, head norm and head, else the model's.
  auto mat_or = [&](TensorRole own, TensorRole fallback) -> Result<Mat> {
    if (w.find(own, l)) return w.mat(own, l);
    if (fallback == TensorRole::kOutput && !w.find(TensorRole::kOutput))
      return w.mat(TensorRole::kTokenEmbd);  // tied
    return w.mat(fallback);
  };
  LOOM_ASSIGN_OR_RETURN(Mat embd, mat_or(TensorRole::kMtpEmbed, TensorRole::kTokenEmbd));
  LOOM_ASSIGN_OR_RETURN(Mat head, mat_or(TensorRole::kMtpHead, TensorRole::kOutput));
  LOOM_ASSIGN_OR_RETURN(Vec head_norm, w.find(TensorRole::kMtpHeadNorm, l)
                                           ? w.vec(TensorRole::kMtpHeadNorm, l)
                                           : w.vec(TensorRole::kOutputNorm));
  LOOM_ASSIGN_OR_RETURN(Vec enorm, w.vec(TensorRole::kMtpEnorm, l));
  LOOM_ASSIGN_OR_RETURN(Vec hnorm, w.vec(TensorRole::kMtpHnorm, l));
  LOOM_ASSIGN_OR_RETURN(Mat eh_proj, w.mat(TensorRole::kMtpEhProj, l));
  const int64_t V = head.rows;
  // x_t = eh_proj · [enorm(embedding of tokens[t]), hnorm(hidden[t])]; the embedding is
  // zero at position 0 where the config says so (vLLM's DeepSeek MTP; not Qwen3-Next's).
  std::vector<Vec> x(T);
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= embd.rows)
      return invalid_argument("reference: token out of range");
    Vec in(2 * E, 0.0);
    if (t > 0 || !c.mtp_zero_embedding_at_start) {
      for (int64_t i = 0; i < E; ++i) in[i] = embd.w[tokens[t] * E + i];
      rmsnorm(in, 0, E, enorm, c.rms_eps);
    }
    for (int64_t i = 0; i < E; ++i) in[E + i] = hidden[t * E + i];
    rmsnorm(in, E, E, hnorm, c.rms_eps);
    x[t] = matvec(eh_proj, in);
  }
  LOOM_RETURN_IF_ERROR(run_block(c, w, l, c.mtp_layers[index], rope_freqs(c, w), x));
  if (out_hidden) out_hidden->assign(T * E, 0.0f);
  std::vector<float> logits(T * V);
  for (int64_t t = 0; t < T; ++t) {
    if (out_hidden && !c.mtp_hidden_after_norm)
      for (int64_t i = 0; i < E; ++i) (*out_hidden)[t * E + i] = static_cast<float>(x[t][i]);
    rmsnorm(x[t], 0, E, head_norm, c.rms_eps);
    if (out_hidden && c.mtp_hidden_after_norm)
      for (int64_t i = 0; i < E; ++i) (*out_hidden)[t * E + i] = static_cast<float>(x[t][i]);
    Vec lg = matvec(head, x[t]);
    for (int64_t i = 0; i < V; ++i) logits[t * V + i] = static_cast<float>(lg[i]);
  }
  return logits;
}

}  // namespace loom::reference
