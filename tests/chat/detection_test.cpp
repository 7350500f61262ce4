// Format detection from the real chat templates in tests/data/chat_templates, and names.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "chat/output_format.h"

namespace loom::chat {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(LOOM_TEST_DATA) + "/chat_templates/" + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

struct Expected {
  const char* file;
  ToolCallFormat tools;
  ReasoningFormat reasoning;
};

TEST(Detection, RealTemplates) {
  const Expected cases[] = {
      {"Qwen-Qwen2.5-7B-Instruct.jinja", ToolCallFormat::kHermes, ReasoningFormat::kNone},
      {"Qwen-Qwen3-0.6B.jinja", ToolCallFormat::kHermes, ReasoningFormat::kQwen3},
      {"NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja", ToolCallFormat::kHermes,
       ReasoningFormat::kNone},
      {"meta-llama-Llama-3.1-8B-Instruct.jinja", ToolCallFormat::kLlama3Json,
       ReasoningFormat::kNone},
      {"mistralai-Mistral-Nemo-Instruct-2407.jinja", ToolCallFormat::kMistral,
       ReasoningFormat::kNone},
      {"deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", ToolCallFormat::kDeepSeekV3,
       ReasoningFormat::kDeepSeekR1},
      {"google-gemma-2-2b-it.jinja", ToolCallFormat::kNone, ReasoningFormat::kNone},
      {"microsoft-Phi-3.5-mini-instruct.jinja", ToolCallFormat::kNone, ReasoningFormat::kNone},
      {"CohereForAI-c4ai-command-r7b-12-2024-tool_use.jinja", ToolCallFormat::kNone,
       ReasoningFormat::kNone},
      // The families of issue 15 (templates from their own sources; see tests/data/README.md).
      {"google-gemma-3-4b-it.jinja", ToolCallFormat::kNone, ReasoningFormat::kNone},
      {"allenai-OLMo-2-1124-7B-Instruct.jinja", ToolCallFormat::kNone, ReasoningFormat::kNone},
      // SmolLM3 thinks unless enable_thinking=false or "/no_think", as Qwen3 does.
      {"HuggingFaceTB-SmolLM3-3B.jinja", ToolCallFormat::kNone, ReasoningFormat::kQwen3},
      // Granite 3.3 writes <think> only when the request sets `thinking`; the prompt never
      // opens it, so an answer without <think> stays content.
      {"ibm-granite-granite-3.3-2b-instruct.jinja", ToolCallFormat::kNone,
       ReasoningFormat::kDeepSeekR1},
  };
  for (const auto& c : cases) {
    std::string t = read_template(c.file);
    EXPECT_EQ(detect_tool_call_format(t), c.tools) << c.file;
    EXPECT_EQ(detect_reasoning_format(t), c.reasoning) << c.file;
  }
}

TEST(Detection, Qwen3CoderMarkup) {
  // The part of Qwen3-Coder's template that renders a call.
  const char* t =
      "{{- '<tool_call>\\n<function=' + tool_call.name + '>\\n' }}"
      "{{- '<parameter=' + args_name + '>\\n' }}{{- '\\n</parameter>\\n' }}";
  EXPECT_EQ(detect_tool_call_format(t), ToolCallFormat::kQwen3Coder);
}

TEST(Detection, PromptOpensReasoning) {
  EXPECT_TRUE(
      prompt_opens_reasoning(ReasoningFormat::kDeepSeekR1, "<｜User｜>hi<｜Assistant｜><think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kQwen3,
                                      "<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n"));
  EXPECT_TRUE(prompt_opens_reasoning(ReasoningFormat::kQwen3, "<|im_start|>assistant\n<think>\n"));
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kNone, "<think>\n"));
}

TEST(Names, RoundTripAndErrors) {
  for (auto f :
       {ToolCallFormat::kNone, ToolCallFormat::kHermes, ToolCallFormat::kLlama3Json,
        ToolCallFormat::kMistral, ToolCallFormat::kDeepSeekV3, ToolCallFormat::kQwen3Coder}) {
    auto r = tool_call_format_from_name(tool_call_format_name(f));
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(*r, f);
  }
  for (auto f : {ReasoningFormat::kNone, ReasoningFormat::kDeepSeekR1, ReasoningFormat::kQwen3}) {
    auto r = reasoning_format_from_name(reasoning_format_name(f));
    ASSERT_TRUE(r.is_ok());
    EXPECT_EQ(*r, f);
  }
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kLlama3Json), "llama3_json");
  auto bad = tool_call_format_from_name("pythonic");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("hermes"), std::string::npos);
  EXPECT_NE(bad.status().message().find("pythonic"), std::string::npos);
  EXPECT_FALSE(reasoning_format_from_name("r1").is_ok());
}

}  // namespace
}  // namespace loom::chat
