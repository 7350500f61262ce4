// The web chat page served from the binary: every file at its URL with its content type and
// the same bytes as web/ and web/node_modules on disk (the embedded copy checked against the
// source), gzip when the client accepts it (decompressed by the system's gzip), no network
// URLs in the page, 405 / 404 for other methods and paths, served without an API key and
// while the model loads, and absent (404) with webui off (--no-webui).
#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <sstream>

#include "common/node_packages.h"
#include "server/webui_assets.h"
#include "server_fixture.h"

namespace loom::test {
namespace {

struct PageFile {
  const char* url;
  const char* file;  // under web/
  const char* content_type;
};

// The page's URL layout (web/assets.cmake), written out independently here.
const PageFile kPageFiles[] = {
    {"/", "index.html", "text/html; charset=utf-8"},
    {"/webui/app.js", "app.js", "text/javascript; charset=utf-8"},
    {"/webui/style.css", "style.css", "text/css; charset=utf-8"},
    {"/webui/lib/marked.min.js", "node_modules/marked/marked.min.js",
     "text/javascript; charset=utf-8"},
    {"/webui/lib/purify.min.js", "node_modules/dompurify/dist/purify.min.js",
     "text/javascript; charset=utf-8"},
    {"/webui/lib/highlight.min.js", "node_modules/@highlightjs/cdn-assets/highlight.min.js",
     "text/javascript; charset=utf-8"},
    {"/webui/lib/highlight-light.min.css",
     "node_modules/@highlightjs/cdn-assets/styles/github.min.css", "text/css; charset=utf-8"},
    {"/webui/lib/highlight-dark.min.css",
     "node_modules/@highlightjs/cdn-assets/styles/github-dark.min.css", "text/css; charset=utf-8"},
};

std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  EXPECT_TRUE(f) << "cannot read " << path;
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::string web_file(const std::string& rel) {
  return read_file(std::string(LOOM_SOURCE_DIR) + "/web/" + rel);
}

HttpResult get(uint16_t port, const std::string& path,
               const std::map<std::string, std::string>& headers = {}) {
  return http_request(port, "GET", path, "", headers);
}

// The system's gzip, as the independent decoder.
std::string gunzip(const std::string& data) {
  const std::string path = ::testing::TempDir() + "webui_body.gz";
  {
    std::ofstream f(path, std::ios::binary);
    f.write(data.data(), static_cast<std::streamsize>(data.size()));
  }
  int rc = 0;
  // run_command merges stderr: a corrupt stream shows up as a non-zero rc and a message.
  std::string out = run_command("gzip -dc '" + path + "'", &rc);
  EXPECT_EQ(rc, 0) << out;
  return out;
}

TEST(ServerWebUi, EveryFileAtItsUrlWithItsTypeAndBytes) {
  const uint16_t port = shared_port();
  EXPECT_EQ(server::web_assets().size(), std::size(kPageFiles));
  for (const PageFile& pf : kPageFiles) {
    SCOPED_TRACE(pf.url);
    HttpResult r = get(port, pf.url);
    ASSERT_EQ(r.status, 200) << r.body;
    EXPECT_EQ(r.headers["content-type"], pf.content_type);
    EXPECT_EQ(r.headers.count("content-encoding"), 0u);
    EXPECT_EQ(r.headers["x-content-type-options"], "nosniff");
    EXPECT_EQ(r.headers["vary"], "Accept-Encoding");
    const std::string expected = web_file(pf.file);
    ASSERT_FALSE(expected.empty());
    EXPECT_TRUE(r.body == expected)
        << "body of " << pf.url << " (" << r.body.size() << " bytes) differs from web/" << pf.file
        << " (" << expected.size() << " bytes)";
  }
  // The page itself carries a content security policy: scripts and connections to its own
  // origin only.
  HttpResult page = get(port, "/");
  EXPECT_NE(page.headers["content-security-policy"].find("default-src 'self'"), std::string::npos);
}

TEST(ServerWebUi, GzipWhenTheClientAcceptsIt) {
  const uint16_t port = shared_port();
  for (const PageFile& pf : kPageFiles) {
    SCOPED_TRACE(pf.url);
    HttpResult r = get(port, pf.url, {{"Accept-Encoding", "gzip, deflate, br"}});
    ASSERT_EQ(r.status, 200);
    EXPECT_EQ(r.headers["content-encoding"], "gzip");
    EXPECT_EQ(r.headers["content-type"], pf.content_type);
    const std::string expected = web_file(pf.file);
    if (expected.size() > 4096) {
      EXPECT_LT(r.body.size(), expected.size());
    }
    EXPECT_TRUE(gunzip(r.body) == expected) << "gunzipped " << pf.url << " differs";
  }
  // Refused or absent gzip: the plain bytes.
  for (const char* accept : {"gzip;q=0", "identity", "br, deflate", "gzip ; q=0.0"}) {
    HttpResult r = get(port, "/webui/app.js", {{"Accept-Encoding", accept}});
    EXPECT_EQ(r.headers.count("content-encoding"), 0u) << accept;
    EXPECT_TRUE(r.body == web_file("app.js")) << accept;
  }
  HttpResult star = get(port, "/webui/app.js", {{"Accept-Encoding", "*"}});
  EXPECT_EQ(star.headers["content-encoding"], "gzip");
}

TEST(ServerWebUi, AcceptEncodingParsing) {
  EXPECT_TRUE(server::accepts_gzip("gzip"));
  EXPECT_TRUE(server::accepts_gzip("GZIP"));
  EXPECT_TRUE(server::accepts_gzip("deflate, gzip;q=0.5"));
  EXPECT_TRUE(server::accepts_gzip("x-gzip"));
  EXPECT_TRUE(server::accepts_gzip("br;q=1, *;q=0.1"));
  EXPECT_FALSE(server::accepts_gzip(""));
  EXPECT_FALSE(server::accepts_gzip("gzip;q=0"));
  EXPECT_FALSE(server::accepts_gzip("gzip;q=0.000"));
  EXPECT_FALSE(server::accepts_gzip("gzipx, br"));
  EXPECT_FALSE(server::accepts_gzip("identity"));
}

// Usable without a network: the page's own files name no other origin, and every /webui/ URL
// they name is served.
TEST(ServerWebUi, PageLoadsNothingFromElsewhere) {
  const uint16_t port = shared_port();
  for (const char* f : {"index.html", "app.js", "style.css"}) {
    std::string text = web_file(f);
    // The favicon's inline SVG names its XML namespace: a name, never fetched.
    const std::string svg_ns = "http://www.w3.org/2000/svg";
    for (size_t at; (at = text.find(svg_ns)) != std::string::npos;) text.erase(at, svg_ns.size());
    EXPECT_EQ(text.find("http://"), std::string::npos) << f;
    EXPECT_EQ(text.find("https://"), std::string::npos) << f;
    EXPECT_EQ(text.find("//cdn"), std::string::npos) << f;
  }
  const std::string html = web_file("index.html");
  const std::regex ref(R"((?:src|href)=\"(/webui/[^\"]+)\")");
  int n = 0;
  for (auto it = std::sregex_iterator(html.begin(), html.end(), ref); it != std::sregex_iterator();
       ++it, ++n) {
    const std::string url = (*it)[1].str();
    EXPECT_EQ(get(port, url).status, 200) << url;
  }
  EXPECT_EQ(n, 7) << "index.html should name its 4 scripts and 3 style sheets";
}

TEST(ServerWebUi, OtherMethodsAndPaths) {
  const uint16_t port = shared_port();
  HttpResult post = http_request(port, "POST", "/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_NE(post.body.find("not allowed"), std::string::npos) << post.body;
  EXPECT_EQ(http_request(port, "DELETE", "/webui/app.js").status, 405);
  for (const char* path : {"/webui/nope.js", "/webui/", "/index.html", "/webui/lib/marked.js",
                           "/webui/../web/app.js"}) {
    HttpResult r = get(port, path);
    EXPECT_EQ(r.status, 404) << path;
    EXPECT_EQ(r.json()["error"]["type"], "not_found_error") << path << ": " << r.body;
  }
}

// The page is static: no API key needed for it (the API calls it makes still need one), and
// it is there while the model loads.
TEST(ServerWebUi, ServedWithoutApiKeyAndWhileLoading) {
  server::ServerOptions so;
  so.api_key = "page-key";
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  EXPECT_EQ(get(s->port(), "/health").status, 503);
  HttpResult page = get(s->port(), "/");
  EXPECT_EQ(page.status, 200);
  EXPECT_TRUE(page.body == web_file("index.html"));
  EXPECT_EQ(get(s->port(), "/webui/app.js").status, 200);
  EXPECT_EQ(get(s->port(), "/v1/models").status, 401);
  s->stop();
}

TEST(ServerWebUi, OffMeansNotFound) {
  server::ServerOptions so;
  so.webui = false;
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  for (const PageFile& pf : kPageFiles) {
    if (pf.url == std::string("/")) continue;  // liveness, below
    HttpResult r = get(s->port(), pf.url);
    EXPECT_EQ(r.status, 404) << pf.url;
    EXPECT_EQ(r.json()["error"]["type"], "not_found_error") << pf.url << ": " << r.body;
  }
  EXPECT_EQ(get(s->port(), "/health").status, 503);  // the rest of the server is unchanged
  s->stop();
}

// Without the page, / answers as Ollama's root does (its CLI sends HEAD / before anything).
TEST(ServerWebUi, OffRootSaysTheServerRuns) {
  server::ServerOptions so;
  so.webui = false;
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  HttpResult root = get(s->port(), "/");
  EXPECT_EQ(root.status, 200);
  EXPECT_EQ(root.body, "loom is running");
  EXPECT_EQ(root.headers["content-type"], "text/plain; charset=utf-8");
  HttpResult head = http_request(s->port(), "HEAD", "/");
  EXPECT_EQ(head.status, 200);
  EXPECT_TRUE(head.body.empty());
  HttpResult post = http_request(s->port(), "POST", "/", "{}");
  EXPECT_EQ(post.status, 405);
  EXPECT_EQ(post.headers["allow"], "GET, HEAD");
  s->stop();
}

}  // namespace
}  // namespace loom::test
