// ChatOutputParser on realistic model outputs per family, each streamed in every split.
#include <gtest/gtest.h>

#include <algorithm>
#include <regex>

#include "parser_test_util.h"

namespace loom::chat {
namespace {

using testing::Collected;
using testing::parse_all_splits;
using testing::ParserSetup;

ParserSetup setup(ToolCallFormat t, ReasoningFormat r = ReasoningFormat::kNone,
                  bool starts_in_reasoning = false) {
  ParserSetup s;
  s.format = {t, r};
  s.starts_in_reasoning = starts_in_reasoning;
  return s;
}

void expect_call(const Collected& c, size_t i, const std::string& name, const std::string& args) {
  ASSERT_LT(i, c.calls.size());
  EXPECT_EQ(c.calls[i].name, name);
  EXPECT_EQ(c.calls[i].arguments, args);
  ASSERT_LT(i, c.streamed.size());
  EXPECT_EQ(c.streamed[i].name, name);
  EXPECT_EQ(c.calls[i].id, c.streamed[i].id);
  // The streamed arguments are the model's text; they normalize to the same JSON.
  EXPECT_EQ(nlohmann::ordered_json::parse(c.streamed[i].arguments).dump(), args);
  EXPECT_TRUE(c.calls[i].complete);
}

// ---- hermes --------------------------------------------------------------------------------

TEST(HermesParser, TextThenParallelCalls) {
  const std::string text =
      "Let me check both.\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"Paris\", \"unit\": \"c\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_time\", "
      "\"arguments\": {\"tz\": \"Europe/Paris\"}}\n</tool_call>";
  Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), text);
  EXPECT_EQ(c.content, "Let me check both.");
  EXPECT_EQ(c.reasoning, "");
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris","unit":"c"})");
  expect_call(c, 1, "get_time", R"({"tz":"Europe/Paris"})");
  EXPECT_NE(c.calls[0].id, c.calls[1].id);
  EXPECT_TRUE(std::regex_match(c.calls[0].id, std::regex("call_[A-Za-z0-9]{24}")));
  // Arguments stream as the model wrote them, compact: they add up to the call's.
  EXPECT_EQ(c.streamed[0].arguments, R"({"city":"Paris","unit":"c"})");
}

TEST(HermesParser, Qwen3ReasoningThenCall) {
  const std::string text =
      "<think>\nThe user wants the weather in Paris. I should call get_weather.\n</think>\n\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n"
      "</tool_call>";
  Collected c = parse_all_splits(setup(ToolCallFormat::kHermes, ReasoningFormat::kQwen3), text);
  EXPECT_EQ(c.reasoning, "The user wants the weather in Paris. I should call get_weather.");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris"})");
}

// Ended by the model, a trailing partial opener is text too (cut by max_tokens it would be
// dropped: CutBeforeTheNameLeavesNothing).
TEST(HermesParser, MarkerLikeTextIsContent) {
  const std::string text = "Use <tools> and <tool_calls> or <tool_cal; a <tool_call";
  ParserSetup s = setup(ToolCallFormat::kHermes);
  s.closed_by_token = true;
  Collected c = parse_all_splits(s, text);
  EXPECT_EQ(c.content, text);
  EXPECT_TRUE(c.calls.empty());
  EXPECT_TRUE(c.streamed.empty());
}

TEST(HermesParser, ToolsDisabledMarkupIsContent) {
  ParserSetup s = setup(ToolCallFormat::kHermes);
  s.tools_enabled = false;
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {}}\n</tool_call>";
  Collected c = parse_all_splits(s, text);
  EXPECT_EQ(c.content, text);
  EXPECT_TRUE(c.calls.empty());
}

