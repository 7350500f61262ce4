// `loom bench serve` against a real loom server (in-process, synth:tiny, loopback): prompts
// aligned through /tokenize + /detokenize, counts that add up, and token totals equal to the
// server's own usage and /metrics counters.
#include <gtest/gtest.h>

#include <regex>
#include <set>

#include "bench/random_dataset.h"
#include "bench/serve.h"
#include "loom/engine.h"
#include "server/server.h"

namespace loom::bench {
namespace {

class ServeLoom : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server::ServerOptions so;
    so.port = 0;
    so.served_model_name = "tiny";
    so.model_path = "synth:tiny";
    so.io_threads = 2;
    so.chat_template =
        "{% for m in messages %}<|{{ m['role'] }}|>{{ m['content'] }}\n{% endfor %}<|assistant|>";
    auto s = server::Server::start(so);
    ASSERT_TRUE(s.is_ok()) << s.status().message();
    EngineConfig ec;
    ec.max_model_len = 256;
    ec.max_num_seqs = 16;
    ec.n_threads = 1;
    Status st = (*s)->load("synth:tiny", ec);
    ASSERT_TRUE(st.is_ok()) << st.message();
    server_ = std::move(s).value().release();
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }
  static ServeOptions options() {
    ServeOptions o;
    o.base_url = server_->url();
    o.input_len = 24;
    o.output_len = 8;
    o.num_prompts = 8;
    o.max_concurrency = 4;
    o.ignore_eos = true;
    o.progress = false;
    o.seed = 7;
    return o;
  }
  static server::Server* server_;
};
server::Server* ServeLoom::server_ = nullptr;

TEST_F(ServeLoom, CountsMatchServerUsageAndMetrics) {
  ServeOptions o = options();
  auto r = run_serve(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  const auto& j = *r;
  for (const char* k : {"duration",
                        "completed",
                        "failed",
                        "total_input_tokens",
                        "total_output_tokens",
                        "request_throughput",
                        "output_throughput",
                        "total_token_throughput",
                        "max_output_tokens_per_s",
                        "mean_ttft_ms",
                        "median_ttft_ms",
                        "std_ttft_ms",
                        "p99_ttft_ms",
                        "mean_tpot_ms",
                        "p99_tpot_ms",
                        "mean_itl_ms",
                        "p99_itl_ms",
                        "input_lens",
                        "output_lens",
                        "ttfts",
                        "itls",
                        "errors"})
    EXPECT_TRUE(j.contains(k)) << k;
  EXPECT_EQ(j["completed"].get<int>() + j["failed"].get<int>(), 8);
  EXPECT_EQ(j["failed"], 0) << j["errors"].dump();
  EXPECT_EQ(j["model_id"], "tiny");
  EXPECT_TRUE(j["prompts_aligned_by_server_tokenizer"].get<bool>());
  EXPECT_EQ(j["total_output_tokens"], 8 * 8);  // ignore_eos: exactly max_tokens each
  // The server's counters moved by exactly what the usage chunks reported.
  ASSERT_TRUE(j.contains("server_generation_tokens")) << j.dump();
  EXPECT_EQ(j["server_generation_tokens"], j["total_output_tokens"]);
  EXPECT_EQ(j["server_prompt_tokens"], j["total_input_tokens"]);
  int64_t sum_in = 0;
  for (const auto& n : j["input_lens"]) sum_in += n.get<int64_t>();
  EXPECT_EQ(sum_in, j["total_input_tokens"].get<int64_t>());
  // Aligned prompts encode to the requested length + BOS, give or take the few tokens that
  // the placeholder byte vocabulary's decode/encode round trip can leave after six tries.
  int exact = 0;
  for (const auto& n : j["input_lens"]) {
    EXPECT_GE(n.get<int>(), 25 - 3) << j["input_lens"].dump();
    EXPECT_LE(n.get<int>(), 25 + 3) << j["input_lens"].dump();
    exact += n.get<int>() == 25;
  }
  EXPECT_GE(exact, 4) << j["input_lens"].dump();
  EXPECT_TRUE(j.contains("server_num_preemptions"));
  EXPECT_TRUE(j.contains("server_prefix_cache_hit_rate"));
}

TEST_F(ServeLoom, ChatEndpoint) {
  ServeOptions o = options();
  o.endpoint = "/v1/chat/completions";
  o.num_prompts = 4;
  auto r = run_serve(o);
  ASSERT_TRUE(r.is_ok()) << r.status().message();
  EXPECT_EQ((*r)["completed"], 4) << (*r)["errors"].dump();
  EXPECT_EQ((*r)["total_output_tokens"], 4 * 8);
  EXPECT_EQ((*r)["server_generation_tokens"], (*r)["total_output_tokens"]);
}

TEST_F(ServeLoom, FreshSeedPerLevelDefeatsPrefixCacheUnlessAsked) {
  ServeOptions o = options();
  o.input_len = 64;
  o.num_prompts = 4;
  auto fresh = run_concurrency_sweep(o, {2, 2});
  ASSERT_TRUE(fresh.is_ok()) << fresh.status().message();
  // Level 2 repeats level 1's settings but not its prompts: no full block is ever reused.
  EXPECT_EQ((*fresh)[1]["server_prefix_cache_hits"], 0);
  o.prefix_len = 48;  // three full blocks of 16 shared by every prompt
  auto shared = run_serve(o, 5);
  ASSERT_TRUE(shared.is_ok()) << shared.status().message();
  EXPECT_GT((*shared)["server_prefix_cache_hits"].get<int64_t>(), 0);
}

// --json-schema-per-request: request i carries its own schema, whose property names hold i,
// and the server follows it: every text opens with one of its own request's properties.
TEST_F(ServeLoom, JsonSchemaPerRequestIsSentAndFollowed) {
  for (const char* endpoint : {"/v1/completions", "/v1/chat/completions"}) {
    SCOPED_TRACE(endpoint);
    ServeOptions o = options();
    o.endpoint = endpoint;
    o.output_len = 24;
    o.json_schema_per_request = true;
    auto r = run_serve(o);
    ASSERT_TRUE(r.is_ok()) << r.status().message();
    ASSERT_EQ((*r)["completed"], 8) << (*r)["errors"].dump();
    EXPECT_TRUE((*r)["json_schema_per_request"].get<bool>());
    std::set<int> seen;
    static const std::regex kOpen(R"re(^\{"(title|count|tags|kind)_([0-9]+)":)re");
    for (const auto& t : (*r)["generated_texts"]) {
      std::smatch m;
      const std::string text = t.get<std::string>();
      ASSERT_TRUE(std::regex_search(text, m, kOpen)) << text;
      seen.insert(std::stoi(m[2].str()));
    }
    EXPECT_EQ(seen, (std::set<int>{0, 1, 2, 3, 4, 5, 6, 7}));
  }
}

TEST_F(ServeLoom, VocabularyProbeFindsModelSize) {
  auto url = parse_base_url(server_->url());
  ASSERT_TRUE(url.is_ok());
  auto tok = ServerTokenizer::probe(*url, "tiny", {});
  ASSERT_NE(tok, nullptr);
  auto v = tok->find_vocab_size();
  ASSERT_TRUE(v.is_ok()) << v.status().message();
  EXPECT_LE(*v, 512);  // synth:tiny's vocabulary
  EXPECT_GT(*v, 256);
}

}  // namespace
}  // namespace loom::bench
