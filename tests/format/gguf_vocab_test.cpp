// Real GGUF files: llama.cpp's vocabulary-only models in tests/data/vocab.
#include <gtest/gtest.h>

#include <filesystem>
#include <map>

#include "format/gguf.h"

namespace loom {
namespace {

std::vector<std::string> vocab_files() {
  std::vector<std::string> out;
  for (const auto& e : std::filesystem::directory_iterator(std::string(LOOM_TEST_DATA) + "/vocab"))
    if (e.path().extension() == ".gguf") out.push_back(e.path().string());
  std::sort(out.begin(), out.end());
  return out;
}

TEST(GgufVocab, EveryFileOpens) {
  const std::vector<std::string> files = vocab_files();
  ASSERT_GE(files.size(), 6u);
  for (const std::string& path : files) {
    SCOPED_TRACE(path);
    auto f = GgufFile::open(path);
    ASSERT_TRUE(f.is_ok()) << f.status().message();
    EXPECT_TRUE(f->version() == 2 || f->version() == 3);
    EXPECT_TRUE(f->tensors().empty());  // vocab-only files
    std::optional<std::string> arch = f->get_string("general.architecture");
    ASSERT_TRUE(arch.has_value());
    EXPECT_FALSE(arch->empty());
    ASSERT_TRUE(f->get_string("tokenizer.ggml.model").has_value());

    const GgufValue* tokens = f->find("tokenizer.ggml.tokens");
    ASSERT_NE(tokens, nullptr);
    ASSERT_EQ(tokens->type(), GgufType::kArray);
    ASSERT_EQ(tokens->array_type(), GgufType::kString);
    const std::vector<std::string>& toks = *tokens->as_string_array();
    EXPECT_GT(toks.size(), 30000u);
    EXPECT_LT(toks.size(), 300000u);
    size_t empty = 0;
    for (const std::string& t : toks) empty += t.empty();
    EXPECT_LT(empty, 3u);  // real vocabularies have (almost) no empty tokens

    if (const GgufValue* types = f->find("tokenizer.ggml.token_type")) {
      ASSERT_NE(types->as_int_array(), nullptr);
      EXPECT_EQ(types->array_size(), toks.size());
    }
    if (const GgufValue* scores = f->find("tokenizer.ggml.scores")) {
      ASSERT_NE(scores->as_float_array(), nullptr);
      EXPECT_EQ(scores->array_size(), toks.size());
    }
    if (std::optional<int64_t> eos = f->get_int("tokenizer.ggml.eos_token_id")) {
      EXPECT_GE(*eos, 0);
      EXPECT_LT(*eos, static_cast<int64_t>(toks.size()));
    }
  }
}

// Facts about two well-known vocabularies, known independently of any GGUF reader.
TEST(GgufVocab, KnownVocabularies) {
  auto gpt2 = GgufFile::open(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-gpt-2.gguf");
  ASSERT_TRUE(gpt2.is_ok()) << gpt2.status().message();
  EXPECT_EQ(gpt2->get_string("general.architecture"), "gpt2");
  const auto& g = *gpt2->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_EQ(g.size(), 50257u);
  EXPECT_EQ(g[0], "!");
  EXPECT_EQ(g[50256], "<|endoftext|>");
  EXPECT_EQ(gpt2->get_int("tokenizer.ggml.eos_token_id"), 50256);
  const GgufValue* merges = gpt2->find("tokenizer.ggml.merges");
  ASSERT_NE(merges, nullptr);
  EXPECT_EQ(merges->array_size(), 50000u);

  auto spm = GgufFile::open(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-llama-spm.gguf");
  ASSERT_TRUE(spm.is_ok()) << spm.status().message();
  EXPECT_EQ(spm->get_string("tokenizer.ggml.model"), "llama");
  const auto& s = *spm->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_EQ(s.size(), 32000u);
  EXPECT_EQ(s[0], "<unk>");
  EXPECT_EQ(s[1], "<s>");
  EXPECT_EQ(s[2], "</s>");
  EXPECT_EQ(s[13], "<0x0A>");
  EXPECT_EQ(spm->get_int("tokenizer.ggml.bos_token_id"), 1);
}

}  // namespace
}  // namespace loom
