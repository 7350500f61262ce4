// Speculative sampling through the whole engine keeps the target's distribution: synth's tiny
// model verifies proposals that another model with its vocabulary (tiny-moe) draws from its
// own distribution, and the tokens generated are distributed as plain decoding's. The test is
// a two-sample chi-square over many seeded requests (the engine told to verify seeded ones
// with the rule too, as it does unseeded ones), on a vocabulary cut to 6 tokens by
// allowed_token_ids (which both models' distributions then share); it is shown to have the
// power to fail: the engine given a broken acceptance rule (always keep the proposal; replace
// a rejected one from p instead of (p - q)+; keep with min(1, q/p)) fails it. Without the
// test's say-so, requests without a seed are verified this way and seeded ones as point
// masses: the target as its own draft keeps every proposal of the first, not of the second.
#include <gtest/gtest.h>

#include <map>

#include "engine/engine_core.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::test_model_bytes;

constexpr int kRequests = 3000;  // per run
constexpr int kOutput = 5;       // tokens per request: one sampled after the prompt, then
                                 // verifies of up to 3 proposals
const std::vector<int32_t> kAllowed = {3, 41, 97, 150, 260, 333};
// Chi-square with 5 degrees of freedom: P(X > 20.5) ~ 0.001 (each of 4 positions tested).
constexpr double kCritical = 20.5;

// A small engine on one thread with F32 K/V; with `self_draft`, the test model (synth:tiny)
// as its own draft, proposing 4 tokens at every verify.
EngineConfig small_config(int32_t max_seqs, int32_t max_model_len, bool self_draft) {
  EngineConfig c;
  c.block_size = 4;
  c.max_num_seqs = max_seqs;
  c.max_model_len = max_model_len;
  c.n_threads = 1;
  c.kv_dtype = Dtype::kF32;
  if (self_draft) {
    c.speculative.method = SpeculativeConfig::Method::kDraftModel;
    c.speculative.model = "synth:tiny";
    c.speculative.num_speculative_tokens = 4;
    c.speculative.always_propose = true;
  }
  return c;
}

