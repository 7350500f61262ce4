// The CPU Gated DeltaNet step (backend/cpu/gated_deltanet.h): convolution, gates, the chunked
// recurrence per (sequence, value head), the gated RMSNorm, the state slots and snapshots.
#include "backend/cpu/gated_deltanet.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "backend/cpu/gated_delta_kernels.h"
#include "base/resize_exact.h"
#include "base/status.h"
#include "kernels/ops.h"

namespace loom {
namespace {

constexpr int64_t kChunk = kRecurrentChunk;
constexpr int64_t kMaxTaps = 16;  // convolution taps the step supports

// Runs fn(task, thread) for n tasks of about `work` multiply-adds in all: on the pool when
// that pays for the hand-off, else on the calling thread (a small model's decode step).
template <class F>
void run_tasks(ThreadPool& pool, int64_t n, int64_t work, F&& fn) {
  if (n > 1 && work >= (int64_t{1} << 15))
    pool.parallel_for(n, fn);
  else
    for (int64_t t = 0; t < n; ++t) fn(t, 0);
}

float silu(float x) {
  return x / (1.0f + std::exp(-x));
}
float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// x *= scale / sqrt(sum x² + 1e-6): HF's l2norm (then q's 1/sqrt(d_k)).
void l2_normalise(float* x, int64_t n, float scale) {
  float ss = 0.0f;
  for (int64_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const float f = scale / std::sqrt(ss + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

// The convolution input at absolute position `pos` of a sequence: its old conv state (the
// K - 1 inputs before n_past, from the slot), a row of this step, or nullptr before position 0.
const float* conv_input(const BatchSequence& s, int64_t pos, const float* conv_state,
                        const float* qkv, int64_t K, int64_t C) {
  if (pos < 0) return nullptr;
  if (pos < s.n_past) return conv_state + (pos - s.n_past + K - 1) * C;
  return qkv + (s.row_begin + pos - s.n_past) * C;
}

// Writes the K - 1 convolution inputs before position `end` (zeros before position 0) to dst.
// Rows read from the sequence's own conv state must sit at or after the row they land in
// (true for end >= n_past), so dst may be that state.
void write_conv_state(const BatchSequence& s, int64_t end, const float* conv_state,
                      const float* qkv, int64_t K, int64_t C, float* dst) {
  for (int64_t r = 0; r < K - 1; ++r) {
    const float* src = conv_input(s, end - (K - 1) + r, conv_state, qkv, K, C);
    if (!src)
      std::fill(dst + r * C, dst + (r + 1) * C, 0.0f);
    else if (src != dst + r * C)
      std::memmove(dst + r * C, src, C * sizeof(float));
  }
}

}  // namespace

DeltaNetStateLayout::DeltaNetStateLayout(const DeltaNetConfig& d) {
  const int64_t C = d.conv_dim();
  conv = 0;
  s0 = (d.conv_kernel - 1) * C;
  tail = s0 + static_cast<int64_t>(d.n_v_heads) * d.d_k * d.d_v;
  tail_per_head = kChunk * (d.d_k + d.d_v + 1);
  total = tail + d.n_v_heads * tail_per_head;
}

void CpuGatedDeltaNet::run(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                           CpuKvCache& kv, const float* qkv, const float* z, const float* beta_in,
                           const float* alpha_in, float* out, ThreadPool& pool) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t n = b.n_rows(), Hv = d.n_v_heads, C = d.conv_dim();
  LOOM_CHECK(d.n_k_heads > 0 && Hv % d.n_k_heads == 0 && d.conv_kernel >= 1 &&
             d.conv_kernel <= kMaxTaps);
  resize_exact(x_, n * C);
  resize_exact(gate_, n * Hv * 2);
  if (scratch_.size() < static_cast<size_t>(pool.size())) scratch_.resize(pool.size());
  for (Scratch& s : scratch_) {
    resize_exact(s.a, kChunk * d.d_v);
    resize_exact(s.bq, kChunk * d.d_v);
    resize_exact(s.u, d.d_v);
    resize_exact(s.coef, kChunk);
    resize_exact(s.e, kChunk);
  }

  convolve(c, L, layer, b, kv, qkv, pool);
  // "gdn_gates": per row and value head, the decay g and beta.
  for (int64_t i = 0; i < n; ++i)
    for (int64_t h = 0; h < Hv; ++h) {
      gate_[(i * Hv + h) * 2] = L.ssm_a[h] * softplus(alpha_in[i * Hv + h] + L.ssm_dt[h]);
      gate_[(i * Hv + h) * 2 + 1] = sigmoid(beta_in[i * Hv + h]);
    }
  update_conv_states(c, layer, b, kv, qkv);

  // "gdn_recurrence": one task per (sequence, value head), each over the sequence's rows.
  const int64_t n_seq = static_cast<int64_t>(b.sequences.size());
  const int64_t work = n * Hv * 3 * d.d_k * d.d_v;
  run_tasks(pool, n_seq * Hv, work, [&](int64_t task, int thread) {
    run_head(c, L, layer, b, kv, static_cast<int32_t>(task / Hv), static_cast<int32_t>(task % Hv),
             z, out, scratch_[thread]);
  });
}

void CpuGatedDeltaNet::convolve(const ModelConfig& c, const LayerWeights& L, int layer,
                                const Batch& b, CpuKvCache& kv, const float* qkv,
                                ThreadPool& pool) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t n = b.n_rows(), C = d.conv_dim(), K = d.conv_kernel;
  const int64_t Hk = d.n_k_heads, dk = d.d_k;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  // "gdn_conv": each row's causal depthwise convolution (taps oldest first), SiLU, then the
  // q and k heads L2-normalised. A row's inputs come from its slot's conv state or this step's
  // rows; either way the same values in the same order.
  run_tasks(pool, n, n * C * K, [&](int64_t i, int) {
    const BatchSequence& s = b.sequences[b.seq[i]];
    const int64_t pos = s.n_past + (i - s.row_begin);
    const float* state = s.n_past > 0 ? kv.state(layer, s.state_slot) : nullptr;
    const float* in[kMaxTaps];
    for (int64_t j = 0; j < K; ++j) in[j] = conv_input(s, pos - K + 1 + j, state, qkv, K, C);
    float* x = &x_[i * C];
    std::fill(x, x + C, 0.0f);
    for (int64_t j = 0; j < K; ++j)  // taps in order, skipping positions before the sequence
      if (in[j])
        for (int64_t ch = 0; ch < C; ++ch) x[ch] += L.ssm_conv[ch * K + j] * in[j][ch];
    for (int64_t ch = 0; ch < C; ++ch) x[ch] = silu(x[ch]);
    for (int64_t h = 0; h < Hk; ++h) {
      l2_normalise(x + h * dk, dk, q_scale);
      l2_normalise(x + (Hk + h) * dk, dk, 1.0f);
    }
  });
}

void CpuGatedDeltaNet::update_conv_states(const ModelConfig& c, int layer, const Batch& b,
                                          CpuKvCache& kv, const float* qkv) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t C = d.conv_dim(), K = d.conv_kernel;
  if (K <= 1) return;
  // Snapshots first: they may read the conv state the sequence's own update overwrites.
  for (const Batch::StateSnapshot& snap : b.state_snapshots) {
    const BatchSequence& s = b.sequences[snap.seq];
    const float* state = s.n_past > 0 ? kv.state(layer, s.state_slot) : nullptr;
    write_conv_state(s, snap.n_tokens, state, qkv, K, C, kv.state(layer, snap.slot));
  }
  for (const BatchSequence& s : b.sequences) {
    if (s.n_new == 0) continue;
    float* state = kv.state(layer, s.state_slot);
    write_conv_state(s, s.n_past + s.n_new, s.n_past > 0 ? state : nullptr, qkv, K, C, state);
  }
}

void CpuGatedDeltaNet::run_head(const ModelConfig& c, const LayerWeights& L, int layer,
                                const Batch& b, CpuKvCache& kv, int32_t seq, int32_t h,
                                const float* z, float* out, Scratch& s) {
  const DeltaNetConfig& d = c.deltanet;
  const BatchSequence& sq = b.sequences[seq];
  if (sq.n_new == 0) return;
  const int64_t Hk = d.n_k_heads, Hv = d.n_v_heads, dk = d.d_k, dv = d.d_v;
  const int64_t C = d.conv_dim(), kh = h / (Hv / Hk);
  const DeltaNetStateLayout lay(d);
  const gdn::Kernels& K = gdn::kernels_for(dk, dv);
  float* st = kv.state(layer, sq.state_slot);
  float* S0 = st + lay.s0 + h * dk * dv;
  float* Kt = st + lay.tail + h * lay.tail_per_head;  // (16, dk) the chunk's keys
  float* Dt = Kt + kChunk * dk;                       // (16, dv) their δ
  float* Gt = Dt + kChunk * dv;                       // (16) their cumulative decays
  if (sq.n_past == 0) std::fill(S0, S0 + dk * dv, 0.0f);

  const int64_t end = static_cast<int64_t>(sq.n_past) + sq.n_new;
  for (int64_t p = sq.n_past; p < end;) {
    // One segment: the step's rows inside the absolute chunk [p / 16 · 16, + 16).
    const int64_t m0 = p % kChunk, seg_end = std::min(end, (p / kChunk + 1) * kChunk);
    const int64_t r0 = sq.row_begin + (p - sq.n_past);
    const float* q_rows = &x_[r0 * C + kh * dk];
    const float* k_rows = &x_[r0 * C + (Hk + kh) * dk];
    K.state_products(k_rows, q_rows, C, static_cast<int>(seg_end - p), S0, dk, dv, s.a.data(),
                     s.bq.data());
    for (int64_t t = 0; t < seg_end - p; ++t) {
      const int64_t row = r0 + t, ti = m0 + t;
      const float* kt = k_rows + t * C;
      const float* qt = q_rows + t * C;
      const float* vt = &x_[row * C + 2 * Hk * dk + h * dv];
      const float g = gate_[(row * Hv + h) * 2], beta = gate_[(row * Hv + h) * 2 + 1];
      const float G = (ti == 0 ? 0.0f : Gt[ti - 1]) + g;
      const float gamma = std::exp(G);
      // δ_t = β·(v − γ·S0ᵀk − Σ_{j<t} e^{G_t−G_j}(k_t·k_j)·δ_j)
      for (int64_t j = 0; j < ti; ++j)
        s.coef[j] = std::exp(G - Gt[j]) * kernels::vec_dot(kt, Kt + j * dk, dk);
      K.scaled_sum(gamma, &s.a[t * dv], s.coef.data(), Dt, static_cast<int>(ti), dv, s.u.data());
      float* delta = Dt + ti * dv;
      for (int64_t e = 0; e < dv; ++e) delta[e] = beta * (vt[e] - s.u[e]);
      std::memcpy(Kt + ti * dk, kt, dk * sizeof(float));
      Gt[ti] = G;
      // o_t = γ·S0ᵀq + Σ_{j≤t} e^{G_t−G_j}(q_t·k_j)·δ_j, then the gated RMSNorm.
      for (int64_t j = 0; j <= ti; ++j)
        s.coef[j] = std::exp(G - Gt[j]) * kernels::vec_dot(qt, Kt + j * dk, dk);
      float* o = out + (row * Hv + h) * dv;
      K.scaled_sum(gamma, &s.bq[t * dv], s.coef.data(), Dt, static_cast<int>(ti + 1), dv, o);
      kernels::rms_norm(o, L.ssm_norm.data(), o, dv, c.rms_eps);
      const float* zt = z + (row * Hv + h) * dv;
      for (int64_t e = 0; e < dv; ++e) o[e] *= silu(zt[e]);
    }
    if (seg_end % kChunk == 0) {
      // The chunk is complete: fold its tail into S0 (the tail is then empty).
      const float G_last = Gt[kChunk - 1];
      for (int64_t j = 0; j < kChunk; ++j) s.e[j] = std::exp(G_last - Gt[j]);
      K.fold(std::exp(G_last), s.e.data(), Kt, Dt, kChunk, dk, dv, S0);
      for (const Batch::StateSnapshot& snap : b.state_snapshots)
        if (snap.seq == seq && snap.n_tokens == seg_end)
          std::memcpy(kv.state(layer, snap.slot) + lay.s0 + h * dk * dv, S0,
                      dk * dv * sizeof(float));
    }
    p = seg_end;
  }
}

uint64_t CpuGatedDeltaNet::scratch_bytes() const {
  uint64_t floats = x_.capacity() + gate_.capacity();
  for (const Scratch& s : scratch_)
    floats +=
        s.a.capacity() + s.bq.capacity() + s.u.capacity() + s.coef.capacity() + s.e.capacity();
  return floats * sizeof(float);
}

uint64_t CpuGatedDeltaNet::scratch_bytes_for(const ModelConfig& c, int64_t rows, int n_threads) {
  const DeltaNetConfig& d = c.deltanet;
  if (d.n_v_heads == 0) return 0;
  const uint64_t floats = rows * (d.conv_dim() + 2 * d.n_v_heads);
  const uint64_t per_thread = 2 * kChunk * d.d_v + d.d_v + 2 * kChunk;
  return (floats + static_cast<uint64_t>(n_threads) * per_thread) * sizeof(float);
}

}  // namespace loom
