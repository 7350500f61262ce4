// Every request field is either supported or a 400 that names it: the black-box cases of
// fields that were once accepted and ignored (Anthropic extra inputs, /tokenize extras, message
// keys a role does not take, tools a template cannot render, reasoning_effort on a model that
// does not reason), the vLLM extensions now implemented (return_token_strs,
// continue_final_message, continuous_usage_stats), and errors that must name the right field.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

const json kHi = json::array({{{"role", "user"}, {"content", "hi"}}});

// A 400 in OpenAI's (or Anthropic's) shape whose param is `param` and whose message holds
// `needle`.
void expect_param(const HttpResult& r, const std::string& param, const std::string& needle = "") {
  EXPECT_EQ(r.status, 400) << r.body;
  const json j = r.json();
  ASSERT_TRUE(j.contains("error") && j["error"].is_object()) << r.body;
  EXPECT_EQ(j["error"]["param"], param) << r.body;
  EXPECT_NE(j["error"]["message"].get<std::string>().find(needle.empty() ? param : needle),
            std::string::npos)
      << r.body;
}

json chat_body(json extra) {
  json b = {{"messages", kHi}, {"max_tokens", 2}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

json messages_body(json extra) {
  json b = {{"messages", kHi}, {"max_tokens", 2}};
  for (auto& [k, v] : extra.items()) b[k] = v;
  return b;
}

const json kTool = {
    {"type", "function"},
    {"function",
     {{"name", "get_weather"},
      {"parameters", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}}}};
const json kAnthropicTool = {
    {"name", "get_weather"},
    {"input_schema", {{"type", "object"}, {"properties", {{"city", {{"type", "string"}}}}}}}};

TEST(RequestFields, AnthropicRefusesExtraInputsAndTakesItsOwn) {
  const uint16_t port = shared_port();
  struct Case {
    json extra;
    const char* param;
  };
  const Case cases[] = {
      {{{"foo", 1}}, "foo"},
      {{{"container", "c"}}, "container"},
      {{{"mcp_servers", json::array({{{"type", "url"}, {"url", "https://x"}}})}}, "mcp_servers"},
      {{{"metadata", {{"foo", "u"}}}}, "metadata.foo"},
      {{{"metadata", {{"user_id", 3}}}}, "metadata.user_id"},
      {{{"temperature", 2}}, "temperature"},
      {{{"service_tier", "priority"}}, "service_tier"},
      {{{"n", 2}}, "n"},
      {{{"stream", true}, {"stream_options", {{"include_usage", true}}}}, "stream_options"},
      {{{"max_tokens", 0}}, "max_tokens"},
  };
  for (const Case& c : cases) {
    auto r = post_json(port, "/v1/messages", messages_body(c.extra));
    SCOPED_TRACE(c.extra.dump());
    expect_param(r, c.param);
    EXPECT_EQ(r.json()["type"], "error") << r.body;
    EXPECT_EQ(r.json()["error"]["type"], "invalid_request_error") << r.body;
  }
  EXPECT_NE(post_json(port, "/v1/messages", messages_body({{"foo", 1}}))
                .body.find("Extra inputs are not permitted"),
            std::string::npos);
  // What Anthropic defines and loom can honour is taken.
  auto ok = post_json(port, "/v1/messages",
                      messages_body({{"metadata", {{"user_id", "u-1"}}},
                                     {"temperature", 1},
                                     {"top_k", 5},
                                     {"top_p", 0.9},
                                     {"stop_sequences", {"zz"}},
                                     {"service_tier", "standard_only"}}));
  EXPECT_EQ(ok.status, 200) << ok.body;
  // count_tokens takes no max_tokens and no unknown field.
  expect_param(post_json(port, "/v1/messages/count_tokens", {{"messages", kHi}, {"foo", 1}}),
               "foo");
  expect_param(post_json(port, "/v1/messages/count_tokens", {{"messages", kHi}, {"max_tokens", 5}}),
               "max_tokens");
  EXPECT_EQ(post_json(port, "/v1/messages/count_tokens", {{"messages", kHi}}).status, 200);
}

TEST(RequestFields, TokenizeTakesVllmsFieldsAndRefusesOthers) {
  const uint16_t port = shared_port();
  auto r = post_json(port, "/tokenize", {{"prompt", "hello"}, {"return_token_strs", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json j = r.json();
  ASSERT_TRUE(j.contains("token_strs")) << r.body;
  ASSERT_EQ(j["token_strs"].size(), j["tokens"].size()) << r.body;
  std::string joined;
  for (const auto& s : j["token_strs"]) joined += s.get<std::string>();
  EXPECT_NE(joined.find("hello"), std::string::npos) << r.body;  // a byte vocabulary
  EXPECT_FALSE(post_json(port, "/tokenize", {{"prompt", "hello"}}).json().contains("token_strs"));

  expect_param(post_json(port, "/tokenize", {{"prompt", "x"}, {"foo", 1}}), "foo");
  expect_param(post_json(port, "/tokenize", {{"prompt", "x"}, {"return_token_strs", "yes"}}),
               "return_token_strs");
  expect_param(post_json(port, "/tokenize", {{"prompt", "x"}, {"tools", {kTool}}}), "tools");
  expect_param(post_json(port, "/tokenize", {{"prompt", "x"}, {"add_generation_prompt", true}}),
               "add_generation_prompt");
  expect_param(post_json(port, "/tokenize", {{"messages", kHi}, {"chat_template", "x"}}),
               "chat_template");
  expect_param(post_json(port, "/detokenize", {{"tokens", {1, 2}}, {"foo", 1}}), "foo");

  // Chat messages with tools: the template names them, so the count grows.
  const size_t plain = post_json(port, "/tokenize", {{"messages", kHi}}).json()["count"];
  const size_t with_tools =
      post_json(port, "/tokenize", {{"messages", kHi}, {"tools", {kTool}}}).json()["count"];
  EXPECT_GT(with_tools, plain);

  // continue_final_message: the last message left open, nothing after its content.
  const json partial = json::array(
      {{{"role", "user"}, {"content", "hi"}}, {{"role", "assistant"}, {"content", "Hello wor"}}});
  auto c = post_json(
      port, "/tokenize",
      {{"messages", partial}, {"continue_final_message", true}, {"add_generation_prompt", false}});
  ASSERT_EQ(c.status, 200) << c.body;
  auto text = post_json(port, "/detokenize", {{"tokens", c.json()["tokens"]}});
  ASSERT_EQ(text.status, 200) << text.body;
  const std::string prompt = text.json()["prompt"];
  ASSERT_GE(prompt.size(), 9u);
  EXPECT_EQ(prompt.substr(prompt.size() - 9), "Hello wor") << prompt;
  auto closed =
      post_json(port, "/tokenize", {{"messages", partial}, {"add_generation_prompt", false}});
  EXPECT_GT(closed.json()["count"].get<size_t>(), c.json()["count"].get<size_t>());
  expect_param(post_json(port, "/tokenize",
                         {{"messages", partial},
                          {"continue_final_message", true},
                          {"add_generation_prompt", true}}),
               "continue_final_message");
}

// Usage on every chunk (vLLM's continuous_usage_stats), for chat and completions streams.
TEST(RequestFields, ContinuousUsageStatsPutsUsageOnEveryChunk) {
  const uint16_t port = shared_port();
  const json so = {{"include_usage", true}, {"continuous_usage_stats", true}};
  for (const char* path : {"/v1/chat/completions", "/v1/completions"}) {
    SCOPED_TRACE(path);
    json body = {{"max_tokens", 5},
                 {"ignore_eos", true},
                 {"temperature", 0},
                 {"stream", true},
                 {"stream_options", so}};
    if (std::string(path) == "/v1/completions")
      body["prompt"] = "hello";
    else
      body["messages"] = kHi;
    auto r = post_json(port, path, body);
    ASSERT_EQ(r.status, 200) << r.body;
    int with_choices = 0;
    int64_t last_completion = -1;
    for (const SseEvent& e : parse_sse(r.body)) {
      if (e.data == "[DONE]") continue;
      const json ck = json::parse(e.data);
      ASSERT_TRUE(ck.contains("usage") && ck["usage"].is_object()) << e.data;
      const int64_t done = ck["usage"]["completion_tokens"];
      EXPECT_GE(done, last_completion) << e.data;
      last_completion = done;
      EXPECT_GT(ck["usage"]["prompt_tokens"].get<int64_t>(), 0) << e.data;
      if (!ck["choices"].empty()) ++with_choices;
    }
    EXPECT_GE(with_choices, 2);
    EXPECT_EQ(last_completion, 5);
    // Without it, only the final chunk has usage.
    body["stream_options"] = {{"include_usage", true}};
    int usage_chunks = 0;
    for (const SseEvent& e : parse_sse(post_json(port, path, body).body))
      if (e.data != "[DONE]" && json::parse(e.data).contains("usage")) ++usage_chunks;
    EXPECT_EQ(usage_chunks, 1);
  }
  expect_param(post_json(port, "/v1/chat/completions",
                         chat_body({{"stream", true},
                                    {"stream_options", {{"continuous_usage_stats", true}}}})),
               "stream_options.continuous_usage_stats");
}

TEST(RequestFields, ChatMessagesTakeOnlyTheirRolesKeys) {
  const uint16_t port = shared_port();
  auto with_messages = [&](json messages) {
    return post_json(port, "/v1/chat/completions", chat_body({{"messages", messages}}));
  };
  expect_param(with_messages(json::array({{{"role", "user"}, {"content", "hi"}, {"foo", 1}}})),
               "messages[0].foo");
  expect_param(with_messages(json::array(
                   {{{"role", "user"}, {"content", "hi"}, {"reasoning_content", "r"}}})),
               "messages[0].reasoning_content");
  expect_param(with_messages(json::array(
                   {{{"role", "user"}, {"content", "hi"}, {"tool_calls", json::array()}}})),
               "messages[0].tool_calls");
  expect_param(
      with_messages(json::array({{{"role", "system"}, {"content", "s"}, {"tool_call_id", "c"}},
                                 {{"role", "user"}, {"content", "hi"}}})),
      "messages[0].tool_call_id");
  // OpenAI's name is taken on every role that has one; null fields (SDK echoes) too.
  EXPECT_EQ(
      with_messages(
          json::array(
              {{{"role", "system"}, {"content", "s"}, {"name", "a"}},
               {{"role", "user"}, {"content", "hi"}, {"name", "bob"}},
               {{"role", "assistant"}, {"content", "yo"}, {"name", "bot"}, {"refusal", nullptr}},
               {{"role", "user"}, {"content", "hi"}}}))
          .status,
      200);
  // Malformed assistant tool calls are named, not left to the template.
  auto calls = [&](json tool_calls) {
    return with_messages(
        json::array({{{"role", "user"}, {"content", "hi"}},
                     {{"role", "assistant"}, {"content", nullptr}, {"tool_calls", tool_calls}},
                     {{"role", "user"}, {"content", "ok"}}}));
  };
  expect_param(calls(json::array({{{"id", "c1"}}})), "messages[1].tool_calls[0].function");
  expect_param(calls({{"id", "c1"}}), "messages[1].tool_calls");
  expect_param(
      calls(json::array(
          {{{"id", "c1"}, {"type", "custom"}, {"custom", {{"name", "f"}, {"input", "x"}}}}})),
      "messages[1].tool_calls[0].type");
  expect_param(calls(json::array({{{"id", "c1"},
                                   {"type", "custom"},
                                   {"function", {{"name", "f"}, {"arguments", "{}"}}}}})),
               "messages[1].tool_calls[0].type");
  expect_param(calls(json::array(
                   {{{"id", "c1"}, {"type", "function"}, {"function", {{"arguments", "{}"}}}}})),
               "messages[1].tool_calls[0].function.name");
  EXPECT_EQ(calls(json::array({{{"id", "c1"},
                                {"type", "function"},
                                {"function", {{"name", "f"}, {"arguments", "{}"}}}}}))
                .status,
            200);
}

TEST(RequestFields, ErrorsNameTheFieldThatIsWrong) {
  const uint16_t port = shared_port();
  const char* chat = "/v1/chat/completions";
  expect_param(post_json(port, chat, chat_body({{"logprobs", true}, {"top_logprobs", 21}})),
               "top_logprobs", "top_logprobs must be in [0, 20]");
  expect_param(post_json(port, chat, chat_body({{"max_completion_tokens", -3}})),
               "max_completion_tokens");
  expect_param(post_json(port, chat, chat_body({{"max_tokens", 1e12}})), "max_tokens",
               "max_tokens must be in [1, 2147483647]");
  expect_param(post_json(port, chat, chat_body({{"seed", 9223372036854775808ull}})), "seed",
               "seed must be in [-9223372036854775808, 9223372036854775807]");
  expect_param(post_json(port, chat, chat_body({{"seed", 18446744073709551615ull}})), "seed",
               "seed must be in [");
  const json cmpl = {{"prompt", "x"}, {"max_tokens", 2}};
  for (int lp : {-1, 21}) {
    json b = cmpl;
    b["logprobs"] = lp;
    expect_param(post_json(port, "/v1/completions", b), "logprobs", "logprobs must be in [0, 20]");
  }
  expect_param(
      post_json(port, chat,
                chat_body({{"stream", true}, {"stream_options", {{"include_usage", "yes"}}}})),
      "stream_options.include_usage");
  expect_param(
      post_json(port, chat, chat_body({{"stream", true}, {"stream_options", {{"foo", 1}}}})),
      "stream_options.foo");
  // The Responses API calls the prompt "input".
  expect_param(post_json(port, "/v1/responses", {{"input", std::string(300, 'x')}}), "input",
               "tokens");
  // reasoning_effort on a model that does not reason: refused as /v1/responses refuses it.
  expect_param(post_json(port, chat, chat_body({{"reasoning_effort", "low"}})), "reasoning_effort",
               "does not reason");
  expect_param(
      post_json(port, "/v1/responses", {{"input", "hi"}, {"reasoning", {{"effort", "low"}}}}),
      "reasoning", "does not reason");
}

// A template that never reads `tools` (as loom's ChatML fallback): tools would be dropped
// without the model hearing of them, so each API refuses them unless tool_choice is "none".
TEST(RequestFields, ToolsOnATemplateWithoutToolSupportAreRefused) {
  server::ServerOptions so;
  so.chat_template =
      "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{%- endfor -%}"
      "{%- if add_generation_prompt -%}<|assistant|>{%- endif -%}";
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  expect_param(post_json(port, "/v1/chat/completions", chat_body({{"tools", {kTool}}})), "tools",
               "--chat-template");
  expect_param(post_json(port, "/v1/chat/completions",
                         chat_body({{"tools", {kTool}}, {"tool_choice", "required"}})),
               "tools", "no tool support");
  EXPECT_EQ(post_json(port, "/v1/chat/completions",
                      chat_body({{"tools", {kTool}}, {"tool_choice", "none"}}))
                .status,
            200);
  expect_param(post_json(port, "/v1/messages", messages_body({{"tools", {kAnthropicTool}}})),
               "tools", "--chat-template");
  EXPECT_EQ(
      post_json(port, "/v1/messages",
                messages_body({{"tools", {kAnthropicTool}}, {"tool_choice", {{"type", "none"}}}}))
          .status,
      200);
  expect_param(post_json(port, "/v1/messages/count_tokens",
                         {{"messages", kHi}, {"tools", {kAnthropicTool}}}),
               "tools");
  expect_param(post_json(port, "/tokenize", {{"messages", kHi}, {"tools", {kTool}}}), "tools");
  expect_param(post_json(port, "/v1/responses",
                         {{"input", "hi"},
                          {"tools",
                           {{{"type", "function"},
                             {"name", "get_weather"},
                             {"parameters", {{"type", "object"}}}}}}}),
               "tools");
  auto ollama = post_json(port, "/api/chat",
                          {{"model", kTestModelName}, {"messages", kHi}, {"tools", {kTool}}});
  EXPECT_EQ(ollama.status, 400) << ollama.body;
  EXPECT_NE(ollama.body.find("no tool support"), std::string::npos) << ollama.body;
  EXPECT_EQ(wait_engine_idle(*s), "");
  s->stop();
  // The shared server's template names its tools: the count grows with them.
  const uint16_t shared = shared_port();
  const int64_t plain =
      post_json(shared, "/v1/messages/count_tokens", {{"messages", kHi}}).json()["input_tokens"];
  const int64_t with_tools = post_json(shared, "/v1/messages/count_tokens",
                                       {{"messages", kHi}, {"tools", {kAnthropicTool}}})
                                 .json()["input_tokens"];
  EXPECT_GT(with_tools, plain);
}

}  // namespace
}  // namespace loom::test
