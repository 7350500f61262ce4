// Anthropic tool use over HTTP against the random-weight test model: tool_choice "any" / "tool"
// must give a tool_use block whose input follows the tool's input_schema (the grammar forces it),
// with stop_reason "tool_use"; the event stream reassembles to the same message; multi-turn
// tool_use / tool_result conversations render; thinking reaches the template; bad input is a
// 400 naming the field and leaves the server healthy.
#include <gtest/gtest.h>

#include <regex>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

// Small schemas whose every value has a bounded length, so a call always fits the test model's
// 256-token context.
json weather_tool() {
  return json::parse(R"({"name": "get_weather", "description": "Weather for a city",
    "input_schema": {"type": "object", "properties": {
      "city": {"type": "string", "maxLength": 8},
      "unit": {"enum": ["c", "f"]},
      "days": {"type": "integer", "minimum": 1, "maximum": 7}},
    "required": ["city", "unit", "days"], "additionalProperties": false}})");
}
json add_tool() {
  return json::parse(R"({"name": "add", "input_schema": {"type": "object", "properties": {
      "a": {"type": "integer", "minimum": 0, "maximum": 99},
      "b": {"type": "integer", "minimum": 0, "maximum": 99},
      "exact": {"type": "boolean"}},
    "required": ["a", "b"], "additionalProperties": false}})");
}

// The input against the simple schemas above: required keys, each value's type and bounds, no
// other keys.
void expect_valid_input(const json& input, const json& tool, const std::string& what) {
  const json& schema = tool["input_schema"];
  ASSERT_TRUE(input.is_object()) << what << ": " << input.dump();
  for (const json& k : schema["required"])
    EXPECT_TRUE(input.contains(k.get<std::string>())) << what << ": " << input.dump();
  for (auto it = input.begin(); it != input.end(); ++it) {
    ASSERT_TRUE(schema["properties"].contains(it.key())) << what << ": unexpected key " << it.key();
    const json& p = schema["properties"][it.key()];
    const json& v = it.value();
    if (p.contains("enum")) {
      EXPECT_NE(std::find(p["enum"].begin(), p["enum"].end(), v), p["enum"].end())
          << what << ": " << v.dump();
    } else if (p["type"] == "string") {
      ASSERT_TRUE(v.is_string()) << what << ": " << v.dump();
      EXPECT_LE(v.get<std::string>().size(), p["maxLength"].get<size_t>() * 4)
          << what;  // UTF-8 bytes per char
    } else if (p["type"] == "integer") {
      ASSERT_TRUE(v.is_number_integer()) << what << ": " << v.dump();
      EXPECT_GE(v.get<int64_t>(), p["minimum"].get<int64_t>()) << what;
      EXPECT_LE(v.get<int64_t>(), p["maximum"].get<int64_t>()) << what;
    } else if (p["type"] == "boolean") {
      EXPECT_TRUE(v.is_boolean()) << what << ": " << v.dump();
    }
  }
}

int count_tokens(const json& body) {
  // count_tokens takes only what shapes the prompt (Anthropic refuses the rest as extra inputs).
  json b = json::object();
  for (const char* k : {"model", "system", "messages", "tools", "tool_choice", "thinking",
                        "output_config", "output_format", "chat_template_kwargs"})
    if (body.contains(k)) b[k] = body[k];
  auto r = post_json(shared_port(), "/v1/messages/count_tokens", b);
  EXPECT_EQ(r.status, 200) << r.body;
  return r.json().value("input_tokens", 0);
}

// A request with both tools and the rest of the context to generate in.
json tools_request(const json& tool_choice, const std::string& user = "weather?") {
  json body = {{"model", kTestModelName},
               {"messages", {{{"role", "user"}, {"content", user}}}},
               {"tools", {weather_tool(), add_tool()}},
               {"tool_choice", tool_choice},
               {"temperature", 0}};
  body["max_tokens"] = kTestMaxModelLen - count_tokens(body) - 1;
  return body;
}

json tool_by_name(const std::string& name) {
  return name == "add" ? add_tool() : weather_tool();
}

