// The CPU Mixture-of-Experts FFN: route every row of the step, group the rows by expert, and
// run each active expert's gate/up/down once for all of its rows (single-threaded tasks of
// up to kRowsPerTask rows, spread over the pool in one hand-off), then sum each row's experts
// in its routing order. Only the chosen experts' weights are read, with the same packed
// layouts and kernels as the dense FFN.
//
// Batch invariance: a row's expert outputs come from matmuls whose per-row results do not
// depend on the other rows (kernels/matmul.h), and they are summed in the row's own routing
// order, so a token's output is the same whichever tokens share its experts in the step.
#pragma once

#include <cstdint>
#include <vector>

#include "base/thread_pool.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

class CpuMoeFfn {
 public:
  static constexpr int64_t kRowsPerTask = 32;

  // xn: n rows of the normed FFN input (n_embd floats each); out: n rows of the FFN output.
  void run(const ModelConfig& c, const LayerWeights& L, const float* xn, int64_t n, float* out,
           ThreadPool& pool);
  // Bytes of scratch held now (grown to the largest step so far).
  uint64_t scratch_bytes() const;
  // Since construction: runs, the distinct experts they routed rows to (summed over runs),
  // and those experts' weight bytes (gate, up, down and their biases): Model::weight_reads.
  uint64_t runs() const { return runs_; }
  uint64_t experts_read() const { return experts_read_; }
  uint64_t expert_bytes_read() const { return expert_bytes_read_; }

 private:
  struct Task {
    int32_t expert;
    int32_t begin, end;  // into rows_of_expert_
  };
  void run_task(const ModelConfig& c, const LayerWeights& L, const Task& t, const float* xn,
                int thread);
  void count_reads(const ModelConfig& c, const LayerWeights& L);
  void shared_expert(const ModelConfig& c, const LayerWeights& L, const float* xn, int64_t n,
                     float* out, ThreadPool& pool);

  std::vector<float> logits_;            // (n, n_expert)
  std::vector<int32_t> ids_;             // (n, k) chosen experts
  std::vector<float> weights_;           // (n, k) their weights
  std::vector<int32_t> rows_of_expert_;  // slots (row * k + s) grouped by expert
  std::vector<int32_t> expert_begin_;    // [n_expert + 1] into rows_of_expert_
  std::vector<int32_t> expert_fill_;     // the counting sort's next place per expert
  std::vector<Task> tasks_;
  std::vector<float> slot_out_;  // (n, k, E): each chosen expert's output for the row
  // Per thread: gathered input rows, gate, up and down outputs of one task.
  struct Scratch {
    std::vector<float> x, gate, up, y;
  };
  static void size_scratch(Scratch& s, const ModelConfig& c, int64_t rows);
  std::vector<Scratch> scratch_;
  std::vector<float> sh_gate_, sh_up_, sh_out_;  // shared expert, (n, Fs) and (n, E)
  uint64_t runs_ = 0, experts_read_ = 0, expert_bytes_read_ = 0;
};

}  // namespace loom
