// Partial selections for the sampler: a k-heap scan for top-k and a weighted quickselect for
// top-p, both under the total order ranks_before (logit desc, id asc).
#include "sampling/top_select.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>

namespace loom::sampling_internal {

void select_top_k(const float* values, int32_t n, int32_t k, bool skip_unsampleable,
                  std::vector<Candidate>* out) {
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  out->clear();
  if (k <= 0 || n <= 0) return;
  auto eligible = [&](float v, float* fixed) {
    if (v > kNegInf) {
      *fixed = v;
      return true;
    }
    *fixed = kNegInf;  // -inf or NaN
    return !skip_unsampleable;
  };

  if (static_cast<int64_t>(k) * 8 >= n) {
    // Large k: a heap would be updated for most entries; nth_element is cheaper.
    for (int32_t i = 0; i < n; ++i) {
      float v;
      if (eligible(values[i], &v)) out->push_back({v, 0.0f, i});
    }
    if (static_cast<int32_t>(out->size()) > k) {
      std::nth_element(out->begin(), out->begin() + k, out->end(), ranks_before);
      out->resize(k);
    }
    std::sort(out->begin(), out->end(), ranks_before);
    return;
  }

  // Small k: keep a heap of the best k seen, worst on top. Ids grow along the scan, so a later
  // entry beats the worst kept one only with a strictly greater value.
  int32_t i = 0;
  for (; i < n && static_cast<int32_t>(out->size()) < k; ++i) {
    float v;
    if (eligible(values[i], &v)) out->push_back({v, 0.0f, i});
  }
  std::make_heap(out->begin(), out->end(), ranks_before);
  if (static_cast<int32_t>(out->size()) == k) {
    float worst = out->front().logit;
    for (; i < n; ++i) {
      float v = values[i];
      if (v > worst) {  // false for NaN and -inf
        std::pop_heap(out->begin(), out->end(), ranks_before);
        out->back() = {v, 0.0f, i};
        std::push_heap(out->begin(), out->end(), ranks_before);
        worst = out->front().logit;
      }
    }
  }
  std::sort_heap(out->begin(), out->end(), ranks_before);
}

int32_t select_top_p(Candidate* c, int32_t n, double target) {
  if (n <= 0) return 0;
  // Invariants: c[0, lo) rank before everything in [lo, n) and weigh `above` < target; the
  // answer lies in (lo, hi].
  int32_t lo = 0, hi = n;
  double above = 0.0;
  int budget = 2 * std::bit_width(static_cast<uint32_t>(n)) + 16;
  while (hi - lo > 32 && budget-- > 0) {
    // Median of three as pivot, parked at hi - 1.
    int32_t mid = lo + (hi - lo) / 2;
    Candidate* a = &c[lo];
    Candidate* b = &c[mid];
    Candidate* z = &c[hi - 1];
    if (ranks_before(*b, *a)) std::swap(a, b);
    if (ranks_before(*z, *b)) std::swap(b, z);
    if (ranks_before(*b, *a)) std::swap(a, b);
    std::swap(*b, c[hi - 1]);
    const Candidate pivot = c[hi - 1];
    Candidate* m = std::partition(c + lo, c + hi - 1,
                                  [&](const Candidate& x) { return ranks_before(x, pivot); });
    std::swap(*m, c[hi - 1]);
    int32_t mi = static_cast<int32_t>(m - c);
    double left = 0.0;
    for (int32_t j = lo; j < mi; ++j) left += c[j].weight;
    if (above + left >= target) {
      hi = mi;
    } else if (above + left + pivot.weight >= target) {
      return mi + 1;
    } else {
      above += left + pivot.weight;
      lo = mi + 1;
    }
  }
  std::sort(c + lo, c + hi, ranks_before);
  for (int32_t j = lo; j < hi; ++j) {
    above += c[j].weight;
    if (above >= target) return j + 1;
  }
  // Only reachable through rounding (the mass of [0, hi) was >= target when summed in
  // another order): keep [0, hi).
  return std::max(hi, 1);
}

int32_t top_p_from_row(const float* x, const float* w, int32_t n, float max_logit, float inv_t,
                       double target, std::vector<Candidate>* out, TopPScratch* scratch) {
  // Buckets split the exponent range [-87, 0] of the nonzero weights evenly; bucket 0 holds
  // the largest logits. (max - x) · inv_t is a chain of monotone float operations, so bucket
  // order agrees with ranks_before.
  constexpr int32_t kBuckets = 4096;
  constexpr int32_t kNone = kBuckets;  // zero-weight tokens: not candidates
  const float scale = inv_t * ((kBuckets - 1) / 87.0f);
  scratch->bucket.resize(n);
  scratch->mass.assign(kBuckets + 1, 0.0);
  scratch->count.assign(kBuckets + 1, 0);
  uint16_t* bucket = scratch->bucket.data();
  double* mass = scratch->mass.data();
  int32_t* count = scratch->count.data();
  for (int32_t i = 0; i < n; ++i) {
    float f = (max_logit - x[i]) * scale;
    int32_t b = f < static_cast<float>(kBuckets - 1) ? static_cast<int32_t>(f) : kBuckets - 1;
    b = w[i] > 0.0f ? b : kNone;
    bucket[i] = static_cast<uint16_t>(b);
    mass[b] += w[i];
    ++count[b];
  }
  int32_t cross = 0, n_in = 0;
  double cum = 0.0;
  for (; cross < kBuckets - 1; ++cross) {
    if (cum + mass[cross] >= target) break;
    cum += mass[cross];
    n_in += count[cross];
  }
  const int32_t n_cross = count[cross];

  // Branch-free split: kept buckets to out[0, n_in), the crossing bucket to
  // out[n_in + 1, ...); every token is written to both cursors and advances only the one it
  // belongs to, so out[n_in] and the slot after the crossing bucket take the spill.
  out->resize(static_cast<size_t>(n_in) + n_cross + 2);
  Candidate* o = out->data();
  int32_t wi = 0, wb = n_in + 1;
  for (int32_t i = 0; i < n; ++i) {
    const Candidate c{x[i], w[i], i};
    const int32_t b = bucket[i];
    o[wi] = c;
    wi += b < cross;
    o[wb] = c;
    wb += b == cross;
  }
  std::copy(o + n_in + 1, o + n_in + 1 + n_cross, o + n_in);
  out->resize(static_cast<size_t>(n_in) + n_cross);

  double above = 0.0;
  for (int32_t i = 0; i < n_in; ++i) above += o[i].weight;
  // Summation order differs from the histogram's; if rounding says the kept buckets already
  // reach the target, the answer lies among them.
  if (above >= target) return select_top_p(o, n_in, target);
  return n_in + select_top_p(o + n_in, n_cross, target - above);
}

}  // namespace loom::sampling_internal
