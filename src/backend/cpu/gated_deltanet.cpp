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
// Rows convolved and then run through the recurrence at a time: 64 rows of Qwen3-Next's
// 8,192 channels are 2 MiB.
constexpr int64_t kRowBlock = 64;

// Runs fn(task, thread) for n tasks of about `work` multiply-adds in all: on the pool when
// that pays for the hand-off, else on the calling thread (a small model's decode step).
template <class F>
void run_tasks(ThreadPool& pool, int64_t n, int64_t work, F&& fn) {
  if (n > 1 && work >= (int64_t{1} << 15))
    pool.parallel_for(n, fn);
  else
    for (int64_t t = 0; t < n; ++t) fn(t, 0);
}

float sigmoid(float x) {
  return 1.0f / (1.0f + std::exp(-x));
}
float softplus(float x) {
  return x > 20.0f ? x : std::log1p(std::exp(x));
}

// x *= scale / sqrt(sum x² + 1e-6): HF's l2norm (then q's 1/sqrt(d_k)).
void l2_normalise(float* x, int64_t n, float scale) {
  const float f = scale / std::sqrt(kernels::vec_dot(x, x, n) + 1e-6f);
  for (int64_t i = 0; i < n; ++i) x[i] *= f;
}

// A slot's convolution inputs: rows at positions [end - n, end), oldest first.
struct ConvHistory {
  const float* rows = nullptr;
  int64_t end = 0, n = 0;
};

// The history in a sequence's slot (none before its first token).
ConvHistory history_of(const BatchSequence& s, const float* state, const DeltaNetStateLayout& lay) {
  if (s.n_past == 0 || lay.history == 0) return {};
  int32_t end;
  std::memcpy(&end, state + lay.conv_end, sizeof end);
  LOOM_CHECK(end >= s.n_past && end - s.n_past <= lay.rollback);  // a rollback it can take back
  return {state + lay.conv, end, lay.history};
}

// The convolution input at absolute position `pos` of a sequence: from its slot's history
// (positions before n_past), a row of this step, or nullptr before position 0 or where the
// history does not reach (rows a later rollback can never need).
const float* conv_input(const BatchSequence& s, int64_t pos, const ConvHistory& h, const float* qkv,
                        int64_t C) {
  if (pos < 0) return nullptr;
  if (pos < s.n_past)
    return pos >= h.end - h.n && pos < h.end ? h.rows + (pos - h.end + h.n) * C : nullptr;
  return qkv + (s.row_begin + pos - s.n_past) * C;
}

// Writes the lay.history convolution inputs before position `end` (zeros where there is none)
// and `end` itself into the slot state `dst`. dst may be the sequence's own slot, which `h`
// reads: a row then moves by end - h.end rows, so rows go newest first when the history moves
// up (end >= h.end) and oldest first when a rollback moves it down.
void write_conv_state(const BatchSequence& s, int64_t end, const ConvHistory& h, const float* qkv,
                      int64_t C, const DeltaNetStateLayout& lay, float* dst) {
  const int64_t n = lay.history;
  float* rows = dst + lay.conv;
  auto write = [&](int64_t r) {
    const float* src = conv_input(s, end - n + r, h, qkv, C);
    if (!src)
      std::fill(rows + r * C, rows + (r + 1) * C, 0.0f);
    else if (src != rows + r * C)
      std::memmove(rows + r * C, src, C * sizeof(float));
  };
  if (end >= h.end)
    for (int64_t r = 0; r < n; ++r) write(r);
  else
    for (int64_t r = n - 1; r >= 0; --r) write(r);
  const int32_t e = static_cast<int32_t>(end);
  std::memcpy(dst + lay.conv_end, &e, sizeof e);
}

}  // namespace

DeltaNetStateLayout::DeltaNetStateLayout(const DeltaNetConfig& d, int32_t rollback) {
  LOOM_CHECK(rollback >= 0 && rollback < kChunk);
  const int64_t C = d.conv_dim();
  this->rollback = rollback;
  history = d.conv_kernel > 1 ? d.conv_kernel - 1 + rollback : 0;
  buffers = rollback > 0 ? 2 : 1;
  conv = 0;
  conv_end = history * C;
  s0 = conv_end + 16;  // 64 bytes: S0 stays as aligned as the slot
  s0_size = static_cast<int64_t>(d.n_v_heads) * d.d_k * d.d_v;
  tail = s0 + buffers * s0_size;
  tail_per_head = kChunk * (d.d_k + d.d_v + 1);
  tail_size = d.n_v_heads * tail_per_head;
  total = tail + buffers * tail_size;
}

