#include "bench/serve.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <ctime>
#include <memory>
#include <mutex>
#include <random>
#include <thread>

#include "bench/http_client.h"
#include "bench/random_dataset.h"

namespace loom::bench {
namespace {

using Json = nlohmann::json;
constexpr uint64_t kSeedStride = 1000003;

struct Target {
  BaseUrl url;
  std::string endpoint;
  std::string model;
  bool chat = false;
  bool ignore_eos = false;
  bool json_schema_per_request = false;
  HttpOptions http;
};

// Request i's own schema: property names carry i, so every request compiles a new grammar.
// The first string is long enough that max_tokens, not the document, ends the output: then
// runs with and without schemas generate the same number of tokens.
Json schema_for_request(size_t i) {
  const std::string k = std::to_string(i);
  Json props = Json::object();
  props["title_" + k] = {{"type", "string"}, {"maxLength", 4000}};
  props["count_" + k] = {{"type", "integer"}, {"minimum", 0}, {"maximum", 1000000}};
  props["tags_" + k] = {
      {"type", "array"}, {"items", {{"type", "string"}, {"maxLength", 40}}}, {"maxItems", 16}};
  props["kind_" + k] = {{"enum", Json::array({"alpha", "beta", "gamma"})}};
  return Json{{"type", "object"},
              {"properties", props},
              {"required", Json::array({"title_" + k, "count_" + k, "tags_" + k, "kind_" + k})},
              {"additionalProperties", false}};
}

// Live counters for the progress line.
struct Progress {
  std::atomic<int32_t> done{0}, failed{0};
  std::atomic<int64_t> chunks{0};
};

std::string request_body(const Target& t, const RandomPrompt& p, size_t index) {
  Json j;
  j["model"] = t.model;
  if (t.chat) {
    j["messages"] = Json::array({Json{{"role", "user"}, {"content", p.text}}});
    j["max_completion_tokens"] = p.output_len;
  } else {
    if (p.is_text)
      j["prompt"] = p.text;
    else
      j["prompt"] = p.ids;
    j["max_tokens"] = p.output_len;
  }
  j["temperature"] = 0.0;
  j["stream"] = true;
  j["stream_options"] = {{"include_usage", true}};
  if (t.ignore_eos) j["ignore_eos"] = true;
  if (t.json_schema_per_request)
    j["response_format"] = {
        {"type", "json_schema"},
        {"json_schema",
         {{"name", "r" + std::to_string(index)}, {"schema", schema_for_request(index)}}}};
  return j.dump();
}

// The text of a chunk's first choice in either shape (completions: text; chat: delta.content).
std::string choice_text(const Json& choice) {
  if (auto it = choice.find("text"); it != choice.end() && it->is_string())
    return it->get<std::string>();
  if (auto d = choice.find("delta"); d != choice.end() && d->is_object())
    if (auto c = d->find("content"); c != d->end() && c->is_string()) return c->get<std::string>();
  return "";
}

RequestRecord send_one(const Target& t, const RandomPrompt& p, size_t index,
                       BenchClock::time_point bench_start, Progress* progress) {
  RequestRecord r;
  r.prompt_len = p.prompt_len;
  const std::string body = request_body(t, p, index);
  const auto st = BenchClock::now();
  r.start_time = std::chrono::duration<double>(st - bench_start).count();
  BenchClock::time_point last = st;
  bool first = false, done = false;
  // After [DONE] the rest of the body is still read (and ignored) so the exchange ends cleanly.
  auto on_data = [&](std::string_view data, BenchClock::time_point ts) {
    if (done) return true;
    if (data == "[DONE]") {
      done = true;
      return true;
    }
    Json j = Json::parse(data, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded() || !j.is_object()) {
      r.error = "a streamed chunk is not JSON: " + std::string(data.substr(0, 200));
      return false;
    }
    if (auto e = j.find("error"); e != j.end() && !e->is_null()) {
      r.error = "server error in stream: " + e->dump();
      return false;
    }
    auto ch = j.find("choices");
    if (ch != j.end() && ch->is_array() && !ch->empty()) {
      if (!first) {
        first = true;
        r.ttft = std::chrono::duration<double>(ts - st).count();
      } else {
        r.itl.push_back(std::chrono::duration<double>(ts - last).count());
      }
      last = ts;
      ++r.chunks;
      if (progress) progress->chunks.fetch_add(1, std::memory_order_relaxed);
      r.generated_text += choice_text((*ch)[0]);
    } else if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      if (auto c = u->find("completion_tokens"); c != u->end() && c->is_number_integer())
        r.output_tokens = c->get<int64_t>();
      if (auto c = u->find("prompt_tokens"); c != u->end() && c->is_number_integer())
        r.prompt_len = c->get<int64_t>();
    }
    return true;
  };
  int status = 0;
  std::string error_body;
  Status s = http_post_sse(t.url, t.endpoint, body, t.http, on_data, &status, &error_body);
  if (!s.is_ok()) {
    if (r.error.empty()) r.error = s.message();
  } else if (status != 200) {
    r.error = "HTTP " + std::to_string(status) + ": " + error_body.substr(0, 500);
  } else if (r.error.empty() && !first) {
    r.error = "Never received a valid chunk to calculate TTFT.";
  }
  r.success = r.error.empty();
  r.latency = std::chrono::duration<double>(last - st).count();
  return r;
}

// Cumulative send offsets (seconds) as vLLM draws them: gamma(burstiness, 1/(rate*burstiness))
// gaps, rescaled so the last request goes out at n / rate.
std::vector<double> send_offsets(int32_t n, double rate, double burstiness, uint64_t seed) {
  std::vector<double> at(n, 0.0);
  if (!std::isfinite(rate)) return at;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  double t = 0;
  for (int32_t i = 0; i < n; ++i) {
    double gap = 1.0 / rate;
    if (std::isfinite(burstiness)) {
      std::gamma_distribution<double> g(burstiness, 1.0 / (rate * burstiness));
      gap = g(rng);
    }
    at[i] = (t += gap);
  }
  if (t > 0)
    for (double& x : at) x *= (n / rate) / t;
  return at;
}

Result<std::string> first_model(const BaseUrl& url, const HttpOptions& http) {
  LOOM_ASSIGN_OR_RETURN(HttpResponse r, http_get(url, "/v1/models", http));
  if (r.status != 200)
    return invalid_argument("GET /v1/models answered HTTP " + std::to_string(r.status) +
                            ": pass --model");
  Json j = Json::parse(r.body, nullptr, false);
  if (j.is_discarded() || !j.contains("data") || !j["data"].is_array() || j["data"].empty() ||
      !j["data"][0].contains("id") || !j["data"][0]["id"].is_string())
    return invalid_argument("GET /v1/models lists no model: pass --model");
  return j["data"][0]["id"].get<std::string>();
}

std::string fetch_metrics(const BaseUrl& url, const HttpOptions& http) {
  HttpOptions h = http;
  h.timeout = std::chrono::seconds(10);
  auto r = http_get(url, "/metrics", h);
  if (!r.is_ok() || r->status != 200) return "";
  return r->body;
}

void progress_loop(const Progress& p, int32_t total, const std::string& label,
                   BenchClock::time_point start, const std::atomic<bool>& stop) {
  const bool tty = isatty(STDERR_FILENO);
  const auto period = tty ? std::chrono::milliseconds(250) : std::chrono::milliseconds(5000);
  auto next = BenchClock::now() + period;
  int64_t prev_chunks = 0;
  auto prev_t = start;
  while (!stop.load()) {
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
    const auto now = BenchClock::now();
    if (now < next && !stop.load()) continue;
    next = now + period;
    const int64_t c = p.chunks.load();
    const double el = std::chrono::duration<double>(now - start).count();
    const double dt = std::chrono::duration<double>(now - prev_t).count();
    std::fprintf(
        stderr,
        "%s%s %d/%d requests done, %d failed, %.1f s, %.1f output tok/s (last interval %.1f)%s",
        tty ? "\r" : "", label.c_str(), p.done.load(), total, p.failed.load(), el,
        el > 0 ? c / el : 0.0, dt > 0 ? (c - prev_chunks) / dt : 0.0, tty ? "   " : "\n");
    std::fflush(stderr);
    prev_chunks = c;
    prev_t = now;
  }
  if (tty) std::fprintf(stderr, "\n");
}

std::string iso_date() {
  std::time_t t = std::time(nullptr);
  char buf[32];
  std::strftime(buf, sizeof buf, "%Y%m%d-%H%M%S", std::localtime(&t));
  return buf;
}

}  // namespace

