// `loom bench serve`: a load generator for any OpenAI-compatible server (loom, vLLM,
// llama-server), measuring what vLLM's `vllm bench serve` measures with the same definitions
// and result keys (see serve_metrics.h). Requests stream (stream_options.include_usage) so the
// server's own token counts are used. One thread per in-flight request; requests are released
// on a Poisson / gamma schedule (--request-rate, --burstiness) and/or bounded by
// --max-concurrency. --concurrency-sweep runs one level after another with a fresh prompt seed
// per level, so a prefix cache cannot flatter later levels.
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "base/status.h"
#include "bench/serve_metrics.h"

namespace loom::bench {

struct ServeOptions {
  std::string base_url = "http://127.0.0.1:8000";
  std::string endpoint = "/v1/completions";  // or /v1/chat/completions
  std::string model;                         // "" = the first of /v1/models
  std::string api_key;
  int32_t input_len = 1024;
  int32_t output_len = 128;
  double range_ratio = 0;
  int32_t prefix_len = 0;
  int32_t num_prompts = 1000;
  // Sweeps only: each level sends max(num_prompts, prompts_per_concurrency x level) requests,
  // so that high levels reach a steady state without making level 1 take forever.
  int32_t prompts_per_concurrency = 0;
  int32_t max_concurrency = 0;  // 0 = unbounded (at most kMaxThreads in flight)
  double request_rate = std::numeric_limits<double>::infinity();
  double burstiness = 1.0;
  bool ignore_eos = false;
  // Structured outputs under load: every request carries its own JSON schema (a distinct
  // schema per request, so no compiled grammar is shared) as response_format json_schema.
  bool json_schema_per_request = false;
  uint64_t seed = 0;
  int32_t vocab_size = 0;  // 0 = find it through the server's /detokenize
  GoodputSlo goodput;
  std::vector<std::string> percentile_metrics = {"ttft", "tpot", "itl"};
  std::vector<double> percentiles = {99};
  bool progress = true;
  bool warmup = true;  // one short request first, so that a misconfiguration fails fast
  double timeout_s = 6 * 3600;
};

inline constexpr int32_t kMaxThreads = 1024;

// One run (one load level). `level` picks the prompt seed (seed + level * kSeedStride).
// Returns vLLM's result JSON plus the run's settings and the server's /metrics deltas.
Result<nlohmann::json> run_serve(const ServeOptions& o, int level = 0);

// One run per concurrency level, in order.
// on_level (optional) sees each level's result as soon as it ends.
Result<std::vector<nlohmann::json>> run_concurrency_sweep(
    const ServeOptions& o, const std::vector<int32_t>& levels,
    const std::function<void(const nlohmann::json&)>& on_level = nullptr);

// vLLM's end-of-run summary block for one result.
std::string format_summary(const nlohmann::json& result, const ServeOptions& o);
// The throughput–interactivity table of a sweep (markdown).
std::string format_sweep_table(const std::vector<nlohmann::json>& results);

// `loom bench serve ...` (argv[0] == "serve").
int serve_main(int argc, char** argv);

}  // namespace loom::bench
