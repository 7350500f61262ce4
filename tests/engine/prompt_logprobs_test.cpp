// Prompt logprobs (SamplingParams::prompt_logprobs): each prompt token's logprob given the
// tokens before it. The reference is the engine's own sampling row: a request whose prompt is
// the first p + 1 tokens computes, in its first sampled row, the distribution prompt entry p
// describes (the same logits, as batch-invariant kernels give them whatever the step holds);
// allowed to sample only prompt token p + 1, it reports that token's raw logprob and rank.
#include <gtest/gtest.h>

#include <random>

#include "engine/test_engine_util.h"

namespace loom {
namespace {

using testing::make_engine;
using testing::random_prompt;
using testing::test_model_bytes;

constexpr int32_t kVocab = 512;  // synth tiny's
constexpr int32_t kTop = 3;

EngineConfig config() {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.max_model_len = 400;
  c.max_num_batched_tokens = 512;
  c.n_threads = 1;
  c.kv_dtype = Dtype::kF32;
  return c;
}

// Runs the requests to the end: every output's prompt_logprobs (by request id, each appended
// in order, so a second delivery would show) and the first generated token's logprobs.
struct Got {
  std::vector<PositionLogprobs> prompt;
  int prompt_deliveries = 0;
  PositionLogprobs first;
};
std::map<std::string, Got> run(Engine& e, const std::vector<GenerateRequest>& rs) {
  for (const GenerateRequest& r : rs) EXPECT_TRUE(e.add_request(r).is_ok());
  std::map<std::string, Got> got;
  while (e.has_unfinished()) {
    auto out = e.step();
    EXPECT_TRUE(out.is_ok()) << out.status().message();
    if (!out.is_ok()) break;
    for (RequestOutput& o : *out) {
      Got& g = got[o.request_id];
      if (!o.prompt_logprobs.empty()) {
        ++g.prompt_deliveries;
        g.prompt.insert(g.prompt.end(), o.prompt_logprobs.begin(), o.prompt_logprobs.end());
      }
      for (const CompletionOutput& c : o.outputs)
        if (c.index == 0 && g.first.token < 0 && !c.logprobs.empty()) g.first = c.logprobs[0];
    }
  }
  EXPECT_EQ(e.check_kv_drained(), "");
  return got;
}

GenerateRequest request(std::string id, std::vector<int32_t> prompt, int32_t prompt_logprobs) {
  GenerateRequest r;
  r.request_id = std::move(id);
  r.prompt = std::move(prompt);
  r.params.max_tokens = 2;
  r.params.temperature = 0.0f;
  r.params.ignore_eos = true;
  r.params.logprobs = kTop;
  r.params.prompt_logprobs = prompt_logprobs;
  return r;
}

void expect_same(const PositionLogprobs& got, const PositionLogprobs& want, int32_t token,
                 size_t at) {
  EXPECT_EQ(got.token, token) << at;
  EXPECT_EQ(want.token, token) << at;  // the reference sampled the prompt token
  EXPECT_EQ(got.logprob, want.logprob) << at;
  EXPECT_EQ(got.rank, want.rank) << at;
  ASSERT_EQ(got.top.size(), want.top.size()) << at;
  for (size_t k = 0; k < want.top.size(); ++k) {
    EXPECT_EQ(got.top[k].token, want.top[k].token) << at << " top " << k;
    EXPECT_EQ(got.top[k].logprob, want.top[k].logprob) << at << " top " << k;
  }
  EXPECT_LT(got.logprob, 0.0f);
  EXPECT_GE(got.rank, 1);
}

TEST(PromptLogprobs, EachTokenGivenThoseBeforeItOverChunksCacheAndSamples) {
  const auto bytes = test_model_bytes({});
  // 300 tokens: two chunks of at most 256 prompt-logprob rows. Tokens repeat from a small
  // range so that some prompt tokens are among the top ones.
  std::vector<int32_t> prompt = random_prompt(300, 11, 24);
  auto e = make_engine(config(), bytes);
  std::vector<GenerateRequest> rs = {request("p", prompt, kTop)};
  rs.push_back(request("n2", prompt, kTop));
  rs.back().params.n = 2;
  rs.back().params.temperature = 0.7f;
  rs.back().params.seed = 3;
  auto got = run(*e, rs);
  const Got& p = got["p"];
  ASSERT_EQ(p.prompt.size(), prompt.size() - 1);
  EXPECT_EQ(p.prompt_deliveries, 1);
  // n = 2: once for the request, the same values.
  EXPECT_EQ(got["n2"].prompt_deliveries, 1);
  ASSERT_EQ(got["n2"].prompt.size(), p.prompt.size());
  for (size_t i = 0; i < p.prompt.size(); ++i)
    EXPECT_EQ(got["n2"].prompt[i].logprob, p.prompt[i].logprob) << i;

  // Against the sampling row of each prefix (a spread of positions, both chunks).
  std::vector<GenerateRequest> prefixes;
  const std::vector<size_t> at = {0, 1, 2, 7, 100, 254, 255, 256, 257, 298};
  for (size_t a : at) {
    prefixes.push_back(request("q" + std::to_string(a),
                               std::vector<int32_t>(prompt.begin(), prompt.begin() + a + 1), -1));
    prefixes.back().params.allowed_token_ids = {prompt[a + 1]};
  }
  auto ref = run(*make_engine(config(), bytes), prefixes);
  for (size_t a : at) {
    const Got& q = ref["q" + std::to_string(a)];
    ASSERT_GE(q.first.token, 0) << a;
    expect_same(p.prompt[a], q.first, prompt[a + 1], a);
  }

  // Again on the same engine: the prompt is in the prefix cache now, and still every position
  // is computed and scored; a request without prompt logprobs gets none.
  auto again = run(*e, {request("p2", prompt, 0), request("none", prompt, -1)});
  ASSERT_EQ(again["p2"].prompt.size(), prompt.size() - 1);
  for (size_t i = 0; i < p.prompt.size(); ++i) {
    EXPECT_EQ(again["p2"].prompt[i].logprob, p.prompt[i].logprob) << i;
    EXPECT_TRUE(again["p2"].prompt[i].top.empty());
  }
  EXPECT_EQ(again["none"].prompt_deliveries, 0);
  // A one-token prompt has no entries.
  auto one = run(*e, {request("one", {prompt[0]}, kTop)});
  EXPECT_EQ(one["one"].prompt_deliveries, 0);
}

}  // namespace
}  // namespace loom
