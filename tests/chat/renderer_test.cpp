// ChatRenderer with the message shapes agents send (OpenAI): an assistant turn with
// "content": null and tool_calls whose arguments are a JSON string, then the tool's result.
#include "chat/renderer.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

namespace loom::chat {
namespace {

std::string read_template(const std::string& name) {
  std::ifstream f(std::string(LOOM_TEST_DATA) + "/chat_templates/" + name);
  EXPECT_TRUE(f.good()) << name;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

Json agent_messages() {
  return Json::parse(R"([
    {"role": "system", "content": "You are a helpful assistant."},
    {"role": "user", "content": "What's the weather in Paris?"},
    {"role": "assistant", "content": null, "tool_calls": [
      {"id": "call_Xq3b9LmZ0pT7vW2kR8sN4cYd", "type": "function",
       "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\", \"unit\": \"c\"}"}}]},
    {"role": "tool", "tool_call_id": "call_Xq3b9LmZ0pT7vW2kR8sN4cYd", "content": "{\"temp_c\": 21}"}
  ])");
}

Json weather_tools() {
  return Json::parse(R"([{"type": "function", "function": {"name": "get_weather",
    "description": "Get the weather", "parameters": {"type": "object",
    "properties": {"city": {"type": "string", "description": "City"},
                   "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}}])");
}

std::string render(const std::string& file, const Json& messages) {
  auto r = ChatRenderer::create(read_template(file), nullptr);
  EXPECT_TRUE(r.is_ok()) << file << ": " << r.status().message();
  if (!r.is_ok()) return "";
  Json tools = weather_tools();
  auto out = r->render(messages, &tools, /*add_generation_prompt=*/true, nullptr);
  EXPECT_TRUE(out.is_ok()) << file << ": " << out.status().message();
  return out.is_ok() ? *out : "";
}

size_t count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

TEST(Renderer, AgentToolTurnQwenHermes) {
  for (const char* file : {"Qwen-Qwen2.5-7B-Instruct.jinja", "Qwen-Qwen3-0.6B.jinja",
                           "NousResearch-Hermes-2-Pro-Llama-3-8B-tool_use.jinja"}) {
    std::string p = render(file, agent_messages());
    // The call as the model writes it: arguments as an object, not a quoted string.
    EXPECT_NE(p.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": "
                     "\"Paris\", \"unit\": \"c\"}}\n</tool_call>"),
              std::string::npos)
        << file << "\n"
        << p;
    EXPECT_NE(p.find("<tool_response>\n{\"temp_c\": 21}\n</tool_response>"), std::string::npos)
        << file << "\n"
        << p;
    EXPECT_EQ(count(p, "None"), 0u) << file;
    EXPECT_TRUE(p.ends_with("<|im_start|>assistant\n")) << file;
  }
}

TEST(Renderer, AgentToolTurnLlama31) {
  std::string p = render("meta-llama-Llama-3.1-8B-Instruct.jinja", agent_messages());
  EXPECT_NE(p.find("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", "
                   "\"parameters\": {\"city\": \"Paris\", \"unit\": \"c\"}}<|eot_id|>"),
            std::string::npos)
      << p;
  // The template applies tojson to string results too (a string "is iterable"), as Jinja2 does.
  EXPECT_NE(
      p.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"{\\\"temp_c\\\": 21}\"<|eot_id|>"),
      std::string::npos)
      << p;
}

TEST(Renderer, AgentToolTurnMistralNemoShortIds) {
  Json m = agent_messages();
  m.push_back(Json{{"role", "assistant"}, {"content", "It is 21 °C."}});
  m.push_back(Json{{"role", "user"}, {"content", "Thanks!"}});
  std::string p = render("mistralai-Mistral-Nemo-Instruct-2407.jinja", m);
  // The long OpenAI id maps to the same 9 characters in the call and in its result.
  EXPECT_NE(p.find("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\", "
                   "\"unit\": \"c\"}, \"id\": \"kR8sN4cYd\"}]"),
            std::string::npos)
      << p;
  EXPECT_EQ(count(p, "\"id\": \"kR8sN4cYd\""), 1u) << p;
  EXPECT_EQ(count(p, "\"call_id\": \"kR8sN4cYd\""), 1u) << p;
  EXPECT_NE(p.find("[TOOL_RESULTS]{\"content\": {\"temp_c\": 21}"), std::string::npos) << p;
}

TEST(Renderer, AgentToolTurnDeepSeekStringArguments) {
  // DeepSeek's template concatenates the arguments as text and tests content for none.
  std::string p = render("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B.jinja", agent_messages());
  EXPECT_NE(p.find("<｜tool▁call▁begin｜>function<｜tool▁sep｜>get_weather\n```json\n"
                   "{\"city\": \"Paris\", \"unit\": \"c\"}\n```<｜tool▁call▁end｜>"),
            std::string::npos)
      << p;
  EXPECT_NE(p.find("<｜tool▁output▁begin｜>{\"temp_c\": 21}<｜tool▁output▁end｜>"),
            std::string::npos)
      << p;
}

TEST(Renderer, ObjectArgumentsAndPlainChatStillRender) {
  Json m = agent_messages();
  m[2]["tool_calls"][0]["function"]["arguments"] = Json{{"city", "Paris"}, {"unit", "c"}};
  std::string p = render("Qwen-Qwen2.5-7B-Instruct.jinja", m);
  EXPECT_NE(p.find("\"arguments\": {\"city\": \"Paris\", \"unit\": \"c\"}"), std::string::npos);
  auto r = ChatRenderer::create("", nullptr);
  ASSERT_TRUE(r.is_ok());
  auto out = r->render(Json::parse(R"([{"role": "user", "content": "hi"},
                                      {"role": "assistant", "content": null}])"),
                       nullptr, false, nullptr);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  EXPECT_EQ(*out, "<|im_start|>user\nhi<|im_end|>\n<|im_start|>assistant\n<|im_end|>\n");
}

// gpt-oss's template (tests/data/chat_templates, as Jinja2 renders it there) reads an assistant
// turn's reasoning as `thinking`: OpenAI-style messages carry it as reasoning_content, which
// renders the same; reasoning_effort is its system message's "Reasoning:" line.
TEST(Renderer, GptOssReasoningContentIsItsThinking) {
  std::ifstream f(std::string(LOOM_TEST_DATA) +
                  "/chat_templates/openai-gpt-oss-120b.thinking_call.json");
  const Json c = Json::parse(f);
  Json messages = c["context"]["messages"];
  messages[1]["reasoning_content"] = messages[1]["thinking"];
  messages[1].erase("thinking");
  auto r = ChatRenderer::create(read_template("openai-gpt-oss-120b.jinja"), nullptr);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  auto out = r->render(messages, &c["context"]["tools"], true, nullptr);
  ASSERT_TRUE(out.is_ok()) << out.status().message();
  // The fixture's only date-dependent line: render with today's date in its place.
  std::string want = c["expected"].get<std::string>();
  const size_t at = want.find("Current date: ") + 14;
  want.replace(at, 10, out->substr(out->find("Current date: ") + 14, 10));
  EXPECT_EQ(*out, want);
  const Json effort = {{"reasoning_effort", "high"}};
  auto high = r->render(messages, &c["context"]["tools"], true, &effort);
  ASSERT_TRUE(high.is_ok());
  EXPECT_NE(high->find("Reasoning: high"), std::string::npos);
}

}  // namespace
}  // namespace loom::chat
