// Metric math of `loom bench serve`, with vLLM's definitions (vllm/benchmarks/serve.py):
//   TTFT  send → first streamed chunk whose `choices` is non-empty
//   E2EL  send → last chunk with non-empty choices ("latency")
//   TPOT  (E2EL − TTFT) / (output_tokens − 1), only for requests with more than one token
//   ITL   every gap between consecutive chunks with choices, pooled over requests
//   goodput  requests meeting every SLO (ttft, tpot, e2el in ms) per second of the run; a
//            request with one token counts its TPOT as 0
//   max_output_tokens_per_s  chunk arrivals bucketed into whole seconds since the first send
// Statistics as numpy: population std, percentiles by linear interpolation; an empty list
// reports 0.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"

namespace loom::bench {

// One request as the client saw it. Times in seconds; start_time from the run's start.
struct RequestRecord {
  bool success = false;
  int64_t prompt_len = 0;     // the server's usage.prompt_tokens when reported
  int64_t output_tokens = 0;  // usage.completion_tokens; 0 = the server did not report usage
  int64_t chunks = 0;         // chunks with non-empty choices
  double start_time = 0;
  double ttft = 0;
  double latency = 0;
  std::vector<double> itl;
  std::string generated_text;
  std::string error;
};

struct GoodputSlo {
  std::optional<double> ttft_ms, tpot_ms, e2el_ms;
  bool any() const { return ttft_ms || tpot_ms || e2el_ms; }
};

// Parses "ttft:MS tpot:MS e2el:MS" items (each as its own argument).
Result<GoodputSlo> parse_goodput(const std::vector<std::string>& items);

struct MetricStats {
  double mean_ms = 0, median_ms = 0, std_ms = 0;
  std::vector<std::pair<double, double>> percentiles_ms;  // (p, value)
};

struct ServeMetrics {
  int32_t completed = 0;
  int32_t failed = 0;
  int64_t total_input = 0;
  int64_t total_output = 0;
  double request_throughput = 0;
  double request_goodput = 0;
  double output_throughput = 0;
  double total_token_throughput = 0;
  double max_output_tokens_per_s = 0;
  int32_t max_concurrent_requests = 0;
  MetricStats ttft, tpot, itl, e2el;
  std::vector<int64_t> output_lens;  // per request; 0 for failed ones
};

// numpy.percentile(values, p) with linear interpolation; `sorted` must be ascending, non-empty.
double percentile_sorted(const std::vector<double>& sorted, double p);

// Output tokens of a successful request: usage.completion_tokens, or (when the server sent no
// usage) the number of chunks with choices.
int64_t output_tokens_of(const RequestRecord& r);

ServeMetrics compute_serve_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                   const std::vector<double>& percentiles,
                                   const GoodputSlo& goodput);

// "99" for 99, "99.9" for 99.9 (vLLM's key spelling: p99_ttft_ms, p99.9_ttft_ms).
std::string percentile_word(double p);

// vLLM's result keys: duration, completed, failed, totals, throughputs, the
// mean_/median_/std_/pNN_ statistics of each metric in `percentile_metrics`, and per-request
// arrays (input_lens, output_lens, ttfts, itls, start_times, generated_texts, errors).
nlohmann::json serve_result_json(const ServeMetrics& m, const std::vector<RequestRecord>& records,
                                 double duration_s,
                                 const std::vector<std::string>& percentile_metrics,
                                 bool goodput_set);

// Sums of every sample of each metric name in a Prometheus text page (labels ignored).
std::map<std::string, double> parse_prometheus_totals(const std::string& page);

// Server-side deltas between two /metrics pages when they carry vLLM's metric names:
// server_prefix_cache_{hits,queries,hit_rate}, server_num_preemptions,
// server_prompt_tokens, server_generation_tokens; and, when tokens were proposed in between,
// vLLM bench serve's speculative-decoding keys: spec_decode_acceptance_rate (a percent),
// spec_decode_acceptance_length (1 + accepted per draft), spec_decode_num_drafts,
// spec_decode_draft_tokens, spec_decode_accepted_tokens and
// spec_decode_per_position_acceptance_rates (accepted at position i per draft, from the
// ..._per_pos_total{position} counters). Empty object when neither page has them.
nlohmann::json server_metric_deltas(const std::string& before, const std::string& after);

}  // namespace loom::bench
