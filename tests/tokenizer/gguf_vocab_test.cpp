// GGUF vocabularies from llama.cpp's models/ggml-vocab-*.gguf against the ids llama.cpp's
// reference tokenizer produced (no BOS, special text not parsed).
#include <gtest/gtest.h>

#include "format/gguf.h"
#include "loom/tokenizer.h"
#include "tokenizer/fixture_util.h"

namespace loom {
namespace {

std::string vocab_path(const std::string& name) {
  return std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-" + name + ".gguf";
}

class GgufVocab : public ::testing::TestWithParam<std::string> {};

TEST_P(GgufVocab, FixtureCases) {
  const std::string path = vocab_path(GetParam());
  auto gguf = GgufFile::open(path);
  ASSERT_TRUE(gguf.is_ok()) << gguf.status().message();
  auto tr = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(tr.is_ok()) << tr.status().message();
  const Tokenizer& t = **tr;

  auto cases = testing::read_cases(path + ".inp");
  auto ids = testing::read_ids(path + ".out");
  ASSERT_EQ(cases.size(), ids.size());
  ASSERT_GT(cases.size(), 40u);
  int failures = 0;
  for (size_t i = 0; i < cases.size(); ++i) {
    auto got = t.encode(cases[i], false, false);
    if (got != ids[i]) ++failures;
    EXPECT_EQ(got, ids[i]) << "case " << i << ": '" << cases[i] << "'";
    // Every fixture vocabulary can represent all bytes, so decoding restores the text.
    EXPECT_EQ(t.decode(ids[i]), cases[i]) << "case " << i;
  }
  EXPECT_EQ(failures, 0);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, GgufVocab,
                         ::testing::Values("llama-spm", "phi-3", "gpt-2", "falcon", "deepseek-llm",
                                           "qwen3"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

TEST(GgufVocabLoad, LoadPicksGgufOrHfDirectory) {
  auto g = Tokenizer::load(vocab_path("qwen3"));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto h = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3");
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  const std::string text = "Grüße, 世界! <|im_start|>assistant\n  x = 3.14159;\t🦙";
  for (bool parse : {false, true}) {
    EXPECT_EQ((*g)->encode(text, false, parse), (*h)->encode(text, false, parse)) << parse;
  }
  EXPECT_EQ((*g)->n_vocab(), (*h)->n_vocab());
  EXPECT_EQ((*g)->find_token("<|im_end|>"), (*h)->find_token("<|im_end|>"));
  EXPECT_TRUE((*g)->is_eog(*(*g)->find_token("<|im_end|>")));

  auto missing = Tokenizer::load("/nonexistent/model.gguf");
  ASSERT_FALSE(missing.is_ok());
  EXPECT_NE(missing.status().message().find("/nonexistent/model.gguf"), std::string::npos);
}

TEST(GgufVocabLoad, SpmAddsBosAndSpacePrefix) {
  auto gguf = GgufFile::open(vocab_path("llama-spm"));
  ASSERT_TRUE(gguf.is_ok());
  auto t = Tokenizer::from_gguf(*gguf);
  ASSERT_TRUE(t.is_ok());
  EXPECT_EQ((*t)->bos(), 1);
  EXPECT_EQ((*t)->eos(), 2);
  EXPECT_TRUE((*t)->add_bos());
  auto with = (*t)->encode("Hello world", true, false);
  auto without = (*t)->encode("Hello world", false, false);
  ASSERT_EQ(with.size(), without.size() + 1);
  EXPECT_EQ(with[0], 1);
  EXPECT_EQ(std::vector<int32_t>(with.begin() + 1, with.end()), without);
  EXPECT_EQ((*t)->token_text(without[0]), "\xE2\x96\x81Hello");  // ▁Hello: space prefix
  // "</s>" is a control token: plain text unless parse_special.
  auto parsed = (*t)->encode("a</s>", false, true);
  EXPECT_EQ(parsed.back(), 2);
  auto plain = (*t)->encode("a</s>", false, false);
  EXPECT_NE(plain.back(), 2);
  EXPECT_EQ((*t)->decode(with, /*skip_special=*/true), "Hello world");
}

}  // namespace
}  // namespace loom
