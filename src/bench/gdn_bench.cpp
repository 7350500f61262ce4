// `loom bench gdn`: the Gated DeltaNet step (backend/cpu/gated_deltanet.h) on random weights at
// real shapes. Prefill: N tokens of one sequence in one run() call (the chunked form: the
// state meets 16 rows at a time) against N calls of one token each (the token-by-token
// recurrence a decode step runs), median of R repetitions each, and their ratio; the two must
// give the same bits (checked). Decode: the state bytes one token reads and the GB/s that
// implies at the one-token speed. Also the plain token-by-token recurrence of the state alone,
// for scale.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <memory>
#include <random>
#include <vector>

#include "backend/cpu/gated_delta_kernels.h"
#include "backend/cpu/gated_deltanet.h"

namespace loom::bench {
namespace {

using Clock = std::chrono::steady_clock;

struct GdnShape {
  const char* name;
  int32_t n_k_heads, n_v_heads, d_k, d_v, conv_kernel;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

int bench_shape(const GdnShape& s, int32_t n_tokens, int n_threads, int reps) {
  ModelConfig c;
  DeltaNetConfig& d = c.deltanet;
  d = {s.n_k_heads, s.n_v_heads, s.d_k, s.d_v, s.conv_kernel};
  c.n_layer = 1;
  c.n_head_kv = 1;
  c.head_dim = 1;
  c.rms_eps = 1e-6f;
  c.layers.resize(1);
  c.layers[0].deltanet = true;
  const int64_t C = d.conv_dim(), Hv = d.n_v_heads, O = Hv * d.d_v, n = n_tokens;
  std::mt19937 rng(1);
  std::normal_distribution<float> nd(0.0f, 1.0f);
  auto fill = [&](std::vector<float>& v, size_t size, float scale) {
    v.resize(size);
    for (float& x : v) x = scale * nd(rng);
  };
  LayerWeights L;
  fill(L.ssm_conv, C * d.conv_kernel, 0.5f);
  fill(L.ssm_dt, Hv, 0.5f);
  fill(L.ssm_norm, d.d_v, 0.1f);
  for (float& w : L.ssm_norm) w += 1.0f;
  for (int64_t h = 0; h < Hv; ++h) L.ssm_a.push_back(-std::exp(0.5f * nd(rng)));
  std::vector<float> qkv, z, beta, alpha;
  fill(qkv, n * C, 1.0f);
  fill(z, n * O, 1.0f);
  fill(beta, n * Hv, 1.0f);
  fill(alpha, n * Hv, 1.0f);
  KvLayout layout = KvLayout::single(1, 1);
  layout.num_state_slots = 1;
  CpuKvCache kv(c, layout, 16, Dtype::kF32);
  ThreadPool pool(n_threads);
  CpuGatedDeltaNet gdn;
  std::vector<float> out_chunked(n * O), out_tokens(n * O);

  Batch b;
  b.sequences.resize(1);
  BatchSequence& sq = b.sequences[0];
  sq.state_slot = 0;
  auto chunked = [&] {
    b.tokens.assign(n, 0);
    b.seq.assign(n, 0);
    sq.n_past = 0;
    sq.n_new = n_tokens;
    gdn.run(c, L, 0, b, kv, qkv.data(), z.data(), beta.data(), alpha.data(), out_chunked.data(),
            pool);
  };
  auto one_by_one = [&] {
    b.tokens.assign(1, 0);
    b.seq.assign(1, 0);
    for (int32_t t = 0; t < n_tokens; ++t) {
      sq.n_past = t;
      sq.n_new = 1;
      gdn.run(c, L, 0, b, kv, &qkv[t * C], &z[t * O], &beta[t * Hv], &alpha[t * Hv],
              &out_tokens[t * O], pool);
    }
  };
  // The plain recurrence over the state alone (no convolution, gates or norm), one task per
  // value head over all the tokens, on the step's own kernels: per token
  // S = e^g·S + k ⊗ δ with δ = β·(v − e^g·Sᵀk), o = e^g·Sᵀq + (k·q)·δ: one read of S for Sᵀk
  // and Sᵀq and one read-write for the update, the fewest a token-by-token form can do.
  const int64_t dk = d.d_k, dv = d.d_v, Hk = d.n_k_heads;
  std::vector<float> kn, qn, vr, gr, br, S(Hv * dk * dv), out_rec(n * O);
  fill(kn, n * Hk * dk, 1.0f / std::sqrt(static_cast<float>(dk)));
  fill(qn, n * Hk * dk, 1.0f / static_cast<float>(dk));
  fill(vr, n * O, 1.0f);
  fill(gr, n * Hv, 0.1f);
  fill(br, n * Hv, 1.0f);
  for (float& g : gr) g = -std::abs(g);
  for (float& x : br) x = 1.0f / (1.0f + std::exp(-x));
  struct RecScratch {
    std::vector<float> a, b, delta;
  };
  std::vector<RecScratch> rs(pool.size());
  for (RecScratch& r : rs) r.a.resize(dv), r.b.resize(dv), r.delta.resize(dv);
  const gdn::Kernels& K = gdn::kernels_for(dk, dv);
  auto recurrent = [&] {
    std::fill(S.begin(), S.end(), 0.0f);
    pool.parallel_for(Hv, [&](int64_t h, int thread) {
      RecScratch& w = rs[thread];
      float* Sh = &S[h * dk * dv];
      const int64_t kh = h / (Hv / Hk);
      const float one = 1.0f;
      for (int64_t t = 0; t < n; ++t) {
        const float* k = &kn[(t * Hk + kh) * dk];
        const float* q = &qn[(t * Hk + kh) * dk];
        const float* v = &vr[t * O + h * dv];
        const float gamma = std::exp(gr[t * Hv + h]), beta = br[t * Hv + h];
        K.state_products(k, q, 0, 1, Sh, dk, dv, w.a.data(), w.b.data());
        for (int64_t e = 0; e < dv; ++e) w.delta[e] = beta * (v[e] - gamma * w.a[e]);
        K.fold(gamma, &one, k, w.delta.data(), 1, dk, dv, Sh);
        float kq = 0.0f;
        for (int64_t i = 0; i < dk; ++i) kq += k[i] * q[i];
        float* o = &out_rec[t * O + h * dv];
        for (int64_t e = 0; e < dv; ++e) o[e] = gamma * w.b[e] + kq * w.delta[e];
      }
    });
  };
  // Wall and process CPU seconds of fn (CPU time is steadier on a shared machine).
  std::vector<double> cpu;
  auto seconds = [&cpu](auto&& fn) {
    const auto t0 = Clock::now();
    const std::clock_t c0 = std::clock();
    fn();
    cpu.push_back(static_cast<double>(std::clock() - c0) / CLOCKS_PER_SEC);
    return std::chrono::duration<double>(Clock::now() - t0).count();
  };
  seconds(chunked);  // warm-up: scratch, pages
  seconds(one_by_one);
  seconds(recurrent);
  cpu.clear();
  std::vector<double> tc, tt, tr, cc, ct, cr;
  for (int r = 0; r < reps; ++r) {  // interleaved, so all see the same machine load
    tc.push_back(seconds(chunked));
    cc.push_back(cpu.back());
    tt.push_back(seconds(one_by_one));
    ct.push_back(cpu.back());
    tr.push_back(seconds(recurrent));
    cr.push_back(cpu.back());
  }
  const bool same = std::memcmp(out_chunked.data(), out_tokens.data(), n * O * 4) == 0;
  const double c_s = median(tc), t_s = median(tt), r_s = median(tr);
  // Multiply-adds per token: S0ᵀk and S0ᵀq (2·dk·dv per head), the fold (dk·dv per head per
  // token, amortised), the tail's dot products and sums (about 16·(dk + dv) on average).
  const double fma_per_token = Hv * (3.0 * d.d_k * d.d_v + 16.0 * (d.d_k + d.d_v));
  // A decode token reads every head's S0, on average half a tail, and the conv state; every
  // 16th token also rewrites S0 (the fold).
  const double state_read =
      4.0 * (Hv * (d.d_k * d.d_v * (1.0 + 1.0 / 16) + 8.0 * (d.d_k + d.d_v + 1)) +
             (d.conv_kernel - 1.0) * C);
  std::printf(
      "%s (Hk=%d Hv=%d dk=%d dv=%d K=%d), %d tokens, %d threads, median of %d:\n"
      "  chunked (1 call):              %8.1f ms wall %8.1f ms CPU  %8.1f tok/s  %6.1f GFLOP/s\n"
      "  token by token (1 call/token): %8.1f ms wall %8.1f ms CPU  %8.1f tok/s  %6.1f GFLOP/s\n"
      "  plain recurrence, state only:  %8.1f ms wall %8.1f ms CPU  %8.1f tok/s\n"
      "  ratio chunked vs token by token: %.2fx wall, %.2fx CPU; vs plain recurrence: %.2fx wall\n"
      "  outputs bit-identical chunked vs token by token: %s\n"
      "  decode: %.2f MiB of state read per token per layer, %.1f us/token -> %.1f GB/s\n",
      s.name, d.n_k_heads, d.n_v_heads, d.d_k, d.d_v, d.conv_kernel, n_tokens, n_threads, reps,
      c_s * 1e3, median(cc) * 1e3, n / c_s, 2 * fma_per_token * n / c_s * 1e-9, t_s * 1e3,
      median(ct) * 1e3, n / t_s, 2 * fma_per_token * n / t_s * 1e-9, r_s * 1e3, median(cr) * 1e3,
      n / r_s, t_s / c_s, median(ct) / median(cc), r_s / c_s, same ? "yes" : "NO",
      state_read / (1 << 20), t_s / n * 1e6, state_read * n / t_s * 1e-9);
  return same ? 0 : 1;
}

}  // namespace

int gdn_bench_main(int argc, char** argv) {
  CLI::App app{
      "Gated DeltaNet step: chunked prefill of one sequence in one call vs one token per call, "
      "and decode's state bytes per token.",
      "loom bench gdn"};
  int32_t n_tokens = 4096;
  int n_threads = 2, reps = 5;
  app.add_option("-n,--tokens", n_tokens, "tokens of the sequence")->check(CLI::Range(1, 1 << 20));
  app.add_option("-t,--threads", n_threads, "CPU threads (0 = physical cores)");
  app.add_option("-r,--repetitions", reps, "timed repetitions (after one warm-up)")
      ->check(CLI::Range(1, 1000));
  CLI11_PARSE(app, argc, argv);
  // Qwen3-Next-80B-A3B's linear attention, and a 16-value-head variant.
  const GdnShape shapes[] = {{"qwen3-next-80b", 16, 32, 128, 128, 4},
                             {"hv16", 16, 16, 128, 128, 4}};
  int rc = 0;
  for (const GdnShape& s : shapes) rc |= bench_shape(s, n_tokens, n_threads, reps);
  return rc;
}

}  // namespace loom::bench
