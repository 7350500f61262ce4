// The bad-input table: malformed requests of every kind get a 4xx with the API's error shape,
// and the server stays healthy after each one.
#include <gtest/gtest.h>

#include <tuple>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

struct BadCase {
  const char* name;
  const char* path;
  std::string body;  // raw bytes
  int status;
};

std::string with(json base, const char* key, json value) {
  base[key] = std::move(value);
  return base.dump();
}

std::vector<BadCase> cases() {
  const json cmpl = {{"prompt", "hello"}, {"max_tokens", 4}};
  const json chat = {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 4}};
  const json msgs = {{"max_tokens", 4}, {"messages", {{{"role", "user"}, {"content", "hi"}}}}};
  const std::string user_hi = R"({"role":"user","content":"hi"})";
  std::vector<BadCase> v = {
      {"malformed json", "/v1/completions", R"({"prompt": "x",)", 400},
      {"not an object", "/v1/completions", R"(["prompt"])", 400},
      {"empty body", "/v1/completions", "", 400},
      {"invalid utf8 in prompt", "/v1/completions", std::string("{\"prompt\": \"a\xff\xfe b\"}"),
       400},
      {"truncated utf8 in chat", "/v1/chat/completions",
       std::string("{\"messages\":[{\"role\":\"user\",\"content\":\"\xe2\x82\"}]}"), 400},
      {"missing prompt", "/v1/completions", R"({"max_tokens": 4})", 400},
      {"prompt number", "/v1/completions", with(cmpl, "prompt", 42), 400},
      {"prompt object", "/v1/completions", with(cmpl, "prompt", {{"a", 1}}), 400},
      {"prompt empty list", "/v1/completions", with(cmpl, "prompt", json::array()), 400},
      {"prompt mixed list", "/v1/completions", with(cmpl, "prompt", {"a", 1}), 400},
      {"token id out of vocab", "/v1/completions", with(cmpl, "prompt", {1, 2, 999999}), 400},
      {"negative token id", "/v1/completions", with(cmpl, "prompt", {1, -5}), 400},
      {"empty token list in batch", "/v1/completions", with(cmpl, "prompt", {json::array()}), 400},
      {"max_tokens zero", "/v1/completions", with(cmpl, "max_tokens", 0), 400},
      {"max_tokens negative", "/v1/completions", with(cmpl, "max_tokens", -3), 400},
      {"max_tokens string", "/v1/completions", with(cmpl, "max_tokens", "4"), 400},
      {"max_tokens fractional", "/v1/completions", with(cmpl, "max_tokens", 2.5), 400},
      {"max_tokens huge", "/v1/completions", with(cmpl, "max_tokens", 1e30), 400},
      {"prompt + max_tokens over max_model_len", "/v1/completions",
       with(cmpl, "max_tokens", kTestMaxModelLen), 400},
      {"prompt longer than max_model_len", "/v1/completions",
       with(cmpl, "prompt", std::vector<int>(kTestMaxModelLen + 5, 300)), 400},
      {"temperature negative", "/v1/completions", with(cmpl, "temperature", -0.5), 400},
      {"temperature string", "/v1/completions", with(cmpl, "temperature", "hot"), 400},
      {"top_p above 1", "/v1/completions", with(cmpl, "top_p", 1.5), 400},
      {"top_p zero", "/v1/completions", with(cmpl, "top_p", 0), 400},
      {"top_k below -1", "/v1/completions", with(cmpl, "top_k", -5), 400},
      {"min_p above 1", "/v1/completions", with(cmpl, "min_p", 2), 400},
      {"n zero", "/v1/completions", with(cmpl, "n", 0), 400},
      {"n string", "/v1/completions", with(cmpl, "n", "two"), 400},
      {"presence_penalty too big", "/v1/completions", with(cmpl, "presence_penalty", 3), 400},
      {"frequency_penalty too small", "/v1/completions", with(cmpl, "frequency_penalty", -3), 400},
      {"repetition_penalty zero", "/v1/completions", with(cmpl, "repetition_penalty", 0), 400},
      {"logit_bias non-id key", "/v1/completions", with(cmpl, "logit_bias", {{"abc", 1}}), 400},
      {"logit_bias value out of range", "/v1/completions", with(cmpl, "logit_bias", {{"5", 200}}),
       400},
      {"logit_bias id out of vocab", "/v1/completions", with(cmpl, "logit_bias", {{"99999", 1}}),
       400},
      {"logit_bias not object", "/v1/completions", with(cmpl, "logit_bias", json::array({1})), 400},
      {"logprobs over max", "/v1/completions", with(cmpl, "logprobs", 50), 400},
      {"logprobs negative", "/v1/completions", with(cmpl, "logprobs", -2), 400},
      {"stop number", "/v1/completions", with(cmpl, "stop", 5), 400},
      {"stop list with number", "/v1/completions", with(cmpl, "stop", {"a", 3}), 400},
      {"stop empty string", "/v1/completions", with(cmpl, "stop", ""), 400},
      {"stop_token_ids out of vocab", "/v1/completions", with(cmpl, "stop_token_ids", {100000}),
       400},
      {"stream_options without stream", "/v1/completions",
       with(cmpl, "stream_options", {{"include_usage", true}}), 400},
      {"stream not bool", "/v1/completions", with(cmpl, "stream", "yes"), 400},
      {"seed string", "/v1/completions", with(cmpl, "seed", "abc"), 400},
      {"ignore_eos string", "/v1/completions", with(cmpl, "ignore_eos", "true"), 400},
      {"min_tokens above max_tokens", "/v1/completions", with(cmpl, "min_tokens", 10), 400},
      {"echo number", "/v1/completions", with(cmpl, "echo", 1), 400},
      {"user number", "/v1/completions", with(cmpl, "user", 1), 400},
      {"unknown model", "/v1/completions", with(cmpl, "model", "no-such-model"), 404},
      {"model number", "/v1/completions", with(cmpl, "model", 3), 400},
      {"missing messages", "/v1/chat/completions", R"({"max_tokens": 4})", 400},
      {"messages empty", "/v1/chat/completions", with(chat, "messages", json::array()), 400},
      {"messages not list", "/v1/chat/completions", with(chat, "messages", "hi"), 400},
      {"message not object", "/v1/chat/completions", with(chat, "messages", {"hi"}), 400},
      {"unknown role", "/v1/chat/completions",
       with(chat, "messages", {{{"role", "wizard"}, {"content", "x"}}}), 400},
      {"missing role", "/v1/chat/completions", with(chat, "messages", {{{"content", "x"}}}), 400},
      {"content number", "/v1/chat/completions",
       with(chat, "messages", {{{"role", "user"}, {"content", 7}}}), 400},
      {"missing content", "/v1/chat/completions", with(chat, "messages", {{{"role", "user"}}}),
       400},
      {"image content part", "/v1/chat/completions",
       with(chat, "messages",
            {{{"role", "user"},
              {"content", {{{"type", "image_url"}, {"image_url", {{"url", "x"}}}}}}}}),
       400},
      {"text part without text", "/v1/chat/completions",
       with(chat, "messages", {{{"role", "user"}, {"content", {{{"type", "text"}}}}}}), 400},
      {"top_logprobs over max", "/v1/chat/completions",
       with(json::parse(with(chat, "logprobs", true)), "top_logprobs", 30), 400},
      {"top_logprobs without logprobs", "/v1/chat/completions", with(chat, "top_logprobs", 2), 400},
      {"logprobs not bool (chat)", "/v1/chat/completions", with(chat, "logprobs", 3), 400},
      {"max_completion_tokens zero", "/v1/chat/completions", with(chat, "max_completion_tokens", 0),
       400},
      {"chat_template_kwargs not object", "/v1/chat/completions",
       with(chat, "chat_template_kwargs", 1), 400},
      {"reasoning_effort unknown", "/v1/chat/completions", with(chat, "reasoning_effort", "max"),
       400},
      {"reasoning_effort number", "/v1/chat/completions", with(chat, "reasoning_effort", 2), 400},
      {"tools not list", "/v1/chat/completions", with(chat, "tools", "x"), 400},
      {"anthropic missing max_tokens", "/v1/messages", R"({"messages":[)" + user_hi + "]}", 400},
      {"anthropic bad role", "/v1/messages",
       with(msgs, "messages", {{{"role", "system"}, {"content", "x"}}}), 400},
      {"anthropic empty messages", "/v1/messages", with(msgs, "messages", json::array()), 400},
      {"anthropic system number", "/v1/messages", with(msgs, "system", 5), 400},
      {"anthropic stop_sequences number", "/v1/messages", with(msgs, "stop_sequences", 5), 400},
      {"count_tokens no messages", "/v1/messages/count_tokens", R"({"model":"tiny-test"})", 400},
      {"tokenize nothing", "/tokenize", R"({})", 400},
      {"tokenize both", "/tokenize", R"({"prompt":"a","messages":[)" + user_hi + "]}", 400},
      {"tokenize prompt number", "/tokenize", R"({"prompt": 3})", 400},
      {"detokenize out of vocab", "/detokenize", R"({"tokens":[1, 100000]})", 400},
      {"detokenize not list", "/detokenize", R"({"tokens":"1 2"})", 400},
      {"detokenize missing", "/detokenize", R"({})", 400},
      // Found by fuzzing (tests/fuzz, server_request target): nesting is bounded before the
      // body is parsed (copying or walking 100,000 levels would overflow the stack).
      {"body nested 100000 deep", "/v1/chat/completions",
       R"({"messages":)" + std::string(100000, '[') + std::string(100000, ']') + "}", 400},
      {"schema string nested deep", "/v1/chat/completions",
       with(chat, "response_format",
            {{"type", "json_schema"},
             {"json_schema",
              {{"name", "x"}, {"schema", std::string(100000, '[') + std::string(100000, ']')}}}}),
       400},
      {"anthropic nested deep", "/v1/messages",
       R"({"max_tokens":4,"messages":[{"role":"user","content":)" + std::string(5000, '{') +
           std::string(5000, '}') + "}]}",
       400},
  };
  return v;
}

