#include "bench/offline.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdarg>
#include <cstdio>
#include <fstream>
#include <nlohmann/json.hpp>
#include <random>

#include "hub/hf_option.h"
#include "model/model.h"
#include "spec/spec_flags.h"

namespace loom::bench {
namespace {

// Whether the engine that ran `r` speculates (it counts acceptances per position then), however
// few proposals the run made.
bool speculating(const OfflineResult& r) {
  return !r.metrics.spec_accepted_per_pos.empty();
}

void appendf(std::string& out, const char* format, ...) __attribute__((format(printf, 2, 3)));
void appendf(std::string& out, const char* format, ...) {
  char buf[512];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buf, sizeof buf, format, args);
  va_end(args);
  out += buf;
}

}  // namespace

Result<OfflineResult> run_offline(Engine& engine, const OfflineOptions& o) {
  if (engine.has_unfinished()) return invalid_argument("offline benchmark needs an idle engine");
  if (o.num_prompts <= 0 || o.input_len <= 0 || o.output_len <= 0)
    return invalid_argument("--num-prompts, --input-len and --output-len must be positive");
  if (o.workload != "random" && o.workload != "self-repeat")
    return invalid_argument("--workload must be random or self-repeat, got " + o.workload);
  const int32_t n_vocab = engine.model().config().n_vocab;
  std::mt19937_64 rng(o.seed);
  std::vector<GenerateRequest> reqs(o.num_prompts);
  for (int32_t i = 0; i < o.num_prompts; ++i) {
    GenerateRequest& r = reqs[i];
    r.request_id = "bench-" + std::to_string(i);
    r.prompt.resize(o.input_len);
    for (int32_t& t : r.prompt) t = static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab));
    // vLLM's throughput benchmark: temperature 1, ignore_eos, exactly output_len tokens.
    r.params.temperature = o.temperature;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    if (o.seed_requests) r.params.seed = o.seed + i;
  }
  if (o.workload == "self-repeat") {
    // Untimed: each prompt's greedy continuation, then the timed prompt P + C + P.
    std::vector<std::vector<int32_t>> cont(o.num_prompts);
    for (int32_t i = 0; i < o.num_prompts; ++i) {
      GenerateRequest warm = reqs[i];
      warm.request_id = "warm-" + std::to_string(i);
      warm.params.temperature = 0.0f;
      LOOM_RETURN_IF_ERROR(engine.add_request(std::move(warm)));
    }
    while (engine.has_unfinished()) {
      LOOM_ASSIGN_OR_RETURN(std::vector<RequestOutput> outs, engine.step());
      for (const RequestOutput& out : outs)
        for (const CompletionOutput& c : out.outputs) {
          auto& dst = cont[std::stoi(out.request_id.substr(5))];
          dst.insert(dst.end(), c.token_ids.begin(), c.token_ids.end());
        }
    }
    for (int32_t i = 0; i < o.num_prompts; ++i) {
      std::vector<int32_t> p = reqs[i].prompt;
      p.insert(p.end(), cont[i].begin(), cont[i].end());
      p.insert(p.end(), reqs[i].prompt.begin(), reqs[i].prompt.end());
      reqs[i].prompt = std::move(p);
      reqs[i].params.temperature = 0.0f;
    }
  }
  const EngineMetrics before = engine.metrics();
  const auto start = std::chrono::steady_clock::now();
  for (GenerateRequest& r : reqs) LOOM_RETURN_IF_ERROR(engine.add_request(std::move(r)));
  OfflineResult res;
  while (engine.has_unfinished()) {
    LOOM_ASSIGN_OR_RETURN(std::vector<RequestOutput> outs, engine.step());
    for (const RequestOutput& out : outs) {
      if (!out.error.empty()) return internal_error("request failed: " + out.error);
      for (const CompletionOutput& c : out.outputs) res.output_tokens += c.token_ids.size();
      if (out.finished) {
        ++res.num_requests;
        res.prompt_tokens += out.num_prompt_tokens;
      }
    }
  }
  res.elapsed_time =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  res.total_num_tokens = res.prompt_tokens + res.output_tokens;
  res.requests_per_second = res.num_requests / res.elapsed_time;
  res.tokens_per_second = res.total_num_tokens / res.elapsed_time;
  res.output_tokens_per_second = res.output_tokens / res.elapsed_time;
  res.metrics = engine.metrics();
  res.metrics.num_steps -= before.num_steps;
  res.metrics.num_preemptions -= before.num_preemptions;
  res.metrics.forward_seconds -= before.forward_seconds;
  res.metrics.decode_step_seconds -= before.decode_step_seconds;
  res.metrics.decode_step_tokens -= before.decode_step_tokens;
  res.metrics.spec_draft_seconds -= before.spec_draft_seconds;
  res.metrics.spec_proposer_seconds -= before.spec_proposer_seconds;
  res.metrics.spec_num_drafts -= before.spec_num_drafts;
  res.metrics.spec_num_draft_tokens -= before.spec_num_draft_tokens;
  res.metrics.spec_num_accepted_tokens -= before.spec_num_accepted_tokens;
  for (size_t p = 0; p < before.spec_accepted_per_pos.size(); ++p)
    res.metrics.spec_accepted_per_pos[p] -= before.spec_accepted_per_pos[p];
  const EngineMetrics& m = res.metrics;
  if (m.spec_num_draft_tokens > 0) {
    res.spec_acceptance_rate =
        static_cast<double>(m.spec_num_accepted_tokens) / m.spec_num_draft_tokens;
    res.spec_mean_acceptance_length =
        1.0 + static_cast<double>(m.spec_num_accepted_tokens) / m.spec_num_drafts;
  }
  return res;
}

