// `loom bench model`: single-stream speed of the engine without HTTP, in llama-bench's style:
// prefill of p tokens in one batch (ppP) and generation of n tokens one at a time from an
// empty cache (tgN), optionally batched decode of B sequences together (tgNxB: tokens/s of all
// sequences; its repetitions alternate with tgN's, and their median ratio is the batched
// speed-up), mean ± sd over reps after one warm-up, plus the roofline single-sequence
// generation implies: weight bytes read per token ÷ the memory read bandwidth measured beside
// each repetition (ModelBenchRow::samples_bw).
// With speculative options, generation through the engine without and with speculation
// (bench/model_bench_spec.cpp).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "base/huge_buffer.h"
#include "base/status.h"
#include "base/thread_pool.h"
#include "loom/engine.h"
#include "model/forward_profile.h"

namespace loom::bench {

struct ModelBenchOptions {
  std::string model;
  int32_t n_prompt = 512;  // 0 = skip the prefill test
  int32_t ubatch = 0;      // tokens per forward pass of the prefill test; 0 = all (pp512 ub1:
                           // token by token, a hybrid's recurrence one step at a time)
  int32_t n_gen = 128;     // 0 = skip the generation test
  int32_t n_depth = 0;     // tokens already in each sequence's cache when generation starts
                           // (prefilled, not timed; llama-bench -d): tgN @ dD
  int32_t batch_seqs = 0;  // > 1: also n_gen steps of this many sequences decoded together
  // > 1: also n_gen steps that compute this many tokens per sequence with logits for each (a
  // speculative verify of verify_tokens - 1 proposals), alone and with batch_seqs sequences;
  // reported as the cost of such a step ÷ a plain decode step measured right before it.
  int32_t verify_tokens = 0;
  int32_t n_threads = 0;  // 0 = physical cores
  int32_t reps = 5;
  int64_t bw_bytes = int64_t{1} << 30;  // bandwidth buffer, well above any last-level cache
  int32_t bw_reps = 5;
  bool profile = false;  // time the forward phases of the timed repetitions (row.profile)
  bool disable_sliding_window = false;  // full attention in every layer (ModelLoadOptions)
  // Enabled (--speculative-config, --model-draft, --draft-max): generation of n_gen tokens
  // through the engine, plain and with this speculation, repetitions alternating (rows
  // "tgN engine" and "tgN spec"); greedy, from a random prompt of max(1, n_depth) tokens.
  SpeculativeConfig speculative;
};

// A "tgN spec" row's speculation: its decode rate ÷ the plain engine's repetition run just
// before it (median over the pairs), and what the proposals did over all timed repetitions.
struct SpeculationFigures {
  std::string method;  // "ngram, k = 4, lookup 2..4", "draft model PATH, k = 4", "mtp, k = 1"
  double speedup = 0;
  double acceptance_rate = 0;         // accepted ÷ proposed tokens
  double mean_acceptance_length = 0;  // tokens per verify (1 + accepted per proposal)
  double proposer_share = 0;          // proposers' time ÷ the run's (its prompt step included)
};

struct ModelBenchRow {
  // "pp512", "tg128", "tg128x16" (16 sequences, one token each per step); " @ d1024" after a
  // generation test's name when it starts with 1024 tokens in each sequence's cache.
  std::string test;
  int32_t n_prompt = 0, n_gen = 0, n_seqs = 1, n_depth = 0;
  double avg_ts = 0, stddev_ts = 0;  // tokens/s; sample standard deviation over reps
  double median_ts = 0;              // tokens/s; the figure to compare on a noisy machine
  std::vector<double> samples_ts;
  // tgN rows (one sequence): the memory read bandwidth beside each repetition, bytes/s: the
  // mean of a short streaming read just before it and one just after (the host's bandwidth
  // drifts by 2x between minutes, so a roofline from one measurement taken at another moment
  // can put a run at 60% or 117% of it). Empty elsewhere.
  std::vector<double> samples_bw;
  // Generation rows (tgN, tgNxB): the weight bytes a step read (Model::weight_reads over the
  // timed repetitions: a batch reads the experts its sequences share once) and the routed
  // experts a Mixture-of-Experts layer read per step; 0 where the backend does not count.
  // tgNxB rows also have samples_bw, and their roofline is n_seqs tokens per step's bytes.
  double weight_bytes_per_step = 0;
  double experts_per_moe_layer = 0;
  // tgNxB rows: median over repetitions of this row's tokens/s ÷ the single-sequence tgN
  // repetition run just before it (the two alternate); 0 elsewhere.
  double speedup = 0;
  // verifyN rows: median over repetitions of this row's step time ÷ the plain decode step
  // time (tgN or tgNxB) of the repetition run just before it; 0 elsewhere.
  double step_cost = 0;
  ForwardProfile profile;  // with ModelBenchOptions::profile: the timed repetitions' phases
  std::optional<SpeculationFigures> speculation;  // "tgN spec" rows
};

struct ModelBenchResult {
  std::string model;
  // Weight bytes one forward token reads (Model::weight_bytes: a MoE model's active experts
  // only); what the generation roofline divides the bandwidth by.
  uint64_t weight_bytes_per_token = 0;
  // Models with recurrent layers: the state bytes one decode token reads (its sequence's whole
  // slot) and writes (its convolution inputs and chunk tail, and a sixteenth of the chunk
  // state, rewritten every 16 tokens); part of the generation roofline.
  uint64_t state_read = 0, state_written = 0;
  // Every weight (a MoE model's every expert), as the file holds them: llama-bench's
  // model_size, which the markdown, JSON and CSV report under that name.
  uint64_t weight_bytes_total = 0;
  uint64_t total_params = 0, active_params = 0;
  int32_t n_threads = 0;
  int32_t n_expert = 0;           // routed experts per Mixture-of-Experts layer (0: none)
  double mem_bw_bytes_per_s = 0;  // best of bw_reps streaming reads, after the tests
  std::vector<ModelBenchRow> rows;
  uint64_t bytes_per_token() const { return weight_bytes_per_token + state_read + state_written; }
  double roofline_tg_ts() const {
    return weight_bytes_per_token ? mem_bw_bytes_per_s / bytes_per_token() : 0;
  }
};

// A generation row's roofline: with samples_bw, per repetition (the tokens/s the bandwidth
// beside it allows, and the repetition's share of that), the medians of both over the
// repetitions; without, from the result's one bandwidth. Generation of one sequence, and of
// several where the row has the bytes its steps read (a token's share: weight_bytes_per_step
// ÷ n_seqs).
struct Roofline {
  bool valid = false;
  double roofline_ts = 0, fraction = 0;
};
Roofline roofline_of(const ModelBenchResult& r, const ModelBenchRow& row);

// Multithreaded streaming reads of one buffer (allocated and touched once): best of `reps`
// with plain loads and `reps` behind software prefetches (as the weight kernels read); bytes/s.
// The buffer is in transparent huge pages, as the weights are (base/huge_buffer.h): from 4 KiB
// pages the same reads measured 8-20% slower on the AMD host, a roofline below what the kernels
// read.
class ReadBandwidthProbe {
 public:
  ReadBandwidthProbe(ThreadPool& pool, int64_t bytes);
  double measure(int32_t reps);

 private:
  ThreadPool& pool_;
  int64_t words_;
  HugeBuffer buf_;
  std::vector<uint64_t> sinks_;  // one cache line per task
};
double measure_read_bandwidth(ThreadPool& pool, int64_t bytes, int32_t reps);

Result<ModelBenchResult> run_model_bench(const ModelBenchOptions& o);

// The "tgN engine" and "tgN spec" rows of o.speculative (bench/model_bench_spec.cpp), and the
// engine configuration they run (checked before the other tests run: a missing draft model
// is an error at once, not after minutes of measurements).
Status add_speculative_rows(const ModelBenchOptions& o, ModelBenchResult& res);
EngineConfig speculative_bench_config(const ModelBenchOptions& o);

std::string model_bench_markdown(const ModelBenchResult& r);
std::string model_bench_csv(const ModelBenchResult& r);
nlohmann::json model_bench_json(const ModelBenchResult& r);  // a list of rows

// `loom bench model ...` (argv[0] == "model").
int model_main(int argc, char** argv);

}  // namespace loom::bench
