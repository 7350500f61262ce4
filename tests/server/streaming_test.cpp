// SSE streams parsed as a client would: completions and chat chunks, n > 1, include_usage,
// [DONE], Anthropic's event sequence; and the non-streaming Anthropic shape.
#include <gtest/gtest.h>

#include <map>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

struct Stream {
  HttpResult head;
  std::vector<SseEvent> events;
};

Stream stream_request(const std::string& path, const json& body) {
  TestConnection c(shared_port());
  Stream s;
  EXPECT_TRUE(c.send_request("POST", path, body.dump()));
  s.head = c.read_response();
  s.events = parse_sse(s.head.body);
  return s;
}

TEST(ServerStreaming, CompletionChunksMatchNonStreaming) {
  json body = {
      {"prompt", "stream me"}, {"max_tokens", 10}, {"temperature", 0}, {"ignore_eos", true}};
  auto full = post_json(shared_port(), "/v1/completions", body).json();
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  Stream s = stream_request("/v1/completions", body);
  ASSERT_EQ(s.head.status, 200) << s.head.body;
  EXPECT_EQ(s.head.headers["content-type"], "text/event-stream");
  ASSERT_GE(s.events.size(), 3u);
  EXPECT_EQ(s.events.back().data, "[DONE]");
  std::string text;
  std::string finish;
  json usage;
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    json j = json::parse(s.events[i].data);
    EXPECT_EQ(j["object"], "text_completion");
    EXPECT_EQ(j["id"], json::parse(s.events[0].data)["id"]);
    if (j["choices"].empty()) {
      usage = j["usage"];
      EXPECT_EQ(i + 2, s.events.size()) << "the usage chunk comes last, before [DONE]";
      continue;
    }
    text += j["choices"][0]["text"].get<std::string>();
    if (!j["choices"][0]["finish_reason"].is_null()) finish = j["choices"][0]["finish_reason"];
  }
  EXPECT_EQ(text, full["choices"][0]["text"]);
  EXPECT_EQ(finish, "length");
  ASSERT_TRUE(usage.is_object());
  EXPECT_EQ(usage["completion_tokens"], 10);
  EXPECT_EQ(usage["prompt_tokens"], full["usage"]["prompt_tokens"]);
}

TEST(ServerStreaming, ChatWithNGreaterThanOne) {
  json body = {{"messages", {{{"role", "user"}, {"content", "tell me"}}}},
               {"max_tokens", 7},
               {"n", 3},
               {"temperature", 0.9},
               {"seed", 11},
               {"ignore_eos", true},
               {"stream", true},
               {"stream_options", {{"include_usage", true}}}};
  Stream s = stream_request("/v1/chat/completions", body);
  ASSERT_EQ(s.head.status, 200) << s.head.body;
  ASSERT_FALSE(s.events.empty());
  EXPECT_EQ(s.events.back().data, "[DONE]");
  std::map<int, std::string> text;
  std::map<int, bool> role_seen, finished;
  json usage;
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    json j = json::parse(s.events[i].data);
    EXPECT_EQ(j["object"], "chat.completion.chunk");
    if (j["choices"].empty()) {
      usage = j["usage"];
      continue;
    }
    const json& c = j["choices"][0];
    int idx = c["index"];
    if (c["delta"].contains("role")) {
      EXPECT_FALSE(role_seen[idx]) << "one role delta per choice";
      EXPECT_EQ(c["delta"]["role"], "assistant");
      role_seen[idx] = true;
    } else {
      EXPECT_TRUE(role_seen[idx]) << "role comes first";
    }
    EXPECT_FALSE(finished[idx]) << "nothing after finish_reason";
    if (c["delta"].contains("content")) text[idx] += c["delta"]["content"].get<std::string>();
    if (!c["finish_reason"].is_null()) {
      EXPECT_EQ(c["finish_reason"], "length");
      finished[idx] = true;
    }
  }
  EXPECT_EQ(finished.size(), 3u);
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(finished[i]) << i;
  EXPECT_EQ(usage["completion_tokens"], 21);
  // Seeded sampling is reproducible: the same request without streaming gives the same texts.
  body.erase("stream");
  body.erase("stream_options");
  json full = post_json(shared_port(), "/v1/chat/completions", body).json();
  ASSERT_EQ(full["choices"].size(), 3u);
  for (const json& c : full["choices"])
    EXPECT_EQ(c["message"]["content"], text[c["index"].get<int>()]);
}