std::string offline_result_json(const OfflineResult& r) {
  nlohmann::json j = {
      {"elapsed_time", r.elapsed_time},
      {"num_requests", r.num_requests},
      {"total_num_tokens", r.total_num_tokens},
      {"requests_per_second", r.requests_per_second},
      {"tokens_per_second", r.tokens_per_second},
      {"output_tokens_per_second", r.output_tokens_per_second},
  };
  if (r.metrics.decode_step_seconds > 0) {
    j["decode_step_seconds"] = r.metrics.decode_step_seconds;
    j["decode_step_tokens"] = r.metrics.decode_step_tokens;
    j["decode_tokens_per_second"] = r.metrics.decode_step_tokens / r.metrics.decode_step_seconds;
  }
  j["target_forward_seconds"] = r.metrics.forward_seconds;
  if (speculating(r)) {  // also when nothing was proposed: the rates are then null
    // As the text: the draft model's or MTP module's forward passes, and every proposer's
    // time (lookups and those passes, prompts' included) over all steps.
    j["spec_draft_seconds"] = r.metrics.spec_draft_seconds;
    j["spec_proposer_seconds"] = r.metrics.spec_proposer_seconds;
    j["spec_num_drafts"] = r.metrics.spec_num_drafts;
    j["spec_num_draft_tokens"] = r.metrics.spec_num_draft_tokens;
    j["spec_num_accepted_tokens"] = r.metrics.spec_num_accepted_tokens;
    const bool proposed = r.metrics.spec_num_draft_tokens > 0;
    j["spec_acceptance_rate"] =
        proposed ? nlohmann::json(r.spec_acceptance_rate) : nlohmann::json();
    j["spec_mean_acceptance_length"] =
        proposed ? nlohmann::json(r.spec_mean_acceptance_length) : nlohmann::json();
  }
  return j.dump(4);
}

