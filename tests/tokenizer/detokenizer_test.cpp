// IncrementalDetokenizer: streaming output is always valid UTF-8 and adds up to decode().
#include <gtest/gtest.h>

#include <random>

#include "format/gguf.h"
#include "loom/tokenizer.h"
#include "tokenizer/unicode.h"

namespace loom {
namespace {

std::unique_ptr<Tokenizer> load_vocab(const std::string& name) {
  auto t = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-" + name + ".gguf");
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

bool valid_utf8(const std::string& s) {
  return tok::utf8_split(s).valid_prefix == s.size();
}

const char* const kTexts[] = {
    "🦙 llamas 🚀 and 😶‍🌫️ (multiple emojis concatenated) ✅",
    "日本語のテキスト、中文文本，한국어 텍스트 — mixed with ASCII.",
    "ied 4 ½ months: Führer ĉĝĥ ๛ ᐁᐃ 𝔘𝔫𝔦𝔠𝔬𝔡𝔢",
};

class Detok : public ::testing::TestWithParam<std::string> {};

TEST_P(Detok, StreamsValidUtf8) {
  auto t = load_vocab(GetParam());
  ASSERT_TRUE(t);
  for (const char* text : kTexts) {
    auto ids = t->encode(text, false, false);
    IncrementalDetokenizer d(*t);
    std::string streamed;
    size_t held_back = 0;
    for (int32_t id : ids) {
      std::string chunk = d.push(id);
      EXPECT_TRUE(valid_utf8(chunk)) << "token " << id;
      if (d.pending_bytes() > 0) ++held_back;
      streamed += chunk;
    }
    streamed += d.finish();
    EXPECT_EQ(streamed, t->decode(ids));
    EXPECT_EQ(streamed, text);
    // Byte-level vocabularies split emoji across tokens: something must have been held back.
    if (GetParam() == "gpt-2") {
      EXPECT_GT(held_back, 0u);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Vocabs, Detok, ::testing::Values("gpt-2", "qwen3", "llama-spm"),
                         [](const auto& info) {
                           std::string s = info.param;
                           for (char& c : s) {
                             if (c == '-') c = '_';
                           }
                           return s;
                         });

TEST(Detok, RandomIdsNeverYieldInvalidUtf8) {
  auto t = load_vocab("gpt-2");
  ASSERT_TRUE(t);
  std::mt19937 rng(1234);
  std::uniform_int_distribution<int32_t> pick(0, t->n_vocab() - 1);
  for (int round = 0; round < 20; ++round) {
    IncrementalDetokenizer d(*t);
    std::string all;
    for (int i = 0; i < 200; ++i) {
      // Bias towards the single-byte tokens so that split sequences are frequent.
      int32_t id = (i % 3 == 0) ? pick(rng) : static_cast<int32_t>(rng() % 256);
      std::string chunk = d.push(id);
      ASSERT_TRUE(valid_utf8(chunk));
      all += chunk;
    }
    all += d.finish();
    EXPECT_TRUE(valid_utf8(all));
  }
}

TEST(Detok, SkipSpecialAndHoldBack) {
  auto t = load_vocab("qwen3");
  ASSERT_TRUE(t);
  const int32_t im_end = *t->find_token("<|im_end|>");
  // "é" is two bytes; find a byte-level token for each half.
  const int32_t b0 = *t->find_token(tok::byte_to_unicode(0xC3));
  const int32_t b1 = *t->find_token(tok::byte_to_unicode(0xA9));
  IncrementalDetokenizer d(*t, /*skip_special=*/true);
  EXPECT_EQ(d.push(b0), "");
  EXPECT_EQ(d.pending_bytes(), 1u);
  EXPECT_EQ(d.push(im_end), "");  // skipped, and does not break the held-back character
  EXPECT_EQ(d.push(b1), "é");
  EXPECT_EQ(d.push(b0), "");
  EXPECT_EQ(d.finish(), "\xEF\xBF\xBD");  // a dangling lead byte ends as U+FFFD

  IncrementalDetokenizer keep(*t);
  EXPECT_EQ(keep.push(im_end), "<|im_end|>");
  // A lead byte followed by a byte that cannot continue it.
  EXPECT_EQ(keep.push(b0), "");
  EXPECT_EQ(keep.push(*t->find_token("a")),
            "\xEF\xBF\xBD"
            "a");
}

TEST(Detok, SpmDropsOnlyTheFirstSpacePrefix) {
  auto t = load_vocab("llama-spm");
  ASSERT_TRUE(t);
  auto ids = t->encode("Hello world", true, false);
  IncrementalDetokenizer d(*t, true);
  std::string s;
  for (int32_t id : ids) s += d.push(id);
  EXPECT_EQ(s, "Hello world");
}

}  // namespace
}  // namespace loom
