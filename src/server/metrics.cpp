// ServerMetrics: Prometheus text rendering (see metrics.h).
#include "server/metrics.h"

#include <cinttypes>
#include <cstdio>

namespace loom::server {

namespace {

std::string fmt_double(double v) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

void header(std::string* out, const char* name, const char* type, const char* help) {
  *out += "# HELP ";
  *out += name;
  *out += ' ';
  *out += help;
  *out += "\n# TYPE ";
  *out += name;
  *out += ' ';
  *out += type;
  *out += '\n';
}

void sample(std::string* out, const char* name, const std::string& labels, double v) {
  *out += name;
  *out += '{';
  *out += labels;
  *out += "} ";
  *out += fmt_double(v);
  *out += '\n';
}

// vLLM's bucket boundaries (vllm/v1/metrics/loggers.py).
const std::vector<double> kTtftBuckets = {0.001, 0.005, 0.01, 0.02,  0.04,  0.06,  0.08, 0.1,
                                          0.25,  0.5,   0.75, 1.0,   2.5,   5.0,   7.5,  10.0,
                                          20.0,  40.0,  80.0, 160.0, 640.0, 2560.0};
const std::vector<double> kItlBuckets = {0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.2,  0.3,  0.4, 0.5,
                                         0.75, 1.0,   2.5,  5.0,   7.5, 10.0, 20.0, 40.0, 80.0};
const std::vector<double> kLatencyBuckets = {0.3,  0.5,   0.8,   1.0,   1.5,   2.0,    2.5,
                                             5.0,  10.0,  15.0,  20.0,  30.0,  40.0,   50.0,
                                             60.0, 120.0, 240.0, 480.0, 960.0, 1920.0, 7680.0};

}  // namespace

std::string prometheus_escape(const std::string& v) {
  std::string out;
  for (char c : v) {
    if (c == '\\')
      out += "\\\\";
    else if (c == '"')
      out += "\\\"";
    else if (c == '\n')
      out += "\\n";
    else
      out += c;
  }
  return out;
}

Histogram::Histogram(std::vector<double> upper_bounds)
    : bounds_(std::move(upper_bounds)), counts_(bounds_.size() + 1, 0) {}

void Histogram::observe(double v) {
  size_t i = 0;
  while (i < bounds_.size() && v > bounds_[i]) ++i;
  ++counts_[i];
  sum_ += v;
  ++count_;
}

void Histogram::render(const std::string& name, const std::string& labels, std::string* out) const {
  uint64_t cum = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    cum += counts_[i];
    std::string le = i < bounds_.size() ? fmt_double(bounds_[i]) : "+Inf";
    sample(out, (name + "_bucket").c_str(), "le=\"" + le + "\"," + labels,
           static_cast<double>(cum));
  }
  sample(out, (name + "_sum").c_str(), labels, sum_);
  sample(out, (name + "_count").c_str(), labels, static_cast<double>(count_));
}

ServerMetrics::ServerMetrics()
    : ttft_(kTtftBuckets), itl_(kItlBuckets), e2e_(kLatencyBuckets), queue_(kLatencyBuckets) {}

void ServerMetrics::observe_time_to_first_token(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  ttft_.observe(s);
}
void ServerMetrics::observe_inter_token_latency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  itl_.observe(s);
}
void ServerMetrics::observe_e2e_latency(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  e2e_.observe(s);
}
void ServerMetrics::observe_queue_time(double s) {
  std::lock_guard<std::mutex> lock(mu_);
  queue_.observe(s);
}
void ServerMetrics::count_finished(FinishReason reason) {
  std::lock_guard<std::mutex> lock(mu_);
  if (reason == FinishReason::kStop)
    ++finished_stop_;
  else if (reason == FinishReason::kLength)
    ++finished_length_;
  else
    ++finished_abort_;
}