Result<Json> run_serve(const ServeOptions& o, int level) {
  if (o.endpoint != "/v1/completions" && o.endpoint != "/v1/chat/completions")
    return invalid_argument("--endpoint must be /v1/completions or /v1/chat/completions");
  if (o.max_concurrency < 0) return invalid_argument("--max-concurrency must not be negative");
  if (!(o.request_rate > 0))
    return invalid_argument("--request-rate must be positive (inf = all at once)");
  if (!(o.burstiness > 0)) return invalid_argument("--burstiness must be positive");
  for (const std::string& m : o.percentile_metrics)
    if (m != "ttft" && m != "tpot" && m != "itl" && m != "e2el")
      return invalid_argument("--percentile-metrics: unknown metric '" + m +
                              "' (use ttft, tpot, itl, e2el)");
  for (double p : o.percentiles)
    if (!(p > 0 && p < 100)) return invalid_argument("--metric-percentiles must lie in (0, 100)");
  Target t;
  LOOM_ASSIGN_OR_RETURN(t.url, parse_base_url(o.base_url));
  t.endpoint = o.endpoint;
  t.chat = o.endpoint == "/v1/chat/completions";
  t.ignore_eos = o.ignore_eos;
  t.json_schema_per_request = o.json_schema_per_request;
  t.http.timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  if (!o.api_key.empty()) t.http.headers.emplace_back("Authorization", "Bearer " + o.api_key);
  t.model = o.model;
  if (t.model.empty()) {
    LOOM_ASSIGN_OR_RETURN(t.model, first_model(t.url, t.http));
  }

  // Prompts: random ids, aligned through the server's tokenizer when it has one.
  std::unique_ptr<ServerTokenizer> tok = ServerTokenizer::probe(t.url, t.model, t.http);
  RandomDatasetOptions d;
  d.num_prompts = o.num_prompts;
  d.input_len = o.input_len;
  d.output_len = o.output_len;
  d.range_ratio = o.range_ratio;
  d.prefix_len = o.prefix_len;
  d.seed = o.seed + static_cast<uint64_t>(level) * kSeedStride;
  d.prefix_seed = o.seed ^ 0x70726566ull;
  d.need_text = t.chat;
  d.vocab_size = o.vocab_size;
  if (d.vocab_size == 0) {
    if (!tok)
      return invalid_argument("the server has no /tokenize + /detokenize: pass --vocab-size");
    LOOM_ASSIGN_OR_RETURN(d.vocab_size, tok->find_vocab_size());
  }
  LOOM_ASSIGN_OR_RETURN(std::vector<RandomPrompt> prompts, make_random_prompts(d, tok.get()));

  if (o.warmup) {
    // A prompt of its own (another seed, 2 tokens out) so that it warms nothing measured.
    RandomDatasetOptions w = d;
    w.num_prompts = 1;
    w.seed = ~d.seed;
    w.output_len = 2;
    w.range_ratio = 0;
    LOOM_ASSIGN_OR_RETURN(std::vector<RandomPrompt> wp, make_random_prompts(w, tok.get()));
    RequestRecord r = send_one(t, wp[0], 0, BenchClock::now(), nullptr);
    if (!r.success) return invalid_argument("the initial test request failed: " + r.error);
  }

  const std::string metrics_before = fetch_metrics(t.url, t.http);
  const int32_t n = o.num_prompts;
  const int32_t workers = std::min({n, o.max_concurrency > 0 ? o.max_concurrency : n, kMaxThreads});
  const std::vector<double> offsets = send_offsets(n, o.request_rate, o.burstiness, d.seed);
  std::vector<RequestRecord> records(n);
  Progress progress;
  std::atomic<int32_t> next{0};
  std::atomic<bool> stop{false};
  const std::string label = o.max_concurrency > 0
                                ? "[concurrency " + std::to_string(o.max_concurrency) + "]"
                                : "[rate " + std::to_string(o.request_rate) + "]";
  const auto start = BenchClock::now();
  std::thread progress_thread;
  if (o.progress)
    progress_thread = std::thread([&] { progress_loop(progress, n, label, start, stop); });
  {
    // Each worker takes the next request in order and sends it at its scheduled time (or at
    // once if that is past): the same as vLLM's schedule followed by a concurrency semaphore.
    std::vector<std::thread> pool;
    for (int32_t w = 0; w < workers; ++w)
      pool.emplace_back([&] {
        for (int32_t i; (i = next.fetch_add(1)) < n;) {
          std::this_thread::sleep_until(start + std::chrono::duration_cast<BenchClock::duration>(
                                                    std::chrono::duration<double>(offsets[i])));
          records[i] = send_one(t, prompts[i], i, start, &progress);
          if (!records[i].success) progress.failed.fetch_add(1);
          progress.done.fetch_add(1);
        }
      });
    for (std::thread& th : pool) th.join();
  }
  const double duration = std::chrono::duration<double>(BenchClock::now() - start).count();
  stop = true;
  if (progress_thread.joinable()) progress_thread.join();
  const std::string metrics_after = fetch_metrics(t.url, t.http);

  ServeMetrics m = compute_serve_metrics(records, duration, o.percentiles, o.goodput);
  Json j = serve_result_json(m, records, duration, o.percentile_metrics, o.goodput.any());
  j["date"] = iso_date();
  j["backend"] = t.chat ? "openai-chat" : "openai";
  j["endpoint"] = o.endpoint;
  j["base_url"] = o.base_url;
  j["model_id"] = t.model;
  j["num_prompts"] = n;
  j["request_rate"] = std::isfinite(o.request_rate) ? Json(o.request_rate) : Json("inf");
  j["burstiness"] = o.burstiness;
  j["max_concurrency"] = o.max_concurrency > 0 ? Json(o.max_concurrency) : Json();
  j["random_input_len"] = o.input_len;
  j["random_output_len"] = o.output_len;
  j["random_range_ratio"] = o.range_ratio;
  j["random_prefix_len"] = o.prefix_len;
  j["ignore_eos"] = o.ignore_eos;
  j["json_schema_per_request"] = o.json_schema_per_request;
  j["seed"] = d.seed;
  j["prompts_aligned_by_server_tokenizer"] = tok != nullptr;
  if (!o.goodput.any()) j.erase("request_goodput");
  if (o.goodput.any()) {
    Json g = Json::object();
    if (o.goodput.ttft_ms) g["ttft"] = *o.goodput.ttft_ms;
    if (o.goodput.tpot_ms) g["tpot"] = *o.goodput.tpot_ms;
    if (o.goodput.e2el_ms) g["e2el"] = *o.goodput.e2el_ms;
    j["goodput"] = g;
  }
  j.update(server_metric_deltas(metrics_before, metrics_after));
  return j;
}

