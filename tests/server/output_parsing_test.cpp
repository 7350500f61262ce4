// How generated text becomes answer content, reasoning and tool calls, over every API, on
// synth's tiny-qwen3 (random weights, Qwen3's real vocabulary) with Qwen3's real template
// (hermes tool calls, qwen3 reasoning):
//   - a call cut off by max_tokens: its markup is never content; a call whose name was read is
//     reported once as incomplete with the arguments written so far, one cut before is
//     dropped; streamed answers add up to exactly the non-streamed ones (OpenAI chat,
//     Anthropic Messages, Responses);
//   - skip_special_tokens holds with parsers on: control tokens (<|im_start|>) never reach
//     content unless the request asks for them.
#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

constexpr int32_t kImStart = 151644;

class Qwen3Server : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    std::ifstream f(std::string(LOOM_TEST_DATA) + "/chat_templates/Qwen-Qwen3-0.6B.jinja");
    std::stringstream ss;
    ss << f.rdbuf();
    server_ = start_tiny_qwen3_server(ss.str(), 1024).release();
    ASSERT_NE(server_, nullptr);
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static uint16_t port() { return server_->port(); }
  static inline server::Server* server_ = nullptr;
};

const json kParameters = json::parse(R"({"type": "object",
    "properties": {"city": {"enum": ["paris", "rome"]}},
    "required": ["city"], "additionalProperties": false})");
const json kUser = json::array({{{"role", "user"}, {"content", "weather?"}}});

// The probe's request: tool_choice required, thinking off; the random model keeps calling
// (parallel calls) until max_tokens cuts the last call somewhere.
json chat_request(int max_tokens) {
  return {{"messages", kUser},
          {"tools",
           {{{"type", "function"},
             {"function", {{"name", "get_weather"}, {"parameters", kParameters}}}}}},
          {"tool_choice", "required"},
          {"max_tokens", max_tokens},
          {"chat_template_kwargs", {{"enable_thinking", false}}},
          {"seed", 1}};
}

void expect_no_markup(const std::string& text, const std::string& what) {
  EXPECT_EQ(text.find("tool_call"), std::string::npos) << what << ": " << text;
  EXPECT_EQ(text.find('<'), std::string::npos) << what << ": " << text;
}

bool is_json(const std::string& s) {
  return !json::parse(s, nullptr, false).is_discarded();
}

// Cuts at every length through the first two calls: each answer's content is empty, its calls
// are the streamed ones exactly, and some lengths cut a call after its name.
TEST_F(Qwen3Server, CutToolCallIsNeverContentAndStreamsAddUp) {
  int cut_calls = 0, complete_answers = 0;
  for (int max_tokens = 1; max_tokens <= 48; ++max_tokens) {
    const std::string what = "max_tokens " + std::to_string(max_tokens);
    SCOPED_TRACE(what);
    auto r = post_json(port(), "/v1/chat/completions", chat_request(max_tokens));
    ASSERT_EQ(r.status, 200) << r.body;
    const json choice = r.json()["choices"][0];
    const json msg = choice["message"];
    const std::string content = msg["content"].is_string() ? msg["content"].get<std::string>() : "";
    EXPECT_EQ(content, "") << r.body;
    json calls = msg.value("tool_calls", json::array());
    for (size_t i = 0; i < calls.size(); ++i) {
      EXPECT_EQ(calls[i]["function"]["name"], "get_weather") << r.body;
      const std::string args = calls[i]["function"]["arguments"];
      // Only the last call can be cut; a cut one shows the arguments written so far.
      if (!is_json(args)) {
        EXPECT_EQ(i + 1, calls.size()) << r.body;
        EXPECT_EQ(choice["finish_reason"], "length") << r.body;
        ++cut_calls;
      }
    }
    complete_answers += choice["finish_reason"] == "tool_calls";

    json body = chat_request(max_tokens);
    body["stream"] = true;
    auto st = post_json(port(), "/v1/chat/completions", body);
    ASSERT_EQ(st.status, 200) << st.body;
    std::string streamed_content;
    json streamed_calls = json::array();
    json finish;
    for (const SseEvent& e : parse_sse(st.body)) {
      if (e.data == "[DONE]") continue;
      const json d = json::parse(e.data)["choices"][0]["delta"];
      if (d.contains("content") && d["content"].is_string())
        streamed_content += d["content"].get<std::string>();
      for (const json& t : d.value("tool_calls", json::array())) {
        const size_t index = t["index"];
        if (t.contains("id")) {
          ASSERT_EQ(index, streamed_calls.size()) << st.body;
          streamed_calls.push_back({{"name", t["function"]["name"]}, {"arguments", ""}});
        }
        ASSERT_LT(index, streamed_calls.size()) << st.body;
        streamed_calls[index]["arguments"] = streamed_calls[index]["arguments"].get<std::string>() +
                                             t["function"]["arguments"].get<std::string>();
      }
      const json fin = json::parse(e.data)["choices"][0]["finish_reason"];
      if (!fin.is_null()) finish = fin;
    }
    expect_no_markup(streamed_content, what);
    EXPECT_EQ(streamed_content, content) << st.body;
    EXPECT_EQ(finish, choice["finish_reason"]);
    json whole = json::array();
    for (const json& c : calls)
      whole.push_back({{"name", c["function"]["name"]}, {"arguments", c["function"]["arguments"]}});
    EXPECT_EQ(streamed_calls, whole) << st.body;
  }
  EXPECT_GT(cut_calls, 0);
  EXPECT_EQ(complete_answers, 0);  // parallel calls: the random model never stops calling
}