// Cut off by max_tokens inside a call whose name was read (so streams announced it): the call
// is reported once, incomplete, with exactly the arguments streamed; its markup is not content.
TEST(HermesParser, CutCallIsAnIncompleteCallNotContent) {
  const std::string first =
      "Checking.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
      "\"paris\"}}\n</tool_call>\n<tool_call>\n{\"name\": \"get_weather\", \"";
  for (const std::string& rest :
       {std::string("argu"), std::string("arguments\": {\"city\": \"Ro")}) {
    SCOPED_TRACE(rest);
    Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), first + rest);
    EXPECT_EQ(c.content, "Checking.");
    ASSERT_EQ(c.calls.size(), 2u);
    expect_call(c, 0, "get_weather", R"({"city":"paris"})");
    EXPECT_TRUE(c.calls[0].complete);
    EXPECT_FALSE(c.calls[1].complete);
    EXPECT_EQ(c.calls[1].name, "get_weather");
    const std::string args = rest == "argu" ? "" : "{\"city\":\"Ro";  // compact
    EXPECT_EQ(c.calls[1].arguments, args);
    ASSERT_EQ(c.streamed.size(), 2u);
    EXPECT_EQ(c.streamed[1].id, c.calls[1].id);
    EXPECT_EQ(c.streamed[1].arguments, args);
  }
}

// Cut before the call's name: nothing of it was announced, and its markup is dropped; so is an
// opener cut in the middle. Ended by the model instead, such a tail is plain text.
TEST(HermesParser, CutBeforeTheNameLeavesNothing) {
  for (const std::string tail : {"<tool_call>\n{\"na", "<tool_call>", "<tool_ca", "<"}) {
    SCOPED_TRACE(tail);
    Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), "Checking. " + tail);
    EXPECT_EQ(c.content, "Checking.");
    EXPECT_TRUE(c.calls.empty());
    EXPECT_TRUE(c.streamed.empty());
  }
  ParserSetup closed = setup(ToolCallFormat::kHermes);
  closed.closed_by_token = true;
  EXPECT_EQ(parse_all_splits(closed, "a <tool_ca").content, "a <tool_ca");
  // Tools off: the markup is text whichever way the output ended.
  ParserSetup off = setup(ToolCallFormat::kHermes);
  off.tools_enabled = false;
  EXPECT_EQ(parse_all_splits(off, "a <tool_call>\n{\"na").content, "a <tool_call>\n{\"na");
}

// llama3_json's bare "{" opener may begin a JSON answer: cut before a call's name it is text.
TEST(Llama3JsonParser, CutBareJsonIsText) {
  Collected c = parse_all_splits(setup(ToolCallFormat::kLlama3Json), "{\"answ");
  EXPECT_EQ(c.content, "{\"answ");
  EXPECT_TRUE(c.calls.empty());
  c = parse_all_splits(setup(ToolCallFormat::kLlama3Json), "<|python_tag|>{\"na");
  EXPECT_EQ(c.content, "");
  c = parse_all_splits(setup(ToolCallFormat::kLlama3Json),
                       "{\"name\": \"f\", \"parameters\": {\"a");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_FALSE(c.calls[0].complete);
  EXPECT_EQ(c.calls[0].arguments, "{\"a");
}

TEST(HermesParser, MissingCloseTagAtEndKeepsCall) {
  const std::string text = "<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": [1, 2]}}\n";
  for (const std::string tail : {"", "</tool_c"}) {  // missing, or cut off by max_tokens
    Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), text + tail);
    EXPECT_EQ(c.content, "");
    ASSERT_EQ(c.calls.size(), 1u);
    expect_call(c, 0, "f", R"({"a":[1,2]})");
  }
}

TEST(HermesParser, NotJsonInsideTagsIsContent) {
  const std::string text = "<tool_call>\nget_weather(Paris)\n</tool_call> done";
  Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), text);
  EXPECT_EQ(c.content, text);
  EXPECT_TRUE(c.calls.empty());
}