// A message's content: at least one block, no empty text block unless it is the only block,
// tool_use blocks with Anthropic ids, declared names and valid inputs. Returns the tool_use count.
int check_content(const json& msg, const std::string& what) {
  static const std::regex kId("^toolu_[A-Za-z0-9]{24}$");
  const json& content = msg["content"];
  EXPECT_TRUE(content.is_array() && !content.empty()) << what << ": " << msg.dump();
  int calls = 0;
  for (const json& b : content) {
    const std::string type = b["type"];
    if (type == "text") {
      EXPECT_TRUE(b["text"].is_string());
      if (content.size() > 1) {
        EXPECT_FALSE(b["text"].get<std::string>().empty()) << what << ": " << msg.dump();
      }
    } else if (type == "thinking") {
      EXPECT_TRUE(b["thinking"].is_string());
      EXPECT_EQ(b["signature"], "");
    } else if (type == "tool_use") {
      ++calls;
      EXPECT_TRUE(std::regex_match(b["id"].get<std::string>(), kId)) << b["id"];
      const std::string name = b["name"];
      EXPECT_TRUE(name == "get_weather" || name == "add") << name;
      expect_valid_input(b["input"], tool_by_name(name), what);
    } else {
      ADD_FAILURE() << what << ": unexpected block type " << type;
    }
  }
  return calls;
}

TEST(ServerAnthropicTools, ToolChoiceAnyGivesAValidToolUse) {
  json body = tools_request({{"type", "any"}, {"disable_parallel_tool_use", true}});
  auto r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(check_content(j, "any"), 1) << r.body;
  EXPECT_EQ(j["stop_reason"], "tool_use") << r.body;
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_GT(j["usage"]["output_tokens"].get<int>(), 0);
}

