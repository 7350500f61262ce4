#include "bench/serve_metrics.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <string_view>

namespace loom::bench {
namespace {

MetricStats stats_of(std::vector<double> v, const std::vector<double>& percentiles) {
  MetricStats s;
  if (v.empty()) v.push_back(0.0);  // numpy on `x or 0`
  std::sort(v.begin(), v.end());
  double sum = 0;
  for (double x : v) sum += x;
  const double mean = sum / v.size();
  double ss = 0;
  for (double x : v) ss += (x - mean) * (x - mean);
  s.mean_ms = mean * 1000.0;
  s.std_ms = std::sqrt(ss / v.size()) * 1000.0;
  s.median_ms = percentile_sorted(v, 50) * 1000.0;
  for (double p : percentiles) s.percentiles_ms.emplace_back(p, percentile_sorted(v, p) * 1000.0);
  return s;
}

// after - before of one metric's samples (0 before when the first page lacks it); nullopt when
// the second page lacks it.
std::optional<double> delta_of(const std::map<std::string, double>& before,
                               const std::map<std::string, double>& after,
                               const std::string& name) {
  auto a = after.find(name);
  if (a == after.end()) return std::nullopt;
  auto b = before.find(name);
  return a->second - (b == before.end() ? 0.0 : b->second);
}

// vllm:spec_decode_num_accepted_tokens_per_pos_total by its position label, summed over the
// other labels.
std::map<int64_t, double> accepted_per_position(const std::string& page) {
  static constexpr std::string_view kName = "vllm:spec_decode_num_accepted_tokens_per_pos_total{";
  static constexpr std::string_view kLabel = "position=\"";
  std::map<int64_t, double> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(kName, 0) != 0) continue;
    const size_t close = line.find('}');
    const size_t at = line.find(kLabel);
    if (close == std::string::npos || at == std::string::npos || at > close) continue;
    const char* s = line.c_str() + at + kLabel.size();
    char* end = nullptr;
    const long long pos = std::strtoll(s, &end, 10);
    if (end == s || *end != '"') continue;
    const char* v = line.c_str() + close + 1;
    const double value = std::strtod(v, &end);
    if (end == v) continue;
    out[pos] += value;
  }
  return out;
}

}  // namespace

Result<GoodputSlo> parse_goodput(const std::vector<std::string>& items) {
  GoodputSlo g;
  for (const std::string& item : items) {
    size_t colon = item.find(':');
    if (colon == std::string::npos)
      return invalid_argument("--goodput item '" + item +
                              "' must look like ttft:MS, tpot:MS or e2el:MS");
    std::string key = item.substr(0, colon);
    std::string value = item.substr(colon + 1);
    char* end = nullptr;
    double ms = std::strtod(value.c_str(), &end);
    if (value.empty() || *end != '\0' || !(ms >= 0) || !std::isfinite(ms))
      return invalid_argument("--goodput " + key + ": '" + value +
                              "' is not a non-negative number of ms");
    if (key == "ttft")
      g.ttft_ms = ms;
    else if (key == "tpot")
      g.tpot_ms = ms;
    else if (key == "e2el")
      g.e2el_ms = ms;
    else
      return invalid_argument("--goodput: unknown metric '" + key + "' (use ttft, tpot or e2el)");
  }
  return g;
}

double percentile_sorted(const std::vector<double>& sorted, double p) {
  const double rank = p / 100.0 * static_cast<double>(sorted.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, sorted.size() - 1);
  const double frac = rank - static_cast<double>(lo);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * frac;
}

int64_t output_tokens_of(const RequestRecord& r) {
  return r.output_tokens > 0 ? r.output_tokens : r.chunks;
}

