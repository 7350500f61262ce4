// CORS as vLLM answers it (--allowed-origins, --allowed-methods, --allowed-headers,
// --allow-credentials): preflights answered before routing and without an API key, the allow
// headers on every response to a request with an Origin, disallowed preflights refused with
// Starlette's "Disallowed CORS ..." 400, and malformed flag values refused at start-up.
#include "server/cors.h"

#include <gtest/gtest.h>

#include "../cli/run_loom.h"
#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

HttpResult preflight(uint16_t port, const std::string& path, const std::string& origin,
                     const std::string& method, const std::string& headers = "") {
  std::map<std::string, std::string> h = {{"Origin", origin},
                                          {"Access-Control-Request-Method", method}};
  if (!headers.empty()) h["Access-Control-Request-Headers"] = headers;
  return http_request(port, "OPTIONS", path, "", h);
}

TEST(ServerCors, DefaultAllowsEveryOrigin) {
  const uint16_t port = shared_port();
  HttpResult p = preflight(port, "/v1/chat/completions", "https://app.example", "POST",
                           "content-type, authorization, x-stainless-os");
  ASSERT_EQ(p.status, 204) << p.body;
  EXPECT_EQ(p.body, "");
  EXPECT_EQ(p.headers.count("content-length"), 0u);
  EXPECT_EQ(p.headers["access-control-allow-origin"], "*");
  EXPECT_NE(p.headers["access-control-allow-methods"].find("POST"), std::string::npos);
  EXPECT_EQ(p.headers["access-control-allow-headers"],
            "content-type, authorization, x-stainless-os");
  EXPECT_EQ(p.headers["access-control-max-age"], "600");
  EXPECT_EQ(p.headers.count("access-control-allow-credentials"), 0u);
  // Any path: the preflight is the browser's, answered before routing.
  EXPECT_EQ(preflight(port, "/api/chat", "http://localhost:3000", "POST").status, 204);

  const std::map<std::string, std::string> origin = {{"Origin", "https://app.example"}};
  HttpResult models = http_request(port, "GET", "/v1/models", "", origin);
  EXPECT_EQ(models.status, 200);
  EXPECT_EQ(models.headers["access-control-allow-origin"], "*");
  EXPECT_EQ(http_request(port, "GET", "/v1/models").headers.count("access-control-allow-origin"),
            0u);
  HttpResult missing = http_request(port, "GET", "/v1/nothing", "", origin);
  EXPECT_EQ(missing.status, 404);
  EXPECT_EQ(missing.headers["access-control-allow-origin"], "*");
  HttpResult stream = post_json(
      port, "/v1/chat/completions",
      {{"messages", {{{"role", "user"}, {"content", "hi"}}}}, {"max_tokens", 2}, {"stream", true}},
      origin);
  EXPECT_EQ(stream.status, 200);
  EXPECT_EQ(stream.headers["access-control-allow-origin"], "*");
  EXPECT_NE(stream.body.find("[DONE]"), std::string::npos);
}

