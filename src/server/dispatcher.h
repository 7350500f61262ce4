// Dispatcher: the one thread that moves engine outputs to sockets. Every in-flight generation
// is a GenerationJob holding its RequestStreams; the dispatcher sweeps them with non-blocking
// next_for(0) reads, hands each output to the job (which renders JSON / SSE and posts the
// bytes to the connection's strand), and sleeps ~1 ms when a sweep found nothing. So no I/O
// thread ever blocks on the engine, and a job costs no thread.
//
// A job whose client disconnected, or whose unread bytes pass the per-stream limit (a slow
// reader), is aborted: the engine frees its KV blocks at its next step and the final "abort"
// output ends the job.
#pragma once

#include <atomic>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "loom/engine.h"
#include "server/metrics.h"
#include "server/responder.h"

namespace loom::server {

class GenerationJob {
 public:
  virtual ~GenerationJob() = default;
  // Dispatcher thread. `prompt_index`: which of the job's streams produced `out`.
  virtual void on_output(size_t prompt_index, RequestOutput& out) = 0;
  // Dispatcher thread, once, after every stream's final output.
  virtual void on_finished() = 0;

  std::vector<std::string> request_ids;
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::shared_ptr<Responder> responder;
  std::atomic<bool> cancelled{false};         // set by the disconnect callback
  std::atomic<int64_t>* in_flight = nullptr;  // decremented by streams.size() when done
  std::string route;                          // for the request log: "/v1/chat/completions", ...

  // Dispatcher bookkeeping, per stream.
  struct Track {
    double last_elapsed = 0.0;
    bool got_token = false;
    bool done = false;
    // For the request log line.
    int32_t prompt_tokens = 0;
    int64_t output_tokens = 0;
    double ttft_s = 0.0;
    std::string finish = "abort";
  };
  std::vector<Track> tracks;
  bool abort_sent = false;
};

class Dispatcher {
 public:
  // log_requests: one info line per finished request (id, route, status, tokens, TTFT, time).
  Dispatcher(AsyncEngine* engine, ServerMetrics* metrics, size_t max_pending_bytes,
             bool log_requests = true);
  ~Dispatcher();  // stop()
  void add(std::shared_ptr<GenerationJob> job);
  // Aborts every job's requests, finishes them, joins the thread.
  void stop();
  size_t num_jobs() const;

 private:
  void loop();
  // Returns true if anything was read.
  bool pump(GenerationJob& job);
  void observe(GenerationJob::Track& t, const RequestOutput& out);
  // The job's end: its log lines, on_finished, the in-flight count.
  void finish(GenerationJob& job);

  AsyncEngine* engine_;
  ServerMetrics* metrics_;
  bool log_requests_ = true;
  size_t max_pending_bytes_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::vector<std::shared_ptr<GenerationJob>> incoming_;
  std::atomic<size_t> num_jobs_{0};
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace loom::server
