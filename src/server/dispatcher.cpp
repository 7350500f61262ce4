// Dispatcher (see dispatcher.h).
#include "server/dispatcher.h"

#include <chrono>

#include "base/log.h"

namespace loom::server {

Dispatcher::Dispatcher(AsyncEngine* engine, ServerMetrics* metrics, size_t max_pending_bytes,
                       bool log_requests)
    : engine_(engine),
      metrics_(metrics),
      log_requests_(log_requests),
      max_pending_bytes_(max_pending_bytes) {
  thread_ = std::thread([this] { loop(); });
}

Dispatcher::~Dispatcher() {
  stop();
}

void Dispatcher::add(std::shared_ptr<GenerationJob> job) {
  job->tracks.assign(job->streams.size(), {});
  num_jobs_.fetch_add(1);
  {
    std::lock_guard<std::mutex> lock(mu_);
    incoming_.push_back(std::move(job));
  }
  cv_.notify_one();
}

size_t Dispatcher::num_jobs() const {
  return num_jobs_.load();
}

void Dispatcher::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stop_) return;
    stop_ = true;
  }
  cv_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void Dispatcher::observe(GenerationJob::Track& t, const RequestOutput& out) {
  size_t n_tokens = 0;
  for (const CompletionOutput& c : out.outputs) n_tokens += c.token_ids.size();
  t.prompt_tokens = out.num_prompt_tokens;
  t.output_tokens += static_cast<int64_t>(n_tokens);
  if (n_tokens > 0) {
    if (!t.got_token) {
      t.got_token = true;
      t.ttft_s = out.time_to_first_token_s;
      metrics_->observe_time_to_first_token(out.time_to_first_token_s);
    } else {
      // Tokens of one step share one arrival: spread the gap over them, as vLLM does per
      // token.
      const double gap = (out.elapsed_s - t.last_elapsed) / static_cast<double>(n_tokens);
      for (size_t i = 0; i < n_tokens; ++i) metrics_->observe_inter_token_latency(gap);
    }
    t.last_elapsed = out.elapsed_s;
  }
  if (out.finished) {
    metrics_->observe_e2e_latency(out.elapsed_s);
    metrics_->observe_queue_time(out.queue_time_s);
    FinishReason reason = FinishReason::kAbort;
    for (const CompletionOutput& c : out.outputs)
      if (c.finished()) reason = c.finish_reason;
    if (!out.error.empty()) reason = FinishReason::kAbort;
    metrics_->count_finished(reason);
    t.finish = !out.error.empty()                ? "error: " + out.error
               : reason == FinishReason::kStop   ? "stop"
               : reason == FinishReason::kLength ? "length"
                                                 : "abort";
    t.last_elapsed = out.elapsed_s;
  }
}

void Dispatcher::finish(GenerationJob& job) {
  job.on_finished();
  if (job.in_flight) job.in_flight->fetch_sub(static_cast<int64_t>(job.streams.size()));
  if (!log_requests_) return;
  // The response was 200 (errors are answered before a job exists); a client that went away
  // shows as finish "abort".
  for (size_t i = 0; i < job.tracks.size(); ++i) {
    const GenerationJob::Track& t = job.tracks[i];
    LOOM_LOG_INFO(
        "request %s %s: 200, prompt %d tokens, output %lld tokens, ttft %.3f s, "
        "total %.3f s, finish %s",
        job.request_ids[i].c_str(), job.route.c_str(), t.prompt_tokens,
        static_cast<long long>(t.output_tokens), t.ttft_s, t.last_elapsed, t.finish.c_str());
  }
}

bool Dispatcher::pump(GenerationJob& job) {
  if (!job.abort_sent && (job.cancelled.load() || job.responder->closed() ||
                          job.responder->pending_bytes() > max_pending_bytes_)) {
    job.abort_sent = true;
    for (size_t i = 0; i < job.streams.size(); ++i)
      if (!job.tracks[i].done) engine_->abort(job.request_ids[i]);
  }
  bool any = false;
  for (size_t i = 0; i < job.streams.size(); ++i) {
    if (job.tracks[i].done) continue;
    while (auto out = job.streams[i]->next_for(std::chrono::milliseconds(0))) {
      any = true;
      observe(job.tracks[i], *out);
      const bool fin = out->finished;
      job.on_output(i, *out);
      if (fin) {
        job.tracks[i].done = true;
        break;
      }
    }
  }
  return any;
}

void Dispatcher::loop() {
  std::vector<std::shared_ptr<GenerationJob>> jobs;
  for (;;) {
    bool stopping;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (jobs.empty()) cv_.wait(lock, [&] { return stop_ || !incoming_.empty(); });
      for (auto& j : incoming_) jobs.push_back(std::move(j));
      incoming_.clear();
      stopping = stop_;
    }
    if (stopping) {
      // Abort everything and wait (bounded) for the final outputs so that every connection
      // gets a proper end.
      for (auto& j : jobs) j->cancelled = true;
      auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
      while (!jobs.empty() && std::chrono::steady_clock::now() < deadline) {
        for (size_t k = 0; k < jobs.size();) {
          pump(*jobs[k]);
          bool all = true;
          for (auto& t : jobs[k]->tracks) all = all && t.done;
          if (all) {
            finish(*jobs[k]);
            jobs[k] = std::move(jobs.back());
            jobs.pop_back();
            num_jobs_.fetch_sub(1);
          } else {
            ++k;
          }
        }
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
      }
      return;
    }
    bool any = false;
    for (size_t k = 0; k < jobs.size();) {
      any |= pump(*jobs[k]);
      bool all = true;
      for (auto& t : jobs[k]->tracks) all = all && t.done;
      if (all) {
        finish(*jobs[k]);
        jobs[k] = std::move(jobs.back());
        jobs.pop_back();
        num_jobs_.fetch_sub(1);
      } else {
        ++k;
      }
    }
    if (!any && !jobs.empty()) {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait_for(lock, std::chrono::milliseconds(1), [&] { return stop_ || !incoming_.empty(); });
    }
  }
}

}  // namespace loom::server