void CpuGatedDeltaNet::run(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                           CpuKvCache& kv, const float* qkv, const float* z, const float* beta_in,
                           const float* alpha_in, float* out, ThreadPool& pool) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t n = b.n_rows(), Hv = d.n_v_heads, C = d.conv_dim(), K = d.conv_kernel;
  LOOM_CHECK(d.n_k_heads > 0 && Hv % d.n_k_heads == 0 && K >= 1 && K <= kMaxTaps);
  const int64_t block = std::min(n, kRowBlock);
  resize_exact(x_, block * C);
  resize_exact(gate_, block * Hv * 2);
  resize_exact(block_seqs_, b.sequences.size());
  if (scratch_.size() < static_cast<size_t>(pool.size())) scratch_.resize(pool.size());
  for (Scratch& s : scratch_) {
    resize_exact(s.a, kChunk * d.d_v);
    resize_exact(s.bq, kChunk * d.d_v);
    resize_exact(s.u, d.d_v);
    resize_exact(s.coef, kChunk);
    resize_exact(s.e, kChunk);
  }
  // The layer's taps tap-major, so that a row's convolution runs along its channels: made
  // once per layer (a decode step would otherwise pay as much for it as for its convolution).
  if (taps_.size() <= static_cast<size_t>(layer)) taps_.resize(layer + 1);
  LayerTaps& taps = taps_[layer];
  if (taps.source != L.ssm_conv.data()) {
    taps.source = L.ssm_conv.data();
    resize_exact(taps.taps, K * C);
    for (int64_t ch = 0; ch < C; ++ch)
      for (int64_t j = 0; j < K; ++j) taps.taps[j * C + ch] = L.ssm_conv[ch * K + j];
  }
  if (static_cast<int64_t>(ones_.size()) != C) ones_.assign(C, 1.0f);

  // Blocks of rows, so that the convolved rows stay in cache for the recurrence. A sequence
  // cut by a block boundary goes on from its slot as if the step had been split there: the
  // same bits.
  for (int64_t r0 = 0; r0 < n; r0 += block) {
    const int64_t r1 = std::min(n, r0 + block);
    convolve(c, L, layer, b, kv, qkv, beta_in, alpha_in, taps.taps.data(), r0, r1, pool);
    // "gdn_recurrence": one task per (sequence in the block, value head).
    int64_t n_seq = 0;
    for (size_t i = 0; i < b.sequences.size(); ++i) {
      const BatchSequence& s = b.sequences[i];
      if (s.row_begin < r1 && s.row_begin + s.n_new > r0)
        block_seqs_[n_seq++] = static_cast<int32_t>(i);
    }
    const int64_t work = (r1 - r0) * Hv * 3 * d.d_k * d.d_v;
    run_tasks(pool, n_seq * Hv, work, [&](int64_t task, int thread) {
      run_head(c, L, layer, b, kv, block_seqs_[task / Hv], static_cast<int32_t>(task % Hv), r0, r1,
               z, out, scratch_[thread]);
    });
  }
  update_conv_states(c, layer, b, kv, qkv);
}

void CpuGatedDeltaNet::convolve(const ModelConfig& c, const LayerWeights& L, int layer,
                                const Batch& b, CpuKvCache& kv, const float* qkv,
                                const float* beta_in, const float* alpha_in, const float* taps,
                                int64_t r0, int64_t r1, ThreadPool& pool) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t C = d.conv_dim(), K = d.conv_kernel, Hv = d.n_v_heads;
  const int64_t Hk = d.n_k_heads, dk = d.d_k;
  const float q_scale = 1.0f / std::sqrt(static_cast<float>(dk));
  const DeltaNetStateLayout lay(d, kv.state_rollback_tokens());
  // "gdn_conv": each row's causal depthwise convolution (taps oldest first), SiLU, then the
  // q and k heads L2-normalised. A row's inputs come from its slot's conv state or this step's
  // rows; either way the same values in the same order. Then "gdn_gates": per value head, the
  // decay g and beta.
  run_tasks(pool, r1 - r0, (r1 - r0) * C * K, [&](int64_t task, int) {
    const int64_t i = r0 + task;
    const BatchSequence& s = b.sequences[b.seq[i]];
    const int64_t pos = s.n_past + (i - s.row_begin);
    const ConvHistory hist = history_of(s, kv.state(layer, s.state_slot), lay);
    const float* in[kMaxTaps];
    for (int64_t j = 0; j < K; ++j) in[j] = conv_input(s, pos - K + 1 + j, hist, qkv, C);
    float* x = &x_[task * C];
    std::fill(x, x + C, 0.0f);
    for (int64_t j = 0; j < K; ++j)  // taps in order, skipping positions before the sequence
      if (in[j])
        for (int64_t ch = 0; ch < C; ++ch) x[ch] += taps[j * C + ch] * in[j][ch];
    kernels::silu_mul(x, ones_.data(), x, C);
    for (int64_t h = 0; h < Hk; ++h) {
      l2_normalise(x + h * dk, dk, q_scale);
      l2_normalise(x + (Hk + h) * dk, dk, 1.0f);
    }
    for (int64_t h = 0; h < Hv; ++h) {
      gate_[(task * Hv + h) * 2] = L.ssm_a[h] * softplus(alpha_in[i * Hv + h] + L.ssm_dt[h]);
      gate_[(task * Hv + h) * 2 + 1] = sigmoid(beta_in[i * Hv + h]);
    }
  });
}

