// Sampler: greedy, filtered sampling distributions against a sort-based double reference,
// penalties against a hand-computed example, logit_bias, allowed ids, min_tokens, determinism.
#include "sampling/sampler.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "test_util.h"

namespace loom {
namespace {

using test::random_logits;
using test::reference_distribution;

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

int32_t sample_one(Sampler& s, const std::vector<float>& logits, const SamplingParams& p, Rng& rng,
                   const PenaltyState* pen = nullptr, std::span<const int32_t> suppressed = {}) {
  SampleOutput out;
  Status st = s.sample(logits, p, pen, suppressed, rng, &out);
  EXPECT_TRUE(st.is_ok()) << st.message();
  return out.token;
}

int32_t first_max(const std::vector<float>& v) {
  return static_cast<int32_t>(std::max_element(v.begin(), v.end()) - v.begin());
}

TEST(Sampler, GreedyIsArgmaxAndDrawsNothing) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto logits = random_logits(997, seed);
    Rng rng(seed), untouched(seed);
    EXPECT_EQ(sample_one(s, logits, p, rng), first_max(logits));
    EXPECT_EQ(rng.next_u64(), untouched.next_u64()) << "greedy must not consume randomness";
  }
}

TEST(Sampler, GreedyTiesPickLowestId) {
  Sampler s;
  SamplingParams p;
  p.temperature = 0.0f;
  auto logits = random_logits(500, 7);
  float top = *std::max_element(logits.begin(), logits.end()) + 1.0f;
  logits[321] = top;
  logits[42] = top;
  logits[499] = top;
  Rng rng(1);
  EXPECT_EQ(sample_one(s, logits, p, rng), 42);
  EXPECT_EQ(argmax_logits(logits.data(), 500), 42);
  // NaN never wins, -inf everywhere is "nothing".
  logits[0] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(argmax_logits(logits.data(), 500), 42);
  std::vector<float> dead(10, kNegInf);
  EXPECT_EQ(argmax_logits(dead.data(), 10), -1);
}

TEST(Sampler, TopK1EqualsGreedyAtAnyTemperature) {
  Sampler s;
  for (float t : {0.05f, 0.7f, 1.0f, 3.0f, 100.0f}) {
    SamplingParams p;
    p.temperature = t;
    p.top_k = 1;
    Rng rng(99);
    for (uint64_t seed = 0; seed < 30; ++seed) {
      auto logits = random_logits(2000, 1000 + seed);
      if (seed % 3 == 0) {  // with a tie for the max
        int32_t m = first_max(logits);
        logits[std::min(m + 17, 1999)] = logits[m];
        logits[std::max(m - 5, 0)] = logits[m];
      }
      EXPECT_EQ(sample_one(s, logits, p, rng), first_max(logits)) << "t=" << t << " seed=" << seed;
    }
  }
}

// Sampling parameters of one test case: temperature, top_k, top_p, min_p.
struct Filters {
  float t;
  int32_t k;
  float top_p;
  float min_p;
};
SamplingParams params_of(const Filters& f) {
  SamplingParams p;
  p.temperature = f.t;
  p.top_k = f.k;
  p.top_p = f.top_p;
  p.min_p = f.min_p;
  return p;
}

