// Mixture of Experts on random data: the router (layers::route_token) against a brute-force
// sort and softmax, ties included; the CPU MoE FFN (backend/cpu/moe_ffn.h) against a direct
// per-token computation in double, with every token sent to one expert, experts left without
// tokens, a gated shared expert, and rows run alone against the whole batch (bit-identical);
// with quantized experts (Q8_0, Q4_K, MXFP4) against the reference path on their dequantized
// weights.
#include "model/layers/moe.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "backend/cpu/moe_ffn.h"
#include "kernels/ref/ref.h"

namespace loom {
namespace {

std::vector<float> random_floats(size_t n, uint32_t seed, float scale = 1.0f) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> d(0.0f, scale);
  std::vector<float> v(n);
  for (float& x : v) x = d(rng);
  return v;
}

// Expected routing: experts by decreasing logit, lower index first on ties; softmax in double.
void brute_force_route(const MoeConfig& m, const std::vector<float>& logits,
                       std::vector<int32_t>* ids, std::vector<double>* w) {
  std::vector<int32_t> order(m.n_expert);
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&](int32_t a, int32_t b) { return logits[a] > logits[b]; });
  ids->assign(order.begin(), order.begin() + m.n_expert_used);
  double all = 0, top = 0;
  for (float l : logits) all += std::exp(static_cast<double>(l));
  for (int32_t e : *ids) top += std::exp(static_cast<double>(logits[e]));
  w->clear();
  for (int32_t e : *ids)
    w->push_back(std::exp(static_cast<double>(logits[e])) / (m.norm_topk ? top : all));
}

TEST(MoeRouter, MatchesSortAndSoftmaxWithTiesAndWithoutRenormalizing) {
  for (bool norm : {true, false}) {
    MoeConfig m;
    m.n_expert = 16;
    m.n_expert_used = 4;
    m.norm_topk = norm;
    for (uint32_t seed = 0; seed < 200; ++seed) {
      std::vector<float> logits = random_floats(16, seed);
      if (seed % 3 == 0) logits[5] = logits[11] = logits[2] = 3.0f;  // a three-way tie on top
      std::vector<int32_t> want_ids;
      std::vector<double> want_w;
      brute_force_route(m, logits, &want_ids, &want_w);
      int32_t ids[4];
      float w[4];
      layers::route_token(m, logits.data(), ids, w);
      double sum = 0;
      for (int s = 0; s < 4; ++s) {
        EXPECT_EQ(ids[s], want_ids[s]) << "seed " << seed << " slot " << s;
        EXPECT_NEAR(w[s], want_w[s], 1e-6) << "seed " << seed;
        sum += w[s];
      }
      if (norm)
        EXPECT_NEAR(sum, 1.0, 1e-6);
      else
        EXPECT_LT(sum, 1.0);
    }
  }
}

// DeepSeek-V3's router by another path: groups ranked by the sum of their two best biased
// scores (stable sort), the experts of the best topk_group of them ranked by biased score
// (stable sort), weights from the unbiased sigmoid scores in double.
void brute_force_sigmoid_route(const MoeConfig& m, const std::vector<float>& logits,
                               const std::vector<float>& bias, std::vector<int32_t>* ids,
                               std::vector<double>* w) {
  const int32_t per = m.n_expert / m.n_group;
  std::vector<double> score(m.n_expert), choice(m.n_expert);
  for (int32_t e = 0; e < m.n_expert; ++e) {
    score[e] = 1.0 / (1.0 + std::exp(-static_cast<double>(logits[e])));
    choice[e] = static_cast<float>(static_cast<float>(score[e]) + bias[e]);
  }
  std::vector<double> group(m.n_group);
  for (int32_t g = 0; g < m.n_group; ++g) {
    std::vector<double> in(choice.begin() + g * per, choice.begin() + (g + 1) * per);
    std::sort(in.rbegin(), in.rend());
    group[g] = static_cast<float>(in[0] + in[1]);
  }
  std::vector<int32_t> groups(m.n_group);
  std::iota(groups.begin(), groups.end(), 0);
  std::stable_sort(groups.begin(), groups.end(),
                   [&](int32_t a, int32_t b) { return group[a] > group[b]; });
  // Experts outside the chosen groups compete with a score of 0 (transformers' masked_fill).
  std::vector<int32_t> all(m.n_expert);
  std::iota(all.begin(), all.end(), 0);
  for (int32_t e = 0; e < m.n_expert; ++e)
    if (std::find(groups.begin(), groups.begin() + m.topk_group, e / per) ==
        groups.begin() + m.topk_group)
      choice[e] = 0.0;
  std::stable_sort(all.begin(), all.end(),
                   [&](int32_t a, int32_t b) { return choice[a] > choice[b]; });
  ids->assign(all.begin(), all.begin() + m.n_expert_used);
  double sum = 0;
  for (int32_t e : *ids) sum += score[e];
  w->clear();
  for (int32_t e : *ids) w->push_back(score[e] / (m.norm_topk ? sum : 1.0) * m.weights_scale);
}

