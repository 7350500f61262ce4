// No allocation on the hot path (issue 6): once a step of a given shape has run, the next step
// of that shape allocates nothing, on the caller or on the pool's threads. Counted through
// this test binary's global operator new, switched on only around the measured step.
#include <gtest/gtest.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <vector>

#include "model/model.h"
#include "model/tiny_model.h"
#include "tools/synth.h"

namespace {
std::atomic<bool> g_counting{false};
std::atomic<int64_t> g_allocations{0};

void* counted_alloc(std::size_t n, std::size_t align) {
  if (g_counting.load(std::memory_order_relaxed)) g_allocations.fetch_add(1);
  void* p = align > alignof(std::max_align_t)
                ? std::aligned_alloc(align, (n + align - 1) / align * align)
                : std::malloc(n ? n : 1);
  if (!p) throw std::bad_alloc();
  return p;
}
}  // namespace

void* operator new(std::size_t n) {
  return counted_alloc(n, 0);
}
void* operator new[](std::size_t n) {
  return counted_alloc(n, 0);
}
void* operator new(std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
void* operator new[](std::size_t n, std::align_val_t a) {
  return counted_alloc(n, static_cast<std::size_t>(a));
}
// The nothrow forms too (std::stable_sort's buffer comes from them): left to the runtime's,
// their blocks would reach the std::free below (a mismatch AddressSanitizer reports).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, 0);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, 0);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new(std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, static_cast<std::size_t>(a));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, std::align_val_t a, const std::nothrow_t&) noexcept {
  try {
    return counted_alloc(n, static_cast<std::size_t>(a));
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void operator delete(void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t, const std::nothrow_t&) noexcept {
  std::free(p);
}
void operator delete(void* p) noexcept {
  std::free(p);
}
void operator delete[](void* p) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete(void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}
void operator delete[](void* p, std::size_t, std::align_val_t) noexcept {
  std::free(p);
}

namespace loom {
namespace {

class NoAllocation : public ::testing::TestWithParam<Dtype> {};

// Decode steps of `n_seqs` sequences (each with its own blocks, after a prompt of a few
// tokens), the last one counted.
int64_t allocations_in_decode_step(Model& m, int n_seqs) {
  const int32_t bs = 4, prompt = 6, steps = 3, blocks_per_seq = 4;
  const int32_t V = m.config().n_vocab;
  auto kv = KvCache::create(m.config(), n_seqs * blocks_per_seq, bs, Dtype::kF16).value();
  std::vector<std::vector<int32_t>> tables(n_seqs);
  for (int s = 0; s < n_seqs; ++s)
    for (int b = 0; b < blocks_per_seq; ++b) tables[s].push_back(s * blocks_per_seq + b);
  std::vector<float> logits(static_cast<size_t>(n_seqs) * prompt * V);
  int64_t counted = -1;
  for (int step = 0; step <= steps; ++step) {
    Batch b;  // step 0: every prompt; then one token per sequence
    for (int s = 0; s < n_seqs; ++s) {
      const int32_t past = step == 0 ? 0 : prompt + step - 1, n = step == 0 ? prompt : 1;
      b.sequences.push_back({tables[s].data(), blocks_per_seq, past, n, b.n_rows()});
      for (int32_t i = 0; i < n; ++i) {
        b.tokens.push_back((s * 7 + step * 3 + i) % V);
        b.pos.push_back(past + i);
        b.seq.push_back(s);
      }
      b.logits_rows.push_back(b.n_rows() - 1);
    }
    const bool last = step == steps;
    if (last) g_allocations.store(0), g_counting.store(true);
    const Status st = m.forward(b, *kv, logits.data());
    if (last) g_counting.store(false), counted = g_allocations.load();
    EXPECT_TRUE(st.is_ok()) << st.message();
  }
  return counted;
}

TEST_P(NoAllocation, DecodeStepsOnceWarm) {
  auto bytes = test::build_tiny_gguf(test::tiny_spec("llama", GetParam()));
  auto file = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(*file, {2});
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  for (int n_seqs : {1, 16})
    EXPECT_EQ(allocations_in_decode_step(**model, n_seqs), 0)
        << dtype_name(GetParam()) << ", " << n_seqs << " sequences";
}

// The MoE layer (routing, grouping by expert, the experts' tasks) and the latent attention
// of MLA models, on synth's tiny MoE presets.
TEST(NoAllocationMoe, DecodeStepsOnceWarm) {
  for (const char* preset : {"tiny-moe", "tiny-gpt-oss", "tiny-mla"}) {
    auto spec = parse_synth_spec(std::string("synth:") + preset);
    ASSERT_TRUE(spec.is_ok()) << spec.status().message();
    auto bytes = synth_model_bytes(*spec);
    ASSERT_TRUE(bytes.is_ok()) << bytes.status().message();
    auto file = GgufFile::parse_bytes(*bytes);
    ASSERT_TRUE(file.is_ok());
    auto model = Model::from_gguf(*file, {2});
    ASSERT_TRUE(model.is_ok()) << model.status().message();
    for (int n_seqs : {1, 16})
      EXPECT_EQ(allocations_in_decode_step(**model, n_seqs), 0) << preset << ", " << n_seqs;
  }
}

INSTANTIATE_TEST_SUITE_P(Types, NoAllocation,
                         ::testing::Values(Dtype::kF32, Dtype::kF16, Dtype::kQ8_0, Dtype::kQ4_0,
                                           Dtype::kQ4_K),
                         [](const auto& info) { return std::string(dtype_name(info.param)); });

}  // namespace
}  // namespace loom
