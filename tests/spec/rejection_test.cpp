// The acceptance rule keeps the target distribution whatever the proposal distribution is: a
// chi-square test over many seeded trials on an 8-token vocabulary, where the test is shown
// to have the power to fail: three mutated rules (always keep the draft, keep it with
// min(1, q/p), replace it from p instead of from (p - q)+) are rejected by the same test.
#include "spec/rejection.h"

#include <gtest/gtest.h>

#include <functional>
#include <random>

namespace loom::spec {
namespace {

constexpr int kVocab = 8;
constexpr int kTrials = 200000;
// Chi-square with 7 degrees of freedom: P(X > 24.3) ~ 0.001.
constexpr double kCritical = 24.3;

using Rule = std::function<int32_t(std::span<const float>, std::span<const float>, int32_t, Rng&)>;

std::vector<float> random_dist(std::mt19937& g, bool peaked) {
  std::vector<float> p(kVocab);
  std::exponential_distribution<float> e(1.0f);
  float s = 0;
  for (auto& x : p) s += x = e(g) * (peaked ? e(g) * e(g) : 1.0f);
  for (auto& x : p) x /= s;
  return p;
}

int32_t draw(std::span<const float> q, Rng& rng) {
  double u = rng.uniform();
  for (int i = 0; i < kVocab; ++i) {
    if (u < q[i]) return i;
    u -= q[i];
  }
  return kVocab - 1;
}

// Chi-square of the emitted tokens against p, for a draft drawn from q each trial.
double chi_square(const std::vector<float>& p, const std::vector<float>& q, const Rule& rule,
                  uint64_t seed) {
  Rng rng(seed);
  std::vector<int64_t> count(kVocab, 0);
  for (int t = 0; t < kTrials; ++t) ++count[rule(p, q, draw(q, rng), rng)];
  double chi = 0;
  for (int i = 0; i < kVocab; ++i) {
    const double want = p[i] * kTrials;
    if (want > 0) chi += (count[i] - want) * (count[i] - want) / want;
  }
  return chi;
}

int32_t resample_from(std::span<const float> w, Rng& rng) {
  double total = 0;
  for (float x : w) total += x;
  double u = rng.uniform() * total;
  for (int i = 0; i < kVocab; ++i) {
    if (u < w[i]) return i;
    u -= w[i];
  }
  return kVocab - 1;
}

TEST(RejectionRule, KeepsTheTargetDistribution) {
  std::mt19937 g(5);
  const Rule rule = [](auto p, auto q, int32_t d, Rng& rng) {
    return verify_draft_token(p, q, d, rng).token;
  };
  for (int c = 0; c < 6; ++c) {
    const auto p = random_dist(g, c % 2), q = random_dist(g, c % 3 == 0);
    EXPECT_LT(chi_square(p, q, rule, 100 + c), kCritical) << c;
  }
  // A point-mass proposal (n-gram): the draft is kept with probability p(d).
  const auto p = random_dist(g, false);
  for (int d = 0; d < kVocab; ++d) {
    std::vector<float> q(kVocab, 0.0f);
    q[d] = 1.0f;
    Rng rng(7 + d);
    int kept = 0;
    for (int t = 0; t < kTrials / 4; ++t) kept += verify_draft_token(p, q, d, rng).accepted;
    EXPECT_NEAR(kept / (kTrials / 4.0), p[d], 0.01) << d;
    EXPECT_LT(chi_square(p, q, rule, 300 + d), kCritical) << d;
  }
}

// A draft token outside both supports (p(d) = q(d) = 0, e.g. one a grammar mask or top-k cut
// from both) is never kept: the target cannot emit it.
TEST(RejectionRule, DraftOutsideBothSupportsIsReplaced) {
  const std::vector<float> p = {0.5f, 0.5f, 0, 0, 0, 0, 0, 0};
  const std::vector<float> q = {0.25f, 0.75f, 0, 0, 0, 0, 0, 0};
  Rng rng(5);
  for (int t = 0; t < 100; ++t) {
    const Verdict v = verify_draft_token(p, q, 4, rng);
    EXPECT_FALSE(v.accepted);
    EXPECT_EQ(v.token, 0);  // (p - q)+ is all on token 0
  }
  // q(d) = 0 < p(d): kept (p / q is infinite).
  const std::vector<float> q2 = {1.0f, 0, 0, 0, 0, 0, 0, 0};
  EXPECT_TRUE(verify_draft_token(p, q2, 1, rng).accepted);
}

TEST(RejectionRule, MutatedRulesFailTheSameTest) {
  std::mt19937 g(9);
  const auto p = random_dist(g, true), q = random_dist(g, false);
  const Rule always_keep = [](auto, auto, int32_t d, Rng&) { return d; };
  const Rule inverted_ratio = [](auto p, auto q, int32_t d, Rng& rng) {
    if (rng.uniform() * p[d] < q[d]) return d;  // min(1, q/p) instead of min(1, p/q)
    std::vector<float> w(kVocab);
    for (int i = 0; i < kVocab; ++i) w[i] = std::max(0.0f, p[i] - q[i]);
    return resample_from(w, rng);
  };
  const Rule resample_from_p = [](auto p, auto q, int32_t d, Rng& rng) {
    if (rng.uniform() * q[d] < p[d]) return d;
    return resample_from(p, rng);  // p instead of (p - q)+
  };
  EXPECT_GT(chi_square(p, q, always_keep, 1), kCritical);
  EXPECT_GT(chi_square(p, q, inverted_ratio, 2), kCritical);
  EXPECT_GT(chi_square(p, q, resample_from_p, 3), kCritical);
}

}  // namespace
}  // namespace loom::spec
