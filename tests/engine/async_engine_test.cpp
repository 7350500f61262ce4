// AsyncEngine: submissions from many threads, per-request streams, abort from another thread,
// errors at submit time. Results must equal the synchronous engine's.
#include <gtest/gtest.h>

#include <thread>

#include "test_engine_util.h"

namespace loom {
namespace {

using testing::make_engine;
using testing::random_prompt;
using testing::test_model_bytes;

GenerateRequest request(int i, int max_tokens) {
  GenerateRequest r;
  r.request_id = "a" + std::to_string(i);
  r.prompt = random_prompt(5 + 7 * i, 50 + i, 512);
  r.params.max_tokens = max_tokens;
  r.params.temperature = 0.9f;
  r.params.seed = i;
  r.params.ignore_eos = true;
  return r;
}

EngineConfig config() {
  EngineConfig c;
  c.max_num_seqs = 8;
  c.n_threads = 1;
  return c;
}

TEST(AsyncEngine, ThreadsSubmitAndReadTheirOwnStreams) {
  auto bytes = test_model_bytes({});
  // Reference: the synchronous engine.
  auto sync = make_engine(config(), bytes);
  for (int i = 0; i < 8; ++i) ASSERT_TRUE(sync->add_request(request(i, 10)).is_ok());
  auto ref = testing::run_all(*sync);

  AsyncEngine engine(make_engine(config(), bytes));
  std::vector<std::vector<int32_t>> got(8);
  std::vector<FinishReason> reasons(8, FinishReason::kNone);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t)
    threads.emplace_back([&, t] {
      for (int i = t; i < 8; i += 4) {
        auto stream = engine.submit(request(i, 10));
        ASSERT_TRUE(stream.is_ok()) << stream.status().message();
        while (auto o = (*stream)->next()) {
          for (const auto& c : o->outputs) {
            got[i].insert(got[i].end(), c.token_ids.begin(), c.token_ids.end());
            if (c.finished()) reasons[i] = c.finish_reason;
          }
        }
        EXPECT_TRUE((*stream)->done());
      }
    });
  for (auto& th : threads) th.join();
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(got[i], ref.at("a" + std::to_string(i)).tokens.at(0)) << i;
    EXPECT_EQ(reasons[i], FinishReason::kLength);
  }
  EXPECT_EQ(engine.metrics().num_finished, 8);
  EXPECT_EQ(engine.engine().check_kv_drained(), "");
}

TEST(AsyncEngine, AbortFromAnotherThreadEndsTheStream) {
  // Long enough that the abort always lands first: the tiny model makes 400 tokens in ~20 ms,
  // which a loaded CI host can spend before the aborting thread runs.
  EngineConfig c = config();
  c.max_model_len = 40000;
  testing::TestModelOptions long_context;
  long_context.context_length = 40000;
  AsyncEngine engine(make_engine(c, test_model_bytes(long_context)));
  GenerateRequest r = request(1, 39000);
  r.params.ignore_eos = true;
  auto stream = engine.submit(r);
  ASSERT_TRUE(stream.is_ok());
  auto first = (*stream)->next();  // generation has started
  ASSERT_TRUE(first.has_value());
  std::thread([&] { engine.abort("a1"); }).join();
  FinishReason last = FinishReason::kNone;
  int32_t n = 0;
  while (auto o = (*stream)->next_for(std::chrono::seconds(20))) {
    for (const auto& c : o->outputs) {
      n = c.num_output_tokens;
      if (c.finished()) last = c.finish_reason;
    }
    if (o->finished) break;
  }
  EXPECT_EQ(last, FinishReason::kAbort);
  EXPECT_LT(n, 39000);
  EXPECT_TRUE((*stream)->done());
  EXPECT_FALSE((*stream)->next().has_value());
}

TEST(AsyncEngine, SubmitRejectsBadAndDuplicateRequests) {
  AsyncEngine engine(make_engine(config(), test_model_bytes({})));
  GenerateRequest bad = request(0, 10);
  bad.params.max_tokens = 100000;
  auto r = engine.submit(bad);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("max_model_len"), std::string::npos);
  auto ok = engine.submit(request(0, 200));
  ASSERT_TRUE(ok.is_ok());
  EXPECT_FALSE(engine.submit(request(0, 5)).is_ok());  // id still in use
  // next_for times out cleanly rather than blocking (and the stream goes on after a timeout:
  // on a loaded 2-core machine 200 tokens can take longer than one wait).
  auto s = *ok;
  for (int timeouts = 0; timeouts < 24;) {
    auto o = s->next_for(std::chrono::milliseconds(5000));
    if (!o) {
      ++timeouts;
      continue;
    }
    if (o->finished) break;
  }
  EXPECT_TRUE(s->done());
  // Once finished, the id can be reused.
  auto again = engine.submit(request(0, 2));
  ASSERT_TRUE(again.is_ok());
  while ((*again)->next()) {
  }
}

}  // namespace
}  // namespace loom