// Where the chosen groups have fewer than k experts scoring above 0 (biased), experts of the
// other groups, scored 0, come first: transformers' DeepseekV3 picks {2, 3} here.
TEST(MoeRouter, OtherGroupsCompeteAtZero) {
  MoeConfig m;
  m.n_expert = 4;
  m.n_expert_used = 2;
  m.sigmoid_scores = true;
  m.score_bias = true;
  m.n_group = 2;
  m.topk_group = 1;
  m.norm_topk = true;
  const std::vector<float> logits(4, 0.0f), bias(4, -0.6f);  // every biased score -0.1
  int32_t ids[2];
  float w[2];
  layers::route_token(m, logits.data(), ids, w, bias.data());
  EXPECT_EQ(ids[0], 2);
  EXPECT_EQ(ids[1], 3);
  EXPECT_FLOAT_EQ(w[0], 0.5f);  // sigmoid(0) / (0.5 + 0.5)
}

TEST(MoeRouter, SigmoidGroupLimitedTopKWithCorrectionBias) {
  MoeConfig m;
  m.n_expert = 16;
  m.n_expert_used = 4;
  m.sigmoid_scores = true;
  m.score_bias = true;
  m.n_group = 4;
  m.topk_group = 2;
  m.weights_scale = 2.5f;
  for (bool norm : {true, false}) {
    m.norm_topk = norm;
    for (uint32_t seed = 0; seed < 200; ++seed) {
      std::vector<float> logits = random_floats(16, seed, 2.0f);
      std::vector<float> bias = random_floats(16, seed + 1000, 0.3f);
      if (seed % 4 == 0)
        logits[1] = logits[9] = logits[14] = 1.5f, bias[1] = bias[9] = bias[14] = 0;
      std::vector<int32_t> want_ids;
      std::vector<double> want_w;
      brute_force_sigmoid_route(m, logits, bias, &want_ids, &want_w);
      int32_t ids[4];
      float w[4];
      layers::route_token(m, logits.data(), ids, w, bias.data());
      for (int s = 0; s < 4; ++s) {
        EXPECT_EQ(ids[s], want_ids[s]) << "seed " << seed << " slot " << s;
        EXPECT_NEAR(w[s], want_w[s], 1e-5) << "seed " << seed;
      }
    }
  }
  // The best single expert (0) is left out when its group's second best is poor; the bias
  // decides the choice but not the weights.
  m.norm_topk = true;
  std::vector<float> logits(16, -4.0f), bias(16, 0.0f);
  logits[0] = 6.0f;                             // group 0: one strong expert
  for (int e : {4, 5, 8, 9}) logits[e] = 2.0f;  // groups 1 and 2: two good ones each
  bias[13] = 1.0f;                              // group 3 lifted by its bias alone...
  bias[12] = 1.0f;                              // ...above groups 1 and 2
  int32_t ids[4];
  float w[4];
  layers::route_token(m, logits.data(), ids, w, bias.data());
  std::vector<int32_t> got(ids, ids + 4);
  std::sort(got.begin(), got.end());
  EXPECT_EQ(got, (std::vector<int32_t>{4, 5, 12, 13}));  // groups 3 and 1 (lower index of 1, 2)
  const double s4 = 1.0 / (1.0 + std::exp(-2.0)), s12 = 1.0 / (1.0 + std::exp(4.0));
  for (int s = 0; s < 4; ++s)
    EXPECT_NEAR(w[s], (ids[s] >= 12 ? s12 : s4) / (2 * s4 + 2 * s12) * 2.5, 1e-5);
}