void expect_error_shape(const HttpResult& r, bool anthropic, const std::string& what) {
  json j = r.json();
  ASSERT_TRUE(j.is_object()) << what << ": body is not JSON: " << r.body;
  ASSERT_TRUE(j.contains("error")) << what << ": " << r.body;
  const json& e = j["error"];
  EXPECT_TRUE(e["message"].is_string() && !e["message"].get<std::string>().empty()) << what;
  EXPECT_TRUE(e["type"].is_string()) << what;
  if (anthropic) {
    EXPECT_EQ(j["type"], "error") << what;
  } else {
    EXPECT_TRUE(e.contains("param")) << what;
    EXPECT_TRUE(e.contains("code")) << what;
  }
}

TEST(ServerBadInput, TableOfMalformedRequests) {
  const auto table = cases();
  ASSERT_GE(table.size(), 40u);
  for (const BadCase& c : table) {
    auto r = http_request(shared_port(), "POST", c.path, c.body);
    EXPECT_EQ(r.status, c.status) << c.name << ": " << r.body;
    expect_error_shape(r, std::string(c.path).rfind("/v1/messages", 0) == 0, c.name);
    ASSERT_EQ(http_request(shared_port(), "GET", "/health").status, 200) << "after " << c.name;
  }
  EXPECT_EQ(wait_engine_idle(shared_server()), "");
}

