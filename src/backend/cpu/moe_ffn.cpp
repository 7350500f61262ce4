#include "backend/cpu/moe_ffn.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "base/resize_exact.h"
#include "kernels/matmul.h"
#include "model/layers/moe.h"
#include "model/layers/steps.h"

namespace loom {

void CpuMoeFfn::run(const ModelConfig& c, const LayerWeights& L, const float* xn, int64_t n,
                    float* out, ThreadPool& pool) {
  const MoeConfig& m = c.moe;
  const int64_t E = c.n_embd, X = m.n_expert, K = m.n_expert_used;
  resize_exact(logits_, n * X);
  resize_exact(ids_, n * K);
  resize_exact(weights_, n * K);
  kernels::matmul(L.router, xn, n, logits_.data(), n > 1 ? &pool : nullptr);
  for (int64_t i = 0; i < n; ++i) {
    if (!L.router_bias.empty()) layers::add_bias(&logits_[i * X], L.router_bias.data(), X);
    layers::route_token(m, &logits_[i * X], &ids_[i * K], &weights_[i * K],
                        L.exp_probs_b.empty() ? nullptr : L.exp_probs_b.data());
  }

  // Slots grouped by expert (counting sort), in row order within an expert.
  expert_begin_.assign(X + 1, 0);
  for (int32_t e : ids_) ++expert_begin_[e + 1];
  for (int64_t e = 0; e < X; ++e) expert_begin_[e + 1] += expert_begin_[e];
  resize_exact(rows_of_expert_, n * K);
  expert_fill_.assign(expert_begin_.begin(), expert_begin_.end() - 1);
  for (int64_t s = 0; s < n * K; ++s)
    rows_of_expert_[expert_fill_[ids_[s]]++] = static_cast<int32_t>(s);
  count_reads(c, L);
  tasks_.clear();
  for (int32_t e = 0; e < X; ++e)
    for (int32_t b = expert_begin_[e]; b < expert_begin_[e + 1]; b += kRowsPerTask)
      tasks_.push_back({e, b, std::min<int32_t>(b + kRowsPerTask, expert_begin_[e + 1])});
  // Larger tasks first, so the last ones to start are short; then in expert order (std::sort
  // with the full key: stable_sort would allocate its buffer every layer).
  std::sort(tasks_.begin(), tasks_.end(), [](const Task& a, const Task& b) {
    const int32_t na = a.end - a.begin, nb = b.end - b.begin;
    return na != nb ? na > nb : a.begin < b.begin;
  });

  resize_exact(slot_out_, n * K * E);
  scratch_.resize(pool.size());
  // Every thread's scratch sized for this step's largest task here, not by its own first task:
  // which threads take which tasks varies, and a thread's first large task would allocate.
  const int64_t max_rows = tasks_.empty() ? 0 : tasks_[0].end - tasks_[0].begin;
  for (Scratch& s : scratch_) size_scratch(s, c, max_rows);
  pool.parallel_for(static_cast<int64_t>(tasks_.size()),
                    [&](int64_t t, int thread) { run_task(c, L, tasks_[t], xn, thread); });

  const bool shared = m.n_ff_shexp > 0;
  if (shared) shared_expert(c, L, xn, n, out, pool);
  for (int64_t i = 0; i < n; ++i) {
    float* o = &out[i * E];
    if (!shared) std::fill(o, o + E, 0.0f);
    for (int64_t s = 0; s < K; ++s) {
      const float w = weights_[i * K + s];
      const float* y = &slot_out_[(i * K + s) * E];
      for (int64_t j = 0; j < E; ++j) o[j] += w * y[j];
    }
  }
}

// The experts this run reads: those with rows (after the counting sort).
void CpuMoeFfn::count_reads(const ModelConfig& c, const LayerWeights& L) {
  const bool bias = !L.gate_exp_bias.empty();
  const uint64_t bias_bytes = bias ? (2 * c.moe.n_ff_exp + c.n_embd) * sizeof(float) : 0;
  ++runs_;
  for (int64_t e = 0; e < c.moe.n_expert; ++e) {
    if (expert_begin_[e + 1] == expert_begin_[e]) continue;
    ++experts_read_;
    expert_bytes_read_ +=
        L.gate_exp[e].nbytes + L.up_exp[e].nbytes + L.down_exp[e].nbytes + bias_bytes;
  }
}

uint64_t CpuMoeFfn::scratch_bytes() const {
  uint64_t bytes = (logits_.capacity() + weights_.capacity() + slot_out_.capacity() +
                    sh_gate_.capacity() + sh_up_.capacity() + sh_out_.capacity()) *
                       sizeof(float) +
                   (ids_.capacity() + rows_of_expert_.capacity() + expert_begin_.capacity() +
                    expert_fill_.capacity()) *
                       sizeof(int32_t);
  for (const Scratch& s : scratch_)
    bytes +=
        (s.x.capacity() + s.gate.capacity() + s.up.capacity() + s.y.capacity()) * sizeof(float);
  return bytes;
}

void CpuMoeFfn::size_scratch(Scratch& s, const ModelConfig& c, int64_t rows) {
  const int64_t E = c.n_embd, F = c.moe.n_ff_exp;
  resize_exact(s.x, rows * E);
  resize_exact(s.gate, rows * F);
  resize_exact(s.up, rows * F);
  resize_exact(s.y, rows * E);
}

void CpuMoeFfn::run_task(const ModelConfig& c, const LayerWeights& L, const Task& t,
                         const float* xn, int thread) {
  const int64_t E = c.n_embd, F = c.moe.n_ff_exp, K = c.moe.n_expert_used;
  const int64_t rows = t.end - t.begin;
  Scratch& s = scratch_[thread];
  size_scratch(s, c, rows);
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t row = rows_of_expert_[t.begin + r] / K;
    std::memcpy(&s.x[r * E], &xn[row * E], E * sizeof(float));
  }
  const kernels::MatmulTarget gate_up[] = {{&L.gate_exp[t.expert], s.gate.data()},
                                           {&L.up_exp[t.expert], s.up.data()}};
  kernels::matmul_multi(gate_up, 2, s.x.data(), rows, nullptr);
  const bool bias = !L.gate_exp_bias.empty();  // gpt-oss: each expert's gate/up/down biases
  for (int64_t r = 0; r < rows; ++r) {
    if (bias) {
      layers::add_bias(&s.gate[r * F], &L.gate_exp_bias[t.expert * F], F);
      layers::add_bias(&s.up[r * F], &L.up_exp_bias[t.expert * F], F);
    }
    layers::gated_activation(c, &s.gate[r * F], &s.up[r * F], F);
  }
  kernels::matmul(L.down_exp[t.expert], s.gate.data(), rows, s.y.data(), nullptr);
  if (bias)
    for (int64_t r = 0; r < rows; ++r)
      layers::add_bias(&s.y[r * E], &L.down_exp_bias[t.expert * E], E);
  for (int64_t r = 0; r < rows; ++r)
    std::memcpy(&slot_out_[rows_of_expert_[t.begin + r] * E], &s.y[r * E], E * sizeof(float));
}

