// SeqPooler (see pooling.h).
#include "engine/pooling.h"

#include <cmath>

namespace loom {

SeqPooler::SeqPooler(const PoolingParams& params, int32_t n_embd)
    : mode_(params.mode),
      normalize_(params.normalize && params.logit_tokens.empty() && !params.classify),
      sum_(static_cast<size_t>(n_embd), 0.0) {}

bool SeqPooler::wants(int32_t pos, int32_t n_tokens) const {
  switch (mode_) {
    case PoolingParams::Mode::kLast:
      return pos == n_tokens - 1;
    case PoolingParams::Mode::kCls:
      return pos == 0;
    case PoolingParams::Mode::kMean:
      return pos >= next_;  // earlier ones were summed before a preemption
  }
  return false;
}

void SeqPooler::add(int32_t pos, std::span<const float> h) {
  if (mode_ == PoolingParams::Mode::kMean) {
    if (pos != next_) return;  // recomputed, or out of order (cannot happen: rows are in order)
    for (size_t k = 0; k < sum_.size(); ++k) sum_[k] += h[k];
    ++next_;
    return;
  }
  for (size_t k = 0; k < sum_.size(); ++k) sum_[k] = h[k];
}

std::vector<float> SeqPooler::finish(int32_t n_tokens) const {
  std::vector<float> out(sum_.size());
  const double scale = mode_ == PoolingParams::Mode::kMean && n_tokens > 0 ? 1.0 / n_tokens : 1.0;
  for (size_t k = 0; k < sum_.size(); ++k) out[k] = static_cast<float>(sum_[k] * scale);
  if (normalize_) l2_normalize(out);
  return out;
}

void l2_normalize(std::span<float> x) {
  double ss = 0;
  for (float v : x) ss += static_cast<double>(v) * v;
  if (ss <= 0) return;
  const double inv = 1.0 / std::sqrt(ss);
  for (float& v : x) v = static_cast<float>(v * inv);
}

}  // namespace loom
