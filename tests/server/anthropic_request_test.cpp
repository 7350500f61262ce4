// Anthropic request conversion without a server: content blocks → the chat template's message
// list (tool_use → tool_calls, tool_result → tool messages, thinking → reasoning_content),
// tools / tool_choice → ToolsRequest, thinking → enable_thinking, and the refusals with the
// field they name.
#include <gtest/gtest.h>

#include "server/anthropic_messages.h"

namespace loom::server {
namespace {

using ToolMode = chat::ChatGrammarRequest::ToolMode;

// Compared without key order (the converter keeps insertion order; the expectation need not).
nlohmann::json plain(const Json& j) {
  return nlohmann::json::parse(j.dump());
}

TEST(AnthropicRequest, MessagesWithToolUseToolResultAndThinking) {
  const Json body = Json::parse(R"({
    "system": [{"type": "text", "text": "be brief"}, {"type": "text", "text": "really", "cache_control": {"type": "ephemeral"}}],
    "messages": [
      {"role": "user", "content": "weather in Paris?"},
      {"role": "assistant", "content": [
        {"type": "thinking", "thinking": "need the tool", "signature": "c2ln"},
        {"type": "text", "text": "Let me check."},
        {"type": "tool_use", "id": "toolu_01", "name": "get_weather", "input": {"city": "Paris", "days": 2}},
        {"type": "tool_use", "id": "toolu_02", "name": "get_time", "input": {}}]},
      {"role": "user", "content": [
        {"type": "tool_result", "tool_use_id": "toolu_01", "content": "sunny"},
        {"type": "text", "text": "thanks"},
        {"type": "tool_result", "tool_use_id": "toolu_02", "is_error": true,
         "content": [{"type": "text", "text": "no clock"}, {"type": "text", "text": "sorry"}]}]},
      {"role": "assistant", "content": [
        {"type": "redacted_thinking", "data": "opaque"},
        {"type": "tool_use", "id": "toolu_03", "name": "get_weather", "input": {"city": "Rome"}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_03"}]}
    ]})");
  Json out;
  auto e = anthropic_messages(body, &out);
  ASSERT_FALSE(e) << e->message;
  const nlohmann::json expected = nlohmann::json::parse(R"([
    {"role": "system", "content": "be brief\nreally"},
    {"role": "user", "content": "weather in Paris?"},
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "need the tool", "tool_calls": [
      {"id": "toolu_01", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Paris\",\"days\":2}"}},
      {"id": "toolu_02", "type": "function", "function": {"name": "get_time", "arguments": "{}"}}]},
    {"role": "tool", "tool_call_id": "toolu_01", "content": "sunny"},
    {"role": "tool", "tool_call_id": "toolu_02", "content": "no clock\nsorry", "is_error": true},
    {"role": "user", "content": "thanks"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "toolu_03", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\":\"Rome\"}"}}]},
    {"role": "tool", "tool_call_id": "toolu_03", "content": ""}
  ])");
  EXPECT_EQ(plain(out), expected) << out.dump(1);
}

TEST(AnthropicRequest, StringAndTextBlockContentStayPlain) {
  const Json body = Json::parse(R"({"system": "sys", "messages": [
      {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]},
      {"role": "assistant", "content": "c"},
      {"role": "user", "content": []}]})");
  Json out;
  ASSERT_FALSE(anthropic_messages(body, &out));
  EXPECT_EQ(plain(out), nlohmann::json::parse(R"([{"role": "system", "content": "sys"},
      {"role": "user", "content": "a\nb"}, {"role": "assistant", "content": "c"},
      {"role": "user", "content": ""}])"));
}