TEST(HermesParser, ArgumentsBeforeNameAndStringArguments) {
  const std::string text =
      "<tool_call>{\"arguments\": {\"x\": \"}{\\\"\"}, \"name\": \"f\"}</tool_call>"
      "<tool_call>{\"name\": \"g\", \"arguments\": \"{\\\"y\\\": 1}\"}</tool_call>"
      "<tool_call>{\"name\": \"h\"}</tool_call>";
  Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), text);
  ASSERT_EQ(c.calls.size(), 3u);
  EXPECT_EQ(c.calls[0].arguments, R"({"x":"}{\""})");
  EXPECT_EQ(c.calls[1].arguments, R"({"y":1})");
  EXPECT_EQ(c.calls[2].arguments, "{}");
  EXPECT_EQ(c.content, "");
}

TEST(HermesParser, TextAfterCallsAndUnicode) {
  const std::string text =
      "Voilà — café ☕\n<tool_call>\n{\"name\": \"note\", \"arguments\": {\"text\": \"naïve "
      "日本\"}}\n</tool_call>\n\nDone!  ";
  Collected c = parse_all_splits(setup(ToolCallFormat::kHermes), text);
  EXPECT_EQ(c.content, "Voilà — café ☕Done!  ");
  ASSERT_EQ(c.calls.size(), 1u);
  EXPECT_EQ(c.calls[0].arguments, R"({"text":"naïve 日本"})");
}

// ---- reasoning -----------------------------------------------------------------------------

TEST(ReasoningParser, DeepSeekR1PromptOpensThink) {
  const std::string text =
      "Okay, the user asks for 2+2.\nThat is 4.\n</think>\n\nThe answer is **4**.\n";
  Collected c =
      parse_all_splits(setup(ToolCallFormat::kNone, ReasoningFormat::kDeepSeekR1, true), text);
  EXPECT_EQ(c.reasoning, "Okay, the user asks for 2+2.\nThat is 4.");
  EXPECT_EQ(c.content, "The answer is **4**.\n");
}

TEST(ReasoningParser, DeepSeekR1ModelRepeatsThink) {
  const std::string text = "<think>\nHmm.\n</think>\nFine.";
  Collected c =
      parse_all_splits(setup(ToolCallFormat::kNone, ReasoningFormat::kDeepSeekR1, true), text);
  EXPECT_EQ(c.reasoning, "Hmm.");
  EXPECT_EQ(c.content, "Fine.");
}

TEST(ReasoningParser, UnterminatedReasoningIsReasoning) {
  const std::string text = "Let me think about </thin";
  Collected c =
      parse_all_splits(setup(ToolCallFormat::kNone, ReasoningFormat::kDeepSeekR1, true), text);
  EXPECT_EQ(c.reasoning, text);
  EXPECT_EQ(c.content, "");
}

TEST(ReasoningParser, Qwen3ThinkingAndNoThinking) {
  ParserSetup s = setup(ToolCallFormat::kHermes, ReasoningFormat::kQwen3);
  Collected c = parse_all_splits(s, "<think>\n\n</think>\n\nHello! How can I help?");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, "Hello! How can I help?");
  c = parse_all_splits(s, "Hello <think> is not at the start");
  EXPECT_EQ(c.reasoning, "");
  EXPECT_EQ(c.content, "Hello <think> is not at the start");
  c = parse_all_splits(s, "<thinking> is a tag");
  EXPECT_EQ(c.content, "<thinking> is a tag");
}

TEST(ReasoningParser, NoReasoningFormatLeavesThinkAsContent) {
  Collected c = parse_all_splits(setup(ToolCallFormat::kNone), "<think>x</think>y");
  EXPECT_EQ(c.content, "<think>x</think>y");
}

// ---- llama3_json ---------------------------------------------------------------------------

TEST(Llama3JsonParser, BareJsonCall) {
  const std::string text =
      "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 3}}";
  Collected c = parse_all_splits(setup(ToolCallFormat::kLlama3Json), text);
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 1u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris","days":3})");
}

