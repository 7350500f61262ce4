// `bench model` with speculative options: generation through the engine, since speculation is
// the engine's (proposers, verify steps, rollback), against the same engine without it.
// Repetitions alternate, each pair on the same random prompt, so that the speed-up compares
// seconds-apart runs on a host whose speed drifts.
#include <algorithm>
#include <limits>
#include <memory>

#include "bench/model_bench.h"
#include "bench/model_bench_util.h"
#include "bench/offline.h"
#include "spec/spec_config.h"

namespace loom::bench {
namespace {

std::string describe(const SpeculativeConfig& s) {
  const std::string k = ", k = " + std::to_string(s.num_speculative_tokens);
  switch (s.method) {
    case SpeculativeConfig::Method::kNgram:
      return "ngram" + k + ", lookup " + std::to_string(s.prompt_lookup_min) + ".." +
             std::to_string(s.prompt_lookup_max);
    case SpeculativeConfig::Method::kDraftModel:
      return "draft model " + s.model + k;
    case SpeculativeConfig::Method::kMtp:
      return "mtp" + k;
    case SpeculativeConfig::Method::kNone:
      break;
  }
  return "none";
}

}  // namespace

EngineConfig speculative_bench_config(const ModelBenchOptions& o) {
  EngineConfig c;
  c.n_threads = o.n_threads;
  c.max_num_seqs = 1;
  // Room for the last verify's proposals past the generated tokens (the engine proposes no
  // further than max_model_len). MTP without a count takes one per MTP layer, known only once
  // the model is loaded: the most any config may ask for.
  const int32_t k = o.speculative.num_speculative_tokens > 0 ? o.speculative.num_speculative_tokens
                                                             : spec::kMaxSpeculativeTokens;
  c.max_model_len = std::max(1, o.n_depth) + o.n_gen + k;
  c.disable_sliding_window = o.disable_sliding_window;
  c.commit_kv_in_background = false;  // no page faults inside the timed steps
  c.speculative = o.speculative;
  return c;
}

Status add_speculative_rows(const ModelBenchOptions& o, ModelBenchResult& res) {
  if (o.n_gen < 2)
    return invalid_argument("speculative options time generation: -n must be at least 2");
  const int32_t prompt = std::max(1, o.n_depth);
  const EngineConfig spec_config = speculative_bench_config(o);
  EngineConfig plain_config = spec_config;
  plain_config.speculative = {};
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> plain, Engine::load(o.model, plain_config));
  LOOM_ASSIGN_OR_RETURN(std::unique_ptr<Engine> spec, Engine::load(o.model, spec_config));

  const std::string at = depth_suffix(o.n_depth);
  ModelBenchRow pr, sr;
  pr.test = "tg" + std::to_string(o.n_gen) + " engine" + at;
  sr.test = "tg" + std::to_string(o.n_gen) + " spec" + at;
  pr.n_gen = sr.n_gen = o.n_gen;
  pr.n_depth = sr.n_depth = o.n_depth;
  SpeculationFigures f;
  f.method = describe(spec->config().speculative);  // as the engine resolved it (mtp's k)
  std::vector<double> speedups;
  int64_t drafts = 0, proposed = 0, accepted = 0;
  double proposer_s = 0, run_s = 0;
  OfflineOptions oo;
  oo.num_prompts = 1;
  oo.input_len = prompt;
  oo.output_len = o.n_gen;
  oo.temperature = 0.0f;
  // The decode steps' own rate: the first token comes from the prompt's step, the same in both.
  auto decode_ts = [](const OfflineResult& r) {
    return r.metrics.decode_step_tokens / r.metrics.decode_step_seconds;
  };
  for (int32_t r = -1; r < o.reps; ++r) {  // r = -1: warm-up
    oo.seed = static_cast<uint64_t>(r + 1);
    LOOM_ASSIGN_OR_RETURN(const OfflineResult a, run_offline(*plain, oo));
    LOOM_ASSIGN_OR_RETURN(const OfflineResult b, run_offline(*spec, oo));
    if (r < 0) continue;
    pr.samples_ts.push_back(decode_ts(a));
    sr.samples_ts.push_back(decode_ts(b));
    speedups.push_back(decode_ts(b) / decode_ts(a));
    drafts += b.metrics.spec_num_drafts;
    proposed += b.metrics.spec_num_draft_tokens;
    accepted += b.metrics.spec_num_accepted_tokens;
    proposer_s += b.metrics.spec_proposer_seconds;
    // The proposers run in the prompt's step too (a draft's first pass over the prompt, an MTP
    // module over its rows): a share of the whole run, not of the decode steps alone.
    run_s += b.elapsed_time;
  }
  mean_sd(pr);
  mean_sd(sr);
  f.speedup = median_of(speedups);
  // Nothing proposed: no rate to report, not a rate of 0 (NaN prints as nan, JSON null).
  constexpr double kNone = std::numeric_limits<double>::quiet_NaN();
  f.acceptance_rate = proposed > 0 ? static_cast<double>(accepted) / proposed : kNone;
  f.mean_acceptance_length = drafts > 0 ? 1.0 + static_cast<double>(accepted) / drafts : kNone;
  if (run_s > 0) f.proposer_share = proposer_s / run_s;
  sr.speculation = std::move(f);
  res.rows.push_back(std::move(pr));
  res.rows.push_back(std::move(sr));
  return Status::ok();
}

}  // namespace loom::bench