std::string offline_result_text(const OfflineResult& r) {
  std::string out;
  const EngineMetrics& m = r.metrics;
  appendf(out, "Throughput: %.2f requests/s, %.2f total tokens/s, %.2f output tokens/s\n",
          r.requests_per_second, r.tokens_per_second, r.output_tokens_per_second);
  appendf(out,
          "Total num prompt tokens:  %lld\nTotal num output tokens:  %lld\n"
          "Elapsed: %.2f s, %lld steps, %lld preemptions\n",
          static_cast<long long>(r.prompt_tokens), static_cast<long long>(r.output_tokens),
          r.elapsed_time, static_cast<long long>(m.num_steps),
          static_cast<long long>(m.num_preemptions));
  appendf(out, "Target model forward passes: %.2f s (%.2f output tokens/s of that time)\n",
          m.forward_seconds, r.output_tokens / m.forward_seconds);
  // Speculation changes decode alone; prefill (the same in both runs) dilutes the whole-run
  // rate, so the decode steps' own rate is the one to compare.
  if (m.decode_step_seconds > 0)
    appendf(out, "Decode steps (no prompt tokens): %.2f s, %lld output tokens (%.2f tokens/s)\n",
            m.decode_step_seconds, static_cast<long long>(m.decode_step_tokens),
            m.decode_step_tokens / m.decode_step_seconds);
  // A draft model runs per verify; an MTP module every step (over the step's kept rows) plus
  // k - 1 rows per verify.
  if (m.spec_draft_seconds > 0)
    appendf(out, "Proposer forward passes (draft model or MTP module): %.2f s, %.2f ms per step\n",
            m.spec_draft_seconds, 1e3 * m.spec_draft_seconds / std::max<int64_t>(1, m.num_steps));
  // The proposers run in every step: an MTP module over the prompts' rows, a draft model over
  // a prompt at its first proposal, in steps that may run prompt tokens. Their time is a share
  // of the whole run's, not of the decode steps' (which it can exceed).
  if (speculating(r) && r.elapsed_time > 0)
    appendf(
        out,
        "Proposers, every step (prompts' passes included): %.4f s (%.3f%% of the elapsed time)\n",
        m.spec_proposer_seconds, 100.0 * m.spec_proposer_seconds / r.elapsed_time);
  if (speculating(r)) {
    char rates[96] = "acceptance rate n/a, mean acceptance length n/a";  // nothing proposed
    if (m.spec_num_draft_tokens > 0)
      std::snprintf(rates, sizeof rates, "acceptance rate %.3f, mean acceptance length %.2f",
                    r.spec_acceptance_rate, r.spec_mean_acceptance_length);
    appendf(out, "Speculative decoding: %lld proposals, %lld tokens proposed, %lld accepted (%s)\n",
            static_cast<long long>(m.spec_num_drafts),
            static_cast<long long>(m.spec_num_draft_tokens),
            static_cast<long long>(m.spec_num_accepted_tokens), rates);
  }
  for (const KvGroupMetrics& g : m.kv_groups)
    if (g.window > 0)
      appendf(out, "KV blocks released behind windows of %d tokens: %lld\n", g.window,
              static_cast<long long>(g.num_window_released_blocks));
  return out;
}

