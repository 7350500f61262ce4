// The harmony format (gpt-oss): analysis messages become reasoning, the final message the
// answer, commentary messages to functions.NAME tool calls; every output streamed in every
// split gives the same result. Outputs are written as gpt-oss writes them after a prompt
// ending in "<|start|>assistant" (the openai/harmony spec's examples).
#include <gtest/gtest.h>

#include "chat/output_format.h"
#include "parser_test_util.h"

namespace loom::chat {
namespace {

using testing::Collected;
using testing::parse_all_splits;
using testing::ParserSetup;

ParserSetup harmony(bool tools = true) {
  ParserSetup s;
  s.format = {ToolCallFormat::kHarmony, ReasoningFormat::kHarmony};
  s.tools_enabled = tools;
  return s;
}

TEST(HarmonyParser, AnalysisThenFinal) {
  const std::string text =
      "<|channel|>analysis<|message|>User asks 2+2. Simple: 4.<|end|>"
      "<|start|>assistant<|channel|>final<|message|>2 + 2 = 4.<|return|>";
  Collected c = parse_all_splits(harmony(), text);
  EXPECT_EQ(c.reasoning, "User asks 2+2. Simple: 4.");
  EXPECT_EQ(c.content, "2 + 2 = 4.");
  EXPECT_TRUE(c.calls.empty());
}

TEST(HarmonyParser, ToolCallInCommentary) {
  const std::string text =
      "<|channel|>analysis<|message|>Need the weather; call get_weather.<|end|>"
      "<|start|>assistant<|channel|>commentary to=functions.get_weather <|constrain|>json"
      "<|message|>{\"location\": \"San Francisco, CA\"}<|call|>";
  Collected c = parse_all_splits(harmony(), text);
  EXPECT_EQ(c.reasoning, "Need the weather; call get_weather.");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, "{\"location\":\"San Francisco, CA\"}");
  ASSERT_EQ(c.streamed.size(), 1u);
  EXPECT_EQ(c.streamed[0].arguments, "{\"location\":\"San Francisco, CA\"}");
  EXPECT_EQ(c.streamed[0].id, c.calls[0].id);
}

// The recipient may also sit in the role part of the header, before the channel.
TEST(HarmonyParser, RecipientBeforeChannelAndPreamble) {
  const std::string text =
      "<|channel|>commentary<|message|>Checking two cities.<|end|>"
      "<|start|>assistant to=functions.get_time<|channel|>commentary json<|message|>"
      "{\"tz\":\"Europe/Paris\"}<|call|>";
  Collected c = parse_all_splits(harmony(), text);
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, "Checking two cities.");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_time");
  EXPECT_EQ(c.calls[0].arguments, "{\"tz\":\"Europe/Paris\"}");
}

TEST(HarmonyParser, ToolsDisabledCallIsContent) {
  const std::string text =
      "<|channel|>commentary to=functions.f <|constrain|>json<|message|>{\"a\":1}<|call|>";
  Collected c = parse_all_splits(harmony(/*tools=*/false), text);
  EXPECT_TRUE(c.calls.empty());
  EXPECT_EQ(c.content, "{\"a\":1}");
}

// Cut off inside the arguments (finish_reason "length"): the call, announced when its header
// was read, is reported incomplete with the arguments written so far; none of it is content.
TEST(HarmonyParser, CutCallIsAnIncompleteCall) {
  const std::string text =
      "<|channel|>analysis<|message|>go<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.f <|constrain|>json<|message|>{\"a\": ";
  Collected c = parse_all_splits(harmony(), text);
  EXPECT_EQ(c.reasoning, "go");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_FALSE(c.calls[0].complete);
  EXPECT_EQ(c.calls[0].name, "f");
  EXPECT_EQ(c.calls[0].arguments, "{\"a\":");
  ASSERT_EQ(c.streamed.size(), 1u);
  EXPECT_EQ(c.streamed[0].arguments, c.calls[0].arguments);
}