// Each bad message list → a 400 on "messages" whose message names the offending place.
TEST(AnthropicRequest, BadMessagesNameTheBlock) {
  const struct {
    const char* messages;
    const char* mentions;
  } cases[] = {
      {R"([{"role": "user", "content": [{"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": "AA=="}}]}])",
       "messages[0].content[0]: content block type 'image' is not supported (this model takes text "
       "only)"},
      {R"([{"role": "user", "content": [{"type": "document", "source": {}}]}])", "'document'"},
      // Keys a message or block does not take are named, never dropped.
      {R"([{"role": "user", "content": "hi", "foo": 1}])", "messages[0].foo is not a known field"},
      {R"([{"role": "user", "content": [{"type": "text", "text": "hi", "citations": []}]}])",
       "messages[0].content[0].citations is not a known field"},
      {R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "thinking", "thinking": "t", "x": 1}]}])",
       "messages[1].content[0].x is not a known field"},
      {R"([{"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_x", "content": "r"}]}])",
       "tool_use_id 'toolu_x' does not match any earlier tool_use block"},
      {R"([{"role": "user", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]}])",
       "belong in assistant turns"},
      {R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": "x"}]}])",
       "messages[1].content[0].input is required (an object)"},
      {R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "name": "f", "input": {}}]}])",
       "messages[1].content[0].id"},
      {R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_result", "tool_use_id": "a"}]}])",
       "belong in user turns"},
      {R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "content": [{"type": "image", "source": {}}]}]}])",
       "messages[2].content[0].content[0]: content block type 'image'"},
      {R"([{"role": "user", "content": "q"}, {"role": "assistant", "content": [{"type": "tool_use", "id": "a", "name": "f", "input": {}}]},
          {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "a", "is_error": "yes"}]}])",
       "is_error must be a boolean"},
      {R"([{"role": "user", "content": [{"type": "thinking", "thinking": "x"}]}])",
       "belong in assistant turns"},
      {R"([{"role": "user", "content": [{"type": "text"}]}])", "needs a string 'text'"},
      {R"([{"role": "user", "content": [{"type": "mystery"}]}])", "'mystery' is not supported"},
      {R"([{"role": "user", "content": [5]}])", "must be a content block object"},
      {R"([{"role": "user", "content": 5}])", "messages[0].content must be a string or a list"},
      {R"([{"role": "system", "content": "x"}])", "must be 'user' or 'assistant'"},
  };
  for (const auto& c : cases) {
    Json body = {{"messages", Json::parse(c.messages)}};
    Json out;
    auto e = anthropic_messages(body, &out);
    ASSERT_TRUE(e) << c.messages;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, "messages") << c.messages;
    EXPECT_NE(e->message.find(c.mentions), std::string::npos) << e->message;
  }
  Json out;
  auto e = anthropic_messages(
      Json::parse(
          R"({"system": [{"type": "image"}], "messages": [{"role": "user", "content": "q"}]})"),
      &out);
  ASSERT_TRUE(e);
  EXPECT_EQ(e->param, "system");
}

std::optional<ApiError> read_tools(const char* body, ToolsRequest* t) {
  const Json j = Json::parse(body);
  FieldReader r(j);
  return read_anthropic_tools(r, t);
}

constexpr const char* kWeatherTool =
    R"({"name": "get_weather", "description": "d", "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}})";

TEST(AnthropicRequest, ToolsAndToolChoiceBecomeAToolsRequest) {
  ToolsRequest t;
  const std::string tools =
      std::string(R"("tools": [)") + kWeatherTool +
      R"(, {"type": "custom", "name": "add", "input_schema": {"type": "object"}, "cache_control": {"type": "ephemeral"}}])";
  auto e = read_tools(("{" + tools + "}").c_str(), &t);
  ASSERT_FALSE(e) << e->message;
  EXPECT_EQ(t.mode, ToolMode::kAuto);
  EXPECT_TRUE(t.parallel_tool_calls);
  ASSERT_EQ(t.tools.size(), 2u);
  EXPECT_EQ(plain(t.tools[0]),
            nlohmann::json::parse(
                R"({"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})"));
  EXPECT_EQ(
      plain(t.tools[1]),
      nlohmann::json::parse(
          R"({"type": "function", "function": {"name": "add", "parameters": {"type": "object"}}})"));

  ASSERT_FALSE(read_tools(
      ("{" + tools + R"(, "tool_choice": {"type": "any", "disable_parallel_tool_use": true}})")
          .c_str(),
      &t));
  EXPECT_EQ(t.mode, ToolMode::kRequired);
  EXPECT_FALSE(t.parallel_tool_calls);
  ASSERT_FALSE(read_tools(
      ("{" + tools + R"(, "tool_choice": {"type": "tool", "name": "add"}})").c_str(), &t));
  EXPECT_EQ(t.mode, ToolMode::kNamed);
  EXPECT_EQ(t.function_name, "add");
  EXPECT_TRUE(t.parallel_tool_calls);
  ASSERT_FALSE(read_tools(("{" + tools + R"(, "tool_choice": {"type": "none"}})").c_str(), &t));
  EXPECT_EQ(t.mode, ToolMode::kNone);
  EXPECT_TRUE(t.declared());  // still shown to the template, as OpenAI's "none" does
  ASSERT_FALSE(read_tools(R"({"tool_choice": {"type": "auto"}})", &t));
  EXPECT_EQ(t.mode, ToolMode::kNone);
  EXPECT_FALSE(t.declared());
}

