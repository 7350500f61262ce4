// Per-request limits (loom serve --max-prompt-tokens, --max-n, --max-stop, --max-stop-bytes,
// --max-tools, --max-grammar-bytes, --max-request-body): a request over one is a 4xx naming the
// field and the flag, the same request within them is served, and the server stays healthy.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

TEST(ServerLimits, EachLimitIsA4xxNamingItsFlag) {
  server::ServerOptions so;
  so.max_prompt_tokens = 40;
  so.max_n = 2;
  so.max_stop = 2;
  so.max_stop_bytes = 4;
  so.max_tools = 1;
  so.max_grammar_bytes = 16384;
  so.max_body_bytes = 4096;
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  auto tool_named = [](const char* name) {
    return json{{"type", "function"},
                {"function", {{"name", name}, {"parameters", {{"type", "object"}}}}}};
  };
  const json tool = tool_named("f");
  // A schema whose grammar is far over 16 KiB: 40 properties with formats.
  json props = json::object();
  for (int i = 0; i < 40; ++i)
    props["p" + std::to_string(i)] = {{"type", "string"},
                                      {"format", i % 2 ? "email" : "date-time"}};
  const json big_schema = {{"type", "object"}, {"properties", props}};
  const json msgs = json::array({{{"role", "user"}, {"content", "hi"}}});
  struct Case {
    const char* path;
    json body;
    const char* param;
    const char* flag;
  };
  const Case cases[] = {
      {"/v1/completions",
       {{"prompt", std::vector<int>(41, 5)}, {"max_tokens", 1}},
       "prompt",
       "--max-prompt-tokens"},
      {"/v1/completions", {{"prompt", "x"}, {"n", 3}, {"max_tokens", 1}}, "n", "--max-n"},
      {"/v1/completions",
       {{"prompt", "x"}, {"stop", {"a", "b", "c"}}, {"max_tokens", 1}},
       "stop",
       "--max-stop"},
      {"/v1/completions",
       {{"prompt", "x"}, {"stop", {"a"}}, {"stop_token_ids", {1, 2}}, {"max_tokens", 1}},
       "stop",
       "--max-stop"},
      {"/v1/completions",
       {{"prompt", "x"}, {"stop", {"abcde"}}, {"max_tokens", 1}},
       "stop",
       "--max-stop-bytes"},
      {"/v1/chat/completions",
       {{"messages", msgs}, {"tools", {tool, tool_named("g")}}, {"max_tokens", 1}},
       "tools",
       "--max-tools"},
      {"/v1/chat/completions",
       {{"messages", msgs},
        {"response_format",
         {{"type", "json_schema"}, {"json_schema", {{"name", "big"}, {"schema", big_schema}}}}},
        {"max_tokens", 1}},
       "response_format",
       "--max-grammar-bytes"},
  };
  for (const Case& c : cases) {
    auto r = post_json(port, c.path, c.body);
    EXPECT_EQ(r.status, 400) << c.flag << ": " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << r.body;
    EXPECT_NE(r.json()["error"]["message"].get<std::string>().find(c.flag), std::string::npos)
        << r.body;
  }
  // The Anthropic and Ollama routes share the checks.
  auto a = post_json(port, "/v1/messages",
                     {{"messages", msgs}, {"max_tokens", 1}, {"stop_sequences", {"a", "b", "c"}}});
  EXPECT_EQ(a.status, 400) << a.body;
  auto o = post_json(port, "/api/generate",
                     {{"model", kTestModelName},
                      {"prompt", "x"},
                      {"stream", false},
                      {"options", {{"stop", {"abcdef"}}}}});
  EXPECT_EQ(o.status, 400) << o.body;
  EXPECT_NE(o.body.find("--max-stop-bytes"), std::string::npos) << o.body;
  // A body over --max-request-body: 413.
  auto big = post_json(port, "/v1/completions", {{"prompt", std::string(5000, 'x')}});
  EXPECT_EQ(big.status, 413) << big.body;
  // Within every limit: served.
  auto ok = post_json(port, "/v1/completions",
                      {{"prompt", std::vector<int>(40, 5)},
                       {"n", 2},
                       {"stop", {"abcd"}},
                       {"stop_token_ids", {1}},
                       {"max_tokens", 2}});
  EXPECT_EQ(ok.status, 200) << ok.body;
  auto chat = post_json(port, "/v1/chat/completions",
                        {{"messages", msgs}, {"tools", {tool}}, {"max_tokens", 2}});
  EXPECT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(wait_engine_idle(*s), "");
  s->stop();
}

// --idle-timeout: a connection that sends no whole request in time is closed; one that does is
// served, and its keep-alive wait starts the clock again.
TEST(ServerLimits, IdleConnectionsAreClosed) {
  server::ServerOptions so;
  so.idle_timeout_s = 1;
  auto s = start_test_server(so);
  ASSERT_TRUE(s);
  TestConnection quiet(s->port());
  ASSERT_TRUE(quiet.ok());
  TestConnection half(s->port());
  ASSERT_TRUE(
      half.send_all("POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Length: 50\r\n\r\n{"));
  TestConnection busy(s->port(), /*timeout_s=*/5);
  ASSERT_TRUE(busy.send_request("GET", "/health", "", {}, /*keep_alive=*/true));
  HttpResult r;
  ASSERT_TRUE(busy.read_head(&r));
  EXPECT_EQ(r.status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(1800));
  HttpResult gone;
  quiet.send_request("GET", "/health", "");
  EXPECT_FALSE(quiet.read_head(&gone)) << "an idle connection was kept open";
  EXPECT_FALSE(half.read_head(&gone)) << "a half-sent request was waited for";
  // Idle after its answer (keep-alive): closed on the same clock.
  EXPECT_TRUE(busy.closed_by_peer()) << "a keep-alive connection was kept open";
  // A fresh connection is served as always.
  EXPECT_EQ(http_request(s->port(), "GET", "/health").status, 200);
  s->stop();
}

}  // namespace
}  // namespace loom::test