// The shared expert (Qwen2-MoE): a dense gated FFN on every row, scaled by
// sigmoid(xn · shexp_gate) where the architecture gates it; written to out.
void CpuMoeFfn::shared_expert(const ModelConfig& c, const LayerWeights& L, const float* xn,
                              int64_t n, float* out, ThreadPool& pool) {
  const int64_t E = c.n_embd, F = c.moe.n_ff_shexp;
  resize_exact(sh_gate_, n * F);
  resize_exact(sh_up_, n * F);
  const kernels::MatmulTarget gate_up[] = {{&L.w_gate_shexp, sh_gate_.data()},
                                           {&L.w_up_shexp, sh_up_.data()}};
  kernels::matmul_multi(gate_up, 2, xn, n, &pool);
  for (int64_t i = 0; i < n; ++i) layers::gated_activation(c, &sh_gate_[i * F], &sh_up_[i * F], F);
  kernels::matmul(L.w_down_shexp, sh_gate_.data(), n, out, &pool);
  if (L.shexp_gate.empty()) return;
  for (int64_t i = 0; i < n; ++i) {
    double dot = 0;
    for (int64_t j = 0; j < E; ++j) dot += static_cast<double>(xn[i * E + j]) * L.shexp_gate[j];
    const float g = static_cast<float>(1.0 / (1.0 + std::exp(-dot)));
    for (int64_t j = 0; j < E; ++j) out[i * E + j] *= g;
  }
}

}  // namespace loom
