// Internal to src/sampling: partial selection of the best tokens of a logits row without a
// full sort (a 152k-entry sort costs milliseconds; a k-heap scan costs one pass).
#pragma once

#include <cstdint>
#include <vector>

namespace loom::sampling_internal {

struct Candidate {
  float logit;   // processed logit (sampler) or raw logit (logprobs)
  float weight;  // unnormalized probability exp((logit - max) / T); filled by the sampler
  int32_t id;    // token id
};

// The order every selection here uses: higher logit first, ties → lower token id. A total
// order, so results never depend on the algorithm or on how the input was laid out.
inline bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
}

// Puts the min(k, #eligible) best entries of values[0, n) into *out, sorted by ranks_before.
// With skip_unsampleable, -inf and NaN entries are not eligible; otherwise NaN ranks as -inf.
void select_top_k(const float* values, int32_t n, int32_t k, bool skip_unsampleable,
                  std::vector<Candidate>* out);

// Top-p on c[0, n) (weights filled, any order): reorders c so that c[0, k) holds the smallest
// ranks_before-prefix whose weight sum reaches `target`, and returns k (>= 1 when n >= 1).
// Expected O(n) (a weighted quickselect), falling back to a sort on adversarial input.
int32_t select_top_p(Candidate* c, int32_t n, double target);

// Reused buffers of top_p_from_row.
struct TopPScratch {
  std::vector<uint16_t> bucket;  // (n) histogram bucket of each token
  std::vector<double> mass;      // (kBuckets + 1) weight per bucket
  std::vector<int32_t> count;    // (kBuckets + 1) tokens per bucket
};

// Top-p over a whole row without sorting it: x = logits, w = weights (0 = not a candidate,
// else exp((x - max_logit) · inv_t) >= e^-87). One histogram pass over logit buckets finds the
// bucket where the mass (ranks_before order) crosses `target`; only that bucket is resolved
// exactly, by select_top_p. Writes the kept tokens (the same set select_top_p would keep) to
// out[0, k), unordered, and returns k. out's capacity must already be >= n + 2.
int32_t top_p_from_row(const float* x, const float* w, int32_t n, float max_logit, float inv_t,
                       double target, std::vector<Candidate>* out, TopPScratch* scratch);

}  // namespace loom::sampling_internal