int offline_main(int argc, char** argv) {
  CLI::App app{
      "Offline throughput: N random-token prompts through the engine at once "
      "(vLLM benchmark_throughput, random dataset).",
      "loom bench offline"};
  std::string model, output_json, kv_dtype = "f16";
  OfflineOptions o;
  EngineConfig c;
  bool no_prefix_cache = false;
  app.add_option("-m,--model", model, "GGUF file, Hugging Face directory or synth:PRESET[:TYPE]");
  std::string hf_repo;
  hub::add_hf_option(app, &hf_repo);
  app.add_option("--num-prompts", o.num_prompts, "number of requests")->capture_default_str();
  app.add_option("--input-len", o.input_len, "prompt tokens per request")->capture_default_str();
  app.add_option("--output-len", o.output_len, "generated tokens per request")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed for prompts and sampling")->capture_default_str();
  app.add_flag_callback(
      "--unseeded", [&o] { o.seed_requests = false; },
      "requests carry no seed (vLLM's benchmark: sampling differs run to run; a draft model's "
      "proposals are then verified against its own distribution, a seeded request's as point "
      "masses)");
  app.add_option("--temperature", o.temperature, "sampling temperature (0 = greedy)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--workload", o.workload,
                 "random, or self-repeat: each prompt P continued greedily to C (untimed), then "
                 "P + C + P greedily (output that can repeat its input)")
      ->capture_default_str();
  app.add_option("--max-num-seqs", c.max_num_seqs, "sequences running at once")
      ->capture_default_str();
  app.add_option("--max-num-batched-tokens", c.max_num_batched_tokens,
                 "token budget per step (0 = backend default)");
  app.add_option("--max-model-len", c.max_model_len,
                 "longest sequence (default: input-len + output-len)");
  app.add_option("--kv-cache-memory", c.kv_cache_memory_gib,
                 "KV cache size in GiB (default: max-num-seqs x max-model-len tokens)");
  app.add_option("--block-size", c.block_size, "tokens per KV block")->capture_default_str();
  app.add_option("--kv-cache-dtype", kv_dtype, "f32, f16 or bf16")->capture_default_str();
  app.add_flag("--no-prefix-cache", no_prefix_cache, "disable automatic prefix caching");
  app.add_flag("--disable-sliding-window", c.disable_sliding_window,
               "full attention in every layer, also where the model slides a window");
  spec::SpeculativeFlags spec_flags;
  spec_flags.add_to(app);
  app.add_option("-t,--threads", c.n_threads, "CPU threads (0 = physical cores)");
  app.add_option("--output-json", output_json, "write the results as JSON to this file");
  CLI11_PARSE(app, argc, argv);
  if (Status st = hub::resolve_hf_option(hf_repo, &model, true); !st.is_ok()) {
    std::fprintf(stderr, "loom bench offline: %s\n", st.message().c_str());
    return 1;
  }

  auto dt = parse_dtype(kv_dtype);
  if (!dt) {
    std::fprintf(stderr, "loom bench offline: bad --kv-cache-dtype '%s'\n", kv_dtype.c_str());
    return 1;
  }
  c.kv_dtype = *dt;
  if (Status st = spec_flags.apply(c.speculative); !st.is_ok()) {
    std::fprintf(stderr, "loom bench offline: %s\n", st.message().c_str());
    return 1;
  }
  c.enable_prefix_caching = !no_prefix_cache;
  // self-repeat's timed prompts are P + C + P: two prompts and one output long.
  if (c.max_model_len == 0)
    c.max_model_len =
        (o.workload == "self-repeat" ? 2 * o.input_len + o.output_len : o.input_len) + o.output_len;
  c.commit_kv_in_background = false;  // no page faults inside the timed steps
  auto engine = Engine::load(model, c);
  if (!engine.is_ok()) {
    std::fprintf(stderr, "loom bench offline: %s\n", engine.status().message().c_str());
    return 1;
  }
  const EngineConfig& rc = (*engine)->config();
  std::printf(
      "model %s, %d threads, %d prompts x (%d in + %d out), max-num-seqs %d, "
      "max-num-batched-tokens %d, %d KV blocks of %d\n",
      model.c_str(), rc.n_threads > 0 ? rc.n_threads : ThreadPool::physical_cores(), o.num_prompts,
      o.input_len, o.output_len, rc.max_num_seqs, rc.max_num_batched_tokens,
      (*engine)->metrics().num_kv_blocks, rc.block_size);
  for (const KvGroupMetrics& g : (*engine)->metrics().kv_groups)
    std::printf(
        "  KV group %s: %d blocks\n",
        g.window == 0 ? "full attention" : ("sliding window " + std::to_string(g.window)).c_str(),
        g.num_blocks);
  auto r = run_offline(**engine, o);
  if (!r.is_ok()) {
    std::fprintf(stderr, "loom bench offline: %s\n", r.status().message().c_str());
    return 1;
  }
  std::printf("%s", offline_result_text(*r).c_str());
  if (!output_json.empty()) {
    std::ofstream f(output_json);
    f << offline_result_json(*r) << "\n";
    if (!f) {
      std::fprintf(stderr, "loom bench offline: cannot write %s\n", output_json.c_str());
      return 1;
    }
  }
  return 0;
}

}  // namespace loom::bench