TEST(AnthropicRequest, BadToolsNameTheField) {
  const std::string w = kWeatherTool;
  const struct {
    std::string body;
    const char* param;
    const char* mentions;
  } cases[] = {
      {R"({"tools": [{"type": "web_search_20250305", "name": "web_search", "max_uses": 5}]})",
       "tools", "'web_search_20250305' is a server tool"},
      {R"({"tools": [{"type": "bash_20250124", "name": "bash"}]})", "tools", "bash_20250124"},
      {R"({"tools": [{"name": "f"}]})", "tools", "tools[0].input_schema is required"},
      {R"({"tools": [{"name": "f", "input_schema": "x"}]})", "tools",
       "tools[0].input_schema must be a JSON Schema object"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "array"}}]})", "tools",
       "input_schema.type must be 'object'"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "object", "properties": {"a": {"type": "strng"}}}}]})",
       "tools", "invalid input_schema"},
      {R"({"tools": [{"name": "f", "input_schema": {"type": "object"}, "parameters": {}}]})",
       "tools", "tools[0].parameters is not a known field"},
      {R"({"tools": [{"name": 5, "input_schema": {"type": "object"}}]})", "tools", "tools[0].name"},
      {R"({"tools": [{"name": "bad name!", "input_schema": {"type": "object"}}]})", "tools",
       "bad name!"},
      {R"({"tools": "x"})", "tools", "tools must be a list"},
      {"{\"tools\": [" + w + "], \"tool_choice\": {\"type\": \"tool\", \"name\": \"nope\"}}",
       "tool_choice", "tool_choice.name 'nope' is not among the declared tools"},
      {"{\"tools\": [" + w + "], \"tool_choice\": {\"type\": \"tool\"}}", "tool_choice",
       "tool_choice.name is required"},
      {"{\"tools\": [" + w + "], \"tool_choice\": {\"type\": \"required\"}}", "tool_choice",
       "tool_choice.type must be auto, any, tool or none"},
      {"{\"tools\": [" + w +
           "], \"tool_choice\": {\"type\": \"any\", \"disable_parallel_tool_use\": 1}}",
       "tool_choice", "disable_parallel_tool_use must be a boolean"},
      {"{\"tools\": [" + w +
           "], \"tool_choice\": {\"type\": \"none\", \"disable_parallel_tool_use\": true}}",
       "tool_choice", "tool_choice.disable_parallel_tool_use is not a known field"},
      {"{\"tools\": [" + w + "], \"tool_choice\": \"any\"}", "tool_choice",
       "tool_choice must be an object"},
      {R"({"tool_choice": {"type": "any"}})", "tool_choice", "requires tools to be declared"},
  };
  for (const auto& c : cases) {
    ToolsRequest t;
    auto e = read_tools(c.body.c_str(), &t);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->status, 400);
    EXPECT_EQ(e->param, c.param) << c.body;
    EXPECT_NE(e->message.find(c.mentions), std::string::npos) << c.body << " → " << e->message;
  }
}

