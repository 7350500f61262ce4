// Rng, PenaltyState and the partial selections (top-k heap, top-p quickselect) against
// straightforward references on random data.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <set>

#include "sampling/row_ops.h"
#include "sampling/penalty_state.h"
#include "sampling/rng.h"
#include "sampling/top_select.h"
#include "test_util.h"

namespace loom {
namespace {

using sampling_internal::Candidate;
using sampling_internal::ranks_before;

TEST(Rng, DeterministicPerSeedAndStream) {
  Rng a(123), b(123), c(124), d(123, 1);
  std::vector<uint64_t> va, vb, vc, vd;
  for (int i = 0; i < 64; ++i) {
    va.push_back(a.next_u64());
    vb.push_back(b.next_u64());
    vc.push_back(c.next_u64());
    vd.push_back(d.next_u64());
  }
  EXPECT_EQ(va, vb);
  EXPECT_NE(va, vc);
  EXPECT_NE(va, vd);
  EXPECT_EQ(Rng::for_request(std::optional<uint64_t>(123)).next_u64(), va[0]);
  // Unseeded generators differ from each other.
  Rng r1, r2;
  EXPECT_NE(r1.next_u64(), r2.next_u64());
}

TEST(Rng, UniformIsUniform) {
  Rng r(2024);
  constexpr int kN = 200000;
  int bins[10] = {};
  double sum = 0;
  for (int i = 0; i < kN; ++i) {
    double u = r.uniform();
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
    ++bins[static_cast<int>(u * 10)];
  }
  EXPECT_NEAR(sum / kN, 0.5, 0.005);
  for (int b : bins) EXPECT_NEAR(b / double(kN), 0.1, 0.005);
}

TEST(PenaltyState, MatchesRecountFromScratch) {
  std::mt19937 gen(5);
  std::uniform_int_distribution<int32_t> tok(0, 4999);
  PenaltyState st;
  std::vector<int32_t> prompt(700);
  for (int32_t& t : prompt) t = tok(gen);
  // In two chunks, as a chunked prefill would.
  st.add_prompt(std::span<const int32_t>(prompt).first(300));
  st.add_prompt(std::span<const int32_t>(prompt).subspan(300));
  std::vector<int32_t> output;
  for (int i = 0; i < 3000; ++i) {
    int32_t t = tok(gen) % 1500;  // repeats likely
    output.push_back(t);
    st.add_output(t);
  }
  // Roll back the last 40 (rejected speculative tokens).
  for (int i = 0; i < 40; ++i) {
    ASSERT_TRUE(st.remove_output(output.back()));
    output.pop_back();
  }
  std::map<int32_t, int32_t> counts;
  for (int32_t t : output) ++counts[t];
  std::set<int32_t> in_prompt(prompt.begin(), prompt.end());

  EXPECT_EQ(st.num_output_tokens(), static_cast<int64_t>(output.size()));
  for (int32_t t = 0; t < 5000; ++t) {
    ASSERT_EQ(st.output_count(t), counts.count(t) ? counts[t] : 0) << t;
    ASSERT_EQ(st.in_prompt(t), in_prompt.count(t) == 1) << t;
  }
  std::set<int32_t> seen;
  for (const auto& e : st.entries()) {
    EXPECT_TRUE(seen.insert(e.token).second) << "duplicate entry " << e.token;
    EXPECT_EQ(e.output_count, st.output_count(e.token));
    EXPECT_EQ(e.in_prompt, st.in_prompt(e.token));
  }
  EXPECT_FALSE(st.remove_output(4999 + 1));
  int32_t never_output = *in_prompt.rbegin();
  if (!counts.count(never_output)) {
    EXPECT_FALSE(st.remove_output(never_output));
  }

  st.reset();
  EXPECT_TRUE(st.entries().empty());
  EXPECT_EQ(st.output_count(output[0]), 0);
  EXPECT_FALSE(st.in_prompt(prompt[0]));
  st.add_output(9);
  EXPECT_EQ(st.output_count(9), 1);
}

std::vector<Candidate> sorted_reference(const std::vector<float>& v, bool skip) {
  std::vector<Candidate> all;
  for (int32_t i = 0; i < static_cast<int32_t>(v.size()); ++i) {
    float x = std::isnan(v[i]) ? -INFINITY : v[i];
    if (skip && x == -INFINITY) continue;
    all.push_back({x, 0.0f, i});
  }
  std::sort(all.begin(), all.end(), ranks_before);
  return all;
}

TEST(TopSelect, TopKMatchesFullSort) {
  for (uint64_t seed = 0; seed < 12; ++seed) {
    auto v = test::random_logits(3001, seed);
    // Coarse rounding creates many ties; a few -inf and NaN entries.
    if (seed % 2) for (float& x : v) x = std::round(x * 4) / 4;
    v[seed * 7] = -INFINITY;
    v[seed * 11 + 1] = NAN;
    for (bool skip : {true, false}) {
      auto ref = sorted_reference(v, skip);
      for (int32_t k : {1, 2, 7, 50, 374, 376, 1000, 2999, 3001, 5000}) {
        std::vector<Candidate> out;
        sampling_internal::select_top_k(v.data(), 3001, k, skip, &out);
        size_t want = std::min<size_t>(k, ref.size());
        ASSERT_EQ(out.size(), want) << "k=" << k;
        for (size_t i = 0; i < want; ++i) {
          ASSERT_EQ(out[i].id, ref[i].id) << "k=" << k << " i=" << i << " seed=" << seed;
        }
      }
    }
  }
}

TEST(TopSelect, TopPFindsMinimalPrefix) {
  std::mt19937 gen(3);
  for (uint64_t seed = 0; seed < 40; ++seed) {
    int32_t n = 1 + static_cast<int32_t>(gen() % 5000);
    auto v = test::random_logits(n, seed + 500, 1.0f + seed % 4);
    if (seed % 3 == 0) for (float& x : v) x = std::round(x);
    std::vector<Candidate> c;
    for (int32_t i = 0; i < n; ++i) c.push_back({v[i], std::exp(v[i] - 10.0f), i});
    auto ref = c;
    std::sort(ref.begin(), ref.end(), ranks_before);
    double total = 0;
    for (auto& x : ref) total += x.weight;
    for (double p : {1e-9, 0.1, 0.5, 0.9, 0.999}) {
      double target = p * total;
      int32_t want = 0;
      double acc = 0;
      while (want < n && acc < target) acc += ref[want++].weight;
      auto work = c;
      int32_t got = sampling_internal::select_top_p(work.data(), n, target);
      ASSERT_EQ(got, want) << "n=" << n << " p=" << p;
      std::vector<int32_t> a, b;
      for (int32_t i = 0; i < got; ++i) a.push_back(work[i].id), b.push_back(ref[i].id);
      std::sort(a.begin(), a.end());
      std::sort(b.begin(), b.end());
      ASSERT_EQ(a, b) << "n=" << n << " p=" << p;
    }
  }
}

TEST(TopSelect, TopPFromRowMatchesReference) {
  // Whole rows as the sampler sees them (weights from exp_weights, with min_p zeros), sizes
  // around the vector width and large enough for crowded buckets.
  for (uint64_t seed = 0; seed < 24; ++seed) {
    const int32_t n = seed % 4 == 0 ? 1 + static_cast<int32_t>(seed) : 5000 + 9000 * (seed % 3);
    auto x = test::random_logits(n, seed + 900, 0.5f + seed % 5);
    if (seed % 5 == 1) for (float& v : x) v = std::round(v * 2) / 2;  // heavy ties
    x[seed % n] = -INFINITY;
    const float inv_t = seed % 2 ? 1.0f : 1.0f / 0.6f;
    const float min_w = seed % 3 == 2 ? 0.01f : 0.0f;
    const float mx = sampling_internal::row_max(x.data(), n);
    std::vector<float> w(n);
    sampling_internal::exp_weights(x.data(), w.data(), n, mx, inv_t, min_w);
    std::vector<Candidate> ref;
    for (int32_t i = 0; i < n; ++i) {
      if (w[i] > 0) ref.push_back({x[i], w[i], i});
    }
    std::sort(ref.begin(), ref.end(), ranks_before);
    const double total = sampling_internal::sum_weights(w.data(), n);
    for (double p : {0.05, 0.5, 0.9, 0.99}) {
      int32_t want = 0;
      double acc = 0;
      while (want < static_cast<int32_t>(ref.size()) && acc < p * total) acc += ref[want++].weight;
      std::vector<Candidate> out;
      out.reserve(n + 2);
      sampling_internal::TopPScratch scratch;
      int32_t got = sampling_internal::top_p_from_row(x.data(), w.data(), n, mx, inv_t, p * total,
                                                      &out, &scratch);
      ASSERT_EQ(got, want) << "n=" << n << " p=" << p << " seed=" << seed;
      std::set<int32_t> kept;
      for (int32_t i = 0; i < got; ++i) kept.insert(out[i].id);
      ASSERT_EQ(kept.size(), static_cast<size_t>(got)) << "duplicate ids";
      for (int32_t i = 0; i < want; ++i) {
        ASSERT_TRUE(kept.count(ref[i].id)) << "rank " << i << " missing, p=" << p;
      }
    }
  }
}

TEST(RowOps, ExpWeightsMaxAndCountAgainstScalar) {
  for (int32_t n : {1, 3, 4, 5, 17, 1000, 4099}) {
    auto x = test::random_logits(n, 40 + n, 6.0f);
    x[n / 2] = NAN;
    if (n > 3) x[1] = -INFINITY;
    if (n > 5) x[n - 2] = -120.0f;  // exp underflows: 0
    float ref_max = -INFINITY;
    for (float v : x) ref_max = v > ref_max ? v : ref_max;
    const float mx = sampling_internal::row_max(x.data(), n);
    ASSERT_EQ(mx, ref_max) << n;
    std::vector<float> w(n);
    const float inv_t = 0.8f, min_w = 1e-3f;
    sampling_internal::exp_weights(x.data(), w.data(), n, mx, inv_t, min_w);
    for (int32_t i = 0; i < n; ++i) {
      const float a = (x[i] - mx) * inv_t;  // the same float argument, exp in double
      const double r = std::isnan(a) ? 0.0 : std::exp(static_cast<double>(a));
      if (r < min_w * (1 + 1e-6)) {
        ASSERT_TRUE(w[i] == 0.0f || std::abs(w[i] - r) <= 1e-6 * r) << i;
      } else {
        ASSERT_NEAR(w[i], r, 4e-7 * r) << "n=" << n << " i=" << i << " x=" << x[i];
      }
    }
    double ref_sum = 0;
    for (float v : w) ref_sum += v;
    EXPECT_NEAR(sampling_internal::sum_weights(w.data(), n), ref_sum, 1e-12 * (1 + ref_sum));
    int32_t ref_count = 0;
    for (float v : x) ref_count += v >= x[0];
    EXPECT_EQ(sampling_internal::count_at_least(x.data(), n, x[0]), ref_count);
  }
}

}  // namespace
}  // namespace loom
