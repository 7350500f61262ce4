// A Gated DeltaNet layer of the CPU forward pass (LayerSpec::deltanet): the projections of the
// normed rows (ssm_qkv, ssm_z, ssm_beta / ssm_alpha or the fused ssm_ba) in one matmul pass,
// the value heads regrouped where the file orders them otherwise (layers/deltanet_order.h), the
// step itself (CpuGatedDeltaNet: convolution, recurrence, gated norm), and ssm_out.
#pragma once

#include <cstdint>
#include <vector>

#include "backend/cpu/gated_deltanet.h"
#include "kernels/matmul.h"

namespace loom {

class CpuDeltaNetLayer {
 public:
  // A layer over the batch's n rows in three phases (timed apart by the forward pass):
  // project: xn (n, E) gets each row's normed input from norm_row (run inside the projections'
  // activation pass), then the rows' q/k/v, z, b and a in the step's order;
  // step: the Gated DeltaNet step over them (each sequence's state slot read and updated);
  // output: ssm_out of the step's outputs into out (n, E).
  void project(const ModelConfig& c, const LayerWeights& L, int64_t n, float* xn,
               const kernels::RowFill& norm_row, ThreadPool& pool);
  void step(const ModelConfig& c, const LayerWeights& L, int layer, const Batch& b, CpuKvCache& kv,
            ThreadPool& pool);
  void output(const ModelConfig& c, const LayerWeights& L, int64_t n, float* out, ThreadPool& pool);

  uint64_t scratch_bytes() const;  // as allocated now
  // What the phases allocate for a step of `rows` rows (0 for a model without recurrent layers).
  static uint64_t scratch_bytes_for(const ModelConfig& c, int64_t rows, int n_threads);

 private:
  void reserve(const ModelConfig& c, int64_t rows, int n_threads);

  CpuGatedDeltaNet step_;
  int64_t cap_rows_ = 0;
  std::vector<float> qkv_, z_, beta_, alpha_, ba_, y_;
  std::vector<float> tmp_;  // per thread: Hv·dv floats for regrouping a row
};

}  // namespace loom
