// End-of-generation tokens stop a request without configuration: on synth's tiny-qwen3 model
// (random weights, Qwen3's real vocabulary) a logit bias forces the token, and the request ends
// with "stop", no stop reason, and none of the token's text. Qwen3's EOS is <|im_end|>;
// <|endoftext|> is a stop only through the end-of-generation rule (its text, control type).
#include <gtest/gtest.h>

#include "test_engine_util.h"

namespace loom {
namespace {

constexpr int32_t kEndOfText = 151643, kImStart = 151644, kImEnd = 151645;

class EndOfGenerationEngine : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    testing::TestModelOptions o;
    o.preset = "tiny-qwen3";
    bytes_ = testing::test_model_bytes(o);
  }
  static void TearDownTestSuite() { bytes_.reset(); }

  std::unique_ptr<Engine> engine() {
    EngineConfig c;
    c.max_num_seqs = 4;
    c.max_model_len = 256;
    c.n_threads = 1;
    return testing::make_engine(c, bytes_);
  }

  // Greedy, with `forced` pushed far above every other logit.
  static GenerateRequest forcing(const Tokenizer& tok, const std::string& id, int32_t forced) {
    GenerateRequest r;
    r.request_id = id;
    r.prompt = tok.encode("<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", false, true);
    r.params.temperature = 0.0f;
    r.params.max_tokens = 6;
    r.params.logit_bias = {{forced, 100.0f}};
    return r;
  }

  static inline std::shared_ptr<std::vector<uint8_t>> bytes_;
};

TEST_F(EndOfGenerationEngine, TurnTerminatorsStopWithoutTheirText) {
  auto e = engine();
  ASSERT_NE(e, nullptr);
  const Tokenizer& tok = *e->tokenizer();
  ASSERT_EQ(tok.find_token("<|endoftext|>"), kEndOfText);
  ASSERT_EQ(tok.eos(), kImEnd);
  for (int32_t stop : {kEndOfText, kImEnd}) {
    const std::string id = "r" + std::to_string(stop);
    ASSERT_TRUE(e->add_request(forcing(tok, id, stop)).is_ok());
    auto out = testing::run_all(*e).at(id);
    EXPECT_EQ(out.tokens.at(0), std::vector<int32_t>{stop});
    EXPECT_EQ(out.finish.at(0), FinishReason::kStop) << stop;
    EXPECT_EQ(out.stop_reason.at(0), "") << stop;  // an end of generation, not a stop_token_id
    EXPECT_EQ(out.text.at(0), "") << stop;
  }
  // <|im_start|> is a control token but no terminator: generation runs to max_tokens.
  ASSERT_TRUE(e->add_request(forcing(tok, "start", kImStart)).is_ok());
  auto out = testing::run_all(*e).at("start");
  EXPECT_EQ(out.tokens.at(0), std::vector<int32_t>(6, kImStart));
  EXPECT_EQ(out.finish.at(0), FinishReason::kLength);
  // ignore_eos turns every end-of-generation token into an ordinary one.
  GenerateRequest r = forcing(tok, "ignore", kEndOfText);
  r.params.ignore_eos = true;
  ASSERT_TRUE(e->add_request(r).is_ok());
  out = testing::run_all(*e).at("ignore");
  EXPECT_EQ(out.tokens.at(0), std::vector<int32_t>(6, kEndOfText));
  EXPECT_EQ(out.finish.at(0), FinishReason::kLength);
  EXPECT_EQ(e->check_kv_drained(), "");
}

TEST_F(EndOfGenerationEngine, MinTokensHoldsBackEveryTerminator) {
  // vLLM: before min_tokens outputs, no end-of-generation token may be sampled, <|endoftext|>
  // as much as the file's EOS.
  auto e = engine();
  ASSERT_NE(e, nullptr);
  GenerateRequest r = forcing(*e->tokenizer(), "min", kEndOfText);
  r.params.min_tokens = 3;
  ASSERT_TRUE(e->add_request(r).is_ok());
  auto out = testing::run_all(*e).at("min");
  const auto& toks = out.tokens.at(0);
  ASSERT_EQ(toks.size(), 4u);
  for (size_t i = 0; i < 3; ++i) EXPECT_FALSE(e->tokenizer()->is_eog(toks[i])) << i;
  EXPECT_EQ(toks[3], kEndOfText);
  EXPECT_EQ(out.finish.at(0), FinishReason::kStop);
  EXPECT_EQ(e->check_kv_drained(), "");
}

}  // namespace
}  // namespace loom