TEST(ServerBadInput, ProtocolLevelErrors) {
  // Unknown route and wrong method.
  auto r = http_request(shared_port(), "GET", "/v1/nothing");
  EXPECT_EQ(r.status, 404);
  expect_error_shape(r, false, "404");
  r = http_request(shared_port(), "GET", "/v1/completions");
  EXPECT_EQ(r.status, 405);
  expect_error_shape(r, false, "405");
  // A 10 MB body is refused with 413 (and the error is readable, not a reset).
  std::string big = R"({"prompt": ")" + std::string(10u << 20, 'a') + R"("})";
  r = http_request(shared_port(), "POST", "/v1/completions", big);
  EXPECT_EQ(r.status, 413);
  expect_error_shape(r, false, "413");
  // Garbage instead of HTTP.
  {
    TestConnection c(shared_port());
    ASSERT_TRUE(c.send_all("THIS IS NOT HTTP\r\n\r\n"));
    HttpResult g = c.read_response();
    EXPECT_EQ(g.status, 400);
  }
  // Huge header.
  r = http_request(shared_port(), "POST", "/v1/completions", "{}",
                   {{"X-Big", std::string(200000, 'h')}});
  EXPECT_EQ(r.status, 400);
  // A client that sends half a request and hangs up.
  {
    TestConnection c(shared_port());
    ASSERT_TRUE(c.send_all("POST /v1/completions HTTP/1.1\r\nContent-Length: 100\r\n\r\n{\"pro"));
  }
  for (int i = 0; i < 3; ++i) EXPECT_EQ(http_request(shared_port(), "GET", "/health").status, 200);
  // Expect: 100-continue (curl does this for large bodies) gets the go-ahead first.
  {
    TestConnection c(shared_port());
    const std::string body = R"({"prompt":"continue"})";
    ASSERT_TRUE(
        c.send_all("POST /tokenize HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   "Expect: 100-continue\r\nConnection: close\r\nContent-Length: " +
                   std::to_string(body.size()) + "\r\n\r\n"));
    HttpResult interim;
    ASSERT_TRUE(c.read_head(&interim));
    EXPECT_EQ(interim.status, 100);
    ASSERT_TRUE(c.send_all(body));
    HttpResult final_response = c.read_response();
    EXPECT_EQ(final_response.status, 200) << final_response.body;
    EXPECT_TRUE(final_response.json()["tokens"].is_array());
  }
  // Keep-alive: two requests on one connection.
  {
    TestConnection c(shared_port());
    ASSERT_TRUE(c.send_request("GET", "/health", "", {}, /*keep_alive=*/true));
    EXPECT_EQ(c.read_response().status, 200);
    ASSERT_TRUE(
        c.send_request("POST", "/tokenize", R"({"prompt":"ab"})", {}, /*keep_alive=*/false));
    HttpResult second = c.read_response();
    EXPECT_EQ(second.status, 200);
    EXPECT_TRUE(second.json()["tokens"].is_array());
  }
}

