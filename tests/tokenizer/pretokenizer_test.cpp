// Pre-tokenizer splits, the named regex sets, merge algorithms on a hand-made vocabulary, and
// loader errors.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include <chrono>

#include "format/gguf.h"
#include "loom/tokenizer.h"
#include "tokenizer/unicode.h"

namespace loom::tok {
namespace {

std::vector<std::string> split(const std::vector<PreSplit>& s, std::string_view text) {
  auto p = PreTokenizer::create(s);
  EXPECT_TRUE(p.is_ok()) << p.status().message();
  std::vector<std::string_view> out;
  p->split(text, &out);
  return {out.begin(), out.end()};
}

using V = std::vector<std::string>;

TEST(PreTokenizer, Behaviors) {
  EXPECT_EQ(split({{"-", SplitBehavior::kIsolated}}, "the-final--countdown"),
            (V{"the", "-", "final", "-", "-", "countdown"}));
  EXPECT_EQ(split({{"-", SplitBehavior::kRemoved}}, "the-final--countdown"),
            (V{"the", "final", "countdown"}));
  EXPECT_EQ(split({{"-", SplitBehavior::kMergedWithPrevious}}, "the-final--countdown"),
            (V{"the-", "final-", "-", "countdown"}));
  EXPECT_EQ(split({{"-", SplitBehavior::kMergedWithNext}}, "the-final--countdown"),
            (V{"the", "-final", "-", "-countdown"}));
  // invert: the regex describes the pieces to keep.
  EXPECT_EQ(split({{"\\w+", SplitBehavior::kRemoved, false, true}}, "ab, cd!"), (V{"ab", "cd"}));
  // literal patterns are not regexes.
  EXPECT_EQ(split({{".", SplitBehavior::kIsolated, true}}, "a.b"), (V{"a", ".", "b"}));
}

TEST(PreTokenizer, Gpt2AndSequences) {
  std::vector<PreSplit> gpt2;
  bool im = false;
  ASSERT_TRUE(pre_splits_for_name("gpt-2", &gpt2, &im));
  EXPECT_EQ(split(gpt2, "Hello world's  3.14 ½ 🦙!"),
            (V{"Hello", " world", "'s", " ", " 3", ".", "14", " ½", " 🦙!"}));
  std::vector<PreSplit> llama3;
  ASSERT_TRUE(pre_splits_for_name("llama-bpe", &llama3, &im));
  EXPECT_TRUE(im);
  EXPECT_EQ(split(llama3, "12345 abc\n\n  x"), (V{"123", "45", " abc", "\n\n", " ", " x"}));
  std::vector<PreSplit> falcon;
  ASSERT_TRUE(pre_splits_for_name("falcon", &falcon, &im));
  EXPECT_EQ(split(falcon, "a+b 12345"), (V{"a", "+", "b", " ", "123", "45"}));
}

// o200k ("gpt-4o": gpt-oss): a capitalised word stays whole with its contraction, camel case
// splits before a capital that starts a lower-case run, digits in threes without a space, a
// punctuation run takes the newlines after it.
TEST(PreTokenizer, O200kSplitsAsTiktoken) {
  std::vector<PreSplit> o200k;
  bool im = true;
  ASSERT_TRUE(pre_splits_for_name("gpt-4o", &o200k, &im));
  EXPECT_FALSE(im);
  EXPECT_EQ(split(o200k, "Hello World's HTTPServer 12345!\n\n  x"),
            (V{"Hello", " World's", " HTTPServer", " ", "123", "45", "!\n\n", " ", " x"}));
  EXPECT_EQ(split(o200k, "camelCase don'T"), (V{"camel", "Case", " don'T"}));
}

TEST(PreTokenizer, EveryNamedSetCompilesAndCoversText) {
  const std::string text = "Hello, y'all! 3333 ½ 世界 한국어 Ωmega\n\t x  ";
  for (const char* name : {"default", "gpt-2", "llama3", "llama-bpe", "qwen2", "deepseek-llm",
                           "deepseek-coder", "falcon", "starcoder", "refact", "mpt", "gpt-neox",
                           "command-r", "olmo", "viking", "gpt-4o"}) {
    std::vector<PreSplit> s;
    bool im;
    ASSERT_TRUE(pre_splits_for_name(name, &s, &im)) << name;
    V pieces = split(s, text);
    std::string joined;
    for (const auto& p : pieces) {
      EXPECT_FALSE(p.empty()) << name;
      joined += p;
    }
    EXPECT_EQ(joined, text) << name;  // Isolated splits never lose or reorder text
  }
  std::vector<PreSplit> s;
  bool im;
  EXPECT_FALSE(pre_splits_for_name("no-such-pre", &s, &im));
}

TEST(PreTokenizer, BadRegexIsAnError) {
  auto p = PreTokenizer::create({PreSplit{"([a-"}});
  ASSERT_FALSE(p.is_ok());
  EXPECT_NE(p.status().message().find("does not compile"), std::string::npos);
}

TEST(PreTokenizer, InvalidUtf8DoesNotCrash) {
  std::vector<PreSplit> s;
  bool im;
  ASSERT_TRUE(pre_splits_for_name("qwen2", &s, &im));
  const std::string text = "ab\xFF\xC3 cd\xE2\x82";
  V pieces = split(s, text);
  std::string joined;
  for (const auto& p : pieces) joined += p;
  EXPECT_EQ(joined, text);
}

TEST(Unicode, ByteLevelTableRoundTrips) {
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  std::string enc;
  byte_level_encode(all, enc);
  EXPECT_EQ(byte_level_decode(enc), all);
  EXPECT_EQ(byte_to_unicode(' '), "\xC4\xA0");   // Ġ
  EXPECT_EQ(byte_to_unicode('\n'), "\xC4\x8A");  // Ċ
  EXPECT_EQ(byte_to_unicode('a'), "a");
}

// A tiny hand-made GGUF vocabulary exercises the loader paths and the merge algorithms on
// cases whose answers are known by construction.
std::shared_ptr<const std::vector<uint8_t>> tiny_gguf(const std::string& model, bool with_merges) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", model);
  std::vector<std::string> toks = {"<unk>", "<s>", "</s>",         "a",     "b", "c", "ab",
                                   "bc",    "abc", "\xE2\x96\x81", "<0x41>"};
  w.set("tokenizer.ggml.tokens", GgufValue::of_string_array(toks));
  std::vector<double> scores = {0, 0, 0, -1, -1, -1, -3, -2, -1, -1, 0};
  w.set("tokenizer.ggml.scores", GgufValue::of_float_array(GgufType::kF32, scores));
  std::vector<int64_t> types = {2, 3, 3, 1, 1, 1, 1, 1, 1, 1, 6};
  w.set("tokenizer.ggml.token_type", GgufValue::of_int_array(GgufType::kI32, types));
  w.set_bool("tokenizer.ggml.add_space_prefix", false);
  if (with_merges) {
    w.set("tokenizer.ggml.merges", GgufValue::of_string_array({"b c", "a b", "a bc"}));
    w.set_string("tokenizer.ggml.pre", "gpt-2");
  }
  return std::make_shared<const std::vector<uint8_t>>(w.to_bytes());
}

TEST(TinyVocab, SpmPrefersHigherScore) {
  auto g = GgufFile::parse_bytes(tiny_gguf("llama", false));
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto t = Tokenizer::from_gguf(*g);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  // bc (-2) beats ab (-3); then a+bc → abc.
  EXPECT_EQ((*t)->encode("abc", false, false), (std::vector<int32_t>{8}));
  EXPECT_EQ((*t)->encode("ab", false, false), (std::vector<int32_t>{6}));
  // 'A' is not a token: byte fallback to <0x41>; 'Z' has no byte token: <unk>.
  EXPECT_EQ((*t)->encode("aA", false, false), (std::vector<int32_t>{3, 10}));
  EXPECT_EQ((*t)->encode("Z", false, false), (std::vector<int32_t>{0}));
  EXPECT_EQ((*t)->decode(std::vector<int32_t>{3, 10}), "aA");
}

TEST(TinyVocab, BpeFollowsMergeRank) {
  auto g = GgufFile::parse_bytes(tiny_gguf("gpt2", true));
  ASSERT_TRUE(g.is_ok());
  auto t = Tokenizer::from_gguf(*g);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  // rank 0 "b c" first, then "a bc".
  EXPECT_EQ((*t)->encode("abc", false, false), (std::vector<int32_t>{8}));
  EXPECT_EQ((*t)->encode("abab", false, false), (std::vector<int32_t>{6, 6}));
  EXPECT_EQ((*t)->encode("cab", false, false), (std::vector<int32_t>{5, 6}));
}

TEST(TinyVocab, LoaderErrors) {
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "bert");
  w.set("tokenizer.ggml.tokens", GgufValue::of_string_array({"a"}));
  auto g = GgufFile::parse_bytes(std::make_shared<const std::vector<uint8_t>>(w.to_bytes()));
  ASSERT_TRUE(g.is_ok());
  auto t = Tokenizer::from_gguf(*g);
  ASSERT_FALSE(t.is_ok());
  EXPECT_EQ(t.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(t.status().message().find("bert"), std::string::npos);

  GgufWriter none;
  none.set_u32("general.alignment", 32);
  auto g2 = GgufFile::parse_bytes(std::make_shared<const std::vector<uint8_t>>(none.to_bytes()));
  ASSERT_TRUE(g2.is_ok());
  EXPECT_FALSE(Tokenizer::from_gguf(*g2).is_ok());

  EXPECT_FALSE(Tokenizer::from_hf_json("{not json", "").is_ok());
  auto uni =
      Tokenizer::from_hf_json(R"({"model": {"type": "Unigram", "vocab": [["a", 0.0]]}})", "");
  ASSERT_FALSE(uni.is_ok());
  EXPECT_EQ(uni.status().code(), StatusCode::kUnsupported);
  EXPECT_FALSE(Tokenizer::from_hf_dir("/nonexistent-dir").is_ok());
}

TEST(HfJson, MetaspaceBpeWithByteFallback) {
  // Llama-2-style tokenizer.json: Metaspace + BPE merges + byte fallback, BOS from config.
  const char* json = R"({
    "model": {"type": "BPE", "byte_fallback": true, "unk_token": "<unk>",
      "vocab": {"<unk>": 0, "<s>": 1, "</s>": 2, "<0x21>": 3, "▁": 4, "h": 5, "i": 6, "▁h": 7, "▁hi": 8},
      "merges": ["▁ h", ["▁h", "i"]]},
    "added_tokens": [{"id": 1, "content": "<s>", "special": true},
                     {"id": 2, "content": "</s>", "special": true}],
    "normalizer": null,
    "pre_tokenizer": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false},
    "decoder": {"type": "Metaspace", "replacement": "▁", "prepend_scheme": "first", "split": false}
  })";
  auto t = Tokenizer::from_hf_json(json, R"({"bos_token": "<s>", "add_bos_token": true})");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto ids = (*t)->encode("hi hi!", true, false);
  EXPECT_EQ(ids, (std::vector<int32_t>{1, 8, 8, 3}));
  EXPECT_EQ((*t)->decode(ids, true), "hi hi!");
  EXPECT_EQ((*t)->encode("</s>", false, true), (std::vector<int32_t>{2}));
}

TEST(Performance, TenKilobytesInMilliseconds) {
  auto t = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-qwen3.gguf");
  ASSERT_TRUE(t.is_ok());
  std::string text;
  while (text.size() < 10000)
    text += "The quick brown fox jumps over the lazy dog. 快速的棕色狐狸 🦊 3.14159\n";
  auto t0 = std::chrono::steady_clock::now();
  auto ids = (*t)->encode(text, false, false);
  double ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_EQ((*t)->decode(ids), text);
  EXPECT_LT(ms, 500.0) << "encoding 10 KB took " << ms << " ms";
  std::printf("encoded %zu bytes into %zu tokens in %.2f ms\n", text.size(), ids.size(), ms);
}

}  // namespace
}  // namespace loom::tok
