#include "spec/ngram_proposer.h"

#include <gtest/gtest.h>

#include <random>

namespace loom::spec {
namespace {

std::vector<int32_t> propose(const std::vector<int32_t>& t, int min_n, int max_n, int k) {
  std::vector<int32_t> out = {-7};  // appended to, never cleared
  const int32_t n = propose_ngram(t, min_n, max_n, k, out);
  EXPECT_EQ(static_cast<int32_t>(out.size()) - 1, n);
  return {out.begin() + 1, out.end()};
}

TEST(NgramProposer, NoMatchProposesNothing) {
  EXPECT_TRUE(propose({1, 2, 3, 4, 5}, 1, 3, 4).empty());
  EXPECT_TRUE(propose({}, 1, 3, 4).empty());
  EXPECT_TRUE(propose({9}, 1, 3, 4).empty());
  // The suffix itself is not an earlier occurrence.
  EXPECT_TRUE(propose({1, 2, 3}, 3, 3, 2).empty());
}

TEST(NgramProposer, CopiesWhatFollowedTheLatestOccurrence) {
  //                 0  1  2  3  4  5  6  7  8  9
  std::vector<int32_t> t = {5, 6, 1, 2, 7, 1, 2, 8, 9, 1, 2};
  // Suffix [1, 2]: latest earlier occurrence at 5, followed by 8, 9, 1, 2.
  EXPECT_EQ(propose(t, 2, 2, 3), (std::vector<int32_t>{8, 9, 1}));
  // Min above every match length that occurs: nothing.
  EXPECT_TRUE(propose(t, 3, 4, 3).empty());
}

TEST(NgramProposer, PrefersTheLongestMatch) {
  // Suffix 3-gram [4, 1, 2] occurs at 0 (followed by 30); the 2-gram [1, 2] occurs later at
  // 5 (followed by 40). The longer match wins.
  std::vector<int32_t> t = {4, 1, 2, 30, 0, 1, 2, 40, 4, 1, 2};
  EXPECT_EQ(propose(t, 1, 3, 1), (std::vector<int32_t>{30}));
  EXPECT_EQ(propose(t, 1, 2, 1), (std::vector<int32_t>{40}));
}

TEST(NgramProposer, ContinuesAShortPeriodForAllKTokens) {
  std::vector<int32_t> t = {9, 1, 2, 3, 1, 2, 3};
  EXPECT_EQ(propose(t, 1, 3, 7), (std::vector<int32_t>{1, 2, 3, 1, 2, 3, 1}));
  EXPECT_EQ(propose({5, 5}, 1, 4, 3), (std::vector<int32_t>{5, 5, 5}));
}

TEST(NgramProposer, MatchesABruteForceReference) {
  std::mt19937 rng(3);
  for (int trial = 0; trial < 2000; ++trial) {
    std::vector<int32_t> t(1 + rng() % 40);
    for (auto& x : t) x = static_cast<int32_t>(rng() % 4);
    const int min_n = 1 + rng() % 3, max_n = min_n + rng() % 3, k = 1 + rng() % 5;
    // Reference: for n from max to min, the largest i < len - n with t[i..i+n) == suffix;
    // then extend the sequence by copying position i + n + j.
    std::vector<int32_t> want;
    const int len = static_cast<int>(t.size());
    for (int n = std::min(max_n, len - 1); n >= min_n && want.empty(); --n)
      for (int i = len - n - 1; i >= 0; --i) {
        bool eq = true;
        for (int d = 0; d < n; ++d) eq &= t[i + d] == t[len - n + d];
        if (!eq) continue;
        std::vector<int32_t> ext = t;
        for (int j = 0; j < k; ++j) ext.push_back(ext[i + n + j]);
        want.assign(ext.begin() + len, ext.end());
        break;
      }
    EXPECT_EQ(propose(t, min_n, max_n, k), want) << trial;
  }
}

}  // namespace
}  // namespace loom::spec
