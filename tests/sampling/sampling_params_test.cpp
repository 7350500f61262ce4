// SamplingParams::validate: every field, accepted boundary values and rejected values with the
// message naming the field, the range and the value received.
#include "sampling/sampling_params.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>

namespace loom {
namespace {

constexpr int32_t kVocab = 1000;
const float kNaN = std::numeric_limits<float>::quiet_NaN();
const float kInf = std::numeric_limits<float>::infinity();

struct Case {
  const char* label;
  std::function<void(SamplingParams&)> set;
  const char* expect;  // substring of the error message; nullptr = must be accepted
};

void run_cases(const std::vector<Case>& cases, int32_t vocab = kVocab) {
  for (const Case& c : cases) {
    SamplingParams p;
    c.set(p);
    Status st = p.validate(vocab);
    if (c.expect == nullptr) {
      EXPECT_TRUE(st.is_ok()) << c.label << ": " << st.message();
    } else {
      EXPECT_FALSE(st.is_ok()) << c.label << " was accepted";
      EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << c.label;
      EXPECT_NE(st.message().find(c.expect), std::string::npos)
          << c.label << ": message \"" << st.message() << "\" lacks \"" << c.expect << "\"";
    }
  }
}

TEST(SamplingParams, DefaultsMatchVllm) {
  SamplingParams p;
  EXPECT_TRUE(p.validate(kVocab).is_ok());
  EXPECT_EQ(p.temperature, 1.0f);
  EXPECT_EQ(p.top_k, 0);
  EXPECT_EQ(p.top_p, 1.0f);
  EXPECT_EQ(p.min_p, 0.0f);
  EXPECT_EQ(p.repetition_penalty, 1.0f);
  EXPECT_EQ(p.n, 1);
  EXPECT_EQ(p.max_tokens, 16);
  EXPECT_EQ(p.logprobs, -1);
  EXPECT_FALSE(p.seed.has_value());
  EXPECT_FALSE(p.is_greedy());
  EXPECT_FALSE(p.has_penalties());
}

TEST(SamplingParams, GreedyAndPenaltyFlags) {
  SamplingParams p;
  p.temperature = 0.0f;
  EXPECT_TRUE(p.is_greedy());
  p.temperature = 1e-6f;
  EXPECT_TRUE(p.is_greedy());
  p.temperature = 0.01f;
  EXPECT_FALSE(p.is_greedy());
  p.presence_penalty = 0.1f;
  EXPECT_TRUE(p.has_penalties());
  p = {};
  p.frequency_penalty = -0.1f;
  EXPECT_TRUE(p.has_penalties());
  p = {};
  p.repetition_penalty = 1.1f;
  EXPECT_TRUE(p.has_penalties());
}

TEST(SamplingParams, SamplingFields) {
  run_cases({
      {"temperature 0", [](auto& p) { p.temperature = 0.0f; }, nullptr},
      {"temperature 2.5", [](auto& p) { p.temperature = 2.5f; }, nullptr},
      {"temperature -0.5", [](auto& p) { p.temperature = -0.5f; },
       "temperature must be a finite number >= 0 (0 means greedy), got -0.5"},
      {"temperature nan", [](auto& p) { p.temperature = kNaN; }, "temperature"},
      {"temperature inf", [](auto& p) { p.temperature = kInf; }, "temperature"},
      {"top_k -1", [](auto& p) { p.top_k = -1; }, nullptr},
      {"top_k 0", [](auto& p) { p.top_k = 0; }, nullptr},
      {"top_k 1", [](auto& p) { p.top_k = 1; }, nullptr},
      {"top_k > vocab", [](auto& p) { p.top_k = kVocab + 5; }, nullptr},
      {"top_k -2", [](auto& p) { p.top_k = -2; }, "top_k must be -1 or 0 (disabled) or >= 1, got -2"},
      {"top_p 1", [](auto& p) { p.top_p = 1.0f; }, nullptr},
      {"top_p tiny", [](auto& p) { p.top_p = 1e-6f; }, nullptr},
      {"top_p 0", [](auto& p) { p.top_p = 0.0f; }, "top_p must be in (0, 1], got 0"},
      {"top_p 1.5", [](auto& p) { p.top_p = 1.5f; }, "top_p must be in (0, 1], got 1.5"},
      {"top_p -0.1", [](auto& p) { p.top_p = -0.1f; }, "top_p must be in (0, 1]"},
      {"top_p nan", [](auto& p) { p.top_p = kNaN; }, "top_p must be in (0, 1], got nan"},
      {"min_p 0", [](auto& p) { p.min_p = 0.0f; }, nullptr},
      {"min_p 1", [](auto& p) { p.min_p = 1.0f; }, nullptr},
      {"min_p -0.01", [](auto& p) { p.min_p = -0.01f; }, "min_p must be in [0, 1], got -0.01"},
      {"min_p 1.5", [](auto& p) { p.min_p = 1.5f; }, "min_p must be in [0, 1], got 1.5"},
      {"min_p nan", [](auto& p) { p.min_p = kNaN; }, "min_p"},
  });
}

TEST(SamplingParams, PenaltyFields) {
  run_cases({
      {"rep 0.01", [](auto& p) { p.repetition_penalty = 0.01f; }, nullptr},
      {"rep 5", [](auto& p) { p.repetition_penalty = 5.0f; }, nullptr},
      {"rep 0", [](auto& p) { p.repetition_penalty = 0.0f; },
       "repetition_penalty must be a finite number > 0 (1 = off), got 0"},
      {"rep -1", [](auto& p) { p.repetition_penalty = -1.0f; }, "repetition_penalty"},
      {"rep inf", [](auto& p) { p.repetition_penalty = kInf; }, "repetition_penalty"},
      {"presence 2", [](auto& p) { p.presence_penalty = 2.0f; }, nullptr},
      {"presence -2", [](auto& p) { p.presence_penalty = -2.0f; }, nullptr},
      {"presence 2.5", [](auto& p) { p.presence_penalty = 2.5f; },
       "presence_penalty must be in [-2, 2], got 2.5"},
      {"presence -2.5", [](auto& p) { p.presence_penalty = -2.5f; }, "presence_penalty"},
      {"presence nan", [](auto& p) { p.presence_penalty = kNaN; }, "presence_penalty"},
      {"frequency 2", [](auto& p) { p.frequency_penalty = 2.0f; }, nullptr},
      {"frequency -2", [](auto& p) { p.frequency_penalty = -2.0f; }, nullptr},
      {"frequency 3", [](auto& p) { p.frequency_penalty = 3.0f; },
       "frequency_penalty must be in [-2, 2], got 3"},
      {"frequency -2.01", [](auto& p) { p.frequency_penalty = -2.01f; }, "frequency_penalty"},
  });
}

TEST(SamplingParams, TokenIdFields) {
  run_cases({
      {"bias edges", [](auto& p) { p.logit_bias = {{0, 100.0f}, {kVocab - 1, -100.0f}}; }, nullptr},
      {"bias id -1", [](auto& p) { p.logit_bias = {{-1, 1.0f}}; },
       "logit_bias token id -1 is out of range [0, 1000)"},
      {"bias id vocab", [](auto& p) { p.logit_bias = {{kVocab, 1.0f}}; },
       "logit_bias token id 1000 is out of range"},
      {"bias 101", [](auto& p) { p.logit_bias = {{3, 101.0f}}; },
       "logit_bias value for token 3 must be in [-100, 100], got 101"},
      {"bias -100.5", [](auto& p) { p.logit_bias = {{3, -100.5f}}; }, "logit_bias value"},
      {"bias nan", [](auto& p) { p.logit_bias = {{3, kNaN}}; }, "logit_bias value"},
      {"bias dup", [](auto& p) { p.logit_bias = {{7, 1.0f}, {3, 2.0f}, {7, 3.0f}}; },
       "logit_bias lists token id 7 twice"},
      {"allowed ok", [](auto& p) { p.allowed_token_ids = {0, 5, kVocab - 1}; }, nullptr},
      {"allowed bad", [](auto& p) { p.allowed_token_ids = {5, kVocab}; },
       "allowed_token_ids contains 1000, out of range [0, 1000)"},
      {"stop ids ok", [](auto& p) { p.stop_token_ids = {0, kVocab - 1}; }, nullptr},
      {"stop ids bad", [](auto& p) { p.stop_token_ids = {-3}; },
       "stop_token_ids contains -3, out of range [0, 1000)"},
  });
}

TEST(SamplingParams, LengthAndOutputFields) {
  run_cases({
      {"n 4", [](auto& p) { p.n = 4; }, nullptr},
      {"n 0", [](auto& p) { p.n = 0; }, "n must be >= 1, got 0"},
      {"max_tokens 1", [](auto& p) { p.max_tokens = 1; }, nullptr},
      {"max_tokens 0", [](auto& p) { p.max_tokens = 0; }, "max_tokens must be >= 1, got 0"},
      {"min_tokens = max", [](auto& p) { p.min_tokens = p.max_tokens; }, nullptr},
      {"min_tokens -1", [](auto& p) { p.min_tokens = -1; }, "min_tokens must be >= 0, got -1"},
      {"min_tokens > max", [](auto& p) { p.min_tokens = 17; },
       "min_tokens must be <= max_tokens (16), got 17"},
      {"stop ok", [](auto& p) { p.stop = {"\n\n", "END"}; }, nullptr},
      {"stop empty", [](auto& p) { p.stop = {"x", ""}; }, "stop cannot contain an empty string"},
      {"seed", [](auto& p) { p.seed = 0xffffffffffffffffull; }, nullptr},
      {"logprobs -1", [](auto& p) { p.logprobs = -1; }, nullptr},
      {"logprobs 0", [](auto& p) { p.logprobs = 0; }, nullptr},
      {"logprobs 20", [](auto& p) { p.logprobs = 20; }, nullptr},
      {"logprobs 21", [](auto& p) { p.logprobs = 21; },
       "logprobs must be -1 (none) or in [0, 20], got 21"},
      {"logprobs -2", [](auto& p) { p.logprobs = -2; }, "logprobs must be -1 (none)"},
      {"prompt_logprobs 20", [](auto& p) { p.prompt_logprobs = 20; }, nullptr},
      {"prompt_logprobs 21", [](auto& p) { p.prompt_logprobs = 21; },
       "prompt_logprobs must be -1 (none) or in [0, 20], got 21"},
  });
  // The cap is the smaller of max_logprobs and the vocabulary.
  run_cases({{"logprobs > vocab", [](auto& p) { p.logprobs = 9; }, "in [0, 8], got 9"},
             {"logprobs = vocab", [](auto& p) { p.logprobs = 8; }, nullptr}},
            /*vocab=*/8);
  SamplingParams p;
  p.logprobs = 50;
  EXPECT_TRUE(p.validate(kVocab, /*max_logprobs=*/64).is_ok());
}

}  // namespace
}  // namespace loom