// A layer of n_expert random F32 experts (and optionally a gated shared expert) whose router
// rows are set by `router`.
struct TestLayer {
  ModelConfig c;
  LayerWeights L;
  std::vector<float> router, shexp[3];
  std::vector<std::vector<float>> gate, up, down;

  static TensorView view(const std::vector<float>& v, int64_t cols, int64_t rows) {
    TensorView t;
    t.dtype = Dtype::kF32;
    t.n_dims = 2;
    t.ne = {cols, rows, 1, 1};
    t.data = v.data();
    t.nbytes = v.size() * sizeof(float);
    return t;
  }

  TestLayer(int32_t E, int32_t X, int32_t K, int32_t F, int32_t Fs, std::vector<float> router_w)
      : router(std::move(router_w)) {
    c.n_embd = E;
    c.moe = {X, K, F, Fs, Fs > 0, true};
    L.router = view(router, E, X);
    for (int32_t e = 0; e < X; ++e) {
      gate.push_back(random_floats(size_t(F) * E, 100 + e, 0.2f));
      up.push_back(random_floats(size_t(F) * E, 200 + e, 0.2f));
      down.push_back(random_floats(size_t(E) * F, 300 + e, 0.2f));
    }
    for (int32_t e = 0; e < X; ++e) {
      L.gate_exp.push_back(view(gate[e], E, F));
      L.up_exp.push_back(view(up[e], E, F));
      L.down_exp.push_back(view(down[e], F, E));
    }
    if (Fs > 0) {
      shexp[0] = random_floats(size_t(Fs) * E, 400, 0.2f);
      shexp[1] = random_floats(size_t(Fs) * E, 401, 0.2f);
      shexp[2] = random_floats(size_t(E) * Fs, 402, 0.2f);
      L.w_gate_shexp = view(shexp[0], E, Fs);
      L.w_up_shexp = view(shexp[1], E, Fs);
      L.w_down_shexp = view(shexp[2], Fs, E);
      L.shexp_gate = random_floats(E, 403, 0.3f);
    }
  }

  static double silu(double x) { return x / (1 + std::exp(-x)); }
  // One gated FFN (rows x cols weights, row-major) applied to x, in double.
  static std::vector<double> ffn(const float* g, const float* u, const float* d, int64_t E,
                                 int64_t F, const float* x) {
    std::vector<double> h(F), y(E, 0.0);
    for (int64_t r = 0; r < F; ++r) {
      double a = 0, b = 0;
      for (int64_t k = 0; k < E; ++k)
        a += double(g[r * E + k]) * x[k], b += double(u[r * E + k]) * x[k];
      h[r] = silu(a) * b;
    }
    for (int64_t r = 0; r < E; ++r)
      for (int64_t k = 0; k < F; ++k) y[r] += double(d[r * F + k]) * h[k];
    return y;
  }

  // The experts x is routed to and their weights, in double.
  void route(const float* x, std::vector<int32_t>* ids, std::vector<double>* w) const {
    const int64_t E = c.n_embd, X = c.moe.n_expert;
    std::vector<float> logits(X);
    for (int64_t e = 0; e < X; ++e) {
      double a = 0;
      for (int64_t k = 0; k < E; ++k) a += double(router[e * E + k]) * x[k];
      logits[e] = static_cast<float>(a);
    }
    brute_force_route(c.moe, logits, ids, w);
  }
  std::vector<int32_t> route(const float* x) const {
    std::vector<int32_t> ids;
    std::vector<double> w;
    route(x, &ids, &w);
    return ids;
  }

  std::vector<double> expected(const float* x) const {
    const int64_t E = c.n_embd, F = c.moe.n_ff_exp;
    std::vector<int32_t> ids;
    std::vector<double> w;
    route(x, &ids, &w);
    std::vector<double> out(E, 0.0);
    for (size_t s = 0; s < ids.size(); ++s) {
      auto y = ffn(gate[ids[s]].data(), up[ids[s]].data(), down[ids[s]].data(), E, F, x);
      for (int64_t j = 0; j < E; ++j) out[j] += w[s] * y[j];
    }
    if (c.moe.n_ff_shexp > 0) {
      auto y = ffn(shexp[0].data(), shexp[1].data(), shexp[2].data(), E, c.moe.n_ff_shexp, x);
      double dot = 0;
      for (int64_t k = 0; k < E; ++k) dot += double(L.shexp_gate[k]) * x[k];
      for (int64_t j = 0; j < E; ++j) out[j] += y[j] / (1 + std::exp(-dot));
    }
    return out;
  }
};