TEST(ServerCors, RestrictedPolicy) {
  server::ServerOptions so;
  so.api_key = "k";
  so.cors.allowed_origins = {"https://good.example"};
  so.cors.allowed_methods = {"GET", "POST"};
  so.cors.allowed_headers = {"Authorization"};
  so.cors.allow_credentials = true;
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  const uint16_t port = s->port();
  // Allowed: the origin echoed (credentials rule out "*"), no API key needed.
  HttpResult ok =
      preflight(port, "/v1/models", "https://good.example", "GET", "Authorization, Content-Type");
  ASSERT_EQ(ok.status, 204) << ok.body;
  EXPECT_EQ(ok.headers["access-control-allow-origin"], "https://good.example");
  EXPECT_EQ(ok.headers["vary"], "Origin");
  EXPECT_EQ(ok.headers["access-control-allow-credentials"], "true");
  EXPECT_EQ(ok.headers["access-control-allow-methods"], "GET, POST");
  EXPECT_EQ(ok.headers["access-control-allow-headers"],
            "Accept, Accept-Language, Content-Language, Content-Type, Authorization");
  struct Refused {
    const char* origin;
    const char* method;
    const char* headers;
    const char* body;
  };
  for (const Refused& r :
       {Refused{"https://evil.example", "GET", "", "Disallowed CORS origin"},
        Refused{"https://good.example", "DELETE", "", "Disallowed CORS method"},
        Refused{"https://good.example", "POST", "x-custom", "Disallowed CORS headers"},
        Refused{"https://evil.example", "PUT", "x-custom",
                "Disallowed CORS origin, method, headers"}}) {
    HttpResult p = preflight(port, "/v1/models", r.origin, r.method, r.headers);
    EXPECT_EQ(p.status, 400) << r.body;
    EXPECT_EQ(p.body, r.body);
    EXPECT_EQ(p.headers.count("access-control-allow-origin"), 0u) << r.body;
  }
  // Simple requests: the header for the allowed origin only (here on a 401 and a 503).
  HttpResult good =
      http_request(port, "GET", "/v1/models", "", {{"Origin", "https://good.example"}});
  EXPECT_EQ(good.status, 401);
  EXPECT_EQ(good.headers["access-control-allow-origin"], "https://good.example");
  EXPECT_EQ(good.headers["access-control-allow-credentials"], "true");
  HttpResult loading =
      http_request(port, "GET", "/health", "", {{"Origin", "https://good.example"}});
  EXPECT_EQ(loading.status, 503);
  EXPECT_EQ(loading.headers["access-control-allow-origin"], "https://good.example");
  HttpResult evil = http_request(port, "GET", "/health", "", {{"Origin", "https://evil.example"}});
  EXPECT_EQ(evil.status, 503);
  EXPECT_EQ(evil.headers.count("access-control-allow-origin"), 0u);
  // OPTIONS without Access-Control-Request-Method is no preflight: a 405 naming the methods.
  HttpResult options = http_request(port, "OPTIONS", "/v1/models");
  EXPECT_EQ(options.status, 405);
  EXPECT_EQ(options.headers["allow"], "GET, HEAD");
  s->stop();
}

TEST(ServerCors, FlagValuesAreJsonLists) {
  auto ok = server::parse_cors_list("--allowed-origins", R"(["https://a.example", "*"])");
  ASSERT_TRUE(ok.is_ok()) << ok.status().message();
  EXPECT_EQ(*ok, (std::vector<std::string>{"https://a.example", "*"}));
  EXPECT_TRUE(server::parse_cors_list("--allowed-methods", "[]").is_ok());
  for (const char* bad : {"https://a.example", R"("*")", "[1]", R"({"a": "b"})", R"(["a")", "",
                          R"(["a\r\nSet-Cookie: x"])"}) {
    auto r = server::parse_cors_list("--allowed-headers", bad);
    ASSERT_FALSE(r.is_ok()) << bad;
    EXPECT_NE(r.status().message().find("--allowed-headers takes a JSON list of strings"),
              std::string::npos)
        << r.status().message();
  }
}

// `loom serve` refuses a malformed value before doing anything else (--dry-run would exit 0).
TEST(ServerCors, ServeRefusesMalformedFlag) {
  CmdResult r = run("serve -m synth:tiny --dry-run --allowed-origins 'https://a.example'");
  EXPECT_EQ(r.code, 1) << r.out;
  EXPECT_NE(r.out.find("--allowed-origins takes a JSON list of strings"), std::string::npos)
      << r.out;
  r =
      run("serve -m synth:tiny --dry-run --allow-credentials --allowed-methods '[\"GET\"]' "
          "--allowed-headers '[\"*\"]' --allowed-origins '[\"https://a.example\"]'");
  EXPECT_EQ(r.code, 0) << r.out;
}

}  // namespace
}  // namespace loom::test