void CpuGatedDeltaNet::update_conv_states(const ModelConfig& c, int layer, const Batch& b,
                                          CpuKvCache& kv, const float* qkv) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t C = d.conv_dim(), K = d.conv_kernel;
  if (K <= 1) return;
  const DeltaNetStateLayout lay(d, kv.state_rollback_tokens());
  // Snapshots first: they may read the conv state the sequence's own update overwrites.
  for (const Batch::StateSnapshot& snap : b.state_snapshots) {
    const BatchSequence& s = b.sequences[snap.seq];
    const ConvHistory hist = history_of(s, kv.state(layer, s.state_slot), lay);
    write_conv_state(s, snap.n_tokens, hist, qkv, C, lay, kv.state(layer, snap.slot));
  }
  for (const BatchSequence& s : b.sequences) {
    if (s.n_new == 0) continue;
    float* state = kv.state(layer, s.state_slot);
    write_conv_state(s, s.n_past + s.n_new, history_of(s, state, lay), qkv, C, lay, state);
  }
}

void CpuGatedDeltaNet::run_head(const ModelConfig& c, const LayerWeights& L, int layer,
                                const Batch& b, CpuKvCache& kv, int32_t seq, int32_t h, int64_t r0,
                                int64_t r1, const float* z, float* out, Scratch& s) {
  const DeltaNetConfig& d = c.deltanet;
  const BatchSequence& sq = b.sequences[seq];
  // This block's rows of the sequence, and their positions [begin, end).
  const int64_t row_a = std::max<int64_t>(r0, sq.row_begin);
  const int64_t row_e = std::min<int64_t>(r1, sq.row_begin + sq.n_new);
  if (row_a >= row_e) return;
  const int64_t begin = sq.n_past + (row_a - sq.row_begin), end = begin + (row_e - row_a);
  const int64_t Hk = d.n_k_heads, Hv = d.n_v_heads, dk = d.d_k, dv = d.d_v;
  const int64_t C = d.conv_dim(), kh = h / (Hv / Hk);
  const DeltaNetStateLayout lay(d, kv.state_rollback_tokens());
  const gdn::Kernels& K = gdn::kernels_for(dk, dv);
  float* st = kv.state(layer, sq.state_slot);
  if (begin == 0)
    std::fill(st + lay.s0_of(0) + h * dk * dv, st + lay.s0_of(0) + (h + 1) * dk * dv, 0.0f);

  for (int64_t p = begin; p < end;) {
    // One segment: the step's rows inside the absolute chunk [p / 16 · 16, + 16).
    const int64_t chunk = p / kChunk, m0 = p % kChunk;
    const int64_t seg_end = std::min(end, (chunk + 1) * kChunk);
    float* S0 = st + lay.s0_of(chunk) + h * dk * dv;              // the state the chunk starts from
    float* Kt = st + lay.tail_of(chunk) + h * lay.tail_per_head;  // (16, dk) the chunk's keys
    float* Dt = Kt + kChunk * dk;                                 // (16, dv) their δ
    float* Gt = Dt + kChunk * dv;                                 // (16) their cumulative decays
    const int64_t first = row_a + (p - begin);  // the segment's first row of the batch
    const float* q_rows = &x_[(first - r0) * C + kh * dk];
    const float* k_rows = &x_[(first - r0) * C + (Hk + kh) * dk];
    K.state_products(k_rows, q_rows, C, static_cast<int>(seg_end - p), S0, dk, dv, s.a.data(),
                     s.bq.data());
    for (int64_t t = 0; t < seg_end - p; ++t) {
      const int64_t row = first + t, ti = m0 + t;
      const float* kt = k_rows + t * C;
      const float* qt = q_rows + t * C;
      const float* vt = &x_[(row - r0) * C + 2 * Hk * dk + h * dv];
      const float* gb = &gate_[((row - r0) * Hv + h) * 2];
      const float g = gb[0], beta = gb[1];
      const float G = (ti == 0 ? 0.0f : Gt[ti - 1]) + g;
      const float gamma = std::exp(G);
      // δ_t = β·(v − γ·S0ᵀk − Σ_{j<t} e^{G_t−G_j}(k_t·k_j)·δ_j)
      for (int64_t j = 0; j < ti; ++j) s.e[j] = std::exp(G - Gt[j]);
      s.e[ti] = 1.0f;
      for (int64_t j = 0; j < ti; ++j) s.coef[j] = s.e[j] * kernels::vec_dot(kt, Kt + j * dk, dk);
      K.scaled_sum(gamma, &s.a[t * dv], s.coef.data(), Dt, static_cast<int>(ti), dv, s.u.data());
      float* delta = Dt + ti * dv;
      for (int64_t e = 0; e < dv; ++e) delta[e] = beta * (vt[e] - s.u[e]);
      std::memcpy(Kt + ti * dk, kt, dk * sizeof(float));
      Gt[ti] = G;
      // o_t = γ·S0ᵀq + Σ_{j≤t} e^{G_t−G_j}(q_t·k_j)·δ_j, then the gated RMSNorm.
      for (int64_t j = 0; j <= ti; ++j) s.coef[j] = s.e[j] * kernels::vec_dot(qt, Kt + j * dk, dk);
      float* o = out + (row * Hv + h) * dv;
      K.scaled_sum(gamma, &s.bq[t * dv], s.coef.data(), Dt, static_cast<int>(ti + 1), dv, o);
      kernels::rms_norm(o, L.ssm_norm.data(), o, dv, c.rms_eps);
      const float* zt = z + (row * Hv + h) * dv;
      kernels::silu_mul(zt, o, o, dv);
    }
    if (seg_end % kChunk == 0) {
      // The chunk is complete: fold its tail into the next chunk's S0 (S0 itself when there is
      // one buffer; else S0 stays for a rollback into this chunk).
      float* next = st + lay.s0_of(chunk + 1) + h * dk * dv;
      if (next != S0) std::memcpy(next, S0, dk * dv * sizeof(float));
      const float G_last = Gt[kChunk - 1];
      for (int64_t j = 0; j < kChunk; ++j) s.e[j] = std::exp(G_last - Gt[j]);
      K.fold(std::exp(G_last), s.e.data(), Kt, Dt, kChunk, dk, dv, next);
      for (const Batch::StateSnapshot& snap : b.state_snapshots)
        if (snap.seq == seq && snap.n_tokens == seg_end)
          std::memcpy(kv.state(layer, snap.slot) + lay.s0_of(chunk + 1) + h * dk * dv, next,
                      dk * dv * sizeof(float));
    }
    p = seg_end;
  }
}

