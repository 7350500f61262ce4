// 64 concurrent streaming clients, a random third of which hang up mid-stream (or before the
// first byte): every surviving stream completes with all its tokens, and afterwards the engine
// is idle with every KV block free, which /metrics agrees with. Also: a client that leaves a
// non-streaming request aborts it, and --max-queue overload answers 503.
#include <gtest/gtest.h>

#include <atomic>
#include <random>
#include <thread>

#include "server_fixture.h"

namespace loom::test {
namespace {

using nlohmann::json;

TEST(ServerConcurrency, SixtyFourStreamsWithRandomDisconnects) {
  server::Server& s = shared_server();
  const uint16_t port = s.port();
  constexpr int kClients = 64;
  constexpr int kTokens = 24;
  std::atomic<int> completed{0}, dropped{0}, failures{0};
  std::vector<std::thread> threads;
  std::mt19937 rng(1234);
  std::vector<int> plan(kClients);  // -1: complete; k >= 0: hang up after k events
  for (int i = 0; i < kClients; ++i) plan[i] = (rng() % 3 == 0) ? static_cast<int>(rng() % 6) : -1;
  for (int i = 0; i < kClients; ++i) {
    threads.emplace_back([&, i] {
      json body = {{"prompt", "client " + std::to_string(i) + " says"},
                   {"max_tokens", kTokens},
                   {"ignore_eos", true},
                   {"stream", true},
                   {"seed", i},
                   {"stream_options", {{"include_usage", true}}}};
      const bool chat = i % 2 == 1;
      if (chat) {
        body.erase("prompt");
        body["messages"] = {{{"role", "user"}, {"content", "client " + std::to_string(i)}}};
      }
      TestConnection c(port);
      if (!c.send_request("POST", chat ? "/v1/chat/completions" : "/v1/completions", body.dump())) {
        ++failures;
        return;
      }
      if (plan[i] == 0) {  // gone before reading anything
        c.close();
        ++dropped;
        return;
      }
      HttpResult head;
      if (!c.read_head(&head) || head.status != 200) {
        ++failures;
        return;
      }
      std::string buf;
      int events = 0;
      while (auto piece = c.next_piece()) {
        buf += *piece;
        events = static_cast<int>(parse_sse(buf).size());
        if (plan[i] > 0 && events >= plan[i]) break;
      }
      if (plan[i] > 0) {
        c.close();
        ++dropped;
        return;
      }
      auto ev = parse_sse(buf);
      if (ev.empty() || ev.back().data != "[DONE]") {
        ++failures;
        return;
      }
      json usage = json::parse(ev[ev.size() - 2].data)["usage"];
      if (usage["completion_tokens"] != kTokens) {
        ++failures;
        return;
      }
      ++completed;
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_EQ(failures.load(), 0);
  EXPECT_EQ(completed.load() + dropped.load(), kClients);
  EXPECT_GT(dropped.load(), 5);
  EXPECT_EQ(wait_engine_idle(s), "");
  auto m = http_request(port, "GET", "/metrics");
  const std::string l = std::string("{model_name=\"") + kTestModelName + "\"}";
  EXPECT_EQ(metric_value(m.body, "vllm:num_requests_running" + l), 0.0);
  EXPECT_EQ(metric_value(m.body, "vllm:num_requests_waiting" + l), 0.0);
  EXPECT_EQ(metric_value(m.body, "vllm:kv_cache_usage_perc" + l), 0.0);
  EXPECT_GE(metric_value(m.body, "vllm:request_success_total{finished_reason=\"abort\""), 1.0);
  EXPECT_EQ(http_request(port, "GET", "/health").status, 200);
}

TEST(ServerConcurrency, DisconnectWhileWaitingForNonStreamingAbortsIt) {
  server::Server& s = shared_server();
  const std::string abort_metric = "vllm:request_success_total{finished_reason=\"abort\"";
  ASSERT_EQ(wait_engine_idle(s), "");
  const double aborted_before =
      metric_value(http_request(s.port(), "GET", "/metrics").body, abort_metric);
  {
    TestConnection c(s.port());
    // A non-streaming request sends nothing until it is done, so only the posted read can
    // notice that the client left. 48 samples of 253 tokens keep the engine busy for tens of
    // milliseconds even on a fast machine; the client leaves as soon as the engine runs them,
    // so the disconnect cannot lose a race against the request finishing on its own.
    json body = {{"prompt", {1, 2, 3}},
                 {"max_tokens", kTestMaxModelLen - 3},
                 {"n", 48},
                 {"ignore_eos", true}};
    ASSERT_TRUE(c.send_request("POST", "/v1/completions", body.dump()));
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (s.engine()->metrics().num_running == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::yield();
    ASSERT_GT(s.engine()->metrics().num_running, 0) << "the request never started";
  }
  EXPECT_EQ(wait_engine_idle(s), "");
  // The dispatcher counts the final output a moment after the engine went idle.
  double aborted_after = aborted_before;
  for (int i = 0; i < 200 && aborted_after == aborted_before; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    aborted_after = metric_value(http_request(s.port(), "GET", "/metrics").body, abort_metric);
  }
  EXPECT_EQ(aborted_after, aborted_before + 1);
}

TEST(ServerConcurrency, OverloadAnswers503) {
  server::ServerOptions so;
  so.max_queue = 0;
  auto s = start_test_server(so, /*load=*/false);
  ASSERT_TRUE(s);
  EngineConfig ec;
  ec.max_model_len = 512;  // the tiny model's whole context: the longest hold there is
  ec.max_num_seqs = 1;
  ec.n_threads = 1;
  ASSERT_TRUE(s->load("synth:tiny", ec).is_ok());
  // One long stream occupies the only slot; the next request is refused.
  TestConnection c(s->port());
  json body = {{"prompt", "hold"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}};
  ASSERT_TRUE(c.send_request("POST", "/v1/completions", body.dump()));
  HttpResult head;
  ASSERT_TRUE(c.read_head(&head));
  auto r = post_json(s->port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}});
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_EQ(r.headers["retry-after"], "1") << r.body;
  EXPECT_TRUE(r.json()["error"]["message"].is_string());
  c.close();
  EXPECT_EQ(wait_engine_idle(*s), "");
  // The slot frees once the dispatcher has seen the aborted request's final output.
  int status = 0;
  for (int i = 0; i < 200 && status != 200; ++i) {
    status = post_json(s->port(), "/v1/completions", {{"prompt", "x"}, {"max_tokens", 2}}).status;
    if (status != 200) std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(status, 200);
  s->stop();
}

}  // namespace
}  // namespace loom::test