Result<std::vector<Json>> run_concurrency_sweep(const ServeOptions& o,
                                                const std::vector<int32_t>& levels,
                                                const std::function<void(const Json&)>& on_level) {
  if (levels.empty()) return invalid_argument("--concurrency-sweep needs at least one level");
  std::vector<Json> out;
  for (size_t i = 0; i < levels.size(); ++i) {
    if (levels[i] <= 0) return invalid_argument("--concurrency-sweep levels must be positive");
    ServeOptions lo = o;
    lo.max_concurrency = levels[i];
    lo.num_prompts = static_cast<int32_t>(
        std::max<int64_t>(o.num_prompts, int64_t{o.prompts_per_concurrency} * levels[i]));
    // The sweep table shows TTFT and TPOT at p50 and p99 whatever else was asked for.
    for (const char* m : {"ttft", "tpot"})
      if (std::find(lo.percentile_metrics.begin(), lo.percentile_metrics.end(), m) ==
          lo.percentile_metrics.end())
        lo.percentile_metrics.push_back(m);
    for (double p : {50.0, 99.0})
      if (std::find(lo.percentiles.begin(), lo.percentiles.end(), p) == lo.percentiles.end())
        lo.percentiles.push_back(p);
    lo.warmup = o.warmup && i == 0;
    LOOM_ASSIGN_OR_RETURN(Json r, run_serve(lo, static_cast<int>(i)));
    if (on_level) on_level(r);
    out.push_back(std::move(r));
  }
  return out;
}

}  // namespace loom::bench
