// The command line and printed tables of `loom bench serve`.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

#include "bench/serve.h"

namespace loom::bench {
namespace {

using Json = nlohmann::json;

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string item;
  while (std::getline(ss, item, ','))
    if (!item.empty()) out.push_back(item);
  return out;
}

double num(const Json& j, const std::string& key) {
  auto it = j.find(key);
  return it != j.end() && it->is_number() ? it->get<double>() : NAN;
}

void line(std::string& out, const char* label, const std::string& value) {
  char buf[128];
  std::snprintf(buf, sizeof buf, "%-40s %-10s\n", label, value.c_str());
  out += buf;
}

std::string fmt2(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.2f", v);
  return buf;
}

std::string header(const std::string& title, char fill) {
  const int width = 50;
  int pad = width - static_cast<int>(title.size());
  int left = pad / 2;
  return std::string(std::max(left, 0), fill) + title + std::string(std::max(pad - left, 0), fill) +
         "\n";
}

}  // namespace

std::string format_summary(const Json& r, const ServeOptions& o) {
  std::string out = header(" Serving Benchmark Result ", '=');
  line(out, "Successful requests:", std::to_string(r.value("completed", 0)));
  line(out, "Failed requests:", std::to_string(r.value("failed", 0)));
  if (r.contains("max_concurrency") && !r["max_concurrency"].is_null())
    line(out, "Maximum request concurrency:", std::to_string(r["max_concurrency"].get<int>()));
  if (std::isfinite(o.request_rate))
    line(out, "Request rate configured (RPS):", fmt2(o.request_rate));
  line(out, "Benchmark duration (s):", fmt2(num(r, "duration")));
  line(out, "Total input tokens:", std::to_string(r.value("total_input_tokens", 0)));
  line(out, "Total generated tokens:", std::to_string(r.value("total_output_tokens", 0)));
  line(out, "Request throughput (req/s):", fmt2(num(r, "request_throughput")));
  if (r.contains("request_goodput"))
    line(out, "Request goodput (req/s):", fmt2(num(r, "request_goodput")));
  line(out, "Output token throughput (tok/s):", fmt2(num(r, "output_throughput")));
  line(out, "Peak output token throughput (tok/s):", fmt2(num(r, "max_output_tokens_per_s")));
  line(out, "Peak concurrent requests:", std::to_string(r.value("max_concurrent_requests", 0)));
  line(out, "Total token throughput (tok/s):", fmt2(num(r, "total_token_throughput")));
  const std::tuple<const char*, const char*, const char*> metrics[] = {
      {"ttft", "TTFT", "Time to First Token"},
      {"tpot", "TPOT", "Time per Output Token (excl. 1st token)"},
      {"itl", "ITL", "Inter-token Latency"},
      {"e2el", "E2EL", "End-to-end Latency"}};
  for (const auto& [key, name, title] : metrics) {
    const std::string k = key;
    if (!r.contains("mean_" + k + "_ms")) continue;
    out += header(title, '-');
    line(out, ("Mean " + std::string(name) + " (ms):").c_str(), fmt2(num(r, "mean_" + k + "_ms")));
    line(out, ("Median " + std::string(name) + " (ms):").c_str(),
         fmt2(num(r, "median_" + k + "_ms")));
    for (double p : o.percentiles) {
      const std::string w = percentile_word(p);
      line(out, ("P" + w + " " + name + " (ms):").c_str(), fmt2(num(r, "p" + w + "_" + k + "_ms")));
    }
  }
  if (r.contains("server_prefix_cache_hit_rate") || r.contains("server_num_preemptions")) {
    out += header(" Server (/metrics deltas) ", '-');
    if (r.contains("server_prefix_cache_hit_rate"))
      line(out, "Prefix cache hit rate (%):", fmt2(100.0 * num(r, "server_prefix_cache_hit_rate")));
    if (r.contains("server_num_preemptions"))
      line(out, "Preemptions:", std::to_string(r["server_num_preemptions"].get<int64_t>()));
  }
  if (r.contains("spec_decode_acceptance_rate")) {  // vLLM's section and keys
    out += header("Speculative Decoding", '-');
    line(out, "Acceptance rate (%):", fmt2(num(r, "spec_decode_acceptance_rate")));
    line(out, "Acceptance length:", fmt2(num(r, "spec_decode_acceptance_length")));
    line(out, "Drafts:", std::to_string(r["spec_decode_num_drafts"].get<int64_t>()));
    line(out, "Draft tokens:", std::to_string(r["spec_decode_draft_tokens"].get<int64_t>()));
    line(out, "Accepted tokens:", std::to_string(r["spec_decode_accepted_tokens"].get<int64_t>()));
    std::string per_pos;
    for (const auto& rate : r["spec_decode_per_position_acceptance_rates"])
      per_pos += (per_pos.empty() ? "" : ", ") + fmt2(100.0 * rate.get<double>());
    line(out, "Per-position acceptance (%):", per_pos);
  }
  out += std::string(50, '=') + "\n";
  return out;
}