uint64_t CpuGatedDeltaNet::scratch_bytes() const {
  uint64_t floats = x_.capacity() + gate_.capacity() + ones_.capacity() +
                    block_seqs_.capacity();  // int32: as many bytes as floats
  for (const LayerTaps& t : taps_) floats += t.taps.capacity();
  for (const Scratch& s : scratch_)
    floats +=
        s.a.capacity() + s.bq.capacity() + s.u.capacity() + s.coef.capacity() + s.e.capacity();
  return floats * sizeof(float);
}

uint64_t CpuGatedDeltaNet::scratch_bytes_for(const ModelConfig& c, int64_t rows, int n_threads) {
  const DeltaNetConfig& d = c.deltanet;
  if (d.n_v_heads == 0) return 0;
  const int64_t block = std::min(rows, kRowBlock);
  int64_t recurrent = 0;
  for (const LayerSpec& spec : c.layers) recurrent += spec.deltanet;
  const uint64_t floats = block * (d.conv_dim() + 2 * d.n_v_heads) +
                          (recurrent * d.conv_kernel + 1) * d.conv_dim() +
                          rows;  // block_seqs_: rows >= sequences
  const uint64_t per_thread = 2 * kChunk * d.d_v + d.d_v + 2 * kChunk;
  return (floats + static_cast<uint64_t>(n_threads) * per_thread) * sizeof(float);
}

}  // namespace loom