// distribution(): the probabilities sample() draws from, against the reference filtered
// softmax (exact support, values to float rounding), with processors (logit_bias, allowed ids)
// applied first, and greedy as all of it on the argmax.
TEST(Sampler, DistributionIsTheReferenceFilteredSoftmax) {
  struct Cfg {
    Filters f;
    int32_t vocab;
  };
  const Cfg cfgs[] = {{{1.0f, 0, 1.0f, 0.0f}, 64},      {{0.7f, 10, 1.0f, 0.0f}, 64},
                      {{1.3f, 0, 0.8f, 0.0f}, 64},      {{1.0f, 0, 1.0f, 0.05f}, 64},
                      {{0.9f, 20, 0.9f, 0.02f}, 64},    {{0.8f, 0, 0.6f, 0.0f}, 3000},
                      {{0.8f, 500, 0.6f, 0.001f}, 3000}};
  Sampler s;
  std::vector<float> got;
  uint64_t seed = 300;
  for (const Cfg& c : cfgs) {
    SamplingParams p = params_of(c.f);
    ASSERT_TRUE(p.validate(c.vocab).is_ok());
    auto logits = random_logits(c.vocab, ++seed, 2.0f);
    ASSERT_TRUE(s.distribution(logits, p, nullptr, {}, &got).is_ok());
    const auto ref = reference_distribution(logits, p);
    ASSERT_EQ(got.size(), ref.size());
    double sum = 0;
    int support = 0;
    for (int32_t t = 0; t < c.vocab; ++t) {
      EXPECT_EQ(got[t] > 0, ref[t] > 0) << "token " << t << " seed " << seed;
      EXPECT_NEAR(got[t], ref[t], 1e-6 + 1e-5 * ref[t]) << "token " << t << " seed " << seed;
      sum += got[t];
      support += got[t] > 0;
    }
    EXPECT_NEAR(sum, 1.0, 1e-5);
    EXPECT_GT(support, 1);
    // With a bias on one token and the rest of the vocabulary but 3 ids disallowed: the
    // reference over the processed logits.
    p.logit_bias = {{5, 2.5f}};
    p.allowed_token_ids = {5, 9, 17, 40};
    ASSERT_TRUE(s.distribution(logits, p, nullptr, {}, &got).is_ok());
    std::vector<float> processed(4);
    for (int i = 0; i < 4; ++i)
      processed[i] = logits[p.allowed_token_ids[i]] + (i == 0 ? 2.5f : 0.0f);
    SamplingParams plain = p;
    plain.logit_bias.clear();
    plain.allowed_token_ids.clear();
    plain.top_k = std::min(plain.top_k, 4);
    const auto ref4 = reference_distribution(processed, plain);
    for (int i = 0; i < 4; ++i)
      EXPECT_NEAR(got[p.allowed_token_ids[i]], ref4[i], 1e-6) << "allowed id " << i;
  }
  SamplingParams greedy;
  greedy.temperature = 0.0f;
  auto logits = random_logits(100, 9);
  ASSERT_TRUE(s.distribution(logits, greedy, nullptr, {}, &got).is_ok());
  for (int32_t t = 0; t < 100; ++t) EXPECT_EQ(got[t], t == first_max(logits) ? 1.0f : 0.0f);
  std::vector<float> dead(10, kNegInf);
  EXPECT_FALSE(s.distribution(dead, SamplingParams(), nullptr, {}, &got).is_ok());
}

// Empirical frequencies over 20k draws against the reference filtered softmax.
void check_distribution(const SamplingParams& p, int32_t vocab, uint64_t seed, float scale) {
  auto logits = random_logits(vocab, seed, scale);
  auto ref = reference_distribution(logits, p);
  Sampler s;
  Rng rng(seed * 31 + 5);
  constexpr int kDraws = 20000;
  std::vector<int> count(vocab, 0);
  for (int i = 0; i < kDraws; ++i) ++count[sample_one(s, logits, p, rng)];
  double max_diff = 0;
  int support = 0;
  for (int32_t t = 0; t < vocab; ++t) {
    if (ref[t] == 0.0) {
      EXPECT_EQ(count[t], 0) << "token " << t << " is filtered out but was drawn";
    }
    support += ref[t] > 0;
    max_diff = std::max(max_diff, std::abs(count[t] / double(kDraws) - ref[t]));
  }
  EXPECT_LT(max_diff, 0.01) << "T=" << p.temperature << " k=" << p.top_k << " p=" << p.top_p
                            << " min_p=" << p.min_p << " support=" << support;
  EXPECT_GT(support, 1) << "a test config that keeps one token tests nothing";
}

TEST(Sampler, DistributionMatchesReference) {
  const Filters cfgs[] = {
      {1.0f, 0, 1.0f, 0.0f},   {0.7f, 10, 1.0f, 0.0f},  {1.3f, 0, 0.8f, 0.0f},
      {1.0f, 0, 1.0f, 0.05f},  {0.9f, 20, 0.9f, 0.02f}, {2.0f, -1, 0.5f, 0.1f},
      {0.5f, 40, 0.95f, 0.0f},
  };
  uint64_t seed = 100;
  for (const Filters& c : cfgs) {
    const SamplingParams p = params_of(c);
    ASSERT_TRUE(p.validate(64).is_ok());
    check_distribution(p, 64, ++seed, 1.5f);
  }
}

TEST(Sampler, DistributionLargeVocabUsesQuickselectPath) {
  // 3000 tokens, top_p keeps a few hundred: exercises the weighted quickselect (> 32 entries)
  // and the candidate cutoff; max abs diff over small probabilities plus exact support.
  SamplingParams p;
  p.temperature = 0.8f;
  p.top_p = 0.6f;
  check_distribution(p, 3000, 7, 2.5f);
  p.top_k = 500;
  p.min_p = 0.001f;
  check_distribution(p, 3000, 8, 2.5f);
}