// Generation stopped at the <|call|> token, whose text is not in the output (it is an
// end-of-generation token): the call is complete. Cut by max_tokens at the same byte it is
// incomplete (above); a final answer ended by <|return|> reads the same either way.
TEST(HarmonyParser, CallClosedByItsStopToken) {
  const std::string text =
      "<|channel|>analysis<|message|>go<|end|><|start|>assistant<|channel|>commentary "
      "to=functions.get_weather <|constrain|>json<|message|>{\"location\": \"SF\"}";
  ParserSetup s = harmony();
  s.closed_by_token = true;
  Collected c = parse_all_splits(s, text);
  EXPECT_EQ(c.reasoning, "go");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].name, "get_weather");
  EXPECT_EQ(c.calls[0].arguments, "{\"location\":\"SF\"}");
  EXPECT_TRUE(c.calls[0].complete);
  const std::string answer =
      "<|channel|>analysis<|message|>go<|end|><|start|>assistant<|channel|>final<|message|>4";
  EXPECT_EQ(parse_all_splits(s, answer).content, "4");
  EXPECT_EQ(parse_all_splits(harmony(), answer).content, "4");
}

// Reasoning cut off: what was written is reasoning; a model that writes no harmony at all
// gives its text as the answer.
TEST(HarmonyParser, CutReasoningAndPlainText) {
  Collected c = parse_all_splits(harmony(), "<|channel|>analysis<|message|>Thinking about");
  EXPECT_EQ(c.reasoning, "Thinking about");
  EXPECT_EQ(c.content, "");
  c = parse_all_splits(harmony(), "Just an answer.");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, "Just an answer.");
}

// Markers where harmony puts none (a random model's output, through the server): a control
// token is never answer text, reasoning or arguments; the markers that end a body still end
// it, the others are dropped.
TEST(HarmonyParser, StrayMarkersAreNeverText) {
  Collected c = parse_all_splits(harmony(), "l<|end|> s");
  EXPECT_EQ(c.content, "l s");
  c = parse_all_splits(harmony(), " im<|constrain|><|message|>,<|constrain|><|channel|>x");
  EXPECT_EQ(c.content, ",x");
  c = parse_all_splits(harmony(),
                       "<|channel|>analysis<|message|>a<|message|>b<|end|><|start|>assistant"
                       "<|channel|>commentary to=functions.f <|constrain|>json<|message|>"
                       "{\"a\":<|constrain|>1}<|call|>");
  EXPECT_EQ(c.reasoning, "ab");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].arguments, "{\"a\":1}");
}

TEST(HarmonyFormat, NamesAndDetection) {
  EXPECT_EQ(*tool_call_format_from_name("openai"), ToolCallFormat::kHarmony);
  EXPECT_EQ(*reasoning_format_from_name("openai_gptoss"), ReasoningFormat::kHarmony);
  EXPECT_STREQ(tool_call_format_name(ToolCallFormat::kHarmony), "openai");
  // The parts of gpt-oss's template that render an assistant message.
  const std::string tmpl =
      "{{- \"<|start|>assistant<|channel|>analysis<|message|>\" + message.thinking + "
      "\"<|end|>\" }}{{- \"<|start|>assistant to=\" + \"functions.\" + tool_call.name + "
      "\"<|channel|>commentary json<|message|>\" }}";
  EXPECT_EQ(detect_tool_call_format(tmpl), ToolCallFormat::kHarmony);
  EXPECT_EQ(detect_reasoning_format(tmpl), ReasoningFormat::kHarmony);
  EXPECT_FALSE(prompt_opens_reasoning(ReasoningFormat::kHarmony, "<|start|>assistant"));
}

TEST(HarmonyGrammar, RequiredCallAndFinalAnswer) {
  ChatGrammarRequest r;
  r.format = {ToolCallFormat::kHarmony, ReasoningFormat::kHarmony};
  r.tool_mode = ChatGrammarRequest::ToolMode::kRequired;
  r.tools = nlohmann::ordered_json::parse(
      R"([{"type":"function","function":{"name":"get_weather","parameters":{"type":"object",
          "properties":{"location":{"type":"string"}},"required":["location"]}}}])");
  auto g = build_chat_grammar(r);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_NE(g->find("commentary to=functions.get_weather <|constrain|>json<|message|>"),
            std::string::npos)
      << *g;
  r.tool_mode = ChatGrammarRequest::ToolMode::kAuto;
  EXPECT_EQ(*build_chat_grammar(r), "");  // free text with calls: parsed, not constrained
  r.tool_mode = ChatGrammarRequest::ToolMode::kNone;
  r.answer_gbnf = "root ::= \"yes\" | \"no\"";
  g = build_chat_grammar(r);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_NE(g->find("<|channel|>final<|message|>"), std::string::npos) << *g;
}

}  // namespace
}  // namespace loom::chat
