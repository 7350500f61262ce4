// Metric math of `loom bench serve` on hand-built request records, checked against values
// worked out by hand from vLLM's definitions (numpy percentiles: linear interpolation).
#include "bench/serve_metrics.h"

#include <gtest/gtest.h>

#include "bench/http_client.h"
#include "bench/serve.h"

namespace loom::bench {
namespace {

RequestRecord ok(int64_t prompt, int64_t out, double start, double ttft, double latency,
                 std::vector<double> itl) {
  RequestRecord r;
  r.success = true;
  r.prompt_len = prompt;
  r.output_tokens = out;
  r.chunks = static_cast<int64_t>(itl.size()) + 1;
  r.start_time = start;
  r.ttft = ttft;
  r.latency = latency;
  r.itl = std::move(itl);
  return r;
}

std::vector<RequestRecord> example() {
  RequestRecord failed;
  failed.error = "HTTP 500";
  return {ok(10, 5, 0.0, 0.1, 0.5, {0.1, 0.1, 0.1, 0.1}), ok(20, 1, 0.2, 0.3, 0.3, {}),
          ok(30, 3, 1.5, 0.2, 1.2, {0.5, 0.5}), failed};
}

TEST(ServeMetrics, PercentileMatchesNumpyLinear) {
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2, 3, 4}, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile_sorted({15, 20, 35, 40, 50}, 40), 29.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({15, 20, 35, 40, 50}, 50), 35.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({7}, 99), 7.0);
  EXPECT_DOUBLE_EQ(percentile_sorted({1, 2}, 100), 2.0);
}

TEST(ServeMetrics, HandWorkedExample) {
  GoodputSlo slo;
  slo.ttft_ms = 250;
  slo.tpot_ms = 200;
  ServeMetrics m = compute_serve_metrics(example(), 4.0, {50, 99}, slo);
  EXPECT_EQ(m.completed, 3);
  EXPECT_EQ(m.failed, 1);
  EXPECT_EQ(m.total_input, 60);
  EXPECT_EQ(m.total_output, 9);
  EXPECT_EQ(m.output_lens, (std::vector<int64_t>{5, 1, 3, 0}));
  EXPECT_DOUBLE_EQ(m.request_throughput, 0.75);
  EXPECT_DOUBLE_EQ(m.output_throughput, 2.25);
  EXPECT_DOUBLE_EQ(m.total_token_throughput, 17.25);
  EXPECT_DOUBLE_EQ(m.request_goodput, 0.25);  // only the first meets both SLOs
  EXPECT_NEAR(m.ttft.mean_ms, 200, 1e-9);
  EXPECT_NEAR(m.ttft.median_ms, 200, 1e-9);
  EXPECT_NEAR(m.ttft.std_ms, 81.64965809277261, 1e-9);  // population std
  EXPECT_NEAR(m.ttft.percentiles_ms[1].second, 298, 1e-9);
  // TPOT leaves out the one-token request: (0.5-0.1)/4 and (1.2-0.2)/2.
  EXPECT_NEAR(m.tpot.mean_ms, 300, 1e-9);
  EXPECT_NEAR(m.tpot.percentiles_ms[1].second, 496, 1e-9);
  EXPECT_NEAR(m.itl.mean_ms, 1400.0 / 6, 1e-9);
  EXPECT_NEAR(m.itl.median_ms, 100, 1e-9);
  EXPECT_NEAR(m.e2el.mean_ms, 2000.0 / 3, 1e-9);
  // Second 0 holds 5 chunks of the first request and 1 of the second; both were active then.
  EXPECT_DOUBLE_EQ(m.max_output_tokens_per_s, 6);
  EXPECT_EQ(m.max_concurrent_requests, 2);
}

TEST(ServeMetrics, GoodputCountsOneTokenTpotAsZeroAndE2el) {
  GoodputSlo slo;
  slo.tpot_ms = 1;  // only the one-token request (TPOT 0) passes
  EXPECT_DOUBLE_EQ(compute_serve_metrics(example(), 2.0, {99}, slo).request_goodput, 0.5);
  GoodputSlo e2e;
  e2e.e2el_ms = 600;  // 0.5 and 0.3 pass, 1.2 does not
  EXPECT_DOUBLE_EQ(compute_serve_metrics(example(), 2.0, {99}, e2e).request_goodput, 1.0);
  EXPECT_DOUBLE_EQ(compute_serve_metrics(example(), 2.0, {99}, {}).request_goodput, 0.0);
}

TEST(ServeMetrics, MissingUsageFallsBackToChunkCount) {
  auto recs = example();
  recs[0].output_tokens = 0;  // server sent no usage: 5 chunks
  recs[2].output_tokens = 0;
  ServeMetrics m = compute_serve_metrics(recs, 1.0, {99}, {});
  EXPECT_EQ(m.total_output, 9);
}

