// Steady-state cost of the Sampler at a 152k vocabulary (Qwen-sized): no heap allocation per
// call (asserted, by counting operator new), and timings printed (not asserted: the test
// machines are shared and noisy).
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <new>

#include "sampling/sampler.h"
#include "test_util.h"

namespace {
std::atomic<int64_t> g_allocations{0};
}  // namespace

// Counting replacement of the global allocator for this test binary.
void* operator new(std::size_t n) {
  g_allocations.fetch_add(1, std::memory_order_relaxed);
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void operator delete(void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }

namespace loom {
namespace {

constexpr int32_t kVocab = 151936;

struct Scenario {
  const char* name;
  SamplingParams params;
  bool penalties;
};

std::vector<Scenario> scenarios() {
  std::vector<Scenario> s;
  SamplingParams p;
  p.temperature = 0.0f;
  s.push_back({"greedy", p, false});
  p = {};
  s.push_back({"T=1", p, false});
  p.top_p = 0.9f;
  s.push_back({"top_p=0.9", p, false});
  p = {};
  p.top_k = 50;
  p.top_p = 0.9f;
  s.push_back({"top_k=50 top_p=0.9", p, false});
  p = {};
  p.top_p = 0.9f;
  p.min_p = 0.05f;
  p.repetition_penalty = 1.1f;
  p.presence_penalty = 0.3f;
  p.frequency_penalty = 0.2f;
  p.logit_bias = {{5, 1.0f}};
  p.logprobs = 5;
  s.push_back({"top_p+min_p+penalties+logprobs=5", p, true});
  return s;
}

TEST(SamplerPerf, NoAllocationInSteadyStateAndTimings) {
  // Two logit shapes: N(0, 1) (flat: top_p keeps ~70% of the vocabulary, the worst case) and
  // N(0, 4) (closer to a trained model's spread).
  for (float scale : {1.0f, 4.0f}) {
    std::vector<std::vector<float>> rows;
    for (int i = 0; i < 8; ++i) rows.push_back(test::random_logits(kVocab, 50 + i, scale));
    PenaltyState pen;
    std::vector<int32_t> prompt(2000);
    for (size_t i = 0; i < prompt.size(); ++i) prompt[i] = (i * 7919) % kVocab;
    pen.add_prompt(prompt);
    for (int i = 0; i < 300; ++i) pen.add_output((i * 104729) % kVocab);

    for (const Scenario& sc : scenarios()) {
      Sampler s;
      Rng rng(1);
      SampleOutput out;
      const PenaltyState* pp = sc.penalties ? &pen : nullptr;
      for (int i = 0; i < 3; ++i)  // warm-up: scratch grows to the vocabulary size
        ASSERT_TRUE(s.sample(rows[i % 8], sc.params, pp, {}, rng, &out).is_ok());

      constexpr int kIters = 24;
      std::vector<double> ms;
      ms.reserve(kIters);
      int64_t before = g_allocations.load();
      for (int i = 0; i < kIters; ++i) {
        auto t0 = std::chrono::steady_clock::now();
        Status st = s.sample(rows[i % 8], sc.params, pp, {}, rng, &out);
        auto t1 = std::chrono::steady_clock::now();
        if (!st.is_ok()) FAIL() << st.message();
        ms.push_back(std::chrono::duration<double, std::milli>(t1 - t0).count());
      }
      int64_t allocs = g_allocations.load() - before;
      std::sort(ms.begin(), ms.end());
      std::printf("[ perf     ] vocab %d N(0,%g) %-34s median %.3f ms  min %.3f ms\n", kVocab,
                  scale, sc.name, ms[kIters / 2], ms[0]);
      EXPECT_EQ(allocs, 0) << sc.name << ": the sampler allocated in steady state";
    }
  }
}

}  // namespace
}  // namespace loom