TEST(AnthropicRequest, Thinking) {
  auto read = [](const char* body, std::optional<int64_t> max_tokens, std::optional<bool>* on) {
    const Json j = Json::parse(body);
    FieldReader r(j);
    return read_anthropic_thinking(r, max_tokens, on);
  };
  std::optional<bool> on;
  ASSERT_FALSE(read(R"({})", 100, &on));
  EXPECT_FALSE(on.has_value());
  ASSERT_FALSE(read(R"({"thinking": {"type": "disabled"}})", 100, &on));
  EXPECT_EQ(on, false);
  ASSERT_FALSE(read(R"({"thinking": {"type": "enabled", "budget_tokens": 1024}})", 2048, &on));
  EXPECT_EQ(on, true);
  ASSERT_FALSE(read(R"({"thinking": {"type": "enabled", "budget_tokens": 4096}})", std::nullopt,
                    &on));  // count_tokens
  EXPECT_EQ(on, true);
  ASSERT_FALSE(read(R"({"thinking": {"type": "adaptive", "display": "summarized"}})", 100, &on));
  EXPECT_EQ(on, true);
  const struct {
    const char* body;
    const char* mentions;
  } bad[] = {
      {R"({"thinking": {"type": "enabled", "budget_tokens": 1000}})",
       "budget_tokens must be at least 1024, got 1000"},
      {R"({"thinking": {"type": "enabled", "budget_tokens": 2048}})",
       "budget_tokens (2048) must be less than max_tokens (2048)"},
      {R"({"thinking": {"type": "enabled", "budget_tokens": "lots"}})",
       "budget_tokens must be an integer"},
      {R"({"thinking": {"type": "enabled"}})", "budget_tokens is required"},
      {R"({"thinking": {"type": "on"}})",
       "thinking.type must be 'enabled', 'adaptive' or 'disabled', got 'on'"},
      {R"({"thinking": {"type": "between_tools"}})", "got 'between_tools'"},
      {R"({"thinking": {"type": "adaptive", "display": "omitted"}})",
       "display 'omitted' is not supported"},
      {R"({"thinking": {"type": "adaptive", "budget_tokens": 2000}})",
       "thinking.budget_tokens is not a known field"},
      {R"({"thinking": {"budget_tokens": 2000}})", "thinking.type is required"},
      {R"({"thinking": {"type": "disabled", "budget_tokens": 2000}})",
       "thinking.budget_tokens is not a known field"},
      {R"({"thinking": true})", "thinking must be an object"},
  };
  for (const auto& c : bad) {
    auto e = read(c.body, 2048, &on);
    ASSERT_TRUE(e) << c.body;
    EXPECT_EQ(e->param, "thinking") << c.body;
    EXPECT_NE(e->message.find(c.mentions), std::string::npos) << c.body << " → " << e->message;
  }
}

TEST(AnthropicRequest, OutputFormat) {
  auto read = [](const char* body, AnswerConstraint* a) {
    const Json j = Json::parse(body);
    FieldReader r(j);
    return read_anthropic_output_format(r, a);
  };
  AnswerConstraint a;
  ASSERT_FALSE(read(R"({"output_config": {"effort": "high"}})", &a));
  EXPECT_TRUE(a.gbnf.empty());
  const char* schema =
      R"({"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]})";
  auto e = read((std::string(R"({"output_config": {"format": {"type": "json_schema", "schema": )") +
                 schema + "}}}")
                    .c_str(),
                &a);
  ASSERT_FALSE(e) << e->message;
  EXPECT_FALSE(a.gbnf.empty());
  EXPECT_EQ(a.field, "output_config.format");
  ASSERT_FALSE(
      read((std::string(R"({"output_format": {"type": "json_schema", "schema": )") + schema + "}}")
               .c_str(),
           &a));
  EXPECT_EQ(a.field, "output_format");
  const struct {
    const char* body;
    const char* param;
    const char* mentions;
  } bad[] = {
      {R"({"output_config": {"format": {"type": "json_schema", "schema": {"type": "strng"}}}})",
       "output_config", "output_config.format.schema"},
      {R"({"output_config": {"format": {"type": "text"}}})", "output_config",
       "output_config.format.type must be 'json_schema'"},
      {R"({"output_config": {"format": {"type": "json_schema"}}})", "output_config",
       "output_config.format.schema is required"},
      {R"({"output_config": {"effort": "extreme"}})", "output_config", "output_config.effort"},
      {R"({"output_config": {"verbosity": 1}})", "output_config",
       "output_config.verbosity is not a known field"},
      {R"({"output_format": {"type": "json_schema", "schema": {}, "name": "x"}})", "output_format",
       "output_format.name is not a known field"},
  };
  for (const auto& c : bad) {
    auto err = read(c.body, &a);
    ASSERT_TRUE(err) << c.body;
    EXPECT_EQ(err->param, c.param) << c.body;
    EXPECT_NE(err->message.find(c.mentions), std::string::npos) << c.body << " → " << err->message;
  }
}

}  // namespace
}  // namespace loom::server