TEST(ServeMetrics, AllFailedReportsZeros) {
  RequestRecord f;
  f.error = "x";
  ServeMetrics m = compute_serve_metrics({f, f}, 1.0, {99}, {});
  EXPECT_EQ(m.completed, 0);
  EXPECT_EQ(m.failed, 2);
  EXPECT_EQ(m.ttft.mean_ms, 0);
  EXPECT_EQ(m.max_output_tokens_per_s, 0);
}

TEST(ServeMetrics, ResultJsonHasVllmKeys) {
  auto recs = example();
  ServeMetrics m = compute_serve_metrics(recs, 4.0, {50, 99.9}, {});
  auto j = serve_result_json(m, recs, 4.0, {"ttft", "tpot", "itl", "e2el"}, false);
  for (const char* k :
       {"duration", "completed", "failed", "total_input_tokens", "total_output_tokens",
        "request_throughput", "request_goodput", "output_throughput", "total_token_throughput",
        "max_output_tokens_per_s", "max_concurrent_requests", "input_lens", "output_lens", "ttfts",
        "itls", "start_times", "generated_texts", "errors"})
    EXPECT_TRUE(j.contains(k)) << k;
  for (const char* metric : {"ttft", "tpot", "itl", "e2el"})
    for (const char* stat : {"mean_", "median_", "std_", "p50_", "p99.9_"})
      EXPECT_TRUE(j.contains(std::string(stat) + metric + "_ms")) << stat << metric;
  EXPECT_EQ(j["itls"].size(), 4u);
  EXPECT_EQ(j["errors"][3], "HTTP 500");
  auto only_ttft = serve_result_json(m, recs, 4.0, {"ttft"}, true);
  EXPECT_FALSE(only_ttft.contains("mean_tpot_ms"));
  EXPECT_TRUE(only_ttft["request_goodput"].is_number());
}

TEST(ServeMetrics, ParseGoodput) {
  auto g = parse_goodput({"ttft:200", "e2el:1500.5"});
  ASSERT_TRUE(g.is_ok());
  EXPECT_EQ(*g->ttft_ms, 200);
  EXPECT_FALSE(g->tpot_ms.has_value());
  EXPECT_EQ(*g->e2el_ms, 1500.5);
  EXPECT_FALSE(parse_goodput({"ttft"}).is_ok());
  EXPECT_FALSE(parse_goodput({"foo:1"}).is_ok());
  EXPECT_FALSE(parse_goodput({"tpot:-1"}).is_ok());
  EXPECT_FALSE(parse_goodput({"tpot:1ms"}).is_ok());
}

TEST(ServeMetrics, PrometheusDeltas) {
  const std::string before =
      "# HELP vllm:prefix_cache_hits_total x\n"
      "vllm:prefix_cache_hits_total{model_name=\"m\"} 10\n"
      "vllm:prefix_cache_queries_total{model_name=\"m\"} 100\n"
      "vllm:num_preemptions_total{model_name=\"m\"} 1\n"
      "vllm:generation_tokens_total{model_name=\"m\"} 5.0\n";
  const std::string after =
      "vllm:prefix_cache_hits_total{model_name=\"m\"} 40\n"
      "vllm:prefix_cache_queries_total{model_name=\"m\"} 220\n"
      "vllm:num_preemptions_total{model_name=\"m\"} 4\n"
      "vllm:generation_tokens_total{model_name=\"m\"} 1.5e1\n"
      "vllm:prompt_tokens_total{model_name=\"m\"} 7\n";
  auto d = server_metric_deltas(before, after);
  EXPECT_EQ(d["server_prefix_cache_hits"], 30);
  EXPECT_EQ(d["server_prefix_cache_queries"], 120);
  EXPECT_DOUBLE_EQ(d["server_prefix_cache_hit_rate"].get<double>(), 0.25);
  EXPECT_EQ(d["server_num_preemptions"], 3);
  EXPECT_EQ(d["server_generation_tokens"], 10);
  EXPECT_EQ(d["server_prompt_tokens"], 7);
  const std::string spec_after =
      after +
      "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 10\n"
      "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 40\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 30\n";
  auto s = server_metric_deltas(before, spec_after);
  EXPECT_DOUBLE_EQ(s["spec_decode_acceptance_rate"].get<double>(), 75.0);
  EXPECT_DOUBLE_EQ(s["spec_decode_acceptance_length"].get<double>(), 4.0);
  EXPECT_FALSE(s.contains("server_spec_acceptance_rate"));
  EXPECT_FALSE(d.contains("spec_decode_acceptance_rate"));
}