class SpeculativeSampling : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    bytes_ = test_model_bytes({.preset = "tiny"});
    mla_bytes_ = test_model_bytes({.preset = "tiny-mla"});
  }
  static void TearDownTestSuite() {
    bytes_.reset();
    mla_bytes_.reset();
  }

  enum class Proposer { kNone, kDraftModel, kMtp };

  // counts[j][t]: how many requests generated allowed token t as their output token j.
  using Counts = std::vector<std::map<int32_t, int64_t>>;

  // kRequests seeded requests (seeds from seed0) on one engine, verified with `rule`: synth's
  // tiny with tiny-moe as its draft (or no proposer), or tiny-mla with its MTP module.
  static Counts run(Proposer proposer, uint64_t seed0,
                    spec::AcceptanceRule rule = spec::verify_draft_token, bool mla = false) {
    const bool speculate = proposer != Proposer::kNone;
    EngineConfig c = small_config(64, 64, false);
    c.max_num_batched_tokens = 512;
    if (proposer == Proposer::kDraftModel) {
      c.speculative.method = SpeculativeConfig::Method::kDraftModel;
      c.speculative.model = "synth:tiny-moe";
    } else if (proposer == Proposer::kMtp) {
      c.speculative.method = SpeculativeConfig::Method::kMtp;
    }
    c.speculative.num_speculative_tokens = speculate ? 3 : 0;
    c.speculative.always_propose = true;  // a proposal at every verify, whatever is kept
    auto file = GgufFile::parse_bytes(mla || proposer == Proposer::kMtp ? mla_bytes_ : bytes_);
    EXPECT_TRUE(file.is_ok());
    auto model = Model::from_gguf(std::move(*file), {});
    EXPECT_TRUE(model.is_ok());
    auto core = EngineCore::create(std::move(*model), nullptr, c);
    EXPECT_TRUE(core.is_ok()) << core.status().message();
    if (!core.is_ok()) return {};
    EngineCore& e = **core;
    e.set_acceptance_rule(rule);
    const std::vector<int32_t> prompt = testing::random_prompt(8, 77, 512);
    for (int i = 0; i < kRequests; ++i) {
      GenerateRequest r;
      r.request_id = "r" + std::to_string(i);
      r.prompt = prompt;
      r.params.max_tokens = kOutput;
      r.params.temperature = 0.1f;
      r.params.allowed_token_ids = kAllowed;
      r.params.ignore_eos = true;
      r.params.seed = seed0 + i;
      EXPECT_TRUE(e.add_request(std::move(r)).is_ok());
    }
    Counts counts(kOutput);
    std::map<std::string, int> emitted;
    while (e.has_unfinished()) {
      auto out = e.step();
      EXPECT_TRUE(out.is_ok()) << out.status().message();
      if (!out.is_ok()) break;
      for (const RequestOutput& o : *out)
        for (const CompletionOutput& co : o.outputs)
          for (const int32_t t : co.token_ids) ++counts[emitted[o.request_id]++][t];
    }
    const EngineMetrics m = e.metrics();
    if (speculate) {
      EXPECT_GE(m.spec_num_drafts, kRequests);  // every request verified proposals
      proposed_ = m.spec_num_draft_tokens;
      accepted_ = m.spec_num_accepted_tokens;
    }
    EXPECT_EQ(e.check_kv_drained(), "");
    return counts;
  }

  // Two-sample chi-square of output position j (equal sample sizes).
  static double chi_square(const Counts& a, const Counts& b, int j) {
    double chi = 0;
    for (const int32_t t : kAllowed) {
      const double x = a[j].count(t) ? a[j].at(t) : 0, y = b[j].count(t) ? b[j].at(t) : 0;
      if (x + y > 0) chi += (x - y) * (x - y) / (x + y);
    }
    return chi;
  }
  // The largest statistic over the verified positions (1..4; position 0 is never proposed).
  static double worst(const Counts& a, const Counts& b) {
    double w = 0;
    for (int j = 1; j < kOutput; ++j) w = std::max(w, chi_square(a, b, j));
    return w;
  }

  static std::shared_ptr<std::vector<uint8_t>> bytes_, mla_bytes_;
  static int64_t proposed_, accepted_;
};
std::shared_ptr<std::vector<uint8_t>> SpeculativeSampling::bytes_;
std::shared_ptr<std::vector<uint8_t>> SpeculativeSampling::mla_bytes_;
int64_t SpeculativeSampling::proposed_ = 0;
int64_t SpeculativeSampling::accepted_ = 0;

// A token from weights w (non-negative), by inverse CDF.
int32_t draw(const std::vector<double>& w, Rng& rng) {
  double total = 0;
  for (const double x : w) total += x;
  double u = rng.uniform() * total;
  int32_t last = -1;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!(w[i] > 0)) continue;
    last = static_cast<int32_t>(i);
    if (u < w[i]) break;
    u -= w[i];
  }
  return last;
}
std::vector<double> residual(std::span<const float> p, std::span<const float> q) {
  std::vector<double> w(p.size());
  for (size_t i = 0; i < p.size(); ++i) w[i] = std::max(0.0, double{p[i]} - double{q[i]});
  return w;
}

spec::Verdict always_keep(std::span<const float>, std::span<const float>, int32_t d, Rng&) {
  return {true, d};
}
// The rule with a rejected proposal replaced from p itself, not (p - q)+.
spec::Verdict replace_from_p(std::span<const float> p, std::span<const float> q, int32_t d,
                             Rng& rng) {
  if (rng.uniform() * q[d] < p[d]) return {true, d};
  return {false, draw(std::vector<double>(p.begin(), p.end()), rng)};
}
// Keeps with min(1, q/p): the ratio upside down.
spec::Verdict ratio_inverted(std::span<const float> p, std::span<const float> q, int32_t d,
                             Rng& rng) {
  if (rng.uniform() * p[d] < q[d]) return {true, d};
  const int32_t t = draw(residual(p, q), rng);
  return {false, t >= 0 ? t : d};
}

