#include "backend/cpu/deltanet_layer.h"

#include "base/resize_exact.h"
#include "model/layers/deltanet_order.h"

namespace loom {
namespace {

// Floats per row of each buffer: qkv, z, beta, alpha, ba (fused only), y.
int64_t row_floats(const DeltaNetConfig& d) {
  const int64_t Z = int64_t{d.n_v_heads} * d.d_v;
  return d.conv_dim() + 2 * Z + 2 * d.n_v_heads + (d.fused_ba ? 2 * d.n_v_heads : 0);
}

bool has_deltanet(const ModelConfig& c) {
  for (const LayerSpec& s : c.layers)
    if (s.deltanet) return true;
  return false;
}

}  // namespace

uint64_t CpuDeltaNetLayer::scratch_bytes_for(const ModelConfig& c, int64_t rows, int n_threads) {
  if (!has_deltanet(c)) return 0;
  const DeltaNetConfig& d = c.deltanet;
  const uint64_t floats =
      rows * row_floats(d) + (layers::deltanet_needs_regroup(d)
                                  ? static_cast<uint64_t>(n_threads) * d.n_v_heads * d.d_v
                                  : 0);
  return floats * sizeof(float) + CpuGatedDeltaNet::scratch_bytes_for(c, rows, n_threads);
}

uint64_t CpuDeltaNetLayer::scratch_bytes() const {
  uint64_t floats = 0;
  for (const std::vector<float>* v : {&qkv_, &z_, &beta_, &alpha_, &ba_, &y_, &tmp_})
    floats += v->capacity();
  return floats * sizeof(float) + step_.scratch_bytes();
}

void CpuDeltaNetLayer::reserve(const ModelConfig& c, int64_t rows, int n_threads) {
  if (rows <= cap_rows_) return;
  cap_rows_ = rows;
  const DeltaNetConfig& d = c.deltanet;
  const int64_t Z = int64_t{d.n_v_heads} * d.d_v;
  resize_exact(qkv_, rows * d.conv_dim());
  resize_exact(z_, rows * Z);
  resize_exact(beta_, rows * d.n_v_heads);
  resize_exact(alpha_, rows * d.n_v_heads);
  if (d.fused_ba) resize_exact(ba_, rows * 2 * d.n_v_heads);
  resize_exact(y_, rows * Z);
  if (layers::deltanet_needs_regroup(d)) resize_exact(tmp_, static_cast<int64_t>(n_threads) * Z);
}

namespace {
// A row's regrouping is a few copies: on the pool for many rows only.
template <class F>
void for_rows(ThreadPool& pool, int64_t n, int64_t row_floats, F&& fn) {
  if (n > 1 && n * row_floats >= 8192)
    pool.parallel_for(n, fn);
  else
    for (int64_t i = 0; i < n; ++i) fn(i, 0);
}
}  // namespace

void CpuDeltaNetLayer::project(const ModelConfig& c, const LayerWeights& L, int64_t n, float* xn,
                               const kernels::RowFill& norm_row, ThreadPool& pool) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t C = d.conv_dim(), Z = int64_t{d.n_v_heads} * d.d_v, Hv = d.n_v_heads;
  reserve(c, n, pool.size());
  kernels::MatmulTarget targets[4] = {{&L.ssm_qkv, qkv_.data()}, {&L.ssm_z, z_.data()}};
  int n_targets = 2;
  if (d.fused_ba) {
    targets[n_targets++] = {&L.ssm_ba, ba_.data()};
  } else {
    targets[n_targets++] = {&L.ssm_beta, beta_.data()};
    targets[n_targets++] = {&L.ssm_alpha, alpha_.data()};
  }
  kernels::matmul_multi(targets, n_targets, xn, n, &pool, norm_row);
  if (layers::deltanet_needs_regroup(d))
    for_rows(pool, n, C + Z, [&](int64_t i, int thread) {
      layers::deltanet_regroup_row(d, &qkv_[i * C], &z_[i * Z],
                                   d.fused_ba ? &ba_[i * 2 * Hv] : nullptr, &beta_[i * Hv],
                                   &alpha_[i * Hv], &tmp_[thread * Z]);
    });
}

void CpuDeltaNetLayer::step(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b,
                            CpuKvCache& kv, ThreadPool& pool) {
  step_.run(c, L, layer, b, kv, qkv_.data(), z_.data(), beta_.data(), alpha_.data(), y_.data(),
            pool);
}

void CpuDeltaNetLayer::output(const ModelConfig& c, const LayerWeights& L, int64_t n, float* out,
                              ThreadPool& pool) {
  const DeltaNetConfig& d = c.deltanet;
  const int64_t Z = int64_t{d.n_v_heads} * d.d_v;
  if (layers::deltanet_needs_regroup(d) && d.v_heads_tiled)
    for_rows(pool, n, Z, [&](int64_t i, int thread) {
      layers::deltanet_ungroup_output(d, &y_[i * Z], &tmp_[thread * Z]);
    });
  kernels::matmul(L.ssm_out, y_.data(), n, out, &pool);
}

}  // namespace loom
