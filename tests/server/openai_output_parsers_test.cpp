// OpenAI chat's reasoning and the parser flags over HTTP: with a DeepSeek-R1-style template the
// random model's text is reasoning, returned as message.reasoning_content and streamed as
// delta.reasoning_content (the same text); --reasoning-parser none and --tool-call-parser NAME
// override what the template shows; bad names are start-up errors naming the flag.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

std::unique_ptr<server::Server> server_with(const char* chat_template, std::string tool_parser = "",
                                            std::string reasoning_parser = "") {
  server::ServerOptions so;
  so.chat_template = chat_template;
  so.tool_call_parser = std::move(tool_parser);
  so.reasoning_parser = std::move(reasoning_parser);
  return start_test_server(so);
}

json reasoning_body(int seed) {
  return {{"messages", {{{"role", "user"}, {"content", "Why is the sky blue?"}}}},
          {"max_tokens", 24},
          {"temperature", 1.0},
          {"seed", seed}};
}

TEST(OpenAiReasoning, ReasoningContentWholeAndStreamed) {
  auto s = server_with(kTestReasoningChatTemplate);
  ASSERT_NE(s, nullptr);
  int with_reasoning = 0;
  for (int seed = 1; seed <= 4; ++seed) {
    SCOPED_TRACE(seed);
    auto r = post_json(s->port(), "/v1/chat/completions", reasoning_body(seed));
    ASSERT_EQ(r.status, 200) << r.body;
    const json msg = r.json()["choices"][0]["message"];
    // The prompt opened <think>: what the model wrote is reasoning (it never wrote </think>
    // in these 24 tokens), none of it content, and no markup leaks into either.
    ASSERT_TRUE(msg["reasoning_content"].is_string()) << r.body;
    const std::string reasoning = msg["reasoning_content"];
    with_reasoning += !reasoning.empty();
    EXPECT_EQ(reasoning.find("<think>"), std::string::npos) << r.body;
    EXPECT_TRUE(msg["content"].is_null() || msg["content"] == "") << r.body;

    json body = reasoning_body(seed);
    body["stream"] = true;
    auto st = post_json(s->port(), "/v1/chat/completions", body);
    ASSERT_EQ(st.status, 200) << st.body;
    std::string streamed_reasoning, streamed_content;
    for (const SseEvent& e : parse_sse(st.body)) {
      if (e.data == "[DONE]") continue;
      const json chunk = json::parse(e.data);
      for (const json& ch : chunk["choices"]) {
        const json& d = ch["delta"];
        if (d.contains("reasoning_content") && d["reasoning_content"].is_string())
          streamed_reasoning += d["reasoning_content"].get<std::string>();
        if (d.contains("content") && d["content"].is_string())
          streamed_content += d["content"].get<std::string>();
      }
    }
    EXPECT_EQ(streamed_reasoning, msg["reasoning_content"].get<std::string>());
    EXPECT_EQ(streamed_content,
              msg["content"].is_string() ? msg["content"].get<std::string>() : "");
  }
  EXPECT_GT(with_reasoning, 0);
}

TEST(OpenAiReasoning, ReasoningParserNoneKeepsTheTextAsContent) {
  auto s = server_with(kTestReasoningChatTemplate, "", "none");
  ASSERT_NE(s, nullptr);
  auto r = post_json(s->port(), "/v1/chat/completions", reasoning_body(3));
  ASSERT_EQ(r.status, 200) << r.body;
  const json msg = r.json()["choices"][0]["message"];
  EXPECT_FALSE(msg.contains("reasoning_content") && msg["reasoning_content"].is_string() &&
               !msg["reasoning_content"].get<std::string>().empty())
      << r.body;
  ASSERT_TRUE(msg["content"].is_string()) << r.body;
  EXPECT_FALSE(msg["content"].get<std::string>().empty()) << r.body;
  // The same request on the auto-detected server puts that text in reasoning_content.
  auto detected = server_with(kTestReasoningChatTemplate);
  ASSERT_NE(detected, nullptr);
  auto d = post_json(detected->port(), "/v1/chat/completions", reasoning_body(3));
  ASSERT_EQ(d.status, 200) << d.body;
  EXPECT_FALSE(d.json()["choices"][0]["message"]["reasoning_content"].get<std::string>().empty())
      << d.body;
}

// tool_choice "required" writes the call in the template's own format (hermes) unless
// --tool-call-parser names another, and that parser reads it back. Cut short by max_tokens in
// its opener, the call leaves neither content nor a call behind.
TEST(OpenAiToolParserFlag, OverridesTheTemplatesFormat) {
  const json tools = json::parse(R"([{"type": "function", "function": {"name": "f",
      "parameters": {"type": "object", "properties": {"x": {"type": "integer"}},
      "required": ["x"], "additionalProperties": false}}}])");
  json body = {{"messages", {{{"role", "user"}, {"content", "call f"}}}},
               {"tools", tools},
               {"tool_choice", "required"},
               {"parallel_tool_calls", false},
               {"seed", 1}};
  for (const std::string parser : {"", "mistral", "hermes"}) {
    SCOPED_TRACE(parser);
    auto s = server_with(kTestChatTemplate, parser);
    ASSERT_NE(s, nullptr);
    body["max_tokens"] = 160;
    auto r = post_json(s->port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json c = r.json()["choices"][0];
    EXPECT_EQ(c["finish_reason"], "tool_calls") << r.body;
    EXPECT_TRUE(c["message"]["content"].is_null()) << r.body;
    ASSERT_EQ(c["message"]["tool_calls"].size(), 1u) << r.body;
    EXPECT_EQ(c["message"]["tool_calls"][0]["function"]["name"], "f") << r.body;
    const json args =
        json::parse(c["message"]["tool_calls"][0]["function"]["arguments"].get<std::string>());
    EXPECT_TRUE(args["x"].is_number_integer()) << r.body;

    body["max_tokens"] = 4;  // four byte tokens: a part of the opener
    r = post_json(s->port(), "/v1/chat/completions", body);
    ASSERT_EQ(r.status, 200) << r.body;
    c = r.json()["choices"][0];
    EXPECT_EQ(c["finish_reason"], "length") << r.body;
    EXPECT_TRUE(c["message"]["content"].is_null() || c["message"]["content"] == "") << r.body;
    EXPECT_FALSE(c["message"].contains("tool_calls")) << r.body;
  }
}

TEST(OpenAiToolParserFlag, UnknownNamesAreStartUpErrors) {
  for (const auto& [tool, reasoning, flag] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"klingon", "", "--tool-call-parser"}, {"", "telepathy", "--reasoning-parser"}}) {
    server::ServerOptions so;
    so.port = 0;
    so.served_model_name = kTestModelName;
    so.model_path = "synth:tiny";
    so.chat_template = kTestChatTemplate;
    so.tool_call_parser = tool;
    so.reasoning_parser = reasoning;
    auto started = server::Server::start(so);
    Status st = started.is_ok() ? (*started)->load("synth:tiny", EngineConfig{}) : started.status();
    ASSERT_FALSE(st.is_ok()) << flag;
    EXPECT_NE(st.message().find(flag), std::string::npos) << st.message();
  }
}

}  // namespace
}  // namespace loom::test