TEST(Llama3JsonParser, PythonTagAndSeveralCalls) {
  const std::string text =
      "<|python_tag|>{\"name\": \"a\", \"parameters\": {}}; {\"name\": \"b\", \"arguments\": "
      "{\"k\": true}}";
  Collected c = parse_all_splits(setup(ToolCallFormat::kLlama3Json), text);
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "a", "{}");
  expect_call(c, 1, "b", R"({"k":true})");
}

TEST(Llama3JsonParser, JsonAnswerAndTextAreContent) {
  Collected c = parse_all_splits(setup(ToolCallFormat::kLlama3Json), "{\"answer\": 42}");
  EXPECT_EQ(c.content, "{\"answer\": 42}");
  EXPECT_TRUE(c.calls.empty());
  c = parse_all_splits(setup(ToolCallFormat::kLlama3Json),
                       "The call is {\"name\": \"f\", \"parameters\": {}}");
  EXPECT_EQ(c.content, "The call is {\"name\": \"f\", \"parameters\": {}}");
  EXPECT_TRUE(c.calls.empty());
}

// ---- mistral -------------------------------------------------------------------------------

TEST(MistralParser, ArrayOfCalls) {
  const std::string text =
      "[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}, \"id\": "
      "\"abc123XYZ\"}, {\"name\": \"get_time\", \"arguments\": {}}]";
  Collected c = parse_all_splits(setup(ToolCallFormat::kMistral), text);
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris"})");
  expect_call(c, 1, "get_time", "{}");
  EXPECT_TRUE(std::regex_match(c.calls[0].id, std::regex("[A-Za-z0-9]{9}")));
}

TEST(MistralParser, ArgsShape) {
  const std::string text =
      "Sure.[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Paris\"}[TOOL_CALLS]get_time[CALL_ID]"
      "a1b2c3d4e[ARGS]{}";
  Collected c = parse_all_splits(setup(ToolCallFormat::kMistral), text);
  EXPECT_EQ(c.content, "Sure.");
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris"})");
  expect_call(c, 1, "get_time", "{}");
  EXPECT_EQ(c.calls[1].id, "a1b2c3d4e");
}

// ---- deepseek_v3 ---------------------------------------------------------------------------

const std::string kDeepSeekCalls =
    "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
    "{\"city\": \"Paris\"}\n```<｜tool▁call▁end｜>\n<｜tool▁call▁begin｜>function<｜tool▁sep｜>"
    "get_time\n```json\n{}\n```<｜tool▁call▁end｜><｜tool▁calls▁end｜>";

TEST(DeepSeekV3Parser, TextThenCalls) {
  Collected c = parse_all_splits(setup(ToolCallFormat::kDeepSeekV3), "Sure.\n" + kDeepSeekCalls);
  EXPECT_EQ(c.content, "Sure.");
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris"})");
  expect_call(c, 1, "get_time", "{}");
}

TEST(DeepSeekV3Parser, R1ReasoningThenCalls) {
  Collected c =
      parse_all_splits(setup(ToolCallFormat::kDeepSeekV3, ReasoningFormat::kDeepSeekR1, true),
                       "I need the weather.\n</think>\n\n" + kDeepSeekCalls);
  EXPECT_EQ(c.reasoning, "I need the weather.");
  EXPECT_EQ(c.content, "");
  ASSERT_EQ(c.calls.size(), 2u);
}

TEST(DeepSeekV3Parser, V31Shape) {
  const std::string text =
      "<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>get_weather<｜tool▁sep｜>{\"city\": "
      "\"Paris\"}<｜tool▁call▁end｜><｜tool▁calls▁end｜>";
  Collected c = parse_all_splits(setup(ToolCallFormat::kDeepSeekV3), text);
  ASSERT_EQ(c.calls.size(), 1u);
  expect_call(c, 0, "get_weather", R"({"city":"Paris"})");
  EXPECT_EQ(c.content, "");
}

// ---- qwen3_coder ---------------------------------------------------------------------------

