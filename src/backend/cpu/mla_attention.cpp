#include "backend/cpu/mla_attention.h"

#include <algorithm>
#include <cstring>

#include "base/resize_exact.h"
#include "kernels/matmul.h"
#include "kernels/ops.h"
#include "kernels/quant.h"
#include "model/layers/mla.h"

namespace loom {
namespace {

// Runs fn(task, thread) for n tasks of about `work` multiply-adds in all: on the pool when
// that pays for the hand-off, else on the calling thread (a tiny model's decode step).
template <class F>
void run_tasks(ThreadPool& pool, int64_t n, int64_t work, F&& fn) {
  if (n > 1 && work >= (int64_t{1} << 15))
    pool.parallel_for(n, fn);
  else
    for (int64_t t = 0; t < n; ++t) fn(t, 0);
}

}  // namespace

void CpuMlaAttention::enable_decompress(int32_t rows, const ModelConfig& c, const Weights& w) {
  decompress_rows_ = rows;
  if (rows <= 0) return;
  const int64_t R = c.mla.kv_lora_rank, N = c.mla.qk_nope_head_dim, H = c.n_head;
  w_uk_.assign(c.n_layer, {});
  w_uk_views_.assign(c.n_layer, {});
  std::vector<float> kb(N);
  for (int l = 0; l < c.n_layer; ++l) {
    const LayerWeights& L = w.layers[l];
    if (L.k_b.empty()) continue;
    std::vector<float>& t = w_uk_[l];
    t.resize(H * N * R);
    for (int64_t h = 0; h < H; ++h)
      for (int64_t r = 0; r < R; ++r) {  // k_b[h] row r holds W_UK[h][:, r]
        kernels::dequantize_row(L.k_b[h].dtype, L.k_b[h].row(r), kb.data(), N);
        for (int64_t d = 0; d < N; ++d) t[(h * N + d) * R + r] = kb[d];
      }
    for (int64_t h = 0; h < H; ++h) {
      TensorView v;
      v.dtype = Dtype::kF32;
      v.n_dims = 2;
      v.ne = {R, N, 1, 1};
      v.data = &t[h * N * R];
      v.nbytes = N * R * sizeof(float);
      w_uk_views_[l].push_back(v);
    }
  }
}

const float* CpuMlaAttention::run(const ModelConfig& c, const LayerWeights& L, int layer,
                                  const Batch& b, CpuKvCache& kv, int kv_group, const float* xn,
                                  const float* rope_cs, int64_t cs_stride, float scale,
                                  ThreadPool& pool) {
  const MlaConfig& a = c.mla;
  const int64_t n = b.n_rows(), H = c.n_head, R = a.kv_lora_rank, P = a.qk_rope_head_dim;
  const int64_t N = a.qk_nope_head_dim, Dv = a.v_head_dim, Dq = N + P, row = R + P;
  resize_exact(q_, n * H * Dq);
  resize_exact(kva_, n * row);
  resize_exact(qcat_, n * H * row);
  resize_exact(lat_, n * H * R);
  resize_exact(out_, n * H * Dv);
  ThreadPool* p = &pool;

  // "mla_q", "mla_kv_a": the query (through the low-rank path when there is one) and the
  // latent row's projection.
  if (L.wq_a.data) {
    resize_exact(qa_, n * a.q_lora_rank);
    const kernels::MatmulTarget first[] = {{&L.wq_a, qa_.data()}, {&L.wkv_a, kva_.data()}};
    kernels::matmul_multi(first, 2, xn, n, p);
    for (int64_t i = 0; i < n; ++i)
      kernels::rms_norm(&qa_[i * a.q_lora_rank], L.q_a_norm.data(), &qa_[i * a.q_lora_rank],
                        a.q_lora_rank, c.rms_eps);
    kernels::matmul(L.wq_b, qa_.data(), n, q_.data(), p);
  } else {
    const kernels::MatmulTarget first[] = {{&L.wq, q_.data()}, {&L.wkv_a, kva_.data()}};
    kernels::matmul_multi(first, 2, xn, n, p);
  }

  // "mla_latent", "mla_q_rope": each row's cached row (stored now; attention reads every
  // position back from the cache) and its rotated queries.
  const int32_t bs = kv.block_size();
  for (int64_t i = 0; i < n; ++i) {
    const float* cs = rope_cs + i * cs_stride;
    float* r = &kva_[i * row];
    layers::mla_latent_row(c, L, r, cs, r);
    layers::mla_rope_query(c, &q_[i * H * Dq], cs);
    const int32_t* table = b.sequences[b.seq[i]].table(kv_group);
    kv.store_latent(layer, table[b.pos[i] / bs], b.pos[i] % bs, r);
  }

  scratch_.resize(pool.size());
  // Sequences with a long enough chunk take the decompressed path (enable_decompress).
  row_decompressed_.assign(n, 0);
  bool any_decompressed = false;
  if (decompress_rows_ > 0)
    for (int64_t i = 0; i < n; ++i)
      if (b.sequences[b.seq[i]].n_new >= decompress_rows_) {
        row_decompressed_[i] = 1;
        any_decompressed = true;
      }

  // One task per head, in one hand-off (a decode step's three phases each on the pool cost
  // more than their work): "mla_q_absorbed", the nope queries of every row through attn_k_b
  // into latent space with the rope part beside them; the head's attention for every row over
  // its sequence's cached rows; "mla_v", the latent sums through attn_v_b to the head's value.
  int64_t positions = 0, max_kv = 0;
  for (int64_t i = 0; i < n; ++i) {
    positions += b.pos[i] + 1;
    max_kv = std::max<int64_t>(max_kv, b.pos[i] + 1);
  }
  // Every thread's scratch sized here, not by its first task: which threads run tasks varies
  // from step to step, and a thread's first task in a later step would allocate then.
  for (Scratch& s : scratch_) {
    resize_exact(s.in, n * std::max(N, R));
    resize_exact(s.out, n * std::max(R, Dv));
    grow_scores(s, 1, max_kv);
    resize_exact(s.row, row);
  }
  const int64_t work = n * H * (N * R + R * Dv) + positions * H * (row + R);
  run_tasks(pool, H, work, [&](int64_t h, int thread) {
    Scratch& s = scratch_[thread];
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(&s.in[i * N], &q_[(i * H + h) * Dq], N * sizeof(float));
    kernels::matmul(L.k_b[h], s.in.data(), n, s.out.data(), nullptr);
    for (int64_t i = 0; i < n; ++i) {
      float* qc = &qcat_[(i * H + h) * row];
      std::memcpy(qc, &s.out[i * R], R * sizeof(float));
      std::memcpy(qc + R, &q_[(i * H + h) * Dq + N], P * sizeof(float));
    }
    for (int64_t i = 0; i < n; ++i) {
      if (row_decompressed_[i]) continue;
      const kernels::PagedHead rows = kv.latent_head(layer, b.sequences[b.seq[i]].table(kv_group));
      attend(c, rows, i, b.pos[i] + 1, h, h + 1, scale, thread);
    }
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(&s.in[i * R], &lat_[(i * H + h) * R], R * sizeof(float));
    kernels::matmul(L.v_b[h], s.in.data(), n, s.out.data(), nullptr);
    for (int64_t i = 0; i < n; ++i)
      std::memcpy(&out_[(i * H + h) * Dv], &s.out[i * Dv], Dv * sizeof(float));
  });
  if (any_decompressed)
    for (int32_t seq = 0; seq < static_cast<int32_t>(b.sequences.size()); ++seq)
      if (b.sequences[seq].n_new >= decompress_rows_)
        attend_decompressed(c, L, layer, b, kv.latent_head(layer, b.sequences[seq].table(kv_group)),
                            seq, scale, pool);
  return out_.data();
}

void CpuMlaAttention::attend_decompressed(const ModelConfig& c, const LayerWeights& L, int layer,
                                          const Batch& b, const kernels::PagedHead& rows,
                                          int32_t seq, float scale, ThreadPool& pool) {
  const MlaConfig& a = c.mla;
  const int64_t n = b.n_rows(), H = c.n_head, R = a.kv_lora_rank, P = a.qk_rope_head_dim;
  const int64_t N = a.qk_nope_head_dim, Dv = a.v_head_dim, Dq = N + P;
  int32_t n_kv = 0;
  for (int64_t i = 0; i < n; ++i)
    if (b.seq[i] == seq) n_kv = std::max(n_kv, b.pos[i] + 1);
  resize_exact(latents_, static_cast<int64_t>(n_kv) * R);
  resize_exact(rope_keys_, static_cast<int64_t>(n_kv) * P);
  std::vector<float>& tmp = scratch_[0].row;
  resize_exact(tmp, R + P);
  for (int32_t t = 0; t < n_kv; ++t) {
    kernels::load_kv(rows.dtype, rows.token(t), tmp.data(), R + P);
    std::memcpy(&latents_[t * R], tmp.data(), R * sizeof(float));
    std::memcpy(&rope_keys_[t * P], tmp.data() + R, P * sizeof(float));
  }
  for (Scratch& s : scratch_) {  // every thread's, before the tasks (as in run())
    resize_exact(s.in, static_cast<int64_t>(n_kv) * N);    // K_nope of every cached row
    resize_exact(s.out, static_cast<int64_t>(n_kv) * Dv);  // V of every cached row
    grow_scores(s, 1, n_kv);
  }
  pool.parallel_for(H, [&](int64_t h, int thread) {
    Scratch& s = scratch_[thread];
    kernels::matmul(w_uk_views_[layer][h], latents_.data(), n_kv, s.in.data(), nullptr);
    kernels::matmul(L.v_b[h], latents_.data(), n_kv, s.out.data(), nullptr);
    for (int64_t i = 0; i < n; ++i) {
      if (b.seq[i] != seq) continue;
      const float* q = &q_[(i * H + h) * Dq];
      const int32_t m = b.pos[i] + 1;
      for (int32_t t = 0; t < m; ++t)
        s.scores[t] = (kernels::vec_dot(q, &s.in[t * N], N) +
                       kernels::vec_dot(q + N, &rope_keys_[t * P], P)) *
                      scale;
      kernels::softmax(s.scores.data(), m);
      float* o = &out_[(i * H + h) * Dv];
      std::fill(o, o + Dv, 0.0f);
      for (int32_t t = 0; t < m; ++t) kernels::vec_axpy(s.scores[t], &s.out[t * Dv], o, Dv);
    }
  });
}

void CpuMlaAttention::grow_scores(Scratch& s, int64_t heads, int64_t n_kv) {
  // Grown 256 positions at a time: a decode step's context is one longer than the last's, and
  // growing to the exact size allocated every step.
  const int64_t need = heads * ((n_kv + 255) / 256 * 256);
  if (static_cast<int64_t>(s.scores.size()) < need) resize_exact(s.scores, need);
}

void CpuMlaAttention::attend(const ModelConfig& c, const kernels::PagedHead& rows, int64_t i,
                             int32_t n_kv, int64_t h0, int64_t h1, float scale, int thread) {
  const int64_t H = c.n_head, R = c.mla.kv_lora_rank, row = c.mla.latent_row();
  Scratch& s = scratch_[thread];
  grow_scores(s, h1 - h0, n_kv);
  resize_exact(s.row, row);
  const bool in_place = rows.dtype == Dtype::kF32;
  auto load = [&](int32_t j) -> const float* {
    if (in_place) return reinterpret_cast<const float*>(rows.token(j));
    kernels::load_kv(rows.dtype, rows.token(j), s.row.data(), row);
    return s.row.data();
  };
  for (int32_t j = 0; j < n_kv; ++j) {
    const float* r = load(j);
    for (int64_t h = h0; h < h1; ++h)
      s.scores[(h - h0) * n_kv + j] = kernels::vec_dot(&qcat_[(i * H + h) * row], r, row) * scale;
  }
  for (int64_t h = h0; h < h1; ++h) {
    kernels::softmax(&s.scores[(h - h0) * n_kv], n_kv);
    std::fill(&lat_[(i * H + h) * R], &lat_[(i * H + h) * R] + R, 0.0f);
  }
  for (int32_t j = 0; j < n_kv; ++j) {
    const float* r = load(j);
    for (int64_t h = h0; h < h1; ++h)
      kernels::vec_axpy(s.scores[(h - h0) * n_kv + j], r, &lat_[(i * H + h) * R], R);
  }
}

uint64_t CpuMlaAttention::scratch_bytes() const {
  uint64_t floats = qa_.capacity() + q_.capacity() + kva_.capacity() + qcat_.capacity() +
                    lat_.capacity() + out_.capacity();
  // The decompressed path (off unless enable_decompress): its W_UK copies and a sequence's
  // latents and RoPE keys as floats.
  floats += latents_.capacity() + rope_keys_.capacity();
  for (const std::vector<float>& w : w_uk_) floats += w.capacity();
  for (const Scratch& s : scratch_)
    floats += s.in.capacity() + s.out.capacity() + s.scores.capacity() + s.row.capacity();
  return floats * sizeof(float);
}

uint64_t CpuMlaAttention::scratch_bytes_for(const ModelConfig& c, int64_t rows, int32_t max_kv,
                                            int n_threads) {
  const MlaConfig& a = c.mla;
  if (a.kv_lora_rank == 0) return 0;
  const int64_t H = c.n_head, R = a.kv_lora_rank, P = a.qk_rope_head_dim, row = R + P;
  const int64_t N = a.qk_nope_head_dim, Dv = a.v_head_dim;
  uint64_t floats = rows * (a.q_lora_rank + H * (N + P) + row + H * row + H * R + H * Dv);
  // A task's gathered rows, and one head's scores over max_kv positions (grown 256 at a time).
  const int64_t per_thread = rows * std::max(N, R) + rows * std::max(R, Dv) +
                             (static_cast<int64_t>(max_kv) + 255) / 256 * 256 + row;
  return (floats + static_cast<uint64_t>(n_threads) * per_thread) * sizeof(float);
}

}  // namespace loom
