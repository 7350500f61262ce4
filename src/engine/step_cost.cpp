#include "engine/step_cost.h"

#include <algorithm>

namespace loom {
namespace {

// Each new step's weight relative to the sums before it: the fit follows about the last 30
// steps, so a batch that grows or a host whose speed drifts moves it within seconds.
constexpr double kForget = 0.97;

}  // namespace

void StepCostModel::observe(int64_t rows, double seconds) {
  if (held_ || rows <= 0 || !(seconds > 0)) return;
  const double x = static_cast<double>(rows);
  s0_ = kForget * s0_ + 1;
  s1_ = kForget * s1_ + x;
  s2_ = kForget * s2_ + x * x;
  sy_ = kForget * sy_ + seconds;
  sxy_ = kForget * sxy_ + x * seconds;
  fit();
}

void StepCostModel::fit() {
  // Steps all of one size say nothing about b: keep the last fit until the rows vary (by at
  // least a row's spread, as weighted variance).
  const double var = s2_ / s0_ - (s1_ / s0_) * (s1_ / s0_);
  if (var < 0.25) return;
  const double b = (s0_ * sxy_ - s1_ * sy_) / (s0_ * s2_ - s1_ * s1_);
  const double mean_x = s1_ / s0_, mean_y = sy_ / s0_;
  // A step cannot get cheaper with rows, nor cost less than nothing at none.
  b_ = std::max(b, 0.0);
  a_ = std::max(mean_y - b_ * mean_x, 0.0);
}

double StepCostModel::row_share(int64_t rows) const {
  const double rb = b_ * static_cast<double>(rows);
  return std::max(a_ + rb > 0 ? rb / (a_ + rb) : 0.0, kMinRowShare);
}

void StepCostModel::hold(double a, double b) {
  a_ = a;
  b_ = b;
  held_ = true;
}

}  // namespace loom
