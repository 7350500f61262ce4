// What a decode step costs as a function of its rows, fitted online: t = a + b * rows, by least
// squares over the recent steps that ran no prompt token (decodes and verifies, each timed
// whole: a draft model's or MTP module's passes, the forward pass, sampling), older steps
// weighing geometrically less. a is what a step costs whatever its rows (streaming the weights,
// per-step overheads), b what each row adds (its share of the compute, and of the proposers').
//
// Speculative decoding weighs its proposals with it: k proposal rows in a step of n decoding
// sequences add b * k to a step that yields n tokens in a + b * n, so they pay when they keep
// more than k * row_share(n) tokens, where row_share(n) = b * n / (a + b * n). One sequence on
// a memory-bound machine: a small share, proposals pay at under one kept token in four; a
// large batch in a compute-bound step: a share near 1, only proposals that are nearly always
// kept pay. A row never costs nothing: on a noisy host the fit can find no per-row cost (b
// clamped to 0), and a share of 0 would let proposals that are never kept run at every step,
// so the share has a floor, kMinRowShare.
#pragma once

#include <cstdint>

namespace loom {

class StepCostModel {
 public:
  // The least share row_share() reports, whatever the fit: a row is at least 2% of a step
  // (the fit before any step, a 0.5B model on 2 cores, puts one sequence's row at 11%).
  static constexpr double kMinRowShare = 0.02;

  void observe(int64_t rows, double seconds);
  // b * rows / (a + b * rows), at least kMinRowShare: the share of a step of `rows` rows that
  // grows with them.
  double row_share(int64_t rows) const;
  double fixed_seconds() const { return a_; }
  double seconds_per_row() const { return b_; }
  // Sets the fit to t = a + b * rows and keeps it there (observe() then changes nothing): for
  // tests that need the engine in one cost regime whatever the host's timing.
  void hold(double a, double b);

 private:
  void fit();
  // Before any fit: 8 ms a step and 1 ms a row (a 0.5B model on 2 cores), which puts a verify
  // of 4 proposals for one sequence at 1.44x a decode step (`bench model --verify 5` measures
  // 1.2-1.45x there).
  double a_ = 8e-3, b_ = 1e-3;
  bool held_ = false;
  // Weighted sums of 1, x, x^2, y, xy over the observed steps (x rows, y seconds).
  double s0_ = 0, s1_ = 0, s2_ = 0, sy_ = 0, sxy_ = 0;
};

}  // namespace loom
