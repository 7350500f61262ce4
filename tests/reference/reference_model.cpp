// Reference forward pass (see reference_model.h).
#include "reference/reference_model.h"

#include <cmath>
#include <string>

#include "kernels/quant.h"

namespace loom::reference {
namespace {

using Vec = std::vector<double>;

// A dequantized matrix: rows x cols floats.
struct Mat {
  int64_t rows = 0, cols = 0;
  std::vector<float> w;
};

Result<Mat> load_mat(const TensorLookup& find, const std::string& name) {
  const TensorView* t = find(name);
  if (!t) return not_found("reference: missing tensor " + name);
  Mat m{t->rows(), t->cols(), {}};
  m.w.resize(m.rows * m.cols);
  for (int64_t r = 0; r < m.rows; ++r) kernels::dequantize_row(t->dtype, t->row(r), &m.w[r * m.cols], m.cols);
  return m;
}

Result<Vec> load_vec(const TensorLookup& find, const std::string& name) {
  LOOM_ASSIGN_OR_RETURN(Mat m, load_mat(find, name));
  return Vec(m.w.begin(), m.w.end());
}

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
Vec rope_freqs(const ModelConfig& c, const TensorLookup& find) {
  const int64_t half = c.head_dim / 2;
  Vec f(half);
  const TensorView* factors = find("rope_freqs.weight");
  std::vector<float> fac;
  if (factors) {
    fac.resize(factors->numel());
    kernels::dequantize_row(factors->dtype, factors->data, fac.data(), factors->numel());
  }
  for (int64_t i = 0; i < half; ++i) {
    double base = std::pow(static_cast<double>(c.rope_theta), -static_cast<double>(2 * i) / c.head_dim);
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

}  // namespace

TensorLookup gguf_lookup(const GgufFile& file) {
  return [&file](std::string_view name) -> const TensorView* {
    const GgufTensorInfo* t = file.find_tensor(name);
    return t ? &t->view : nullptr;
  };
}

Result<std::vector<float>> forward(const ModelConfig& c, const TensorLookup& find,
                                   std::span<const int32_t> tokens) {
  const int64_t E = c.n_embd, D = c.head_dim, H = c.n_head, HK = c.n_head_kv;
  const int64_t T = static_cast<int64_t>(tokens.size());
  auto blk = [](int l, const char* s) { return "blk." + std::to_string(l) + "." + s; };
  LOOM_ASSIGN_OR_RETURN(Mat embd, load_mat(find, "token_embd.weight"));
  const int64_t V = embd.rows;
  const Vec freqs = rope_freqs(c, find);
  const bool neox = c.rope_style == RopeStyle::kNeox;

  // Residual stream for all positions, then layer by layer (K/V history per layer).
  std::vector<Vec> x(T, Vec(E));
  for (int64_t t = 0; t < T; ++t) {
    if (tokens[t] < 0 || tokens[t] >= V) return invalid_argument("reference: token out of range");
    for (int64_t i = 0; i < E; ++i) x[t][i] = embd.w[tokens[t] * E + i];
  }
  for (int l = 0; l < c.n_layer; ++l) {
    LOOM_ASSIGN_OR_RETURN(Vec attn_norm, load_vec(find, blk(l, "attn_norm.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wq, load_mat(find, blk(l, "attn_q.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wk, load_mat(find, blk(l, "attn_k.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wv, load_mat(find, blk(l, "attn_v.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wo, load_mat(find, blk(l, "attn_output.weight")));
    LOOM_ASSIGN_OR_RETURN(Vec ffn_norm, load_vec(find, blk(l, "ffn_norm.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wg, load_mat(find, blk(l, "ffn_gate.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wu, load_mat(find, blk(l, "ffn_up.weight")));
    LOOM_ASSIGN_OR_RETURN(Mat wd, load_mat(find, blk(l, "ffn_down.weight")));
    Vec bq, bk, bv, qn, kn;
    if (c.qkv_bias) {
      LOOM_ASSIGN_OR_RETURN(bq, load_vec(find, blk(l, "attn_q.bias")));
      LOOM_ASSIGN_OR_RETURN(bk, load_vec(find, blk(l, "attn_k.bias")));
      LOOM_ASSIGN_OR_RETURN(bv, load_vec(find, blk(l, "attn_v.bias")));
    }
    if (c.qk_norm) {
      LOOM_ASSIGN_OR_RETURN(qn, load_vec(find, blk(l, "attn_q_norm.weight")));
      LOOM_ASSIGN_OR_RETURN(kn, load_vec(find, blk(l, "attn_k_norm.weight")));
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
  LOOM_ASSIGN_OR_RETURN(Vec out_norm, load_vec(find, "output_norm.weight"));
  Mat out_w;
  if (c.tied_embeddings || !find("output.weight")) {
    out_w = std::move(embd);
  } else {
    LOOM_ASSIGN_OR_RETURN(out_w, load_mat(find, "output.weight"));
  }
  std::vector<float> logits(T * V);
  for (int64_t t = 0; t < T; ++t) {
    rmsnorm(x[t], 0, E, out_norm, c.rms_eps);
    Vec lg = matvec(out_w, x[t]);
    for (int64_t i = 0; i < V; ++i) logits[t * V + i] = static_cast<float>(lg[i]);
  }
  return logits;
}

}  // namespace loom::reference
