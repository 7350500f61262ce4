// Pooling requests (embeddings and scores, PoolingParams): against transformers' logits
// (the last-token hidden state times the LM head), against the reference forward pass's
// hidden states (mean, CLS, last), batch invariance among generating requests with chunked
// prefill, scores equal to a generate-mode forward's logits, and the requests the engine
// refuses.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <nlohmann/json.hpp>

#include "format/safetensors.h"
#include "model/config_reader.h"
#include "reference/reference_model.h"
#include "test_engine_util.h"

namespace loom {
namespace {

using testing::make_engine;
using testing::random_prompt;
using testing::run_all;
using testing::test_model_bytes;

// One pooling request run to completion alone; its pooled vector.
std::vector<float> pool_alone(Engine& e, const std::vector<int32_t>& prompt, PoolingParams p) {
  GenerateRequest r;
  r.request_id = "alone";
  r.prompt = prompt;
  r.pooling = p;
  EXPECT_TRUE(e.add_request(r).is_ok());
  std::vector<float> out;
  while (e.has_unfinished()) {
    auto step = e.step();
    EXPECT_TRUE(step.is_ok());
    if (!step.is_ok()) break;
    for (RequestOutput& o : *step)
      if (o.finished) out = std::move(o.pooled);
  }
  EXPECT_EQ(e.check_kv_drained(), "");
  return out;
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += static_cast<double>(x) * x;
  return std::sqrt(s);
}

// transformers' qwen3 fixture: the un-normalised last-token embedding times the (tied) LM head
// read straight from the safetensors file is transformers' last-position logits row.
TEST(Pooling, LastTokenTimesLmHeadIsTransformersLogits) {
  const std::string dir = std::string(LOOM_TEST_DATA) + "/hf_reference/qwen3";
  EngineConfig ec;
  ec.n_threads = 1;
  ec.max_num_seqs = 4;
  ec.kv_dtype = Dtype::kF32;  // as transformers computed them
  auto engine = Engine::load(dir, ec);
  ASSERT_TRUE(engine.is_ok()) << engine.status().message();
  auto st = SafetensorsModel::open(dir);
  ASSERT_TRUE(st.is_ok()) << st.status().message();
  const TensorView* head = st->find("model.embed_tokens.weight");  // tied
  ASSERT_NE(head, nullptr);
  ASSERT_EQ(head->dtype, Dtype::kF32);
  const int64_t E = head->ne[0], V = head->ne[1];
  const float* w = static_cast<const float*>(head->data);

  std::ifstream in(dir + "/cases.json");
  const nlohmann::json cases = nlohmann::json::parse(in)["cases"];
  ASSERT_EQ(cases.size(), 3u);
  for (const auto& c : cases) {
    const std::vector<int32_t> tokens = c["tokens"].get<std::vector<int32_t>>();
    const int64_t T = static_cast<int64_t>(tokens.size());
    std::vector<float> hf(T * V);
    std::ifstream lf(dir + "/" + c["logits_file"].get<std::string>(), std::ios::binary);
    lf.read(reinterpret_cast<char*>(hf.data()), static_cast<std::streamsize>(hf.size() * 4));
    const float* last = &hf[(T - 1) * V];

    PoolingParams raw;
    raw.normalize = false;
    const std::vector<float> h = pool_alone(**engine, tokens, raw);
    ASSERT_EQ(static_cast<int64_t>(h.size()), E);
    double worst = 0, scale = 0;
    for (int64_t v = 0; v < V; ++v) {
      double dot = 0;
      for (int64_t k = 0; k < E; ++k) dot += static_cast<double>(h[k]) * w[v * E + k];
      worst = std::max(worst, std::abs(dot - last[v]));
      scale = std::max(scale, std::abs(static_cast<double>(last[v])));
    }
    std::printf(
        "  last-token embedding x LM head vs transformers: max abs err %.3g (max |logit| %.3g)\n",
        worst, scale);
    EXPECT_LT(worst / scale, 2e-5);

    // The default (normalised) embedding: unit norm, the same direction.
    const std::vector<float> unit = pool_alone(**engine, tokens, PoolingParams{});
    EXPECT_NEAR(norm(unit), 1.0, 1e-6);
    const double n = norm(h);
    for (int64_t k = 0; k < E; ++k) EXPECT_NEAR(unit[k], h[k] / n, 1e-6);
  }
}

// Mean, CLS and last pooling against the reference forward pass's final hidden states, with
// the prompt prefilled in chunks of 8 (mean sums across steps).
TEST(Pooling, MeanClsAndLastMatchReferenceHiddenStates) {
  auto bytes = test_model_bytes({});
  auto file = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(file.is_ok());
  auto cfg = config_from_gguf(*file);
  ASSERT_TRUE(cfg.is_ok());
  EngineConfig ec;
  ec.n_threads = 1;
  ec.max_num_batched_tokens = 8;
  ec.kv_dtype = Dtype::kF32;  // the reference keeps K/V in double
  auto engine = make_engine(ec, bytes);
  ASSERT_TRUE(engine);
  const ModelConfig& mc = engine->model().config();
  const std::vector<int32_t> prompt = random_prompt(37, 7, mc.n_vocab);
  std::vector<float> hidden;
  auto ref = reference::forward(mc, reference::gguf_lookup(*file), prompt, &hidden);
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  const int64_t E = mc.n_embd, T = static_cast<int64_t>(prompt.size());

  std::vector<double> mean(E, 0.0);
  for (int64_t t = 0; t < T; ++t)
    for (int64_t k = 0; k < E; ++k) mean[k] += hidden[t * E + k] / static_cast<double>(T);
  struct Case {
    PoolingParams::Mode mode;
    std::vector<double> want;
  };
  std::vector<Case> cases = {
      {PoolingParams::Mode::kMean, mean},
      {PoolingParams::Mode::kCls, std::vector<double>(hidden.begin(), hidden.begin() + E)},
      {PoolingParams::Mode::kLast, std::vector<double>(hidden.end() - E, hidden.end())}};
  for (const Case& c : cases) {
    PoolingParams p;
    p.mode = c.mode;
    p.normalize = false;
    const std::vector<float> got = pool_alone(*engine, prompt, p);
    ASSERT_EQ(static_cast<int64_t>(got.size()), E);
    double worst = 0, scale = 0;
    for (int64_t k = 0; k < E; ++k) {
      worst = std::max(worst, std::abs(got[k] - c.want[k]));
      scale = std::max(scale, std::abs(c.want[k]));
    }
    EXPECT_LT(worst / scale, 1e-4) << "mode " << static_cast<int>(c.mode);
  }
}

// An embedding is the same bits alone and in a batch of 8 requests mixed with generating ones,
// chunked differently (and a repeat is the same with a prefix-cache hit for last pooling).
TEST(Pooling, BatchInvariantAmongGeneratingRequests) {
  auto bytes = test_model_bytes({});
  for (PoolingParams::Mode mode :
       {PoolingParams::Mode::kLast, PoolingParams::Mode::kMean, PoolingParams::Mode::kCls}) {
    PoolingParams p;
    p.mode = mode;
    EngineConfig alone_cfg;
    alone_cfg.n_threads = 1;
    auto alone_engine = make_engine(alone_cfg, bytes);
    const int32_t V = alone_engine->model().config().n_vocab;
    const std::vector<int32_t> text = random_prompt(45, 11, V);
    const std::vector<float> alone = pool_alone(*alone_engine, text, p);

    EngineConfig ec;
    ec.n_threads = 1;
    ec.max_num_batched_tokens = 24;  // prompts split across steps, differently from alone
    ec.shared_prefill_tokens = 0;
    auto engine = make_engine(ec, bytes);
    for (int i = 0; i < 8; ++i) {
      GenerateRequest r;
      r.request_id = "r" + std::to_string(i);
      r.prompt = i == 5 ? text : random_prompt(10 + 7 * i, 100 + i, V);
      if (i % 2 == 1) {
        r.pooling = p;
      } else {
        r.params.max_tokens = 6;
        r.params.temperature = 0;
      }
      ASSERT_TRUE(engine->add_request(r).is_ok());
    }
    std::vector<float> batched;
    std::map<std::string, bool> finished;
    while (engine->has_unfinished()) {
      auto step = engine->step();
      ASSERT_TRUE(step.is_ok());
      for (RequestOutput& o : *step) {
        if (!o.finished) continue;
        finished[o.request_id] = true;
        if (o.request_id == "r5") batched = o.pooled;
      }
    }
    EXPECT_EQ(finished.size(), 8u);
    EXPECT_EQ(batched, alone) << "mode " << static_cast<int>(mode);
    EXPECT_EQ(engine->check_kv_drained(), "");
    // Again on the same engine: last pooling may now hit the prefix cache, mean and CLS
    // recompute everything; the bits are the same either way.
    EXPECT_EQ(pool_alone(*engine, text, p), alone) << "mode " << static_cast<int>(mode);
  }
}

// Scores from LM-head logits (a Qwen3-Reranker as a causal LM) are exactly the logits a
// generating request's last prompt position gets.
TEST(Pooling, LogitScoresAreTheGenerateLogits) {
  auto bytes = test_model_bytes({});
  EngineConfig ec;
  ec.n_threads = 1;
  auto engine = make_engine(ec, bytes);
  const int32_t V = engine->model().config().n_vocab;
  const std::vector<int32_t> prompt = random_prompt(21, 3, V);
  PoolingParams p;
  p.logit_tokens = {17, 400, 3};
  const std::vector<float> scores = pool_alone(*engine, prompt, p);
  engine->keep_logits(true);
  GenerateRequest g;
  g.request_id = "gen";
  g.prompt = prompt;
  g.params.max_tokens = 1;
  ASSERT_TRUE(engine->add_request(g).is_ok());
  auto got = run_all(*engine);
  ASSERT_EQ(got["gen"].logits.size(), 1u);
  const std::vector<float>& row = got["gen"].logits[0];
  ASSERT_EQ(scores.size(), 3u);
  for (size_t j = 0; j < 3; ++j) EXPECT_EQ(scores[j], row[p.logit_tokens[j]]);
}

// A reranker as llama.cpp converts one (synth tiny-qwen3-rerank: pooling_type rank,
// cls.output = the tied LM head's "yes" and "no" rows): the classifier's outputs are the
// generate-mode logits of those tokens, so its softmax is sigmoid(yes - no) of a plain forward.
TEST(Pooling, ClassifierHeadIsTheYesNoLogits) {
  auto bytes = test_model_bytes({.preset = "tiny-qwen3-rerank", .arch = "qwen3"});
  EngineConfig ec;
  ec.n_threads = 1;
  auto engine = make_engine(ec, bytes);
  ASSERT_TRUE(engine);
  const ModelConfig& mc = engine->model().config();
  EXPECT_EQ(mc.pooling, PoolingType::kRank);
  ASSERT_EQ(mc.n_cls_out, 2);
  EXPECT_EQ(mc.classifier_labels, (std::vector<std::string>{"yes", "no"}));
  EXPECT_NE(mc.rerank_template.find("{document}"), std::string::npos);
  const Tokenizer* tok = engine->tokenizer();
  ASSERT_NE(tok, nullptr);
  const int32_t yes = *tok->find_token("yes"), no = *tok->find_token("no");
  const std::vector<int32_t> prompt = tok->encode("<Query>: sky\n<Document>: blue", false, true);
  PoolingParams p;
  p.classify = true;
  const std::vector<float> head = pool_alone(*engine, prompt, p);
  ASSERT_EQ(head.size(), 2u);
  engine->keep_logits(true);
  GenerateRequest g;
  g.request_id = "gen";
  g.prompt = prompt;
  g.params.max_tokens = 1;
  ASSERT_TRUE(engine->add_request(g).is_ok());
  auto got = run_all(*engine);
  const std::vector<float>& row = got["gen"].logits.at(0);
  EXPECT_NEAR(head[0], row[yes], 1e-5);
  EXPECT_NEAR(head[1], row[no], 1e-5);
  const double from_head = 1 / (1 + std::exp(head[1] - head[0]));
  const double from_logits = 1 / (1 + std::exp(static_cast<double>(row[no]) - row[yes]));
  EXPECT_NEAR(from_head, from_logits, 1e-6);
}

TEST(Pooling, RefusesWhatItCannotDo) {
  auto bytes = test_model_bytes({});
  EngineConfig ec;
  ec.n_threads = 1;
  ec.max_model_len = 64;
  auto engine = make_engine(ec, bytes);
  auto refused = [&](PoolingParams p, int32_t len, const char* says) {
    GenerateRequest r;
    r.request_id = "x";
    r.prompt = random_prompt(len, 1, 512);
    r.pooling = p;
    Status st = engine->add_request(r);
    EXPECT_FALSE(st.is_ok()) << says;
    EXPECT_NE(st.message().find(says), std::string::npos) << st.message();
  };
  PoolingParams head;
  head.classify = true;
  refused(head, 4, "classifier head");
  PoolingParams bad_token;
  bad_token.logit_tokens = {512};
  refused(bad_token, 4, "outside the vocabulary");
  PoolingParams mean_score;
  mean_score.mode = PoolingParams::Mode::kMean;
  mean_score.logit_tokens = {1};
  refused(mean_score, 4, "must be last");
  refused(PoolingParams{}, 65, "max_model_len");
  // 64 tokens fit (a pooling request generates nothing).
  GenerateRequest ok;
  ok.request_id = "ok";
  ok.prompt = random_prompt(64, 2, 512);
  ok.pooling = PoolingParams{};
  EXPECT_TRUE(engine->add_request(ok).is_ok());
  run_all(*engine);
}

}  // namespace
}  // namespace loom