TEST_F(SpeculativeSampling, DraftProposalsKeepTheTargetDistribution) {
  const Counts plain = run(Proposer::kNone, 1'000'000);
  const Counts plain2 = run(Proposer::kNone, 2'000'000);
  const Counts spec = run(Proposer::kDraftModel, 3'000'000);
  // The draft is another model: its proposals are often rejected, the rule's replacement
  // carries the distribution there.
  EXPECT_GT(accepted_, proposed_ / 10);
  EXPECT_LT(accepted_, proposed_ * 9 / 10);
  const double chi_plain = worst(plain, plain2), chi_spec = worst(plain, spec);
  std::printf(
      "chi-square, worst of 4 positions: plain vs plain %.1f, speculative %.1f "
      "(critical %.1f); kept %lld of %lld proposals\n",
      chi_plain, chi_spec, kCritical, static_cast<long long>(accepted_),
      static_cast<long long>(proposed_));
  EXPECT_LT(chi_plain, kCritical);
  EXPECT_LT(chi_spec, kCritical);
}

// The same with tiny-mla's MTP module proposing (its first proposal drawn when the module
// observes the target's step, the next ones chained in the verify's slots).
TEST_F(SpeculativeSampling, MtpProposalsKeepTheTargetDistribution) {
  const Counts plain = run(Proposer::kNone, 1'000'000, spec::verify_draft_token, true);
  const Counts spec = run(Proposer::kMtp, 3'000'000);
  EXPECT_GT(accepted_, proposed_ / 20);
  EXPECT_LT(accepted_, proposed_ * 9 / 10);
  const double chi = worst(plain, spec);
  std::printf("MTP: chi-square %.1f (critical %.1f); kept %lld of %lld proposals\n", chi, kCritical,
              static_cast<long long>(accepted_), static_cast<long long>(proposed_));
  EXPECT_LT(chi, kCritical);
  const double broken = worst(plain, run(Proposer::kMtp, 3'000'000, &always_keep));
  std::printf("MTP, always keep: chi-square %.1f\n", broken);
  EXPECT_GT(broken, kCritical);
}

TEST_F(SpeculativeSampling, BrokenAcceptanceRulesFail) {
  const Counts plain = run(Proposer::kNone, 1'000'000);
  for (const auto& [name, rule] :
       {std::pair{"always keep", &always_keep}, std::pair{"replace from p", &replace_from_p},
        std::pair{"min(1, q/p)", &ratio_inverted}}) {
    const double chi = worst(plain, run(Proposer::kDraftModel, 3'000'000, rule));
    std::printf("%s: chi-square %.1f\n", name, chi);
    EXPECT_GT(chi, kCritical) << name;
  }
}

// The target as its own draft (synth:tiny is the test model's bytes; its single-token logits
// are the verify rows' bit for bit, so q = p): sampling requests without a seed keep every
// proposal, seeded ones (point masses, kept with probability p(d)) fewer.
TEST_F(SpeculativeSampling, UnseededRequestsVerifyTheDraftsDistribution) {
  for (const bool seeded : {false, true}) {
    const EngineConfig c = small_config(8, 128, true);
    std::vector<GenerateRequest> rs;
    for (int i = 0; i < 8; ++i) {
      GenerateRequest r;
      r.request_id = "r" + std::to_string(i);
      r.prompt = testing::random_prompt(10, 900 + i, 512);
      r.params.max_tokens = 40;
      r.params.temperature = 0.9f;
      r.params.ignore_eos = true;
      if (seeded) r.params.seed = 5 + i;
      rs.push_back(r);
    }
    EngineMetrics m;
    const auto out = testing::run_requests(c, bytes_, rs, &m);
    for (const GenerateRequest& r : rs) {
      ASSERT_TRUE(out.count(r.request_id)) << r.request_id;
      EXPECT_EQ(out.at(r.request_id).tokens.at(0).size(), 40u) << r.request_id;
    }
    EXPECT_GT(m.spec_num_draft_tokens, 8 * 4) << seeded;
    if (seeded) {
      EXPECT_LT(m.spec_num_accepted_tokens, m.spec_num_draft_tokens * 3 / 4);
    } else {
      EXPECT_EQ(m.spec_num_accepted_tokens, m.spec_num_draft_tokens);
    }
  }
}

