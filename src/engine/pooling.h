// Pooling of one sequence's final hidden states for embedding requests (PoolingParams in
// include/loom/engine.h): which positions it needs, their running sum (mean) or the one row it
// keeps (last, CLS), and the finished vector (L2-normalised when asked).
//
// Batch invariance: positions are added in order, each exactly once (a position recomputed
// after a preemption is skipped), so the result does not depend on how the prompt was chunked
// or what shared its steps.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "loom/engine.h"

namespace loom {

class SeqPooler {
 public:
  SeqPooler(const PoolingParams& params, int32_t n_embd);

  // Whether the hidden state of position `pos` of an n_tokens-long prompt is needed.
  bool wants(int32_t pos, int32_t n_tokens) const;
  void add(int32_t pos, std::span<const float> hidden);
  // The pooled vector of an n_tokens-long prompt (every wanted position added).
  std::vector<float> finish(int32_t n_tokens) const;

 private:
  PoolingParams::Mode mode_;
  bool normalize_;
  std::vector<double> sum_;  // mean: positions [0, next_) summed; last / CLS: the row kept
  int32_t next_ = 0;
};

// x / ‖x‖₂ (unchanged when the norm is 0).
void l2_normalize(std::span<float> x);

}  // namespace loom
