// A draft model's vocabulary against the target's, as llama.cpp checks it: sizes at most 128
// apart (padded embeddings), and the same token text from id 5 up to the smaller size where
// both tokenizers are known. A padded draft then never proposes a token the target does not
// have, and a target's token past the draft's vocabulary does not fail the draft's step.
// --spec-draft-p-min's measure of how sure a draft is (draft_confidence) against a sort of the
// whole row, and the proposals it cuts.
#include "spec/draft_model.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "model/tiny_model.h"
#include "spec/sampled_proposal.h"

namespace loom::spec {
namespace {

std::unique_ptr<Tokenizer> vocab_fixture(const std::string& name) {
  auto t = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/vocab/" + name);
  EXPECT_TRUE(t.is_ok()) << name << ": " << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

TEST(DraftVocabulary, SizesMayDifferByPaddingAlone) {
  // Qwen2.5-7B's embedding has 152064 rows, Qwen2.5-0.5B's 151936: one tokenizer.
  EXPECT_TRUE(check_draft_vocabulary(151936, 152064).is_ok());
  EXPECT_TRUE(check_draft_vocabulary(152064, 151936).is_ok());
  EXPECT_TRUE(check_draft_vocabulary(512, 512).is_ok());
  for (auto [draft, target] :
       {std::pair{151936, 152065}, std::pair{152065, 151936}, std::pair{512, 151936}}) {
    Status st = check_draft_vocabulary(draft, target);
    ASSERT_FALSE(st.is_ok()) << draft << " " << target;
    EXPECT_NE(st.message().find("the draft model's vocabulary has " + std::to_string(draft) +
                                " tokens but the target's has " + std::to_string(target)),
              std::string::npos)
        << st.message();
  }
}

// Phi-3's vocabulary is Llama 2's (32000) plus 64 added tokens: a draft for it. Qwen3's and
// DeepSeek-LLM's, padded to one size, first differ at id 124.
TEST(DraftVocabulary, TokenTextsAreCompared) {
  auto llama = vocab_fixture("ggml-vocab-llama-spm.gguf");
  auto phi3 = vocab_fixture("ggml-vocab-phi-3.gguf");
  auto qwen3 = vocab_fixture("ggml-vocab-qwen3.gguf");
  auto deepseek = vocab_fixture("ggml-vocab-deepseek-llm.gguf");
  ASSERT_TRUE(llama && phi3 && qwen3 && deepseek);
  EXPECT_TRUE(check_draft_vocabulary(32064, 32000, phi3.get(), llama.get()).is_ok());
  EXPECT_TRUE(check_draft_vocabulary(32000, 32064, llama.get(), phi3.get()).is_ok());
  Status st = check_draft_vocabulary(151936, 151936, deepseek.get(), qwen3.get());
  ASSERT_FALSE(st.is_ok());
  EXPECT_NE(st.message().find("differs from the target's at token 124: the target's is \"À\", "
                              "the draft's \"Â\""),
            std::string::npos)
      << st.message();
  // Without both tokenizers only the sizes can be compared.
  EXPECT_TRUE(check_draft_vocabulary(151936, 151936, deepseek.get(), nullptr).is_ok());
  EXPECT_TRUE(check_draft_vocabulary(151936, 151936, nullptr, qwen3.get()).is_ok());
}

// The reference: the row's finite logits sorted, the softmax of the 10 largest, its first.
double sorted_top10_confidence(std::vector<float> row) {
  row.erase(std::remove_if(row.begin(), row.end(), [](float l) { return !(l > -INFINITY); }),
            row.end());
  if (row.empty()) return 0.0;
  std::sort(row.begin(), row.end(), std::greater<float>());
  double sum = 0;
  for (size_t i = 0; i < std::min<size_t>(10, row.size()); ++i)
    sum += std::exp(static_cast<double>(row[i]) - row[0]);
  return 1.0 / sum;
}

TEST(DraftConfidence, IsTheSoftmaxOfTheTenBestLogits) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  for (int trial = 0; trial < 200; ++trial) {
    const size_t n = 1 + rng() % 300;
    std::vector<float> row(n);
    for (float& l : row) l = normal(rng);
    // Masked tokens (-inf), a NaN, and ties among the best.
    for (size_t i = 0; i < n / 5; ++i) row[rng() % n] = -INFINITY;
    if (trial % 3 == 0) row[rng() % n] = NAN;
    if (trial % 4 == 0 && n > 3) row[1] = row[2] = *std::max_element(row.begin(), row.end());
    EXPECT_NEAR(draft_confidence(row), sorted_top10_confidence(row), 1e-6) << "trial " << trial;
  }
  EXPECT_EQ(draft_confidence(std::vector<float>(5, -INFINITY)), 0.0f);
  EXPECT_FLOAT_EQ(draft_confidence(std::vector<float>{3.0f}), 1.0f);
  EXPECT_FLOAT_EQ(draft_confidence(std::vector<float>(40, 1.5f)), 0.1f);  // 10 ties
  EXPECT_FLOAT_EQ(draft_confidence(std::vector<float>{0.0f, 0.0f, -INFINITY}), 0.5f);
}

class DraftProposals : public ::testing::Test {
 protected:
  static constexpr int32_t kBlockSize = 16;
  static constexpr int32_t kK = 4;

