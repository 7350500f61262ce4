#include "bench/chat_bench.h"

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <random>

#include "model/model.h"

namespace loom::bench {
namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n == 0 ? 0.0 : n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

}  // namespace

Result<std::vector<ChatTurn>> run_chat(Engine& engine, const ChatOptions& o, uint64_t seed) {
  if (engine.has_unfinished()) return invalid_argument("chat benchmark needs an idle engine");
  if (o.turns <= 0 || o.system_len < 0 || o.user_len <= 0 || o.output_len <= 0)
    return invalid_argument("--turns, --user-len and --output-len must be positive");
  const int32_t n_vocab = engine.model().config().n_vocab;
  std::mt19937_64 rng(seed);
  auto random_tokens = [&](int32_t n, std::vector<int32_t>& out) {
    for (int32_t i = 0; i < n; ++i)
      out.push_back(static_cast<int32_t>(rng() % static_cast<uint64_t>(n_vocab)));
  };
  std::vector<int32_t> history;
  random_tokens(o.system_len, history);
  std::vector<ChatTurn> turns;
  for (int32_t t = 0; t < o.turns; ++t) {
    random_tokens(o.user_len, history);
    GenerateRequest r;
    r.request_id = "chat-" + std::to_string(seed) + "-" + std::to_string(t);
    r.prompt = history;
    r.params.temperature = 0.0f;
    r.params.max_tokens = o.output_len;
    r.params.ignore_eos = true;
    LOOM_RETURN_IF_ERROR(engine.add_request(std::move(r)));
    ChatTurn turn;
    turn.prompt_tokens = static_cast<int32_t>(history.size());
    while (engine.has_unfinished()) {
      LOOM_ASSIGN_OR_RETURN(std::vector<RequestOutput> outs, engine.step());
      for (const RequestOutput& out : outs) {
        if (!out.error.empty()) return internal_error("chat turn failed: " + out.error);
        for (const CompletionOutput& c : out.outputs)
          history.insert(history.end(), c.token_ids.begin(), c.token_ids.end());
        if (out.finished) {
          turn.cached_tokens = out.num_cached_tokens;
          turn.ttft_s = out.time_to_first_token_s;
        }
      }
    }
    turns.push_back(turn);
  }
  return turns;
}

int chat_main(int argc, char** argv) {
  CLI::App app{
      "Multi-turn chat replay: the time to first token of each turn of a conversation, with "
      "prefix caching on and off (two engines, conversations alternating).",
      "loom bench chat"};
  std::string model;
  ChatOptions o;
  EngineConfig c;
  c.max_num_seqs = 4;
  app.add_option("-m,--model", model, "GGUF file, Hugging Face directory or synth:PRESET[:TYPE]")
      ->required();
  app.add_option("--turns", o.turns, "turns per conversation")->capture_default_str();
  app.add_option("--system-len", o.system_len, "system prompt tokens")->capture_default_str();
  app.add_option("--user-len", o.user_len, "user message tokens per turn")->capture_default_str();
  app.add_option("--output-len", o.output_len, "answer tokens per turn")->capture_default_str();
  app.add_option("--repeats", o.repeats, "conversations per engine (medians over them)")
      ->capture_default_str();
  app.add_option("--seed", o.seed, "random seed of the conversations")->capture_default_str();
  app.add_option("--state-snapshot-every", c.state_snapshot_every,
                 "hybrid models: recurrent-state snapshot every N KV blocks")
      ->capture_default_str();
  app.add_option("-t,--threads", c.n_threads, "CPU threads (0 = physical cores)");
  CLI11_PARSE(app, argc, argv);
  if (o.repeats <= 0) {
    std::fprintf(stderr, "loom bench chat: --repeats must be positive\n");
    return 1;
  }
  c.max_model_len = o.system_len + o.turns * (o.user_len + o.output_len);
  c.commit_kv_in_background = false;
  EngineConfig off = c;
  off.enable_prefix_caching = false;
  auto on_engine = Engine::load(model, c);
  auto off_engine = on_engine.is_ok() ? Engine::load(model, off) : on_engine.status();
  if (!off_engine.is_ok()) {
    std::fprintf(stderr, "loom bench chat: %s\n", off_engine.status().message().c_str());
    return 1;
  }
  std::printf("model %s, %d turns: system %d + %d user tokens per turn, %d answer tokens\n",
              model.c_str(), o.turns, o.system_len, o.user_len, o.output_len);
  // [turn] TTFTs over the repeats, and the cache's share of the last turn.
  std::vector<std::vector<double>> ttft_on(o.turns), ttft_off(o.turns);
  std::vector<ChatTurn> last_on;
  for (int32_t rep = 0; rep < o.repeats; ++rep) {
    for (bool caching : {true, false}) {
      Engine& e = caching ? **on_engine : **off_engine;
      auto turns = run_chat(e, o, o.seed + static_cast<uint64_t>(rep));
      if (!turns.is_ok()) {
        std::fprintf(stderr, "loom bench chat: %s\n", turns.status().message().c_str());
        return 1;
      }
      for (int32_t t = 0; t < o.turns; ++t)
        (caching ? ttft_on : ttft_off)[t].push_back((*turns)[t].ttft_s);
      if (caching) last_on = *turns;
    }
  }
  std::printf("%-5s %8s %8s %14s %14s %8s\n", "turn", "prompt", "cached", "TTFT on (ms)",
              "TTFT off (ms)", "off/on");
  for (int32_t t = 0; t < o.turns; ++t) {
    const double on = median(ttft_on[t]) * 1e3, no = median(ttft_off[t]) * 1e3;
    std::printf("%-5d %8d %8d %14.1f %14.1f %8.2f\n", t + 1, last_on[t].prompt_tokens,
                last_on[t].cached_tokens, on, no, on > 0 ? no / on : 0.0);
  }
  const EngineMetrics m = (*on_engine)->metrics();
  std::printf(
      "prefix cache (on): %lld of %lld prompt tokens served from cache (%.1f%%); medians of %d "
      "conversations\n",
      static_cast<long long>(m.prefix_cache_hits), static_cast<long long>(m.prefix_cache_queries),
      m.prefix_cache_queries > 0 ? 100.0 * m.prefix_cache_hits / m.prefix_cache_queries : 0.0,
      o.repeats);
  return 0;
}

}  // namespace loom::bench