TEST(ServerAnthropicTools, ToolChoiceAnySampledWithSeeds) {
  for (int seed = 1; seed <= 3; ++seed) {
    json body = tools_request({{"type", "any"}, {"disable_parallel_tool_use", true}});
    body["temperature"] = 1.0;
    body["seed"] = seed;
    auto r = post_json(shared_port(), "/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json j = r.json();
    const std::string what = "seed " + std::to_string(seed);
    EXPECT_EQ(check_content(j, what), 1) << r.body;
    EXPECT_EQ(j["stop_reason"], "tool_use") << what << ": " << r.body;
  }
}

TEST(ServerAnthropicTools, ToolChoiceToolCallsTheNamedTool) {
  json body = tools_request(
      {{"type", "tool"}, {"name", "add"}, {"disable_parallel_tool_use", true}}, "add 2 and 3");
  auto r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(check_content(j, "tool"), 1) << r.body;
  for (const json& b : j["content"])
    if (b["type"] == "tool_use") {
      EXPECT_EQ(b["name"], "add");
    }
  EXPECT_EQ(j["stop_reason"], "tool_use") << r.body;
}

TEST(ServerAnthropicTools, ToolChoiceNoneAndAutoGiveValidMessages) {
  json body = tools_request({{"type", "none"}});
  body["max_tokens"] = 8;
  body["ignore_eos"] = true;
  auto r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(check_content(j, "none"), 0);
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  body = tools_request({{"type", "auto"}});
  r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  j = r.json();
  const int calls = check_content(j, "auto");
  if (calls > 0)
    EXPECT_EQ(j["stop_reason"], "tool_use") << r.body;
  else
    EXPECT_NE(j["stop_reason"], "tool_use") << r.body;
}

// The stream as a client reassembles it (the SDK's accumulation), checking the event grammar on
// the way: blocks are started, filled and stopped one at a time with indices 0, 1, ...
json reassemble(const std::vector<SseEvent>& events, json* message_delta) {
  json msg;
  int open = -1;
  std::vector<std::string> partial;
  for (const SseEvent& e : events) {
    json j = json::parse(e.data);
    EXPECT_EQ(j["type"], e.event);
    if (e.event == "ping") continue;
    if (e.event == "message_start") {
      EXPECT_TRUE(msg.is_null()) << "one message_start";
      msg = j["message"];
      EXPECT_TRUE(msg["content"].empty());
      EXPECT_TRUE(msg["stop_reason"].is_null());
    } else if (e.event == "content_block_start") {
      EXPECT_EQ(open, -1) << "a block started before the previous one stopped";
      open = j["index"];
      EXPECT_EQ(open, static_cast<int>(msg["content"].size()));
      json b = j["content_block"];
      if (b["type"] == "tool_use") {
        EXPECT_EQ(b["input"], json::object());
      }
      if (b["type"] == "text") {
        EXPECT_EQ(b["text"], "");
      }
      msg["content"].push_back(b);
      partial.emplace_back();
    } else if (e.event == "content_block_delta") {
      EXPECT_EQ(j["index"], open);
      if (open < 0) continue;
      json& b = msg["content"][open];
      const json& d = j["delta"];
      if (d["type"] == "text_delta") {
        EXPECT_EQ(b["type"], "text");
        b["text"] = b["text"].get<std::string>() + d["text"].get<std::string>();
      } else if (d["type"] == "thinking_delta") {
        EXPECT_EQ(b["type"], "thinking");
        b["thinking"] = b["thinking"].get<std::string>() + d["thinking"].get<std::string>();
      } else if (d["type"] == "signature_delta") {
        EXPECT_EQ(b["type"], "thinking");
        b["signature"] = d["signature"];
      } else if (d["type"] == "input_json_delta") {
        EXPECT_EQ(b["type"], "tool_use");
        partial[open] += d["partial_json"].get<std::string>();
      } else {
        ADD_FAILURE() << "unknown delta " << d.dump();
      }
    } else if (e.event == "content_block_stop") {
      EXPECT_EQ(j["index"], open);
      if (open >= 0 && msg["content"][open]["type"] == "tool_use") {
        json input = json::parse(partial[open], nullptr, false);
        EXPECT_FALSE(input.is_discarded()) << "input_json_delta fragments: " << partial[open];
        msg["content"][open]["input"] = input;
      }
      open = -1;
    } else if (e.event == "message_delta") {
      EXPECT_EQ(open, -1) << "message_delta with a block open";
      *message_delta = j;
      msg["stop_reason"] = j["delta"]["stop_reason"];
      msg["stop_sequence"] = j["delta"]["stop_sequence"];
      msg["usage"]["output_tokens"] = j["usage"]["output_tokens"];
    } else if (e.event != "message_stop") {
      ADD_FAILURE() << "unexpected event " << e.event << ": " << e.data;
    }
  }
  EXPECT_FALSE(events.empty());
  if (!events.empty()) {
    EXPECT_EQ(events.back().event, "message_stop");
  }
  return msg;
}

json without_ids(json msg) {
  for (json& b : msg["content"])
    if (b.contains("id")) b["id"] = "";
  msg.erase("id");
  return msg;
}

TEST(ServerAnthropicTools, StreamReassemblesToTheSameMessage) {
  // One call each: with parallel calls the random model keeps calling until max_tokens cuts the
  // last call short (output_parsing_test checks those cut calls, streamed and not).
  for (const json& choice :
       {json{{"type", "any"}, {"disable_parallel_tool_use", true}},
        json{{"type", "tool"}, {"name", "add"}, {"disable_parallel_tool_use", true}}}) {
    json body = tools_request(choice);
    json full = post_json(shared_port(), "/v1/messages", body).json();
    body["stream"] = true;
    TestConnection c(shared_port());
    ASSERT_TRUE(c.send_request("POST", "/v1/messages", body.dump()));
    HttpResult head = c.read_response();
    ASSERT_EQ(head.status, 200) << head.body;
    EXPECT_EQ(head.headers["content-type"], "text/event-stream");
    json delta;
    json streamed = reassemble(parse_sse(head.body), &delta);
    EXPECT_GE(check_content(streamed, "stream"), 1) << head.body;
    EXPECT_EQ(streamed["stop_reason"], "tool_use");
    EXPECT_EQ(without_ids(streamed), without_ids(full)) << head.body;
  }
}

TEST(ServerAnthropicTools, MultiTurnToolUseAndToolResultRender) {
  json body = json::parse(R"({"model": "tiny-test", "max_tokens": 4, "temperature": 0, "messages": [
      {"role": "user", "content": "weather?"},
      {"role": "assistant", "content": [{"type": "text", "text": "checking"},
        {"type": "tool_use", "id": "toolu_01A09q90qw90lq917835lq9", "name": "get_weather", "input": {"city": "Paris", "unit": "c", "days": 1}}]},
      {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "toolu_01A09q90qw90lq917835lq9", "content": "sunny"},
                                   {"type": "text", "text": "and?"}]}]})");
  body["tools"] = {weather_tool(), add_tool()};
  auto r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  check_content(r.json(), "multi-turn");
  // The template sees the tools (marked by the test template) and the tool result as its own
  // turn, before the user's text.
  json ct = body;
  ct.erase("max_tokens");  // generation fields are extra inputs to count_tokens
  ct.erase("temperature");
  auto n = post_json(shared_port(), "/v1/messages/count_tokens", ct);
  ASSERT_EQ(n.status, 200) << n.body;
  auto t =
      post_json(shared_port(), "/tokenize",
                {{"prompt",
                  "<|tools|><|user|>weather?\n<|assistant|>checking\n<|tool|>sunny\n<|user|>and?\n"
                  "<|assistant|>"},
                 {"add_special_tokens", false}});
  EXPECT_EQ(n.json()["input_tokens"], t.json()["count"]);
  // A tool_use-only assistant turn (content null for the template) renders too, streaming.
  body["messages"][1]["content"].erase(0);
  body["stream"] = true;
  TestConnection c(shared_port());
  ASSERT_TRUE(c.send_request("POST", "/v1/messages", body.dump()));
  HttpResult s = c.read_response();
  ASSERT_EQ(s.status, 200) << s.body;
  json delta;
  reassemble(parse_sse(s.body), &delta);
  EXPECT_EQ(delta["delta"]["stop_reason"], "max_tokens");
}