// vLLM's bench serve keys for speculative decoding, from /metrics deltas: the acceptance rate
// as a percent, the acceptance length, the counts, and per draft position the accepted share
// of the drafts (from the ..._per_pos_total{position} counters; a position only the first page
// has counts 0).
TEST(ServeMetrics, SpecDecodeKeysAreVllms) {
  const std::string before =
      "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 2\n"
      "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 6\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 3\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\",model_name=\"m\"} 2\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\",model_name=\"m\"} 1\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\",model_name=\"m\"} 0\n";
  const std::string after =
      "# TYPE vllm:spec_decode_num_accepted_tokens_per_pos_total counter\n"
      "vllm:spec_decode_num_drafts_total{model_name=\"m\"} 12\n"
      "vllm:spec_decode_num_draft_tokens_total{model_name=\"m\"} 36\n"
      "vllm:spec_decode_num_accepted_tokens_total{model_name=\"m\"} 18\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"0\",model_name=\"m\"} 10\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"1\",model_name=\"m\"} 6\n"
      "vllm:spec_decode_num_accepted_tokens_per_pos_total{position=\"2\",model_name=\"m\"} 2\n";
  auto j = server_metric_deltas(before, after);
  EXPECT_DOUBLE_EQ(j["spec_decode_acceptance_rate"].get<double>(), 50.0);   // 15 of 30, percent
  EXPECT_DOUBLE_EQ(j["spec_decode_acceptance_length"].get<double>(), 2.5);  // 1 + 15 / 10
  EXPECT_EQ(j["spec_decode_num_drafts"], 10);
  EXPECT_EQ(j["spec_decode_draft_tokens"], 30);
  EXPECT_EQ(j["spec_decode_accepted_tokens"], 15);
  const std::vector<double> per_pos = j["spec_decode_per_position_acceptance_rates"];
  EXPECT_EQ(per_pos, (std::vector<double>{0.8, 0.5, 0.2})) << j.dump();
  EXPECT_FALSE(j.contains("server_spec_num_drafts"));  // vLLM's spec_decode_num_drafts instead
  // The printed summary's section, as vLLM's bench serve prints it.
  const std::string summary = format_summary(j, ServeOptions{});
  EXPECT_NE(summary.find("Speculative Decoding"), std::string::npos) << summary;
  const size_t rate = summary.find("Acceptance rate (%):");
  ASSERT_NE(rate, std::string::npos) << summary;
  EXPECT_EQ(summary.substr(summary.find_first_not_of(' ', rate + 20), 6), "50.00 ") << summary;
  EXPECT_NE(summary.find("80.00, 50.00, 20.00"), std::string::npos) << summary;
  // Nothing proposed during the run: no speculative keys, as vLLM.
  auto idle = server_metric_deltas(after, after);
  EXPECT_FALSE(idle.contains("spec_decode_acceptance_rate")) << idle.dump();
  EXPECT_FALSE(idle.contains("spec_decode_per_position_acceptance_rates")) << idle.dump();
  EXPECT_TRUE(server_metric_deltas("", "").empty());
  EXPECT_TRUE(server_metric_deltas("", "some_other_metric 3\n").empty());
}

TEST(SseSplitter, ReassemblesSplitLines) {
  const std::string stream =
      ": comment\r\nevent: x\r\ndata: {\"a\":1}\r\n\r\ndata:{\"b\":2}\n\ndata: [DONE]\n\n";
  // Feed in every possible two-piece split; the payloads must come out the same each time.
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseLineSplitter s;
    std::vector<std::string> got;
    auto cb = [&](std::string_view d, BenchClock::time_point) {
      got.emplace_back(d);
      return true;
    };
    s.feed(std::string_view(stream).substr(0, cut), BenchClock::now(), cb);
    s.feed(std::string_view(stream).substr(cut), BenchClock::now(), cb);
    ASSERT_EQ(got, (std::vector<std::string>{"{\"a\":1}", "{\"b\":2}", "[DONE]"}))
        << "cut at " << cut;
  }
}

TEST(SseSplitter, StopsWhenCallbackSaysSo) {
  SseLineSplitter s;
  int n = 0;
  bool more = s.feed("data: 1\ndata: 2\ndata: 3\n", BenchClock::now(),
                     [&](std::string_view, BenchClock::time_point) { return ++n < 2; });
  EXPECT_FALSE(more);
  EXPECT_EQ(n, 2);
}

TEST(BaseUrl, Parses) {
  auto u = parse_base_url("http://localhost:8080/prefix/");
  ASSERT_TRUE(u.is_ok());
  EXPECT_EQ(u->host, "localhost");
  EXPECT_EQ(u->port, "8080");
  EXPECT_EQ(u->prefix, "/prefix");
  auto d = parse_base_url("http://10.0.0.1");
  ASSERT_TRUE(d.is_ok());
  EXPECT_EQ(d->port, "80");
  auto v6 = parse_base_url("http://[::1]:9000");
  ASSERT_TRUE(v6.is_ok());
  EXPECT_EQ(v6->host, "::1");
  EXPECT_EQ(v6->port, "9000");
  EXPECT_FALSE(parse_base_url("https://x").is_ok());
  EXPECT_FALSE(parse_base_url("localhost:8000").is_ok());
  EXPECT_FALSE(parse_base_url("http://:80").is_ok());
  EXPECT_FALSE(parse_base_url("http://h:99999").is_ok());
  EXPECT_FALSE(parse_base_url("http://h:8x").is_ok());
}

}  // namespace
}  // namespace loom::bench
