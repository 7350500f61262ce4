// HTTP/1.1 pipelining (RFC 7230 6.3.2): requests sent back to back before any answer, in one
// TCP segment or split across several, are all answered in order on the one connection,
// whether the one before was a plain GET, a POST with a body or a streamed (SSE) response.
// Each connection's read timeout is short, so a dropped request fails the test in seconds
// instead of waiting for the server's 60 s idle timeout.
#include <gtest/gtest.h>

#include <chrono>
#include <thread>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

constexpr int kTimeoutS = 8;

std::string get(const std::string& path, bool close = false) {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\n" + (close ? "Connection: close\r\n" : "") +
         "\r\n";
}

std::string post(const std::string& path, const std::string& body, bool close = false) {
  return "POST " + path + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n" +
         "Content-Length: " + std::to_string(body.size()) + "\r\n" +
         (close ? "Connection: close\r\n" : "") + "\r\n" + body;
}

TEST(ServerPipelining, TwoRequestsInOneSegment) {
  TestConnection c(shared_port(), kTimeoutS);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send_all(get("/health") + get("/version", /*close=*/true)));
  HttpResult a = c.read_response();
  EXPECT_EQ(a.status, 200);
  EXPECT_EQ(a.body, "{}");
  HttpResult b = c.read_response();
  ASSERT_EQ(b.status, 200) << "the second pipelined request was not answered";
  EXPECT_TRUE(b.json()["version"].is_string()) << b.body;
  EXPECT_TRUE(c.closed_by_peer());
}

// POST bodies, HEAD, a CORS preflight (204) and GETs back to back: each answer in order, the
// bodies framed exactly (a body shared with the next request's bytes is not over-read).
TEST(ServerPipelining, MixedRequestsAnsweredInOrder) {
  const std::string long_prompt(20000, 'a');  // a body that spans several reads
  TestConnection c(shared_port(), kTimeoutS);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send_all(post("/tokenize", R"({"prompt":"ab","add_special_tokens":false})") +
                         "HEAD /v1/models HTTP/1.1\r\nHost: x\r\n\r\n" +
                         post("/tokenize", json{{"prompt", long_prompt}}.dump()) +
                         "OPTIONS /v1/models HTTP/1.1\r\nHost: x\r\nOrigin: https://a.example\r\n"
                         "Access-Control-Request-Method: GET\r\n\r\n" +
                         get("/v1/models/" + std::string(kTestModelName)) + get("/api/version") +
                         get("/version", true)));
  HttpResult r1 = c.read_response();
  ASSERT_EQ(r1.status, 200) << r1.body;
  EXPECT_TRUE(r1.json()["tokens"].is_array()) << r1.body;
  HttpResult r2;
  ASSERT_TRUE(c.read_head(&r2));  // HEAD: headers only
  EXPECT_EQ(r2.status, 200);
  EXPECT_GT(std::stoll(r2.headers["content-length"]), 0);
  HttpResult r3 = c.read_response();
  ASSERT_EQ(r3.status, 200) << r3.body;
  EXPECT_GE(r3.json()["count"].get<int>(), 1);
  HttpResult r4 = c.read_response();
  EXPECT_EQ(r4.status, 204);
  EXPECT_EQ(r4.headers["access-control-allow-origin"], "*");
  HttpResult r5 = c.read_response();
  ASSERT_EQ(r5.status, 200) << r5.body;
  EXPECT_EQ(r5.json()["id"], kTestModelName);
  HttpResult r6 = c.read_response();
  ASSERT_EQ(r6.status, 200) << r6.body;
  EXPECT_TRUE(r6.json()["version"].is_string());
  HttpResult r7 = c.read_response();
  ASSERT_EQ(r7.status, 200) << r7.body;
  EXPECT_TRUE(r7.json()["version"].is_string());
  EXPECT_TRUE(c.closed_by_peer());
}

// The request after a streamed answer waits in the buffer while the stream runs.
TEST(ServerPipelining, RequestAfterAStreamedResponse) {
  const json body = {{"prompt", "hello"},
                     {"max_tokens", 6},
                     {"stream", true},
                     {"ignore_eos", true},
                     {"temperature", 0}};
  TestConnection c(shared_port(), kTimeoutS);
  ASSERT_TRUE(c.ok());
  ASSERT_TRUE(c.send_all(
      post("/v1/completions", body.dump()) +
      post("/v1/chat/completions", json{{"messages", {{{"role", "user"}, {"content", "hi"}}}},
                                        {"max_tokens", 3},
                                        {"stream", true}}
                                       .dump()) +
      get("/health", true)));
  HttpResult s1 = c.read_response();
  ASSERT_EQ(s1.status, 200) << s1.body;
  EXPECT_EQ(s1.headers["transfer-encoding"], "chunked");
  auto events = parse_sse(s1.body);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().data, "[DONE]");
  HttpResult s2 = c.read_response();
  ASSERT_EQ(s2.status, 200) << "the request after a stream was not answered";
  auto chat = parse_sse(s2.body);
  ASSERT_FALSE(chat.empty());
  EXPECT_EQ(chat.back().data, "[DONE]");
  EXPECT_EQ(json::parse(chat.front().data)["object"], "chat.completion.chunk");
  HttpResult h = c.read_response();
  EXPECT_EQ(h.status, 200);
  EXPECT_TRUE(c.closed_by_peer());
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

// The second request split across segments, its first half in the same read as the first
// request: the rest is read from the socket once the first answer is out.
TEST(ServerPipelining, SecondRequestSplitAcrossSegments) {
  TestConnection c(shared_port(), kTimeoutS);
  ASSERT_TRUE(c.ok());
  const std::string second = post("/tokenize", R"({"prompt":"abc","add_special_tokens":false})");
  const size_t half = second.size() / 2;
  ASSERT_TRUE(c.send_all(get("/health") + second.substr(0, half)));
  HttpResult a = c.read_response();
  EXPECT_EQ(a.status, 200);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  ASSERT_TRUE(c.send_all(second.substr(half)));
  HttpResult b = c.read_response();
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(b.json(), post_json(shared_port(), "/tokenize",
                                {{"prompt", "abc"}, {"add_special_tokens", false}})
                          .json());
  // And the connection goes on as an ordinary keep-alive one.
  ASSERT_TRUE(c.send_all(get("/version", true)));
  EXPECT_EQ(c.read_response().status, 200);
}

}  // namespace
}  // namespace loom::test