TEST(ServerAnthropicTools, ThinkingReachesTheTemplate) {
  const json msgs = {{{"role", "user"}, {"content", "hi"}}};
  auto count = [&](const json& thinking) {
    json b = {{"messages", msgs}};
    if (!thinking.is_null()) b["thinking"] = thinking;
    auto r = post_json(shared_port(), "/v1/messages/count_tokens", b);
    EXPECT_EQ(r.status, 200) << r.body;
    return r.json()["input_tokens"].get<int>();
  };
  auto tokens = [&](const std::string& prompt) {
    return post_json(shared_port(), "/tokenize",
                     {{"prompt", prompt}, {"add_special_tokens", false}})
        .json()["count"]
        .get<int>();
  };
  // The test template appends " /no_think" to user turns when enable_thinking is false.
  EXPECT_EQ(count({{"type", "disabled"}}), tokens("<|user|>hi /no_think\n<|assistant|>"));
  EXPECT_EQ(count({{"type", "enabled"}, {"budget_tokens", 2048}}),
            tokens("<|user|>hi\n<|assistant|>"));
  EXPECT_EQ(count(json()), tokens("<|user|>hi\n<|assistant|>"));
  auto r = post_json(shared_port(), "/v1/messages",
                     {{"messages", msgs},
                      {"max_tokens", 3},
                      {"thinking", {{"type", "disabled"}}},
                      {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["usage"]["input_tokens"], tokens("<|user|>hi /no_think\n<|assistant|>"));
}

// Anthropic's structured outputs (output_config.format): the text block is JSON that follows
// the schema.
TEST(ServerAnthropicTools, OutputConfigFormatConstrainsTheText) {
  json body = {{"model", kTestModelName},
               {"messages", {{{"role", "user"}, {"content", "numbers?"}}}},
               {"temperature", 0},
               {"output_config",
                {{"format", {{"type", "json_schema"}, {"schema", add_tool()["input_schema"]}}}}}};
  body["max_tokens"] = kTestMaxModelLen - count_tokens(body) - 1;
  auto r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  ASSERT_EQ(j["content"].size(), 1u) << r.body;
  ASSERT_EQ(j["content"][0]["type"], "text");
  json value = json::parse(j["content"][0]["text"].get<std::string>(), nullptr, false);
  ASSERT_FALSE(value.is_discarded()) << r.body;
  expect_valid_input(value, add_tool(), "output_config");
  EXPECT_EQ(j["stop_reason"], "end_turn") << r.body;
  // With forced tool calls the turn is a valid tool_use; the format waits for the answer
  // that follows the tool's result.
  body["tools"] = json::array({add_tool()});
  body["tool_choice"] = {{"type", "any"}, {"disable_parallel_tool_use", true}};
  body["max_tokens"] = kTestMaxModelLen - count_tokens(body) - 1;  // the tools lengthen it
  r = post_json(shared_port(), "/v1/messages", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(check_content(r.json(), "any + output_config"), 1) << r.body;
  EXPECT_EQ(r.json()["stop_reason"], "tool_use") << r.body;
}

TEST(ServerAnthropicTools, BadInputIsA400NamingTheField) {
  const json user = {{{"role", "user"}, {"content", "q"}}};
  const json base = {{"model", kTestModelName}, {"max_tokens", 16}, {"messages", user}};
  auto with = [&](const char* key, const json& v) {
    json b = base;
    b[key] = v;
    return b;
  };
  auto with_tools = [&](const json& choice) {
    json b = with("tools", json::array({weather_tool()}));
    b["tool_choice"] = choice;
    return b;
  };
  json bad_schema = weather_tool();
  bad_schema["input_schema"]["properties"]["city"]["type"] = "strng";
  const struct {
    const char* name;
    json body;
    const char* param;
    const char* mentions;
  } cases[] = {
      {"invalid input_schema", with("tools", json::array({bad_schema})), "tools", "input_schema"},
      {"input_schema missing", with("tools", json::array({{{"name", "f"}}})), "tools",
       "input_schema"},
      {"server tool",
       with("tools", json::array({{{"type", "web_search_20250305"}, {"name", "web_search"}}})),
       "tools", "web_search_20250305"},
      {"unknown tool named", with_tools({{"type", "tool"}, {"name", "nope"}}), "tool_choice",
       "nope"},
      {"bad tool_choice type", with_tools({{"type", "sometimes"}}), "tool_choice", "sometimes"},
      {"any without tools", with("tool_choice", {{"type", "any"}}), "tool_choice", "tool_choice"},
      {"image block",
       with("messages",
            {{{"role", "user"},
              {"content",
               {{{"type", "image"}, {"source", {{"type", "url"}, {"url", "http://x/y.png"}}}}}}}}),
       "messages", "image"},
      {"document block",
       with("messages", {{{"role", "user"},
                          {"content", {{{"type", "document"}, {"source", json::object()}}}}}}),
       "messages", "document"},
      {"orphan tool_result",
       with("messages", {{{"role", "user"},
                          {"content", {{{"type", "tool_result"}, {"tool_use_id", "toolu_x"}}}}}}),
       "messages", "toolu_x"},
      {"thinking bad type", with("thinking", {{"type", "maybe"}}), "thinking", "thinking.type"},
      {"thinking small budget", with("thinking", {{"type", "enabled"}, {"budget_tokens", 100}}),
       "thinking", "budget_tokens"},
      {"thinking budget over max_tokens",
       with("thinking", {{"type", "enabled"}, {"budget_tokens", 1024}}), "thinking", "max_tokens"},
      {"thinking not object", with("thinking", "on"), "thinking", "thinking"},
      {"kwargs disagree",
       [&] {
         json b = with("thinking", {{"type", "disabled"}});
         b["chat_template_kwargs"] = {{"enable_thinking", true}};
         return b;
       }(),
       "thinking", "enable_thinking"},
  };
  for (const auto& c : cases) {
    for (const char* path : {"/v1/messages", "/v1/messages/count_tokens"}) {
      if (std::string(path) == "/v1/messages/count_tokens" &&
          std::string(c.name) == "thinking budget over max_tokens")
        continue;
      auto r = post_json(shared_port(), path, c.body);
      EXPECT_EQ(r.status, 400) << c.name << " " << path << ": " << r.body;
      json j = r.json();
      EXPECT_EQ(j["type"], "error") << c.name;
      EXPECT_EQ(j["error"]["type"], "invalid_request_error") << c.name;
      EXPECT_EQ(j["error"]["param"], c.param) << c.name << ": " << r.body;
      EXPECT_NE(j["error"]["message"].get<std::string>().find(c.mentions), std::string::npos)
          << c.name << ": " << r.body;
    }
  }
  ASSERT_EQ(http_request(shared_port(), "GET", "/health").status, 200);
  auto ok = post_json(shared_port(), "/v1/messages", base);
  EXPECT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

}  // namespace
}  // namespace loom::test