// Everything a request produced: tokens, and per token its logprob and top logprobs.
struct Produced {
  std::vector<int32_t> tokens;
  std::vector<float> logprobs;
  std::vector<std::vector<TokenLogprob>> tops;
};

// The rule's path with q = p (the target as its own draft, seeded requests verified by the rule
// as unseeded ones are): each proposal is drawn as plain decoding draws that token, so the
// tokens, their logprobs and top logprobs are plain decoding's, with top-p, several sequences
// and a request aborted between verifies (which frees its blocks). (A penalty the draft does
// not see would make p != q: other tokens, distributed as plain decoding's.)
TEST_F(SpeculativeSampling, SelfDraftUnderTheRuleIsPlainDecodingLogprobsIncluded) {
  auto run_engine = [&](bool speculate) {
    const EngineConfig c = small_config(8, 128, speculate);
    auto file = GgufFile::parse_bytes(bytes_);
    auto model = Model::from_gguf(std::move(*file), {});
    auto core = EngineCore::create(std::move(*model), nullptr, c);
    EXPECT_TRUE(core.is_ok()) << core.status().message();
    EngineCore& e = **core;
    e.set_acceptance_rule(spec::verify_draft_token);
    for (int i = 0; i < 6; ++i) {
      GenerateRequest r;
      r.request_id = "r" + std::to_string(i);
      r.prompt = testing::random_prompt(10, 700 + i, 512);
      r.params.max_tokens = 40;
      r.params.temperature = 0.8f;
      r.params.top_p = i % 2 ? 0.9f : 1.0f;
      r.params.logprobs = 2;
      r.params.ignore_eos = true;
      r.params.seed = 40 + i;
      EXPECT_TRUE(e.add_request(std::move(r)).is_ok());
    }
    std::map<std::string, Produced> out;
    int steps = 0;
    while (e.has_unfinished()) {
      auto step = e.step();
      EXPECT_TRUE(step.is_ok()) << step.status().message();
      if (!step.is_ok()) break;
      if (++steps == 6) e.abort("r5");  // after a few verifies
      for (const RequestOutput& o : *step)
        for (const CompletionOutput& co : o.outputs) {
          Produced& p = out[o.request_id];
          p.tokens.insert(p.tokens.end(), co.token_ids.begin(), co.token_ids.end());
          for (const PositionLogprobs& lp : co.logprobs) {
            p.logprobs.push_back(lp.logprob);
            p.tops.push_back(lp.top);
          }
        }
    }
    EXPECT_EQ(e.check_kv_drained(), "");
    const EngineMetrics m = e.metrics();
    if (speculate) {
      EXPECT_GT(m.spec_num_drafts, 10);
      EXPECT_EQ(m.spec_num_accepted_tokens, m.spec_num_draft_tokens);
    }
    return out;
  };
  const auto plain = run_engine(false), spec = run_engine(true);
  for (int i = 0; i < 5; ++i) {
    const std::string id = "r" + std::to_string(i);
    ASSERT_EQ(spec.at(id).tokens, plain.at(id).tokens) << id;
    EXPECT_EQ(spec.at(id).tokens.size(), 40u);
    ASSERT_EQ(spec.at(id).logprobs.size(), 40u) << id;
    EXPECT_EQ(spec.at(id).logprobs, plain.at(id).logprobs) << id;
    for (size_t t = 0; t < 40; ++t) {
      ASSERT_EQ(spec.at(id).tops[t].size(), 2u);
      for (int k = 0; k < 2; ++k) {
        EXPECT_EQ(spec.at(id).tops[t][k].token, plain.at(id).tops[t][k].token) << id << " " << t;
        EXPECT_EQ(spec.at(id).tops[t][k].logprob, plain.at(id).tops[t][k].logprob);
      }
    }
  }
  EXPECT_LT(spec.at("r5").tokens.size(), 40u);  // aborted
}

}  // namespace
}  // namespace loom
