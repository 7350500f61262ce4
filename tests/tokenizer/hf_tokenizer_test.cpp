// Hugging Face tokenizer.json path, against ids the HF `tokenizers` library produced.
#include <gtest/gtest.h>

#include "loom/tokenizer.h"
#include "tokenizer/fixture_util.h"

namespace loom {
namespace {

const std::string kQwen3Dir = std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3";

const Tokenizer& qwen3() {
  static std::unique_ptr<Tokenizer> t = [] {
    auto r = Tokenizer::from_hf_dir(kQwen3Dir);
    EXPECT_TRUE(r.is_ok()) << r.status().message();
    return r.is_ok() ? std::move(r).value() : nullptr;
  }();
  return *t;
}

TEST(HfTokenizer, Qwen3FixtureCases) {
  auto cases = testing::read_cases(kQwen3Dir + "/cases.inp");
  auto ids = testing::read_ids(kQwen3Dir + "/cases.out");
  ASSERT_EQ(cases.size(), ids.size());
  ASSERT_GT(cases.size(), 40u);
  const Tokenizer& t = qwen3();
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ(t.encode(cases[i], false, false), ids[i]) << "case " << i << ": '" << cases[i] << "'";
    EXPECT_EQ(t.decode(ids[i]), cases[i]) << "case " << i;
  }
}

TEST(HfTokenizer, Qwen3SpecialTokens) {
  const Tokenizer& t = qwen3();
  EXPECT_EQ(t.n_vocab(), 151669);
  ASSERT_TRUE(t.find_token("<|im_start|>").has_value());
  const int32_t im_start = *t.find_token("<|im_start|>");
  const int32_t im_end = *t.find_token("<|im_end|>");
  EXPECT_EQ(im_start, 151644);
  EXPECT_EQ(t.eos(), im_end);  // tokenizer_config.json eos_token
  EXPECT_TRUE(t.is_eog(im_end));
  EXPECT_TRUE(t.is_eog(151643));  // <|endoftext|>
  EXPECT_FALSE(t.is_eog(im_start));
  EXPECT_EQ(t.bos(), -1);
  EXPECT_FALSE(t.add_bos());

  auto parsed = t.encode("<|im_start|>user", false, true);
  ASSERT_EQ(parsed.size(), 2u);
  EXPECT_EQ(parsed[0], im_start);
  EXPECT_EQ(t.token_text(parsed[1]), "user");
  auto plain = t.encode("<|im_start|>user", false, false);
  EXPECT_GT(plain.size(), 2u);
  for (int32_t id : plain) EXPECT_NE(id, im_start);
  EXPECT_EQ(t.decode(plain), "<|im_start|>user");
  EXPECT_EQ(t.decode(parsed), "<|im_start|>user");
  EXPECT_EQ(t.decode(parsed, /*skip_special=*/true), "user");
  // add_special does nothing for a vocabulary that adds neither BOS nor EOS.
  EXPECT_EQ(t.encode("hi", true, false), t.encode("hi", false, false));
}

}  // namespace
}  // namespace loom
