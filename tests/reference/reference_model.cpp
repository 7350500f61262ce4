// Reference forward pass (see reference_model.h).
#include "reference/reference_model.h"

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
  const int64_t half = c.head_dim / 2;
  Vec f(half);
  const TensorView* factors = w.find(TensorRole::kRopeFreqs);
  std::vector<float> fac;
  if (factors) {
    fac.resize(factors->numel());
    kernels::dequantize_row(factors->dtype, factors->data, fac.data(), factors->numel());
  }
  for (int64_t i = 0; i < half; ++i) {
    double base =
        std::pow(static_cast<double>(c.rope_theta), -static_cast<double>(2 * i) / c.head_dim);
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

void apply_rope(Vec& x, int64_t n_heads, int64_t d, int64_t pos, const Vec& freqs, bool neox) {
  for (int64_t h = 0; h < n_heads; ++h) {
    for (int64_t i = 0; i < d / 2; ++i) {
      int64_t a = h * d + (neox ? i : 2 * i);
      int64_t b = h * d + (neox ? i + d / 2 : 2 * i + 1);
      double th = pos * freqs[i];
      double x0 = x[a], x1 = x[b];
      x[a] = x0 * std::cos(th) - x1 * std::sin(th);
      x[b] = x0 * std::sin(th) + x1 * std::cos(th);
    }
  }
}

// The Llama block (pre-norm RMSNorm, SwiGLU, full causal attention, optional qkv biases and
// per-head q/k norms) is what this reference implements; the other families are checked
// against transformers' logits (tests/model/hf_reference_test.cpp).
Status check_supported(const ModelConfig& c) {
  std::string what;
  if (c.activation != Activation::kSilu) what = "a GELU FFN";
  if (c.norm_placement != NormPlacement::kPre) what = "norms other than pre-norm";
  if (c.fused_qkv || c.fused_gate_up) what = "fused projections";
  if (c.qk_norm && c.qk_norm_kind != QkNorm::kPerHead) what = "whole-projection q/k norms";
  if (c.n_rot != 0 && c.n_rot != c.head_dim) what = "partial rotary";
  if (c.embd_scale != 1.0f || c.residual_scale != 1.0f || c.attn_scale != 0.0f ||
      c.logit_scale != 1.0f || c.attn_softcap != 0.0f || c.final_softcap != 0.0f)
    what = "scales or soft-caps";
  for (const LayerSpec& s : c.layers)
    if (s.window != 0 || !s.rope || s.rope_theta != 0) what = "per-layer attention variants";
  if (c.rope_scaling.type == RopeScalingType::kLongRope) what = "LongRoPE";
  if (c.moe.n_expert > 0) what = "Mixture-of-Experts FFNs";
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
  for (int l = 0; l < c.n_layer; ++l) {
    LOOM_ASSIGN_OR_RETURN(Vec attn_norm, w.vec(TensorRole::kAttnNorm, l));
    LOOM_ASSIGN_OR_RETURN(Mat wq, w.mat(TensorRole::kWq, l));
    LOOM_ASSIGN_OR_RETURN(Mat wk, w.mat(TensorRole::kWk, l));
    LOOM_ASSIGN_OR_RETURN(Mat wv, w.mat(TensorRole::kWv, l));
    LOOM_ASSIGN_OR_RETURN(Mat wo, w.mat(TensorRole::kWo, l));
    LOOM_ASSIGN_OR_RETURN(Vec ffn_norm, w.vec(TensorRole::kFfnNorm, l));
    LOOM_ASSIGN_OR_RETURN(Mat wg, w.mat(TensorRole::kWGate, l));
    LOOM_ASSIGN_OR_RETURN(Mat wu, w.mat(TensorRole::kWUp, l));
    LOOM_ASSIGN_OR_RETURN(Mat wd, w.mat(TensorRole::kWDown, l));
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
    std::vector<Vec> q(T), k(T), v(T);
    for (int64_t t = 0; t < T; ++t) {
      Vec h = x[t];
      rmsnorm(h, 0, E, attn_norm, c.rms_eps);
      q[t] = matvec(wq, h);
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
      apply_rope(q[t], H, D, t, freqs, neox);
      apply_rope(k[t], HK, D, t, freqs, neox);
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
      Vec o = matvec(wo, att);
      for (int64_t i = 0; i < E; ++i) x[t][i] += o[i];
      Vec h = x[t];
      rmsnorm(h, 0, E, ffn_norm, c.rms_eps);
      Vec g = matvec(wg, h), u = matvec(wu, h);
      for (size_t i = 0; i < g.size(); ++i) g[i] = g[i] / (1 + std::exp(-g[i])) * u[i];
      Vec dn = matvec(wd, g);
      for (int64_t i = 0; i < E; ++i) x[t][i] += dn[i];
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