TEST(Sampler, PenaltiesMatchHandComputedExample) {
  //                              0     1     2     3     4     5     6     7
  const std::vector<float> logits{2.0f, -1.0f, 0.5f, 3.0f, -2.0f, 1.0f, 0.0f, -0.5f};
  PenaltyState pen;
  const int32_t prompt[] = {0, 1, 1};
  pen.add_prompt(prompt);
  for (int32_t t : {3, 3, 4, 0}) pen.add_output(t);
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 0.5f;
  p.frequency_penalty = 0.25f;
  Sampler s;
  auto processed = s.process(logits, p, &pen, {});
  ASSERT_TRUE(processed.is_ok()) << processed.status().message();
  // 0: prompt + 1 output:   2/2 - 0.25 - 0.5 = 0.25
  // 1: prompt only:         -1*2 = -2 (presence/frequency ignore the prompt)
  // 3: 2 outputs:           3/2 - 0.5 - 0.5 = 0.5
  // 4: 1 output, negative:  -2*2 - 0.25 - 0.5 = -4.75
  const float expected[] = {0.25f, -2.0f, 0.5f, 0.5f, -4.75f, 1.0f, 0.0f, -0.5f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ((*processed)[i], expected[i]) << "token " << i;

  // End to end: the penalties move the argmax from 3 to 5.
  p.temperature = 0.0f;
  Rng rng(1);
  EXPECT_EQ(sample_one(s, logits, p, rng, &pen), 5);
  EXPECT_EQ(sample_one(s, logits, p, rng, /*pen=*/nullptr), 3);

  // Only repetition: applies to prompt and output tokens alike.
  SamplingParams r;
  r.repetition_penalty = 0.5f;
  auto rep = s.process(logits, r, &pen, {});
  ASSERT_TRUE(rep.is_ok());
  const float expected_rep[] = {4.0f, -0.5f, 0.5f, 6.0f, -1.0f, 1.0f, 0.0f, -0.5f};
  for (int i = 0; i < 8; ++i) EXPECT_FLOAT_EQ((*rep)[i], expected_rep[i]) << "token " << i;

  // Logit bias is added before penalties (vLLM v1): (−1 + 3) / 2 = 1 for prompt token 1.
  r.repetition_penalty = 2.0f;
  r.logit_bias = {{1, 3.0f}};
  auto biased = s.process(logits, r, &pen, {});
  ASSERT_TRUE(biased.is_ok());
  EXPECT_FLOAT_EQ((*biased)[1], 1.0f);
  EXPECT_EQ(logits[1], -1.0f) << "the caller's logits are not modified";
}

TEST(Sampler, LogitBiasForcesAndBansTokens) {
  Sampler s;
  auto logits = random_logits(5000, 3, 1.0f);
  const int32_t weakest =
      static_cast<int32_t>(std::min_element(logits.begin(), logits.end()) - logits.begin());
  SamplingParams p;
  p.logit_bias = {{weakest, 100.0f}};
  Rng rng(11);
  for (int i = 0; i < 100; ++i) ASSERT_EQ(sample_one(s, logits, p, rng), weakest);

  SamplingParams g;
  g.temperature = 0.0f;
  const int32_t best = first_max(logits);
  auto second_logits = logits;
  second_logits[best] = kNegInf;
  g.logit_bias = {{best, -100.0f}};
  EXPECT_EQ(sample_one(s, logits, g, rng), first_max(second_logits));

  SamplingParams bad;
  bad.logit_bias = {{5000, 1.0f}};
  SampleOutput out;
  Status st = s.sample(logits, bad, nullptr, {}, rng, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
  EXPECT_NE(st.message().find("logit_bias token id 5000"), std::string::npos) << st.message();
}

TEST(Sampler, AllowedTokenIdsRestrictTheSupport) {
  Sampler s;
  auto logits = random_logits(300, 5, 1.0f);
  SamplingParams p;
  p.allowed_token_ids = {7, 123, 250};
  Rng rng(2);
  std::map<int32_t, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[sample_one(s, logits, p, rng)];
  EXPECT_EQ(seen.size(), 3u);
  for (auto [tok, n] : seen) EXPECT_TRUE(tok == 7 || tok == 123 || tok == 250) << tok;
  p.temperature = 0.0f;
  int32_t best = 7;
  for (int32_t t : {123, 250}) best = logits[t] > logits[best] ? t : best;
  EXPECT_EQ(sample_one(s, logits, p, rng), best);
}

TEST(Sampler, MinTokensSuppressesEosAndStopIds) {
  std::vector<float> logits = random_logits(100, 21, 1.0f);
  const int32_t eos = 2, stop_id = 7;
  logits[eos] = 50.0f;      // overwhelmingly likely
  logits[stop_id] = 49.0f;  // next
  SamplingParams p;
  p.min_tokens = 3;
  p.stop_token_ids = {stop_id};
  const int32_t eos_ids[] = {eos};
  Sampler s;
  Rng rng(3);
  std::vector<int32_t> suppressed;
  for (int64_t produced = 0; produced < 3; ++produced) {
    min_tokens_suppressed_ids(p, eos_ids, produced, &suppressed);
    EXPECT_EQ(suppressed.size(), 2u);
    for (int i = 0; i < 300; ++i) {
      int32_t t = sample_one(s, logits, p, rng, nullptr, suppressed);
      ASSERT_NE(t, eos);
      ASSERT_NE(t, stop_id);
    }
  }
  min_tokens_suppressed_ids(p, eos_ids, 3, &suppressed);
  EXPECT_TRUE(suppressed.empty());
  EXPECT_EQ(sample_one(s, logits, p, rng, nullptr, suppressed), eos);

  // ignore_eos: EOS is an ordinary token, only the stop ids wait for min_tokens.
  p.ignore_eos = true;
  min_tokens_suppressed_ids(p, eos_ids, 0, &suppressed);
  EXPECT_EQ(suppressed, std::vector<int32_t>{stop_id});

  // Everything suppressed: an error, not a crash or a bogus token.
  SamplingParams only;
  only.allowed_token_ids = {eos};
  SampleOutput out;
  const int32_t sup[] = {eos};
  Status st = s.sample(logits, only, nullptr, sup, rng, &out);
  EXPECT_EQ(st.code(), StatusCode::kInvalidArgument);
}

TEST(Sampler, SameSeedSameTokensDifferentSeedDifferent) {
  auto run = [](uint64_t seed, bool interleave) {
    Sampler s;
    SamplingParams p;
    p.temperature = 1.2f;
    p.top_p = 0.95f;
    p.seed = seed;
    Rng rng = Rng::for_request(p.seed);
    Rng other(777);  // another request sharing the sampler (a batch neighbour)
    SamplingParams q;
    q.top_k = 5;
    std::vector<int32_t> tokens;
    for (int i = 0; i < 100; ++i) {
      if (interleave) sample_one(s, random_logits(400, 9000 + i, 1.0f), q, other);
      tokens.push_back(sample_one(s, random_logits(400, i, 1.0f), p, rng));
    }
    return tokens;
  };
  auto a = run(42, false);
  EXPECT_EQ(a, run(42, false));
  EXPECT_EQ(a, run(42, true)) << "a batch neighbour changed this request's tokens";
  EXPECT_NE(a, run(43, false));
  // Streams of one seed (n > 1) differ too.
  Rng s0(42, 0), s1(42, 1);
  EXPECT_NE(s0.next_u64(), s1.next_u64());
}

TEST(Sampler, LogprobsAreRawLogSoftmax) {
  Sampler s;
  auto logits = random_logits(4096, 77, 3.0f);
  // Ties inside the top-k, to check the id tie-break.
  int32_t m = first_max(logits);
  logits[4000] = logits[m];
  logits[10] = logits[m] - 0.5f;
  logits[20] = logits[m] - 0.5f;
  double mx = logits[m], z = 0;
  for (float v : logits) z += std::exp(double(v) - mx);
  const double lse = mx + std::log(z);

  SamplingParams p;
  p.logprobs = 8;
  p.logit_bias = {{123, 30.0f}};  // changes the distribution, not the reported logprobs
  p.temperature = 0.3f;
  Rng rng(5);
  SampleOutput out;
  ASSERT_TRUE(s.sample(logits, p, nullptr, {}, rng, &out).is_ok());
  ASSERT_TRUE(out.has_logprobs);
  EXPECT_EQ(out.token, 123);
  EXPECT_EQ(out.logprobs.token, 123);
  EXPECT_NEAR(out.logprobs.logprob, double(logits[123]) - lse, 1e-5);
  int32_t rank = 0;
  for (float v : logits) rank += v >= logits[123];
  EXPECT_EQ(out.logprobs.rank, rank);

  std::vector<int32_t> order(logits.size());
  std::iota(order.begin(), order.end(), 0);
  std::sort(order.begin(), order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  ASSERT_EQ(out.logprobs.top.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(out.logprobs.top[i].token, order[i]) << i;
    EXPECT_NEAR(out.logprobs.top[i].logprob, double(logits[order[i]]) - lse, 1e-5) << i;
  }
  EXPECT_EQ(out.logprobs.top[0].token, m);
  EXPECT_EQ(out.logprobs.top[1].token, 4000);

  // logprobs = 0: the sampled token only.
  p.logprobs = 0;
  ASSERT_TRUE(s.sample(logits, p, nullptr, {}, rng, &out).is_ok());
  EXPECT_TRUE(out.has_logprobs);
  EXPECT_TRUE(out.logprobs.top.empty());
  p.logprobs = -1;
  ASSERT_TRUE(s.sample(logits, p, nullptr, {}, rng, &out).is_ok());
  EXPECT_FALSE(out.has_logprobs);

  // Prompt-logprobs path: any token, with -inf logits in the row.
  logits[9] = kNegInf;
  PositionLogprobs lp;
  s.logprobs(logits, 9, 3, &lp);
  EXPECT_EQ(lp.logprob, kNegInf);
  EXPECT_EQ(lp.rank, 4096);
  EXPECT_EQ(lp.top.size(), 3u);
}

TEST(Sampler, EmptyOrDeadRowsAreErrors) {
  Sampler s;
  SamplingParams p;
  Rng rng(1);
  SampleOutput out;
  EXPECT_FALSE(s.sample(std::span<const float>(), p, nullptr, {}, rng, &out).is_ok());
  std::vector<float> dead(50, kNegInf);
  dead[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_EQ(s.sample(dead, p, nullptr, {}, rng, &out).code(), StatusCode::kInvalidArgument);
  p.temperature = 0.0f;
  EXPECT_EQ(s.sample(dead, p, nullptr, {}, rng, &out).code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loom

namespace loom {
namespace {

// A grammar's token bitmask: only tokens whose bit is set can come out, greedy or random, and
// the logprobs still describe the raw logits (vLLM: masks are processors, logprobs are raw).
TEST(Sampler, TokenBitmaskRestrictsSampling) {
  Sampler s;
  constexpr int32_t n = 1000;
  for (uint64_t seed = 1; seed <= 10; ++seed) {
    auto logits = test::random_logits(n, seed);
    std::vector<uint32_t> mask((n + 31) / 32, 0);
    Rng pick(seed * 77);
    std::vector<int32_t> allowed;
    for (int k = 0; k < 5; ++k) {
      const int32_t id = static_cast<int32_t>(pick.next_u64() % n);
      mask[id / 32] |= 1u << (id % 32);
      allowed.push_back(id);
    }
    SamplingParams greedy;
    greedy.temperature = 0.0f;
    greedy.logprobs = 0;
    SampleOutput out;
    Rng rng(seed);
    ASSERT_TRUE(s.sample(logits, greedy, nullptr, {}, rng, &out, mask).is_ok());
    int32_t best = allowed[0];
    for (int32_t id : allowed)
      if (logits[id] > logits[best] || (logits[id] == logits[best] && id < best)) best = id;
    EXPECT_EQ(out.token, best);
    // Raw logprob: log_softmax over all n logits, not over the allowed ones.
    double z = 0;
    const float mx = *std::max_element(logits.begin(), logits.end());
    for (float l : logits) z += std::exp(static_cast<double>(l - mx));
    EXPECT_NEAR(out.logprobs.logprob, logits[best] - mx - std::log(z), 1e-4);

    SamplingParams random;
    random.temperature = 1.5f;
    for (int i = 0; i < 200; ++i) {
      ASSERT_TRUE(s.sample(logits, random, nullptr, {}, rng, &out, mask).is_ok());
      EXPECT_NE(std::find(allowed.begin(), allowed.end(), out.token), allowed.end());
    }
  }
  // Nothing allowed: an error, not a token.
  auto logits = test::random_logits(n, 3);
  std::vector<uint32_t> none((n + 31) / 32, 0);
  SampleOutput out;
  Rng rng(1);
  SamplingParams p;
  EXPECT_FALSE(s.sample(logits, p, nullptr, {}, rng, &out, none).is_ok());
  // A mask shorter than the vocabulary is refused.
  std::vector<uint32_t> short_mask(3, ~0u);
  EXPECT_FALSE(s.sample(logits, p, nullptr, {}, rng, &out, short_mask).is_ok());
}

}  // namespace
}  // namespace loom