  // A proposer over a random 97-token model for a target of `target_vocab` tokens.
  static std::unique_ptr<DraftModelProposer> proposer(int32_t target_vocab) {
    test::TinySpec spec;  // n_vocab 97
    auto file = GgufFile::parse_bytes(test::build_tiny_gguf(spec));
    EXPECT_TRUE(file.is_ok());
    auto model = Model::from_gguf(std::move(*file), {});
    EXPECT_TRUE(model.is_ok()) << model.status().message();
    auto p = DraftModelProposer::create(std::move(*model), target_vocab, /*num_blocks=*/16,
                                        kBlockSize, Dtype::kF32, /*max_seqs=*/8, kK);
    EXPECT_TRUE(p.is_ok()) << p.status().message();
    return p.is_ok() ? std::move(p).value() : nullptr;
  }

  // Every sequence's proposals after `prompts` (each its own blocks, two of them): k, or
  // fewer where p_min cut them.
  static Result<std::vector<std::vector<int32_t>>> propose(
      DraftModelProposer& p, const std::vector<std::vector<int32_t>>& prompts) {
    const size_t n = prompts.size();
    std::vector<std::vector<int32_t>> tables(n), drafts(n, std::vector<int32_t>(kK, -1));
    std::vector<int32_t> computed(n, 0);
    std::vector<DraftSeq> seqs;
    for (size_t i = 0; i < n; ++i) {
      tables[i] = {static_cast<int32_t>(2 * i), static_cast<int32_t>(2 * i + 1)};
      seqs.push_back(
          {prompts[i], tables[i].data(), 2, static_cast<int64_t>(i), &computed[i], &drafts[i]});
    }
    LOOM_RETURN_IF_ERROR(p.fill(seqs));
    return drafts;
  }
};

// A draft padded past the target's vocabulary: its best token overall is often one the target
// does not have (41 of 97 here); it proposes its best token below the target's size instead.
TEST_F(DraftProposals, NeverPastTheTargetsVocabulary) {
  constexpr int32_t kTargetVocab = 56;
  auto p = proposer(kTargetVocab);
  ASSERT_TRUE(p);
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(test::random_tokens(5 + i, kTargetVocab, 100 + i));
  auto drafts = propose(*p, prompts);
  ASSERT_TRUE(drafts.is_ok()) << drafts.status().message();
  for (const std::vector<int32_t>& d : *drafts)
    for (int32_t t : d) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, kTargetVocab);
    }
}

// A target padded past the draft's vocabulary: a sequence holding one of those tokens (a raw
// token-id prompt can) still gets proposals, and the others in its step too.
TEST_F(DraftProposals, TargetTokensPastTheDraftsVocabularyDoNotFailTheStep) {
  auto p = proposer(/*target_vocab=*/97 + 64);
  ASSERT_TRUE(p);
  auto drafts = propose(*p, {{3, 150, 7, 160}, {4, 5, 6}});
  ASSERT_TRUE(drafts.is_ok()) << drafts.status().message();
  for (const std::vector<int32_t>& d : *drafts)
    for (int32_t t : d) {
      EXPECT_GE(t, 0);
      EXPECT_LT(t, 97);
    }
}

// --spec-draft-p-min: each sequence's proposals are a prefix of those without it, cut where
// the draft is less sure than p_min; at 1 there are none, just above 0 all of them.
TEST_F(DraftProposals, PMinCutsEachDraftToAPrefix) {
  constexpr int32_t kVocab = 97;
  std::vector<std::vector<int32_t>> prompts;
  for (int i = 0; i < 8; ++i) prompts.push_back(test::random_tokens(5 + i, kVocab, 300 + i));
  auto p = proposer(kVocab);
  ASSERT_TRUE(p);
  auto full = propose(*p, prompts);
  ASSERT_TRUE(full.is_ok()) << full.status().message();
  size_t cut = 0;
  for (const float p_min : {1e-9f, 0.2f, 0.35f, 0.5f, 1.0f}) {
    auto q = proposer(kVocab);
    ASSERT_TRUE(q);
    q->set_p_min(p_min);
    auto drafts = propose(*q, prompts);
    ASSERT_TRUE(drafts.is_ok()) << drafts.status().message();
    for (size_t i = 0; i < prompts.size(); ++i) {
      const std::vector<int32_t>& d = (*drafts)[i];
      ASSERT_LE(d.size(), static_cast<size_t>(kK));
      EXPECT_TRUE(std::equal(d.begin(), d.end(), (*full)[i].begin())) << p_min << " seq " << i;
      if (p_min == 1e-9f) {
        EXPECT_EQ(d.size(), static_cast<size_t>(kK));
      }
      if (p_min == 1.0f) {
        EXPECT_TRUE(d.empty());
      }
      cut += p_min < 1.0f && d.size() < static_cast<size_t>(kK);
    }
  }
  EXPECT_GT(cut, 0u) << "no bound between 0 and 1 cut a draft";
}

}  // namespace
}  // namespace loom::spec
