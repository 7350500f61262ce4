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
  double mx = -INFINITY, sum = 0;
  for (double v : logits) mx = std::max(mx, v);
  for (int64_t e = 0; e < X; ++e) sum += p[e] = std::exp(logits[e] - mx);
  for (double& v : p) v /= sum;
  std::vector<int64_t> order(X);
  for (int64_t e = 0; e < X; ++e) order[e] = e;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return p[a] > p[b]; });
  double chosen = 0;
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
           m.norm_topk ? p[e] / chosen : p[e]);
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
  if (c.embd_scale != 1.0f || c.residual_scale != 1.0f || c.attn_scale != 0.0f ||
      c.logit_scale != 1.0f || c.attn_softcap != 0.0f || c.final_softcap != 0.0f)
    what = "scales or soft-caps";
  for (const LayerSpec& s : c.layers)
    if (s.window != 0 || !s.rope || s.rope_theta != 0) what = "per-layer attention variants";
  if (c.rope_scaling.type == RopeScalingType::kLongRope) what = "LongRoPE";
  const MoeConfig& m = c.moe;
  if (m.n_expert > 0 && (m.sigmoid_scores || m.score_bias || m.router_bias || m.expert_bias ||
                         m.weights_scale != 1.0f))
    what = "Mixture-of-Experts routing other than softmax top-k";
  if (c.mla.kv_lora_rank > 0) what = "Multi-head Latent Attention";
  if (what.empty()) return Status::ok();
  return invalid_argument("reference: " + c.arch + " uses " + what +
                          ", which the reference does not implement");
}

}  // namespace

TensorLookup gguf_lookup(const GgufFile& file) {
  return [&file](std::string_view name) -> const TensorView* {
    const GgufTensorInfo* t = file.find_tensor(name);
    return t ? &t->view : nullptr;
  };
}

Result<std::vector<float>> forward(const ModelConfig& c, const TensorLookup& find,
                                   std::span<const int32_t> tokens, std::vector<float>* hidden) {
  LOOM_RETURN_IF_ERROR(check_supported(c));
  LOOM_ASSIGN_OR_RETURN(const PlannedTensors w, PlannedTensors::bind(c, find));
  const int64_t E = c.n_embd, D = c.head_dim, H = c.n_head, HK = c.n_head_kv;
  const int64_t T = static_cast<int64_t>(tokens.size());
  LOOM_ASSIGN_OR_RETURN(Mat embd, w.mat(TensorRole::kTokenEmbd));
  const int64_t V = embd.rows;
  const Vec freqs = rope_freqs(c, w);
  const bool neox = c.rope_style == RopeStyle::kNeox;

  // Residual stream for all positions, then layer by layer (K/V history per layer).
  std::vector<Vec> x(T, Vec(E));
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) return invalid_argument("reference: token out of range");
    for (int64_t i = 0; i < E; ++i) x[t][i] = embd.w[tokens[t] * E + i];
  }
  const int64_t n_rot = c.n_rot > 0 ? c.n_rot : D;
  // The FFN half of a block: x += ffn(norm(x)).
  auto ffn = [&](int l, Vec& xt) -> Status {
    LOOM_ASSIGN_OR_RETURN(Vec ffn_norm, w.vec(TensorRole::kFfnNorm, l));
    Vec h = xt;
    rmsnorm(h, 0, E, ffn_norm, c.rms_eps);
    Vec dn;
    if (l < static_cast<int>(c.layers.size()) && c.layers[l].moe) {
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
  for (int l = 0; l < c.n_layer; ++l) {
    LOOM_ASSIGN_OR_RETURN(Vec attn_norm, w.vec(TensorRole::kAttnNorm, l));
    if (l < static_cast<int>(c.layers.size()) && c.layers[l].deltanet) {
      std::vector<Vec> h(T);
      for (int64_t t = 0; t < T; ++t) {
        h[t] = x[t];
        rmsnorm(h[t], 0, E, attn_norm, c.rms_eps);
      }
      LOOM_ASSIGN_OR_RETURN(std::vector<Vec> o, gated_deltanet(c, w, l, h));
      for (int64_t t = 0; t < T; ++t) {
        for (int64_t i = 0; i < E; ++i) x[t][i] += o[t][i];
        LOOM_RETURN_IF_ERROR(ffn(l, x[t]));
      }
      continue;
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
      LOOM_RETURN_IF_ERROR(ffn(l, x[t]));
    }
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

}  // namespace loom::reference