std::string ServerMetrics::render(const EngineMetrics& m, const std::string& model_name,
                                  int32_t block_size) const {
  const std::string l = "model_name=\"" + prometheus_escape(model_name) + "\"";
  std::string out;
  header(&out, "vllm:num_requests_running", "gauge",
         "Number of requests in model execution batches.");
  sample(&out, "vllm:num_requests_running", l, m.num_running);
  header(&out, "vllm:num_requests_waiting", "gauge", "Number of requests waiting to be processed.");
  sample(&out, "vllm:num_requests_waiting", l, m.num_waiting);
  header(&out, "vllm:kv_cache_usage_perc", "gauge", "KV-cache usage. 1 means 100 percent usage.");
  sample(&out, "vllm:kv_cache_usage_perc", l, m.kv_cache_usage);
  header(&out, "vllm:gpu_cache_usage_perc", "gauge",
         "KV-cache usage (older name of vllm:kv_cache_usage_perc). 1 means 100 percent usage.");
  sample(&out, "vllm:gpu_cache_usage_perc", l, m.kv_cache_usage);
  header(&out, "vllm:prefix_cache_queries_total", "counter",
         "Prefix cache queries, in terms of number of queried tokens.");
  sample(&out, "vllm:prefix_cache_queries_total", l, static_cast<double>(m.prefix_cache_queries));
  header(&out, "vllm:prefix_cache_hits_total", "counter",
         "Prefix cache hits, in terms of number of cached tokens.");
  sample(&out, "vllm:prefix_cache_hits_total", l, static_cast<double>(m.prefix_cache_hits));
  header(&out, "vllm:prompt_tokens_total", "counter", "Number of prefill tokens processed.");
  sample(&out, "vllm:prompt_tokens_total", l, static_cast<double>(m.prompt_tokens));
  header(&out, "vllm:generation_tokens_total", "counter", "Number of generation tokens processed.");
  sample(&out, "vllm:generation_tokens_total", l, static_cast<double>(m.generation_tokens));
  header(&out, "vllm:num_preemptions_total", "counter",
         "Cumulative number of preemption from the engine.");
  sample(&out, "vllm:num_preemptions_total", l, static_cast<double>(m.num_preemptions));
  if (m.num_state_slots_live > 0 || m.state_snapshots_taken > 0) {  // a hybrid model
    header(&out, "loom:recurrent_state_snapshots", "gauge",
           "Prefix snapshots of the recurrent state cached now (hybrid models).");
    sample(&out, "loom:recurrent_state_snapshots", l, m.num_state_snapshots);
    header(&out, "loom:recurrent_state_snapshots_taken_total", "counter",
           "Prefix snapshots of the recurrent state taken (hybrid models).");
    sample(&out, "loom:recurrent_state_snapshots_taken_total", l,
           static_cast<double>(m.state_snapshots_taken));
  }
  if (!m.spec_accepted_per_pos.empty()) {  // speculative decoding is on
    header(&out, "vllm:spec_decode_num_drafts_total", "counter", "Number of spec decoding drafts.");
    sample(&out, "vllm:spec_decode_num_drafts_total", l, static_cast<double>(m.spec_num_drafts));
    header(&out, "vllm:spec_decode_num_draft_tokens_total", "counter", "Number of draft tokens.");
    sample(&out, "vllm:spec_decode_num_draft_tokens_total", l,
           static_cast<double>(m.spec_num_draft_tokens));
    header(&out, "vllm:spec_decode_num_accepted_tokens_total", "counter",
           "Number of accepted tokens.");
    sample(&out, "vllm:spec_decode_num_accepted_tokens_total", l,
           static_cast<double>(m.spec_num_accepted_tokens));
    header(&out, "vllm:spec_decode_num_accepted_tokens_per_pos_total", "counter",
           "Accepted tokens per draft position.");
    for (size_t p = 0; p < m.spec_accepted_per_pos.size(); ++p)
      sample(&out, "vllm:spec_decode_num_accepted_tokens_per_pos_total",
             "position=\"" + std::to_string(p) + "\"," + l,
             static_cast<double>(m.spec_accepted_per_pos[p]));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    header(&out, "vllm:request_success_total", "counter",
           "Count of successfully processed requests.");
    sample(&out, "vllm:request_success_total", "finished_reason=\"stop\"," + l,
           static_cast<double>(finished_stop_));
    sample(&out, "vllm:request_success_total", "finished_reason=\"length\"," + l,
           static_cast<double>(finished_length_));
    sample(&out, "vllm:request_success_total", "finished_reason=\"abort\"," + l,
           static_cast<double>(finished_abort_));
    header(&out, "vllm:time_to_first_token_seconds", "histogram",
           "Histogram of time to first token in seconds.");
    ttft_.render("vllm:time_to_first_token_seconds", l, &out);
    header(&out, "vllm:inter_token_latency_seconds", "histogram",
           "Histogram of inter-token latency in seconds.");
    itl_.render("vllm:inter_token_latency_seconds", l, &out);
    header(&out, "vllm:e2e_request_latency_seconds", "histogram",
           "Histogram of e2e request latency in seconds.");
    e2e_.render("vllm:e2e_request_latency_seconds", l, &out);
    header(&out, "vllm:request_queue_time_seconds", "histogram",
           "Histogram of time spent in WAITING phase for request.");
    queue_.render("vllm:request_queue_time_seconds", l, &out);
  }
  header(&out, "vllm:cache_config_info", "gauge", "Information of the LLMEngine CacheConfig");
  sample(&out, "vllm:cache_config_info",
         "block_size=\"" + std::to_string(block_size) + "\",num_gpu_blocks=\"" +
             std::to_string(m.num_kv_blocks) + "\"," + l,
         1.0);
  // Per KV layer group: full attention, or one sliding window whose blocks are released as
  // sequences outgrow it.
  header(&out, "loom:kv_cache_group_blocks", "gauge",
         "KV blocks of each layer group (full_attention or sliding_window_N), used or free.");
  auto group_label = [&](const KvGroupMetrics& g) {
    return std::string("group=\"") +
           (g.window == 0 ? "full_attention" : "sliding_window_" + std::to_string(g.window)) +
           "\",";
  };
  for (const KvGroupMetrics& g : m.kv_groups) {
    sample(&out, "loom:kv_cache_group_blocks", group_label(g) + "state=\"used\"," + l,
           g.num_used_blocks);
    sample(&out, "loom:kv_cache_group_blocks", group_label(g) + "state=\"free\"," + l,
           g.num_blocks - g.num_used_blocks);
  }
  header(&out, "loom:kv_cache_window_released_blocks_total", "counter",
         "KV blocks released because they fell out of a sequence's sliding window.");
  for (const KvGroupMetrics& g : m.kv_groups)
    if (g.window > 0)
      sample(&out, "loom:kv_cache_window_released_blocks_total", group_label(g) + l,
             static_cast<double>(g.num_window_released_blocks));
  return out;
}

void render_grammar_cache(uint64_t hits, uint64_t misses, const std::string& model_name,
                          std::string* out) {
  const std::string l = "model_name=\"" + prometheus_escape(model_name) + "\"";
  header(out, "loom:grammar_cache_hits_total", "counter",
         "Output constraints served by an already compiled grammar.");
  sample(out, "loom:grammar_cache_hits_total", l, static_cast<double>(hits));
  header(out, "loom:grammar_cache_misses_total", "counter",
         "Grammars compiled for output constraints (failed compiles included).");
  sample(out, "loom:grammar_cache_misses_total", l, static_cast<double>(misses));
}

}  // namespace loom::server