// 404 and 405 in the shape of the API the path belongs to: Ollama's {"error": "..."} under
// /api/, Anthropic's {"type": "error", "error": {...}} under /v1/messages, OpenAI's elsewhere.
TEST(ServerBadInput, RouteErrorsInTheApisShape) {
  const uint16_t port = shared_port();
  for (auto [method, path, status] :
       {std::tuple{"POST", "/api/tags", 405}, std::tuple{"GET", "/api/foo", 404},
        std::tuple{"GET", "/api/chat", 405}, std::tuple{"DELETE", "/api", 404}}) {
    HttpResult r = http_request(port, method, path, "{}");
    EXPECT_EQ(r.status, status) << path;
    EXPECT_TRUE(r.json()["error"].is_string()) << path << ": " << r.body;
  }
  for (auto [method, path, status] :
       {std::tuple{"GET", "/v1/messages/count_tokens", 405}, std::tuple{"GET", "/v1/messages", 405},
        std::tuple{"POST", "/v1/messages/batches", 404}}) {
    HttpResult r = http_request(port, method, path, "{}");
    EXPECT_EQ(r.status, status) << path;
    EXPECT_EQ(r.json()["type"], "error") << path << ": " << r.body;
    EXPECT_TRUE(r.json()["error"]["type"].is_string()) << path << ": " << r.body;
    EXPECT_TRUE(r.json()["error"]["message"].is_string()) << path << ": " << r.body;
  }
  HttpResult openai = http_request(port, "PUT", "/v1/chat/completions", "{}");
  EXPECT_EQ(openai.status, 405);
  EXPECT_TRUE(openai.json()["error"]["message"].is_string()) << openai.body;
  EXPECT_FALSE(openai.json().contains("type")) << openai.body;
  EXPECT_EQ(openai.headers["allow"], "POST");
  EXPECT_EQ(http_request(port, "POST", "/api/tags", "{}").headers["allow"], "GET, HEAD");
}

}  // namespace
}  // namespace loom::test
