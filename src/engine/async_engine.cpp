// AsyncEngine: one engine thread loops over Engine::step(); other threads submit requests and
// aborts through a queue that the loop drains between steps, and read each request's outputs
// from its own RequestStream.
#include <thread>
#include <unordered_map>

#include "base/log.h"
#include "loom/engine.h"

namespace loom {

struct AsyncEngine::State {
  std::mutex mu;
  std::condition_variable cv;
  std::vector<std::pair<GenerateRequest, std::shared_ptr<RequestStream>>> incoming;
  std::vector<std::string> aborts;
  // Every unfinished request's stream (ids are reserved here from submit on).
  std::unordered_map<std::string, std::shared_ptr<RequestStream>> streams;
  EngineMetrics metrics;
  bool stop = false;
  std::thread thread;
};

AsyncEngine::AsyncEngine(std::unique_ptr<Engine> engine)
    : engine_(std::move(engine)), state_(std::make_unique<State>()) {
  state_->metrics = engine_->metrics();
  state_->thread = std::thread([this] { loop(); });
}

AsyncEngine::~AsyncEngine() {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->stop = true;
  }
  state_->cv.notify_all();
  state_->thread.join();
  // Readers still waiting get a final "abort" instead of blocking forever.
  for (auto& [id, stream] : state_->streams) {
    RequestOutput o;
    o.request_id = id;
    o.finished = true;
    o.error = "engine shut down";
    CompletionOutput c;
    c.finish_reason = FinishReason::kAbort;
    o.outputs.push_back(c);
    stream->push(std::move(o));
  }
}

Result<std::shared_ptr<RequestStream>> AsyncEngine::submit(GenerateRequest request) {
  LOOM_RETURN_IF_ERROR(engine_->validate(request));
  auto stream = std::make_shared<RequestStream>(request.request_id);
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    if (state_->stop) return invalid_argument("engine is shutting down");
    if (!state_->streams.emplace(request.request_id, stream).second)
      return invalid_argument("request id '" + request.request_id + "' is already in use");
    state_->incoming.emplace_back(std::move(request), stream);
  }
  state_->cv.notify_all();
  return stream;
}

void AsyncEngine::abort(const std::string& request_id) {
  {
    std::lock_guard<std::mutex> lock(state_->mu);
    state_->aborts.push_back(request_id);
  }
  state_->cv.notify_all();
}

EngineMetrics AsyncEngine::metrics() const {
  std::lock_guard<std::mutex> lock(state_->mu);
  return state_->metrics;
}

void AsyncEngine::loop() {
  State& s = *state_;
  std::vector<std::pair<GenerateRequest, std::shared_ptr<RequestStream>>> incoming;
  std::vector<std::string> aborts;
  for (;;) {
    {
      std::unique_lock<std::mutex> lock(s.mu);
      s.cv.wait(lock, [&] {
        return s.stop || !s.incoming.empty() || !s.aborts.empty() || engine_->has_unfinished();
      });
      if (s.stop) return;
      incoming.swap(s.incoming);
      aborts.swap(s.aborts);
    }
    for (auto& [req, stream] : incoming) {
      const std::string id = req.request_id;
      Status st = engine_->add_request(std::move(req));
      if (st.is_ok()) continue;
      RequestOutput o;
      o.request_id = id;
      o.finished = true;
      o.error = st.message();
      stream->push(std::move(o));
      std::lock_guard<std::mutex> lock(s.mu);
      s.streams.erase(id);
    }
    incoming.clear();
    for (const std::string& id : aborts) engine_->abort(id);
    aborts.clear();

    std::vector<RequestOutput> outs;
    if (engine_->has_unfinished()) {
      auto r = engine_->step();
      if (r.is_ok())
        outs = std::move(r).value();
      else
        LOOM_LOG_ERROR("engine step failed: %s", r.status().message().c_str());
    }
    std::lock_guard<std::mutex> lock(s.mu);
    for (RequestOutput& o : outs) {
      auto it = s.streams.find(o.request_id);
      if (it == s.streams.end()) continue;
      const bool fin = o.finished;
      it->second->push(std::move(o));
      if (fin) s.streams.erase(it);
    }
    s.metrics = engine_->metrics();
  }
}

void RequestStream::push(RequestOutput output) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (final_pushed_) return;
    final_pushed_ = output.finished;
    queue_.push_back(std::move(output));
  }
  cv_.notify_all();
}

std::optional<RequestOutput> RequestStream::next() {
  std::unique_lock<std::mutex> lock(mu_);
  if (final_read_) return std::nullopt;
  cv_.wait(lock, [&] { return !queue_.empty(); });
  RequestOutput o = std::move(queue_.front());
  queue_.pop_front();
  if (o.finished) final_read_ = true;
  return o;
}

std::optional<RequestOutput> RequestStream::next_for(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (final_read_) return std::nullopt;
  if (!cv_.wait_for(lock, timeout, [&] { return !queue_.empty(); })) return std::nullopt;
  RequestOutput o = std::move(queue_.front());
  queue_.pop_front();
  if (o.finished) final_read_ = true;
  return o;
}

bool RequestStream::done() const {
  std::lock_guard<std::mutex> lock(mu_);
  return final_read_;
}

}  // namespace loom
