// Anthropic thinking blocks over HTTP, on servers whose chat templates make the test model a
// reasoning model: a DeepSeek-R1-style template (the prompt opens <think>, so the random model's
// output is reasoning) gives a thinking block, streamed as thinking_delta + signature_delta; a
// Qwen3-style template with thinking {type: "disabled"} gives a tool call with no reasoning.
#include <gtest/gtest.h>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

constexpr const char* kR1Template =
    "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|><think>\n{%- endif -%}";

// Qwen3's switch: with enable_thinking=false the prompt closes an empty think block. (Tools
// are marked: a template that never reads them makes tools a 400.)
constexpr const char* kQwen3Template =
    "{%- if tools -%}<|tools|>{%- endif -%}"
    "{%- for m in messages -%}<|{{ m['role'] }}|>{{ m['content'] }}{{ '\\n' }}{%- endfor -%}"
    "{%- if add_generation_prompt -%}<|assistant|>"
    "{%- if enable_thinking is defined and not enable_thinking -%}<think>\n\n</think>\n\n{%- endif "
    "-%}"
    "{%- endif -%}";

std::unique_ptr<server::Server> server_with(const char* chat_template) {
  server::ServerOptions so;
  so.chat_template = chat_template;
  return start_test_server(so);
}

// The event stream folded into a message (block order and the signature_delta checked).
json fold(const std::string& body) {
  json msg;
  for (const SseEvent& e : parse_sse(body)) {
    json j = json::parse(e.data);
    if (e.event == "message_start") msg = j["message"];
    if (e.event == "content_block_start") {
      EXPECT_EQ(j["index"], msg["content"].size());
      msg["content"].push_back(j["content_block"]);
    }
    if (e.event == "content_block_delta") {
      json& b = msg["content"][j["index"].get<size_t>()];
      const json& d = j["delta"];
      if (d["type"] == "thinking_delta")
        b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      if (d["type"] == "text_delta")
        b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
      if (d["type"] == "signature_delta") {
        EXPECT_EQ(b["type"], "thinking");
        b["signature_seen"] = true;
      }
      if (d["type"] == "input_json_delta")
        b["partial"] = b.value("partial", "") + d["partial_json"].get<std::string>();
    }
    if (e.event == "content_block_stop") {
      json& b = msg["content"][j["index"].get<size_t>()];
      if (b["type"] == "thinking") {
        EXPECT_EQ(b["signature_seen"], true) << "a thinking block ends with a signature_delta";
        b.erase("signature_seen");
      }
      if (b["type"] == "tool_use") {
        b["input"] = json::parse(b.value("partial", "{}"));
        b.erase("partial");
      }
    }
    if (e.event == "message_delta") {
      msg["stop_reason"] = j["delta"]["stop_reason"];
      msg["usage"]["output_tokens"] = j["usage"]["output_tokens"];
    }
  }
  return msg;
}

TEST(ServerAnthropicThinking, ReasoningBecomesAThinkingBlock) {
  auto s = server_with(kR1Template);
  ASSERT_TRUE(s);
  json body = {{"max_tokens", 20},
               {"temperature", 0},
               {"ignore_eos", true},
               {"messages", {{{"role", "user"}, {"content", "think"}}}}};
  auto r = post_json(s->port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json full = r.json();
  ASSERT_GE(full["content"].size(), 1u) << r.body;
  const json& first = full["content"][0];
  EXPECT_EQ(first["type"], "thinking") << r.body;
  EXPECT_FALSE(first["thinking"].get<std::string>().empty()) << r.body;
  EXPECT_EQ(first["signature"], "");
  EXPECT_EQ(full["stop_reason"], "max_tokens");

  body["stream"] = true;
  TestConnection c(s->port());
  ASSERT_TRUE(c.send_request("POST", "/v1/messages", body.dump()));
  HttpResult sr = c.read_response();
  ASSERT_EQ(sr.status, 200) << sr.body;
  json streamed = fold(sr.body);
  streamed.erase("id");
  full.erase("id");
  EXPECT_EQ(streamed, full) << sr.body;

  // A thinking block sent back in a later turn is accepted (passed as reasoning_content).
  json again = {{"max_tokens", 2},
                {"messages",
                 {{{"role", "user"}, {"content", "think"}},
                  {{"role", "assistant"}, {"content", full["content"]}},
                  {{"role", "user"}, {"content", "more"}}}}};
  EXPECT_EQ(post_json(s->port(), "/v1/messages", again).status, 200);
  s->stop();
}

TEST(ServerAnthropicThinking, DisabledThinkingGoesStraightToTheCall) {
  auto s = server_with(kQwen3Template);
  ASSERT_TRUE(s);
  json tool = json::parse(R"({"name": "pick", "input_schema": {"type": "object",
      "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}}, "required": ["n"], "additionalProperties": false}})");
  json body = {{"max_tokens", 150},
               {"temperature", 0},
               {"thinking", {{"type", "disabled"}}},
               {"tools", json::array({tool})},
               {"tool_choice", {{"type", "any"}, {"disable_parallel_tool_use", true}}},
               {"messages", {{{"role", "user"}, {"content", "pick"}}}}};
  auto r = post_json(s->port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json full = r.json();
  ASSERT_EQ(full["content"].size(), 1u) << r.body;
  EXPECT_EQ(full["content"][0]["type"], "tool_use") << r.body;
  EXPECT_EQ(full["content"][0]["name"], "pick");
  ASSERT_TRUE(full["content"][0]["input"].contains("n")) << r.body;
  EXPECT_TRUE(full["content"][0]["input"]["n"].is_number_integer());
  EXPECT_EQ(full["stop_reason"], "tool_use");

  body["stream"] = true;
  TestConnection c(s->port());
  ASSERT_TRUE(c.send_request("POST", "/v1/messages", body.dump()));
  HttpResult sr = c.read_response();
  ASSERT_EQ(sr.status, 200) << sr.body;
  json streamed = fold(sr.body);
  for (json* m : {&streamed, &full}) {
    m->erase("id");
    (*m)["content"][0].erase("id");
  }
  EXPECT_EQ(streamed, full) << sr.body;
  s->stop();
}

}  // namespace
}  // namespace loom::test