std::string format_sweep_table(const std::vector<Json>& results) {
  std::string out =
      "| concurrency | req/s | output tok/s | peak tok/s | TTFT p50 ms | TTFT p99 ms | TPOT p50 ms "
      "| TPOT p99 ms "
      "| failed |\n|---:|---:|---:|---:|---:|---:|---:|---:|---:|\n";
  for (const Json& r : results) {
    char buf[512];
    std::snprintf(buf, sizeof buf, "| %d | %.2f | %.1f | %.0f | %.1f | %.1f | %.1f | %.1f | %d |\n",
                  r.value("max_concurrency", 0), num(r, "request_throughput"),
                  num(r, "output_throughput"), num(r, "max_output_tokens_per_s"),
                  num(r, "median_ttft_ms"), num(r, "p99_ttft_ms"), num(r, "median_tpot_ms"),
                  num(r, "p99_tpot_ms"), r.value("failed", 0));
    out += buf;
  }
  return out;
}

int serve_main(int argc, char** argv) {
  CLI::App app{
      "Load-test an OpenAI-compatible server (loom, vLLM, llama-server) with random prompts; "
      "vLLM's `bench serve` metrics and result keys.",
      "loom bench serve"};
  ServeOptions o;
  std::string dataset = "random", request_rate = "inf", percentile_metrics = "ttft,tpot,itl",
              metric_percentiles = "99", sweep, result_file;
  std::vector<std::string> goodput;
  bool save_result = false, no_progress = false;
  app.add_option("--base-url", o.base_url, "server URL (http://host:port)")->capture_default_str();
  app.add_option("--endpoint", o.endpoint, "/v1/completions or /v1/chat/completions")
      ->capture_default_str();
  app.add_option("--model", o.model, "model name in requests (default: the first of /v1/models)");
  app.add_option("--api-key", o.api_key, "sent as Authorization: Bearer KEY");
  app.add_option("--dataset-name", dataset, "only 'random'")->capture_default_str();
  app.add_option("--random-input-len", o.input_len, "prompt tokens")->capture_default_str();
  app.add_option("--random-output-len", o.output_len, "output tokens (max_tokens)")
      ->capture_default_str();
  app.add_option("--random-range-ratio", o.range_ratio, "lengths uniform in [len*(1-R), len*(1+R)]")
      ->capture_default_str();
  app.add_option("--random-prefix-len", o.prefix_len,
                 "shared prefix tokens at the start of every prompt")
      ->capture_default_str();
  app.add_option("--num-prompts", o.num_prompts, "requests (per level with --concurrency-sweep)")
      ->capture_default_str();
  app.add_option("--max-concurrency", o.max_concurrency,
                 "requests in flight at most (0 = no limit)");
  app.add_option("--request-rate", request_rate, "requests/s (Poisson/gamma arrivals), or inf")
      ->capture_default_str();
  app.add_option("--burstiness", o.burstiness, "gamma shape of arrivals: 1 = Poisson, <1 burstier")
      ->capture_default_str();
  app.add_option("--concurrency-sweep", sweep,
                 "run these --max-concurrency levels in turn, e.g. 1,2,4,8");
  app.add_option("--prompts-per-concurrency", o.prompts_per_concurrency,
                 "with --concurrency-sweep: at least this many requests per unit of concurrency")
      ->check(CLI::Range(0, 1 << 20));
  app.add_flag("--ignore-eos", o.ignore_eos,
               "ask the server to generate exactly the output length");
  app.add_flag("--json-schema-per-request", o.json_schema_per_request,
               "send each request its own JSON schema (response_format json_schema)");
  app.add_option("--seed", o.seed, "random seed")->capture_default_str();
  app.add_option("--vocab-size", o.vocab_size,
                 "token ids to draw from (default: probed via /detokenize)");
  app.add_option("--goodput", goodput, "SLOs for goodput: ttft:MS tpot:MS e2el:MS")->expected(1, 3);
  app.add_option("--percentile-metrics", percentile_metrics, "metrics to report percentiles of")
      ->capture_default_str();
  app.add_option("--metric-percentiles", metric_percentiles, "percentiles to report, e.g. 50,90,99")
      ->capture_default_str();
  app.add_flag("--save-result", save_result, "write the result JSON");
  app.add_option("--result-file", result_file,
                 "where --save-result writes (default: loom-bench-serve-DATE.json)");
  app.add_option("--timeout", o.timeout_s, "seconds one request may take")->capture_default_str();
  app.add_flag("--no-progress", no_progress, "no live progress line");
  app.add_flag("!--no-warmup", o.warmup, "skip the initial test request");
  CLI11_PARSE(app, argc, argv);

  auto fail = [](const std::string& m) {
    std::fprintf(stderr, "loom bench serve: %s\n", m.c_str());
    return 1;
  };
  if (dataset != "random") return fail("--dataset-name: only 'random' is supported");
  if (request_rate == "inf") {
    o.request_rate = std::numeric_limits<double>::infinity();
  } else {
    char* end = nullptr;
    o.request_rate = std::strtod(request_rate.c_str(), &end);
    if (*end != '\0' || !(o.request_rate > 0))
      return fail("--request-rate must be a positive number or inf");
  }
  auto g = parse_goodput(goodput);
  if (!g.is_ok()) return fail(g.status().message());
  o.goodput = *g;
  o.percentile_metrics = split_commas(percentile_metrics);
  o.percentiles.clear();
  for (const std::string& p : split_commas(metric_percentiles)) {
    char* end = nullptr;
    double v = std::strtod(p.c_str(), &end);
    if (*end != '\0') return fail("--metric-percentiles: '" + p + "' is not a number");
    o.percentiles.push_back(v);
  }
  o.progress = !no_progress;
  if (save_result && result_file.empty()) {
    std::time_t t = std::time(nullptr);
    char buf[64];
    std::strftime(buf, sizeof buf, "loom-bench-serve-%Y%m%d-%H%M%S.json", std::localtime(&t));
    result_file = buf;
  }

  Json saved;
  if (!sweep.empty()) {
    std::vector<int32_t> levels;
    for (const std::string& s : split_commas(sweep)) {
      char* end = nullptr;
      long v = std::strtol(s.c_str(), &end, 10);
      if (*end != '\0' || v <= 0 || v > (1 << 20))
        return fail("--concurrency-sweep: '" + s + "' is not a positive integer");
      levels.push_back(static_cast<int32_t>(v));
    }
    std::vector<Json> results;
    auto r = run_concurrency_sweep(o, levels, [&](const Json& level) {
      std::fprintf(
          stderr,
          "concurrency %d: %.1f output tok/s, TTFT p50 %.1f ms, TPOT p50 %.1f ms, %d failed\n",
          level.value("max_concurrency", 0), num(level, "output_throughput"),
          num(level, "median_ttft_ms"), num(level, "median_tpot_ms"), level.value("failed", 0));
    });
    if (!r.is_ok()) return fail(r.status().message());
    results = std::move(*r);
    std::printf("%s", format_sweep_table(results).c_str());
    saved = results;
  } else {
    auto r = run_serve(o);
    if (!r.is_ok()) return fail(r.status().message());
    std::printf("%s", format_summary(*r, o).c_str());
    saved = std::move(*r);
  }
  if (save_result) {
    std::ofstream f(result_file);
    f << saved.dump(2) << "\n";
    if (!f) return fail("cannot write " + result_file);
    std::fprintf(stderr, "result written to %s\n", result_file.c_str());
  }
  return 0;
}

}  // namespace loom::bench