nlohmann::ordered_json coder_tools() {
  return nlohmann::ordered_json::parse(R"([
    {"type": "function", "function": {"name": "write_file", "parameters": {"type": "object",
      "properties": {"path": {"type": "string"}, "content": {"type": "string"},
                     "mode": {"type": "integer"}, "ratio": {"type": "number"},
                     "force": {"type": "boolean"}, "opts": {"type": "object"},
                     "tags": {"type": ["array", "null"]}}}}},
    {"type": "function", "function": {"name": "run", "parameters": {"type": "object",
      "properties": {"cmd": {"type": "string"}}}}}
  ])");
}

TEST(Qwen3CoderParser, TypedParameters) {
  ParserSetup s = setup(ToolCallFormat::kQwen3Coder);
  s.tools = coder_tools();
  const std::string text =
      "I'll write it.\n<tool_call>\n<function=write_file>\n<parameter=path>\nsrc/a \"b\".py\n"
      "</parameter>\n<parameter=content>\ndef f():\n    return 1\n\n</parameter>\n"
      "<parameter=mode>\n420\n</parameter>\n<parameter=ratio>\n2.0\n</parameter>\n"
      "<parameter=force>\nTrue\n</parameter>\n<parameter=opts>\n{\"a\": [1]}\n</parameter>\n"
      "<parameter=tags>\nnull\n</parameter>\n<parameter=extra>\n7\n</parameter>\n</function>\n"
      "</tool_call>\n<tool_call>\n<function=run>\n<parameter=cmd>\nnull\n</parameter>\n"
      "</function>\n</tool_call>";
  Collected c = parse_all_splits(s, text);
  EXPECT_EQ(c.content, "I'll write it.");
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "write_file",
              R"({"path":"src/a \"b\".py","content":"def f():\n    return 1\n","mode":420,)"
              R"("ratio":2,"force":true,"opts":{"a":[1]},"tags":null,"extra":"7"})");
  expect_call(c, 1, "run", R"({"cmd":null})");
}

TEST(Qwen3CoderParser, NoSchemaMissingCloseAndNoParams) {
  const std::string text =
      "<tool_call>\n<function=f>\n<parameter=x>\n42\n<parameter=y>\nhi\n</function>\n"
      "</tool_call><tool_call><function=g></function></tool_call>";
  Collected c = parse_all_splits(setup(ToolCallFormat::kQwen3Coder), text);
  ASSERT_EQ(c.calls.size(), 2u);
  expect_call(c, 0, "f", R"({"x":"42","y":"hi"})");
  expect_call(c, 1, "g", "{}");
}

// The markers a parser reads, which must survive skip_special_tokens where they are control
// tokens: tool markers only when the request's tools are parsed.
TEST(ParserMarkers, PerFormat) {
  using V = std::vector<std::string>;
  EXPECT_EQ(parser_markers({ToolCallFormat::kHermes, ReasoningFormat::kQwen3}, true),
            (V{"<think>", "</think>", "<tool_call>", "</tool_call>"}));
  EXPECT_EQ(parser_markers({ToolCallFormat::kHermes, ReasoningFormat::kQwen3}, false),
            (V{"<think>", "</think>"}));
  EXPECT_EQ(parser_markers({ToolCallFormat::kMistral, ReasoningFormat::kNone}, true),
            (V{"[TOOL_CALLS]", "[ARGS]", "[CALL_ID]"}));
  const V harmony = parser_markers({ToolCallFormat::kHarmony, ReasoningFormat::kHarmony}, false);
  EXPECT_NE(std::find(harmony.begin(), harmony.end(), "<|channel|>"), harmony.end());
  EXPECT_NE(std::find(harmony.begin(), harmony.end(), "<|start|>"), harmony.end());
  EXPECT_TRUE(parser_markers({ToolCallFormat::kNone, ReasoningFormat::kNone}, true).empty());
}

}  // namespace
}  // namespace loom::chat
