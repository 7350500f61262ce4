// Batch invariance: a row's logits are bit-identical whichever other rows share its batch,
// however its prompt was chunked across calls, and whatever the thread count. The engine's
// tests (prefix caching, preemption, batching) rely on this exactness.
#include <gtest/gtest.h>

#include <cstring>

#include "model/model.h"
#include "model/tiny_model.h"

namespace loom {
namespace {

struct Seq {
  std::vector<int32_t> tokens;
  std::vector<int32_t> table;  // physical blocks
};

bool bit_equal(const float* a, const float* b, size_t n) {
  return std::memcmp(a, b, n * 4) == 0;
}

class BatchInvariance : public ::testing::TestWithParam<std::pair<std::string, Dtype>> {};

TEST_P(BatchInvariance, TogetherAloneAndChunkedAreBitIdentical) {
  auto [arch, type] = GetParam();
  auto bytes = test::build_tiny_gguf(test::tiny_spec(arch, type));
  auto file = GgufFile::parse_bytes(bytes);
  ASSERT_TRUE(file.is_ok());
  auto model = Model::from_gguf(*file, {2});
  ASSERT_TRUE(model.is_ok()) << model.status().message();
  Model& m = **model;
  const int32_t V = m.config().n_vocab;
  const int32_t bs = 4;

  // Four sequences of different lengths, each with its own scattered blocks.
  std::vector<Seq> seqs;
  const int lens[] = {13, 1, 22, 8};
  int32_t next_block = 0;
  for (int s = 0; s < 4; ++s) {
    Seq q;
    q.tokens = test::random_tokens(lens[s], V, 100 + s);
    for (int b = 0; b < (lens[s] + bs - 1) / bs; ++b) q.table.push_back(next_block++);
    seqs.push_back(q);
  }
  for (auto& q : seqs) std::reverse(q.table.begin(), q.table.end());  // non-contiguous order

  // (a) all four in one batch, every row's logits, with a KV cache of its own.
  auto kv_all = KvCache::create(m.config(), next_block, bs, Dtype::kF16).value();
  Batch b;
  std::vector<std::vector<float>> together(4);
  for (int s = 0; s < 4; ++s) {
    int32_t n = static_cast<int32_t>(seqs[s].tokens.size());
    b.sequences.push_back(
        {seqs[s].table.data(), static_cast<int32_t>(seqs[s].table.size()), 0, n, b.n_rows()});
    for (int32_t i = 0; i < n; ++i) {
      b.logits_rows.push_back(b.n_rows());
      b.tokens.push_back(seqs[s].tokens[i]);
      b.pos.push_back(i);
      b.seq.push_back(s);
    }
  }
  std::vector<float> all(b.logits_rows.size() * V);
  ASSERT_TRUE(m.forward(b, *kv_all, all.data()).is_ok());

  // (d) a decode step: every sequence's prompt but its last token first, then the last tokens
  // of all as one batch of single rows (the attention tasks split statically per thread). With
  // the four sequences twice over (copies in blocks of their own), each task takes all of a
  // sequence's KV heads and prepares its row itself (CpuModel::plan_attention).
  for (const int copies : {1, 2}) {
    auto kv = KvCache::create(m.config(), copies * next_block, bs, Dtype::kF16).value();
    std::vector<std::vector<int32_t>> tables;
    for (int c = 0; c < copies; ++c)
      for (int s = 0; s < 4; ++s) {
        tables.push_back(seqs[s].table);
        for (int32_t& blk : tables.back()) blk += c * next_block;
      }
    Batch pre, step;
    std::vector<float> scratch_logits, last(4 * copies * V);
    for (int cs = 0; cs < 4 * copies; ++cs) {
      const Seq& q = seqs[cs % 4];
      const int32_t n = static_cast<int32_t>(q.tokens.size());
      const int32_t* table = tables[cs].data();
      const int32_t nb = static_cast<int32_t>(tables[cs].size());
      if (n > 1) {
        pre.sequences.push_back({table, nb, 0, n - 1, pre.n_rows()});
        for (int32_t i = 0; i + 1 < n; ++i) {
          pre.tokens.push_back(q.tokens[i]);
          pre.pos.push_back(i);
          pre.seq.push_back(static_cast<int32_t>(pre.sequences.size()) - 1);
        }
      }
      step.sequences.push_back({table, nb, n - 1, 1, step.n_rows()});
      step.logits_rows.push_back(step.n_rows());
      step.tokens.push_back(q.tokens[n - 1]);
      step.pos.push_back(n - 1);
      step.seq.push_back(cs);
    }
    ASSERT_TRUE(m.forward(pre, *kv, scratch_logits.data()).is_ok());
    ASSERT_TRUE(m.forward(step, *kv, last.data()).is_ok());
    for (int cs = 0; cs < 4 * copies; ++cs) {
      size_t end = 0;
      for (int s = 0; s <= cs % 4; ++s) end += seqs[s].tokens.size();
      EXPECT_TRUE(bit_equal(&last[cs * V], &all[(end - 1) * V], V))
          << "decode row of seq " << cs << ", " << 4 * copies << " sequences";
    }
  }
  // (e) a verify-shaped step: each sequence's last (up to) 5 tokens as one step of several rows
  // per sequence, after the rest; every sequence fits one attention task per KV head, so the
  // tasks are split statically per thread with prefetch, as in decode (CpuModel::plan_attention).
  {
    auto kv = KvCache::create(m.config(), next_block, bs, Dtype::kF16).value();
    Batch pre, step;
    for (int s = 0; s < 4; ++s) {
      const Seq& q = seqs[s];
      const int32_t n = static_cast<int32_t>(q.tokens.size()), tail = std::min(n, 5);
      const int32_t nb = static_cast<int32_t>(q.table.size());
      if (n > tail) {
        pre.sequences.push_back({q.table.data(), nb, 0, n - tail, pre.n_rows()});
        for (int32_t i = 0; i < n - tail; ++i) {
          pre.tokens.push_back(q.tokens[i]);
          pre.pos.push_back(i);
          pre.seq.push_back(static_cast<int32_t>(pre.sequences.size()) - 1);
        }
      }
      step.sequences.push_back({q.table.data(), nb, n - tail, tail, step.n_rows()});
      for (int32_t i = n - tail; i < n; ++i) {
        step.logits_rows.push_back(step.n_rows());
        step.tokens.push_back(q.tokens[i]);
        step.pos.push_back(i);
        step.seq.push_back(s);
      }
    }
    std::vector<float> scratch_logits, got(step.logits_rows.size() * V);
    ASSERT_TRUE(m.forward(pre, *kv, scratch_logits.data()).is_ok());
    ASSERT_TRUE(m.forward(step, *kv, got.data()).is_ok());
    size_t end = 0, row = 0;
    for (int s = 0; s < 4; ++s) {
      const size_t n = seqs[s].tokens.size(), tail = std::min<size_t>(n, 5);
      end += n;
      for (size_t i = end - tail; i < end; ++i, ++row)
        EXPECT_TRUE(bit_equal(&got[row * V], &all[i * V], V))
            << "verify row " << i << " of seq " << s;
    }
  }

  // (b) each alone, (c) each chunked by 1 and by 7, with a different model thread count.
  auto m1 = Model::from_gguf(*file, {1}).value();
  size_t row = 0;
  for (int s = 0; s < 4; ++s) {
    const size_t n = seqs[s].tokens.size();
    const float* want = &all[row * V];
    row += n;
    for (int chunk : {64, 1, 7}) {
      for (Model* mm : {&m, m1.get()}) {
        auto kv = KvCache::create(m.config(), next_block, bs, Dtype::kF16).value();
        std::vector<float> got(n * V);
        Batch cb;
        for (size_t start = 0; start < n; start += chunk) {
          const size_t len = std::min<size_t>(chunk, n - start);
          cb.clear();
          cb.sequences.push_back({seqs[s].table.data(), static_cast<int32_t>(seqs[s].table.size()),
                                  static_cast<int32_t>(start), static_cast<int32_t>(len), 0});
          for (size_t i = 0; i < len; ++i) {
            cb.tokens.push_back(seqs[s].tokens[start + i]);
            cb.pos.push_back(static_cast<int32_t>(start + i));
            cb.seq.push_back(0);
            cb.logits_rows.push_back(static_cast<int32_t>(i));
          }
          ASSERT_TRUE(mm->forward(cb, *kv, &got[start * V]).is_ok());
        }
        EXPECT_TRUE(bit_equal(got.data(), want, n * V))
            << "seq " << s << " chunk " << chunk << " threads " << mm->thread_pool().size()
            << " max rel diff " << test::rel_err(got.data(), want, n * V);
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(All, BatchInvariance,
                         ::testing::Values(std::pair{std::string("llama"), Dtype::kF32},
                                           std::pair{std::string("qwen2"), Dtype::kQ8_0},
                                           std::pair{std::string("qwen3"), Dtype::kQ4_K}),
                         [](const auto& info) {
                           return info.param.first + "_" +
                                  std::string(dtype_name(info.param.second));
                         });

}  // namespace
}  // namespace loom