// The Messages API: the same cuts give the same blocks streamed and not, and no text block.
TEST_F(Qwen3Server, AnthropicCutToolUseStreamsTheSameBlocks) {
  int cut_calls = 0;
  for (int max_tokens = 1; max_tokens <= 48; max_tokens += 3) {
    const std::string what = "max_tokens " + std::to_string(max_tokens);
    SCOPED_TRACE(what);
    json body = {{"model", kTestModelName},
                 {"max_tokens", max_tokens},
                 {"messages", kUser},
                 {"tools", {{{"name", "get_weather"}, {"input_schema", kParameters}}}},
                 {"tool_choice", {{"type", "any"}}},
                 {"thinking", {{"type", "disabled"}}},
                 {"seed", 1}};
    auto r = post_json(port(), "/v1/messages", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json whole = r.json()["content"];
    for (json& b : whole) {
      // Text only as the one empty block of a message with nothing else in it.
      if (b["type"] != "tool_use") {
        EXPECT_EQ(whole, json::parse(R"([{"type": "text", "text": ""}])")) << r.body;
      }
      b.erase("id");
    }
    body["stream"] = true;
    auto st = post_json(port(), "/v1/messages", body);
    ASSERT_EQ(st.status, 200) << st.body;
    json streamed = json::array();
    std::vector<std::string> partial;
    for (const SseEvent& e : parse_sse(st.body)) {
      const json j = json::parse(e.data);
      if (e.event == "content_block_start") {
        json b = j["content_block"];
        b.erase("id");
        streamed.push_back(b);
        partial.emplace_back();
      } else if (e.event == "content_block_delta") {
        const json& d = j["delta"];
        if (d["type"] == "input_json_delta")
          partial.back() += d["partial_json"].get<std::string>();
        else if (d["type"] == "text_delta")
          streamed.back()["text"] =
              streamed.back()["text"].get<std::string>() + d["text"].get<std::string>();
      } else if (e.event == "content_block_stop" && streamed.back()["type"] == "tool_use") {
        // A call cut short keeps the {} of its start: its partial arguments are no object.
        json input = json::parse(partial.back(), nullptr, false);
        if (input.is_discarded()) {
          ++cut_calls;
          input = json::object();
        }
        streamed.back()["input"] = input;
      }
    }
    EXPECT_EQ(streamed, whole) << st.body;
  }
  EXPECT_GT(cut_calls, 0);
}

// The Responses API: output items streamed (item done events, argument and text deltas) are
// the non-streamed ones; a cut call is a function_call item with status incomplete.
TEST_F(Qwen3Server, ResponsesCutFunctionCallStreamsTheSameItems) {
  int cut_calls = 0;
  for (int max_tokens = 1; max_tokens <= 48; max_tokens += 3) {
    const std::string what = "max_output_tokens " + std::to_string(max_tokens);
    SCOPED_TRACE(what);
    json body = {
        {"input", "weather?"},
        {"max_output_tokens", max_tokens},
        {"tools", {{{"type", "function"}, {"name", "get_weather"}, {"parameters", kParameters}}}},
        {"tool_choice", "required"},
        {"reasoning", {{"effort", "none"}}},
        {"seed", 1}};
    auto r = post_json(port(), "/v1/responses", body);
    ASSERT_EQ(r.status, 200) << r.body;
    json whole = r.json()["output"];
    for (json& it : whole) {
      EXPECT_EQ(it["type"], "function_call") << r.body;
      if (it["status"] == "incomplete") ++cut_calls;
      it.erase("id");
      it.erase("call_id");
    }
    body["stream"] = true;
    auto st = post_json(port(), "/v1/responses", body);
    ASSERT_EQ(st.status, 200) << st.body;
    json streamed = json::array();
    std::string arguments;
    for (const SseEvent& e : parse_sse(st.body)) {
      const json j = json::parse(e.data);
      if (e.event == "response.function_call_arguments.delta") arguments += j["delta"];
      if (e.event != "response.output_item.done") continue;
      json it = j["item"];
      if (it["type"] == "function_call") {
        EXPECT_EQ(it["arguments"], arguments) << st.body;
        arguments.clear();
      }
      it.erase("id");
      it.erase("call_id");
      streamed.push_back(it);
    }
    EXPECT_EQ(streamed, whole) << st.body;
  }
  EXPECT_GT(cut_calls, 0);
}

// <|im_start|> is a control token: skip_special_tokens (the default) drops it from chat
// content with the parsers on, as /v1/completions does; false keeps it.
TEST_F(Qwen3Server, SkipSpecialTokensHoldsWithParsers) {
  auto forced = [&](const std::string& path, json body) {
    body["max_tokens"] = 2;
    body["ignore_eos"] = true;
    body["logit_bias"] = {{std::to_string(kImStart), 100}};
    if (path == "/v1/completions")
      body["prompt"] = "hi";
    else
      body["messages"] = json::array({{{"role", "user"}, {"content", "hi"}}});
    if (path == "/v1/messages") body["model"] = kTestModelName;
    auto r = post_json(port(), path, body);
    EXPECT_EQ(r.status, 200) << r.body;
    const json j = r.json();
    if (path == "/v1/completions") return j["choices"][0]["text"].get<std::string>();
    if (path == "/v1/messages") return j["content"][0]["text"].get<std::string>();
    const json& m = j["choices"][0]["message"];
    const json& reasoning = m["reasoning_content"];
    return m["content"].get<std::string>() +
           (reasoning.is_string() ? reasoning.get<std::string>() : "");
  };
  for (const std::string path : {"/v1/chat/completions", "/v1/messages", "/v1/completions"}) {
    SCOPED_TRACE(path);
    EXPECT_EQ(forced(path, json::object()), "");
    EXPECT_EQ(forced(path, {{"skip_special_tokens", true}}), "");
    EXPECT_EQ(forced(path, {{"skip_special_tokens", false}}), "<|im_start|><|im_start|>");
  }
  // Streamed the same.
  json body = {{"messages", json::array({{{"role", "user"}, {"content", "hi"}}})},
               {"max_tokens", 2},
               {"ignore_eos", true},
               {"logit_bias", {{std::to_string(kImStart), 100}}},
               {"stream", true}};
  auto st = post_json(port(), "/v1/chat/completions", body);
  ASSERT_EQ(st.status, 200) << st.body;
  EXPECT_EQ(st.body.find("im_start"), std::string::npos) << st.body;
}

}  // namespace
}  // namespace loom::test