ServeMetrics compute_serve_metrics(const std::vector<RequestRecord>& records, double duration_s,
                                   const std::vector<double>& percentiles,
                                   const GoodputSlo& goodput) {
  ServeMetrics m;
  std::vector<double> ttfts, tpots, itls, e2els;
  int32_t good = 0;
  for (const RequestRecord& r : records) {
    if (!r.success) {
      ++m.failed;
      m.output_lens.push_back(0);
      continue;
    }
    ++m.completed;
    const int64_t out = output_tokens_of(r);
    m.output_lens.push_back(out);
    m.total_output += out;
    m.total_input += r.prompt_len;
    double tpot = 0;  // one-token requests count as 0 for goodput, and are left out of TPOT
    if (out > 1) {
      tpot = (r.latency - r.ttft) / static_cast<double>(out - 1);
      tpots.push_back(tpot);
    }
    itls.insert(itls.end(), r.itl.begin(), r.itl.end());
    ttfts.push_back(r.ttft);
    e2els.push_back(r.latency);
    bool ok = true;
    if (goodput.ttft_ms && r.ttft > *goodput.ttft_ms / 1000.0) ok = false;
    if (goodput.tpot_ms && tpot > *goodput.tpot_ms / 1000.0) ok = false;
    if (goodput.e2el_ms && r.latency > *goodput.e2el_ms / 1000.0) ok = false;
    if (goodput.any() && ok) ++good;
  }
  const double dur = duration_s > 0 ? duration_s : 1e-9;
  m.request_throughput = m.completed / dur;
  m.request_goodput = good / dur;
  m.output_throughput = m.total_output / dur;
  m.total_token_throughput = (m.total_input + m.total_output) / dur;
  m.ttft = stats_of(ttfts, percentiles);
  m.tpot = stats_of(tpots, percentiles);
  m.itl = stats_of(itls, percentiles);
  m.e2el = stats_of(e2els, percentiles);

  // Peak output tokens/s: each chunk's arrival (start + ttft + running sum of gaps) falls in a
  // whole-second bucket counted from the earliest successful send.
  double t0 = 0, t1 = 0;
  bool any = false;
  for (const RequestRecord& r : records) {
    if (!r.success) continue;
    t0 = any ? std::min(t0, r.start_time) : r.start_time;
    t1 = any ? std::max(t1, r.start_time + r.latency) : r.start_time + r.latency;
    any = true;
  }
  if (any) {
    const size_t n_buckets = static_cast<size_t>(std::ceil(t1 - t0)) + 1;
    std::vector<double> tokens(n_buckets, 0.0);
    std::vector<int32_t> active(n_buckets, 0);
    for (const RequestRecord& r : records) {
      if (!r.success) continue;
      double t = r.start_time + r.ttft;
      auto bucket = [&](double at) { return static_cast<int64_t>(at - t0); };
      auto add = [&](double at) {
        int64_t b = bucket(at);
        if (b >= 0 && b < static_cast<int64_t>(n_buckets)) tokens[b] += 1;
      };
      add(t);
      for (double gap : r.itl) add(t += gap);
      const int64_t b_end = std::min<int64_t>(bucket(r.start_time + r.latency), n_buckets - 1);
      for (int64_t b = bucket(r.start_time); b <= b_end; ++b) ++active[b];
    }
    m.max_output_tokens_per_s = *std::max_element(tokens.begin(), tokens.end());
    m.max_concurrent_requests = *std::max_element(active.begin(), active.end());
  }
  return m;
}

std::string percentile_word(double p) {
  if (p == std::floor(p)) return std::to_string(static_cast<int64_t>(p));
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.15g", p);
  return buf;
}

nlohmann::json serve_result_json(const ServeMetrics& m, const std::vector<RequestRecord>& records,
                                 double duration_s,
                                 const std::vector<std::string>& percentile_metrics,
                                 bool goodput_set) {
  nlohmann::json j;
  j["duration"] = duration_s;
  j["completed"] = m.completed;
  j["failed"] = m.failed;
  j["total_input_tokens"] = m.total_input;
  j["total_output_tokens"] = m.total_output;
  j["request_throughput"] = m.request_throughput;
  j["request_goodput"] = goodput_set ? nlohmann::json(m.request_goodput) : nlohmann::json();
  j["output_throughput"] = m.output_throughput;
  j["total_token_throughput"] = m.total_token_throughput;
  j["max_output_tokens_per_s"] = m.max_output_tokens_per_s;
  j["max_concurrent_requests"] = m.max_concurrent_requests;
  auto arr = [&](auto f) {
    nlohmann::json a = nlohmann::json::array();
    for (const RequestRecord& r : records) a.push_back(f(r));
    return a;
  };
  j["input_lens"] = arr([](const RequestRecord& r) { return r.prompt_len; });
  j["output_lens"] = m.output_lens;
  j["ttfts"] = arr([](const RequestRecord& r) { return r.ttft; });
  j["itls"] = arr([](const RequestRecord& r) { return r.itl; });
  j["start_times"] = arr([](const RequestRecord& r) { return r.start_time; });
  j["generated_texts"] = arr([](const RequestRecord& r) { return r.generated_text; });
  j["errors"] = arr([](const RequestRecord& r) { return r.error; });
  const std::pair<const char*, const MetricStats*> all[] = {
      {"ttft", &m.ttft}, {"tpot", &m.tpot}, {"itl", &m.itl}, {"e2el", &m.e2el}};
  for (const auto& [name, s] : all) {
    if (std::find(percentile_metrics.begin(), percentile_metrics.end(), name) ==
        percentile_metrics.end())
      continue;
    const std::string n = name;
    j["mean_" + n + "_ms"] = s->mean_ms;
    j["median_" + n + "_ms"] = s->median_ms;
    j["std_" + n + "_ms"] = s->std_ms;
    for (const auto& [p, v] : s->percentiles_ms) j["p" + percentile_word(p) + "_" + n + "_ms"] = v;
  }
  return j;
}

