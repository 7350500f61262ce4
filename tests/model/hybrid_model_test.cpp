// The Gated DeltaNet hybrids on `loom synth` models (tiny-qwen35: value heads tiled over twice
// fewer key heads as llama.cpp's qwen35 files store them; tiny-qwen3next: b and a fused,
// experts): the CPU model against the independent reference forward pass, batch and chunk
// invariance bit for bit, a resume from a prefix snapshot, the state-slot checks, and the
// scratch the memory plan predicts.
#include <gtest/gtest.h>

#include "backend/cpu/cpu_model.h"
#include "model/bind.h"
#include "model/tiny_model.h"
#include "reference/reference_model.h"
#include "tools/synth.h"

namespace loom {
namespace {

struct Synth {
  std::shared_ptr<std::vector<uint8_t>> bytes;
  GgufFile file;
};

// "synth:PRESET[:TYPE][@ARCH]": ARCH another family for the preset's shape (qwen35moe: Qwen3.5's
// layers with tiny-qwen3next's experts).
Synth synth_file(const std::string& spec) {
  const size_t at = spec.find('@');
  auto so = parse_synth_spec(spec.substr(0, at));
  EXPECT_TRUE(so.is_ok());
  if (at != std::string::npos) so->arch = spec.substr(at + 1);
  auto bytes = synth_model_bytes(*so);
  EXPECT_TRUE(bytes.is_ok()) << bytes.status().message();
  auto file = GgufFile::parse_bytes(*bytes);
  EXPECT_TRUE(file.is_ok());
  return {*bytes, std::move(*file)};
}

std::unique_ptr<Model> load(const std::string& spec) {
  Synth s = synth_file(spec);
  auto m = Model::from_gguf(std::move(s.file), {2});
  EXPECT_TRUE(m.is_ok()) << m.status().message();
  return std::move(*m);
}

std::unique_ptr<KvCache> cache(const ModelConfig& c, int32_t blocks, int32_t slots) {
  KvLayout layout = KvLayout::single(c.n_layer, blocks);
  layout.num_state_slots = slots;
  return KvCache::create(c, layout, 16, Dtype::kF32).value();
}

std::vector<int32_t> tokens(int n, int salt) {
  std::vector<int32_t> t;
  for (int i = 0; i < n; ++i) t.push_back((i * 37 + salt * 101 + 5) % 500);
  return t;
}

// One sequence's rows [start, start + len) of `toks` in blocks `table`, state slot `slot`.
void add_rows(Batch& b, const std::vector<int32_t>& table, const std::vector<int32_t>& toks,
              int32_t start, int32_t len, int32_t slot) {
  const int32_t seq = static_cast<int32_t>(b.sequences.size());
  BatchSequence s{table.data(), static_cast<int32_t>(table.size()), start, len,
                  static_cast<int32_t>(b.tokens.size())};
  s.state_slot = slot;
  b.sequences.push_back(s);
  for (int32_t i = 0; i < len; ++i) {
    b.logits_rows.push_back(static_cast<int32_t>(b.tokens.size()));
    b.tokens.push_back(toks[start + i]);
    b.pos.push_back(start + i);
    b.seq.push_back(seq);
  }
}

// Logits of `toks` in steps of `chunk` rows, sequence in blocks [0, 4) and slot 0.
std::vector<float> run(Model& m, KvCache& kv, const std::vector<int32_t>& toks, int chunk) {
  const int32_t V = m.config().n_vocab, n = static_cast<int32_t>(toks.size());
  std::vector<int32_t> table = {0, 1, 2, 3};
  std::vector<float> out(static_cast<size_t>(n) * V);
  for (int32_t start = 0; start < n; start += chunk) {
    Batch b;
    add_rows(b, table, toks, start, std::min(chunk, n - start), 0);
    EXPECT_TRUE(m.forward(b, kv, &out[static_cast<size_t>(start) * V]).is_ok());
  }
  return out;
}

class HybridSynth : public ::testing::TestWithParam<std::string> {};

// F32 weights: within 1e-4 of the reference (double accumulation, plain recurrence); Q8_0:
// both read the same quantized weights, the fast path also rounds its activations to 8 bits
// (4e-2, as forward_test's Q8_0 bound).
TEST_P(HybridSynth, MatchesTheReference) {
  for (const char* type : {"", ":q8_0"}) {
    const double tol = *type ? 4e-2 : 1e-4;
    const std::string p = GetParam(), preset = p.substr(0, p.find('@'));
    const std::string spec =
        "synth:" + preset + type + (p.find('@') == std::string::npos ? "" : p.substr(p.find('@')));
    Synth s = synth_file(spec);
    auto bound = bind_gguf(s.file);
    ASSERT_TRUE(bound.is_ok()) << bound.status().message();
    auto m = load(spec);
    const auto toks = tokens(40, 1);
    auto want = reference::forward(bound->config, reference::gguf_lookup(s.file), toks);
    ASSERT_TRUE(want.is_ok()) << want.status().message();
    auto kv = cache(m->config(), 4, 1);
    const std::vector<float> got = run(*m, *kv, toks, 64);
    const int64_t V = m->config().n_vocab;
    double worst = 0;
    for (size_t r = 0; r < toks.size(); ++r)
      worst = std::max(worst, test::rel_err(&got[r * V], &(*want)[r * V], V));
    std::printf("  %s: row rel err vs reference %.3g\n", spec.c_str(), worst);
    EXPECT_LT(worst, tol) << spec;
  }
}

// A prompt's logits are the same bits in one step, in chunks of 7 (crossing the recurrent
// chunks of 16 at every offset) and one token per step, and alongside another sequence.
TEST_P(HybridSynth, ChunkAndBatchInvariant) {
  auto m = load("synth:" + GetParam());
  const int32_t V = m->config().n_vocab;
  const auto toks = tokens(40, 2), other = tokens(33, 3);
  auto kv = cache(m->config(), 8, 2);
  const std::vector<float> whole = run(*m, *kv, toks, 64);
  EXPECT_EQ(run(*m, *kv, toks, 7), whole);
  EXPECT_EQ(run(*m, *kv, toks, 1), whole);
  // With the other sequence (blocks 4-7, slot 1) in the same steps, its rows first.
  std::vector<int32_t> t0 = {0, 1, 2, 3}, t1 = {4, 5, 6, 7};
  std::vector<float> batched(toks.size() * V);
  for (int32_t start = 0; start < 40; start += 13) {
    Batch b;
    const int32_t len = std::min(13, 40 - start);
    add_rows(b, t1, other, std::min(start, 32), start < 33 ? std::min(len, 33 - start) : 0, 1);
    add_rows(b, t0, toks, start, len, 0);
    std::vector<float> logits(b.logits_rows.size() * V);
    ASSERT_TRUE(m->forward(b, *kv, logits.data()).is_ok());
    const size_t skip = b.sequences[0].n_new;
    std::copy(logits.begin() + skip * V, logits.end(), batched.begin() + start * V);
  }
  EXPECT_EQ(batched, whole);
}

// A snapshot after 16 tokens, restored into another slot, continues exactly as the sequence
// that computed all 40 (its K/V blocks shared as a prefix cache shares them).
TEST_P(HybridSynth, ResumesFromASnapshot) {
  auto m = load("synth:" + GetParam());
  const int32_t V = m->config().n_vocab;
  const auto toks = tokens(40, 4);
  auto kv = cache(m->config(), 4, 3);
  std::vector<int32_t> table = {0, 1, 2, 3};
  Batch b;
  add_rows(b, table, toks, 0, 24, 0);
  b.state_snapshots.push_back({0, 16, 2});
  std::vector<float> first(24 * V);
  ASSERT_TRUE(m->forward(b, *kv, first.data()).is_ok());
  const std::vector<float> whole = run(*m, *kv, toks, 64);
  // Resume in slot 1 from the snapshot: positions 16-39 again.
  Batch r;
  add_rows(r, table, toks, 16, 24, 1);
  r.state_restores.push_back({2, 1});
  std::vector<float> resumed(24 * V);
  ASSERT_TRUE(m->forward(r, *kv, resumed.data()).is_ok());
  EXPECT_TRUE(std::equal(resumed.begin(), resumed.end(), whole.begin() + 16 * V));
  EXPECT_TRUE(std::equal(first.begin(), first.end(), whole.begin()));
}

TEST_P(HybridSynth, RejectsSequencesWithoutAStateSlot) {
  auto m = load("synth:" + GetParam());
  auto kv = cache(m->config(), 4, 1);
  std::vector<int32_t> table = {0, 1, 2, 3};
  const auto toks = tokens(4, 5);
  std::vector<float> logits(4 * m->config().n_vocab);
  for (int32_t slot : {-1, 1}) {
    Batch b;
    add_rows(b, table, toks, 0, 4, slot);
    EXPECT_FALSE(m->forward(b, *kv, logits.data()).is_ok()) << slot;
  }
  Batch b;
  add_rows(b, table, toks, 0, 4, 0);
  b.state_restores.push_back({0, 3});
  EXPECT_FALSE(m->forward(b, *kv, logits.data()).is_ok());
}

// The scratch a step of 48 rows over 48 positions allocates is what scratch_bytes plans for it
// (within 1%; the experts' task scratch bounded by the plan).
TEST_P(HybridSynth, ScratchIsWhatThePlanSays) {
  auto m = load("synth:" + GetParam());
  auto kv = cache(m->config(), 4, 1);
  run(*m, *kv, tokens(48, 6), 48);
  const uint64_t planned = CpuModel::scratch_bytes(m->config(), 48, 48, 48, 2);
  const uint64_t used = m->memory_use().scratch;
  if (m->config().moe.n_expert == 0) {  // within 1%, as MemoryPlanMatches
    EXPECT_NEAR(static_cast<double>(used) / static_cast<double>(planned), 1.0, 0.01)
        << "used " << used << ", planned " << planned;
  } else {
    EXPECT_LE(used, planned);
    EXPECT_GT(static_cast<double>(used), 0.9 * static_cast<double>(planned));
  }
}

INSTANTIATE_TEST_SUITE_P(Presets, HybridSynth,
                         ::testing::Values("tiny-qwen35", "tiny-qwen3next",
                                           "tiny-qwen3next@qwen35moe"));

}  // namespace
}  // namespace loom
