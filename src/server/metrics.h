// Prometheus metrics under vLLM's names (the ones llm-d, Dynamo and Grafana dashboards
// scrape): gauges and counters come from the engine's EngineMetrics snapshot, latency
// histograms and finish-reason counters are observed by the stream dispatcher.
#pragma once

#include <cstdint>
#include <mutex>
#include <string>
#include <vector>

#include "loom/engine.h"

namespace loom::server {

class Histogram {
 public:
  explicit Histogram(std::vector<double> upper_bounds);
  void observe(double v);
  // `name`_bucket / _sum / _count lines with `labels` (e.g. model_name="x") on each.
  void render(const std::string& name, const std::string& labels, std::string* out) const;
  uint64_t count() const { return count_; }

 private:
  std::vector<double> bounds_;
  std::vector<uint64_t> counts_;  // per bucket (not cumulative); last = +Inf
  double sum_ = 0.0;
  uint64_t count_ = 0;
};

class ServerMetrics {
 public:
  ServerMetrics();
  void observe_time_to_first_token(double s);
  void observe_inter_token_latency(double s);
  void observe_e2e_latency(double s);
  void observe_queue_time(double s);
  void count_finished(FinishReason reason);

  // The whole /metrics page (Prometheus text format 0.0.4).
  std::string render(const EngineMetrics& m, const std::string& model_name,
                     int32_t block_size) const;

 private:
  mutable std::mutex mu_;
  Histogram ttft_, itl_, e2e_, queue_;
  uint64_t finished_stop_ = 0, finished_length_ = 0, finished_abort_ = 0;
};

// The compiled-grammar cache's counters (structured::GrammarCache::stats()), appended to the
// page: loom:grammar_cache_hits_total (a constraint served by an already compiled grammar)
// and loom:grammar_cache_misses_total (grammars compiled, failures included).
void render_grammar_cache(uint64_t hits, uint64_t misses, const std::string& model_name,
                          std::string* out);

// A Prometheus label value: backslash, double quote and newline escaped.
std::string prometheus_escape(const std::string& v);

}  // namespace loom::server