std::map<std::string, double> parse_prometheus_totals(const std::string& page) {
  std::map<std::string, double> out;
  std::istringstream in(page);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    size_t name_end = line.find_first_of("{ ");
    if (name_end == std::string::npos) continue;
    std::string name = line.substr(0, name_end);
    size_t value_at = name_end;
    if (line[name_end] == '{') {
      size_t close = line.find('}', name_end);  // label values never hold '}' in vLLM's metrics
      if (close == std::string::npos) continue;
      value_at = close + 1;
    }
    const char* s = line.c_str() + value_at;
    char* end = nullptr;
    double v = std::strtod(s, &end);
    if (end == s) continue;
    out[name] += v;
  }
  return out;
}

nlohmann::json server_metric_deltas(const std::string& before, const std::string& after) {
  auto b = parse_prometheus_totals(before);
  auto a = parse_prometheus_totals(after);
  nlohmann::json j = nlohmann::json::object();
  auto delta = [&](const std::string& name, const char* key) -> std::optional<double> {
    if (!a.count(name)) return std::nullopt;
    double d = a[name] - (b.count(name) ? b[name] : 0.0);
    j[key] = static_cast<int64_t>(std::llround(d));
    return d;
  };
  auto hits = delta("vllm:prefix_cache_hits_total", "server_prefix_cache_hits");
  auto queries = delta("vllm:prefix_cache_queries_total", "server_prefix_cache_queries");
  if (hits && queries) j["server_prefix_cache_hit_rate"] = *queries > 0 ? *hits / *queries : 0.0;
  delta("vllm:num_preemptions_total", "server_num_preemptions");
  delta("vllm:prompt_tokens_total", "server_prompt_tokens");
  delta("vllm:generation_tokens_total", "server_generation_tokens");
  // Speculative decoding, under vLLM's bench serve keys: the acceptance rate as a percent,
  // the acceptance length (the bonus token plus the accepted proposals per draft), and per
  // draft position the share of drafts whose token there was accepted. Only when tokens were
  // proposed during the run, as vLLM.
  auto drafts = delta_of(b, a, "vllm:spec_decode_num_drafts_total");
  auto proposed = delta_of(b, a, "vllm:spec_decode_num_draft_tokens_total");
  auto accepted = delta_of(b, a, "vllm:spec_decode_num_accepted_tokens_total");
  if (drafts && proposed && accepted && *proposed > 0) {
    j["spec_decode_acceptance_rate"] = 100.0 * *accepted / *proposed;
    j["spec_decode_acceptance_length"] = *drafts > 0 ? 1.0 + *accepted / *drafts : 0.0;
    j["spec_decode_num_drafts"] = std::llround(*drafts);
    j["spec_decode_draft_tokens"] = std::llround(*proposed);
    j["spec_decode_accepted_tokens"] = std::llround(*accepted);
    const std::map<int64_t, double> pos_b = accepted_per_position(before);
    const std::map<int64_t, double> pos_a = accepted_per_position(after);
    std::map<int64_t, double> pos_delta;  // positions of either page, in order
    for (const auto& [pos, n] : pos_b) pos_delta[pos] = 0.0;
    for (const auto& [pos, n] : pos_a) pos_delta[pos] = n - (pos_b.count(pos) ? pos_b.at(pos) : 0);
    nlohmann::json rates = nlohmann::json::array();
    if (*drafts > 0)
      for (const auto& [pos, n] : pos_delta) rates.push_back(n / *drafts);
    j["spec_decode_per_position_acceptance_rates"] = std::move(rates);
  }
  return j;
}

}  // namespace loom::bench
