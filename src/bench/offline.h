// Offline throughput benchmark (vLLM's benchmark_throughput with the random dataset): N prompts
// of random token ids, all submitted at once to one Engine, run to completion; reports
// requests/s, total tokens/s and output tokens/s.
#pragma once

#include <cstdint>
#include <string>

#include "base/status.h"
#include "loom/engine.h"

namespace loom::bench {

struct OfflineOptions {
  int32_t num_prompts = 64;
  int32_t input_len = 128;
  int32_t output_len = 128;
  uint64_t seed = 0;
  float temperature = 1.0f;  // vLLM's benchmark samples at 1
  // Request i samples with seed + i (reproducible runs). false (--unseeded): no seed, as vLLM's
  // benchmark sends them; a draft model's proposals for them are then verified against the
  // draft's own distribution, where seeded ones verify point masses (spec/rejection.h).
  bool seed_requests = true;
  // "random": random prompts. "self-repeat": each random prompt P is first continued greedily
  // (untimed) to C; the timed request is P + C + P, greedy, so that its output can repeat a
  // span of its input, which is what n-gram speculation looks up (the model's own text, not
  // a planted answer).
  std::string workload = "random";
};

struct OfflineResult {
  double elapsed_time = 0;  // seconds, first request added → last one finished
  int32_t num_requests = 0;
  int64_t prompt_tokens = 0;
  int64_t output_tokens = 0;
  int64_t total_num_tokens = 0;
  double requests_per_second = 0;
  double tokens_per_second = 0;  // (prompt + output) / elapsed, as vLLM
  double output_tokens_per_second = 0;
  EngineMetrics metrics;  // engine counters of the timed run (steps, preemptions, ...)
  // Speculative decoding: accepted / proposed tokens, and tokens per verify (1 + accepted
  // per proposal, vLLM's mean acceptance length); 0 when nothing was proposed (the report
  // then says n/a, the JSON null).
  double spec_acceptance_rate = 0;
  double spec_mean_acceptance_length = 0;
};

// Runs the benchmark on `engine` (which must be idle).
Result<OfflineResult> run_offline(Engine& engine, const OfflineOptions& options);

// The JSON vLLM's benchmark_throughput writes with --output-json, plus the times the text
// reports: target_forward_seconds, and with speculation configured spec_draft_seconds,
// spec_proposer_seconds, spec_num_drafts, spec_num_draft_tokens, spec_num_accepted_tokens,
// spec_acceptance_rate and spec_mean_acceptance_length (null when nothing was proposed).
std::string offline_result_json(const OfflineResult& r);

// The report `loom bench offline` prints after its run: throughput, the target's and the
// proposers' times, and speculation's counts.
std::string offline_result_text(const OfflineResult& r);

// `loom bench offline ...` (argv[0] == "offline").
int offline_main(int argc, char** argv);

}  // namespace loom::bench