void expect_matches_direct(const TestLayer& t, const std::vector<float>& x, int64_t n,
                           ThreadPool& pool, const std::string& what) {
  const int64_t E = t.c.n_embd;
  CpuMoeFfn moe;
  std::vector<float> out(n * E);
  moe.run(t.c, t.L, x.data(), n, out.data(), pool);
  // The run read each expert some row is routed to once (the test's own routing).
  std::set<int32_t> routed;
  for (int64_t i = 0; i < n; ++i)
    for (int32_t e : t.route(&x[i * E])) routed.insert(e);
  uint64_t routed_bytes = 0;
  for (int32_t e : routed)
    routed_bytes += t.L.gate_exp[e].nbytes + t.L.up_exp[e].nbytes + t.L.down_exp[e].nbytes;
  EXPECT_EQ(moe.runs(), 1u) << what;
  EXPECT_EQ(moe.experts_read(), routed.size()) << what;
  EXPECT_EQ(moe.expert_bytes_read(), routed_bytes) << what;
  for (int64_t i = 0; i < n; ++i) {
    auto want = t.expected(&x[i * E]);
    double num = 0, den = 0;
    for (int64_t j = 0; j < E; ++j)
      num += (out[i * E + j] - want[j]) * (out[i * E + j] - want[j]), den += want[j] * want[j];
    ASSERT_LT(std::sqrt(num / den), 1e-5) << what << " row " << i;
  }
  // Each row alone gives the same bits as inside the batch.
  for (int64_t i = 0; i < n; i += 7) {
    std::vector<float> one(E);
    moe.run(t.c, t.L, &x[i * E], 1, one.data(), pool);
    for (int64_t j = 0; j < E; ++j)
      ASSERT_EQ(one[j], out[i * E + j]) << what << " row " << i << " alone";
  }
}

TEST(CpuMoeFfn, MatchesDirectComputationAndIsBatchInvariant) {
  const int32_t E = 64, X = 8, K = 2, F = 32;
  ThreadPool pool(2);
  const int64_t n = 70;  // more than kRowsPerTask for the busiest experts
  TestLayer t(E, X, K, F, 0, random_floats(size_t(X) * E, 7));
  expect_matches_direct(t, random_floats(n * E, 8), n, pool, "random routing");
  TestLayer shared(E, X, K, F, 48, random_floats(size_t(X) * E, 9));
  expect_matches_direct(shared, random_floats(n * E, 10), n, pool, "gated shared expert");
}

TEST(CpuMoeFfn, EveryTokenToOneExpertAndExpertsWithoutTokens) {
  const int32_t E = 32, X = 6, K = 2, F = 16;
  ThreadPool pool(2);
  // Positive inputs; expert 3's router row is large and positive, expert 1's next: every
  // token picks 3 then 1, and experts 0, 2, 4, 5 get nothing.
  std::vector<float> router(size_t(X) * E, 0.0f);
  for (int32_t k = 0; k < E; ++k) router[3 * E + k] = 2.0f, router[1 * E + k] = 1.0f;
  TestLayer t(E, X, K, F, 0, router);
  std::vector<float> x = random_floats(40 * E, 11);
  for (float& v : x) v = std::fabs(v) + 0.1f;
  expect_matches_direct(t, x, 40, pool, "all to one expert");
}