TEST(ServerStreaming, StreamWithoutUsageHasNoUsageChunk) {
  Stream s =
      stream_request("/v1/completions",
                     {{"prompt", "x"}, {"max_tokens", 3}, {"stream", true}, {"ignore_eos", true}});
  ASSERT_EQ(s.head.status, 200);
  for (size_t i = 0; i + 1 < s.events.size(); ++i) {
    json j = json::parse(s.events[i].data);
    EXPECT_FALSE(j["choices"].empty());
    EXPECT_FALSE(j.contains("usage") && !j["usage"].is_null());
  }
  EXPECT_EQ(s.events.back().data, "[DONE]");
}

TEST(ServerAnthropic, MessagesJson) {
  auto r = post_json(
      shared_port(), "/v1/messages",
      {{"model", kTestModelName},
       {"max_tokens", 5},
       {"system", "sys"},
       {"messages", {{{"role", "user"}, {"content", {{{"type", "text"}, {"text", "hey"}}}}}}},
       {"temperature", 0},
       {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json j = r.json();
  EXPECT_EQ(j["type"], "message");
  EXPECT_EQ(j["role"], "assistant");
  EXPECT_TRUE(j["id"].get<std::string>().rfind("msg_", 0) == 0);
  ASSERT_EQ(j["content"].size(), 1u);
  EXPECT_EQ(j["content"][0]["type"], "text");
  EXPECT_EQ(j["stop_reason"], "max_tokens");
  EXPECT_TRUE(j["stop_sequence"].is_null());
  EXPECT_EQ(j["usage"]["output_tokens"], 5);
  auto ct = post_json(shared_port(), "/v1/messages/count_tokens",
                      {{"model", kTestModelName},
                       {"system", "sys"},
                       {"messages", {{{"role", "user"}, {"content", "hey"}}}}});
  ASSERT_EQ(ct.status, 200) << ct.body;
  EXPECT_EQ(ct.json()["input_tokens"], j["usage"]["input_tokens"]);
  auto t = post_json(
      shared_port(), "/tokenize",
      {{"prompt", "<|system|>sys\n<|user|>hey\n<|assistant|>"}, {"add_special_tokens", false}});
  EXPECT_EQ(ct.json()["input_tokens"], t.json()["count"]);
}

TEST(ServerAnthropic, StopSequenceAndStreamEvents) {
  json base = {{"max_tokens", 30},
               {"messages", {{{"role", "user"}, {"content", "go"}}}},
               {"temperature", 0},
               {"ignore_eos", true}};
  json full = post_json(shared_port(), "/v1/messages", base).json();
  const std::string text = full["content"][0]["text"];
  ASSERT_GE(text.size(), 10u);
  const std::string stop = utf8_middle(text, 2);
  json body = base;
  body["stop_sequences"] = {stop};
  body["stream"] = true;
  Stream s = stream_request("/v1/messages", body);
  ASSERT_EQ(s.head.status, 200) << s.head.body;
  std::vector<std::string> names;
  std::string streamed;
  json delta;
  for (const SseEvent& e : s.events) {
    json j = json::parse(e.data);
    EXPECT_EQ(j["type"], e.event);
    if (e.event == "ping") continue;
    names.push_back(e.event);
    if (e.event == "content_block_delta") streamed += j["delta"]["text"].get<std::string>();
    if (e.event == "message_delta") delta = j;
    if (e.event == "message_start") {
      EXPECT_GT(j["message"]["usage"]["input_tokens"].get<int>(), 0);
    }
  }
  ASSERT_GE(names.size(), 5u);
  EXPECT_EQ(names.front(), "message_start");
  EXPECT_EQ(names[1], "content_block_start");
  EXPECT_EQ(names[names.size() - 3], "content_block_stop");
  EXPECT_EQ(names[names.size() - 2], "message_delta");
  EXPECT_EQ(names.back(), "message_stop");
  EXPECT_EQ(streamed, text.substr(0, text.find(stop)));
  EXPECT_EQ(delta["delta"]["stop_reason"], "stop_sequence");
  EXPECT_EQ(delta["delta"]["stop_sequence"], stop);
  EXPECT_GT(delta["usage"]["output_tokens"].get<int>(), 0);
}

}  // namespace
}  // namespace loom::test