// Quantized experts: the fast path quantizes the activations on the fly (8-bit rows: Q8_0
// blocks of 32 for Q8_0 and MXFP4 weights, Q8_K blocks of 256 for Q4_K) and multiplies in
// integers; the reference (TestLayer::expected: kernels/ref's dequantization, double products)
// takes the dequantized weights and float activations, so the two differ by the activations'
// quantization alone. Rounding 8-bit blocks costs what quantizing the weights to Q8_0 costs:
// on this data (n_embd 256, experts of 256, 2 of 8 per token) Q8_0 weights move the output by
// 0.93% (relative RMS), and the fast path is off by 1.1% (Q8_0, MXFP4: activations rounded
// before gate/up and before down) and 1.8% (Q4_K: Q8_K's blocks of 256 have a coarser scale);
// worst rows 1.4-2.9% over seeds 22-26. Bounds: 3% (5% for Q4_K) over the batch, twice that
// for a row. Wrong experts are off by about 130%, and for the 4-bit types the weights before
// quantization (what a wrong scale or block layout reads instead) by 12% (Q4_K) and 21% (MXFP4),
// several times the fast path's error (checked); for Q8_0 that difference is below the
// activations' own, so only the wrong experts tell it apart.
TEST(CpuMoeFfn, QuantizedExpertsMatchTheirDequantizedWeights) {
  const int32_t E = 256, X = 8, K = 2, F = 256;  // rows of 256: every K-quant block fits
  const int64_t n = 48;
  ThreadPool pool(2);
  const std::vector<float> router = random_floats(size_t(X) * E, 21, 0.1f);
  const std::vector<float> x = random_floats(n * E, 22);
  for (Dtype type : {Dtype::kQ8_0, Dtype::kQ4_K, Dtype::kMXFP4}) {
    SCOPED_TRACE(std::string(dtype_name(type)));
    const TestLayer original(E, X, K, F, 0, router);
    TestLayer q(E, X, K, F, 0, router);  // the same floats, then quantized
    std::vector<std::vector<uint8_t>> bytes;
    auto quantize = [&](std::vector<float>& w, int64_t cols, TensorView& view) {
      const int64_t rows = static_cast<int64_t>(w.size()) / cols;
      const uint64_t rb = *row_bytes(type, cols);
      std::vector<uint8_t>& b = bytes.emplace_back(rows * rb);
      for (int64_t r = 0; r < rows; ++r) {
        kernels::ref::quantize_row(type, &w[r * cols], &b[r * rb], cols);
        kernels::ref::dequantize_row(type, &b[r * rb], &w[r * cols], cols);
      }
      view.dtype = type;
      view.data = b.data();
      view.nbytes = b.size();
    };
    bytes.reserve(3 * X);
    for (int32_t e = 0; e < X; ++e) {
      quantize(q.gate[e], E, q.L.gate_exp[e]);
      quantize(q.up[e], E, q.L.up_exp[e]);
      quantize(q.down[e], F, q.L.down_exp[e]);
    }
    // The reference with every token's experts wrong: expert e's weights those of e + 1.
    TestLayer wrong(E, X, K, F, 0, router);
    for (int32_t e = 0; e < X; ++e) {
      wrong.gate[e] = q.gate[(e + 1) % X];
      wrong.up[e] = q.up[(e + 1) % X];
      wrong.down[e] = q.down[(e + 1) % X];
    }
    CpuMoeFfn moe;
    std::vector<float> out(n * E);
    moe.run(q.c, q.L, x.data(), n, out.data(), pool);
    // The whole batch's relative RMS error, and its worst row; the same for the wrong answers.
    double num = 0, den = 0, worst = 0, num_unq = 0, num_mis = 0;
    for (int64_t i = 0; i < n; ++i) {
      const std::vector<double> want = q.expected(&x[i * E]);
      const std::vector<double> unq = original.expected(&x[i * E]);
      const std::vector<double> mis = wrong.expected(&x[i * E]);
      double row_num = 0, row_den = 0;
      for (int64_t j = 0; j < E; ++j) {
        row_num += (out[i * E + j] - want[j]) * (out[i * E + j] - want[j]);
        row_den += want[j] * want[j];
        num_unq += (unq[j] - want[j]) * (unq[j] - want[j]);
        num_mis += (mis[j] - want[j]) * (mis[j] - want[j]);
      }
      num += row_num, den += row_den;
      worst = std::max(worst, std::sqrt(row_num / row_den));
    }
    const double err = std::sqrt(num / den), unquantized = std::sqrt(num_unq / den),
                 misrouted = std::sqrt(num_mis / den);
    std::printf(
        "  %s experts: rel RMS error %.3g (worst row %.3g); the weights before "
        "quantization %.3g, wrong experts %.3g\n",
        std::string(dtype_name(type)).c_str(), err, worst, unquantized, misrouted);
    const double bound = type == Dtype::kQ4_K ? 0.05 : 0.03;
    EXPECT_LT(err, bound);
    EXPECT_LT(worst, 2 * bound);
    EXPECT_GT(misrouted, 10 * bound);
    if (type != Dtype::kQ8_0) {
      EXPECT_GT(unquantized, 4 * err);
    }
  }
}

}  // namespace
}  // namespace loom
