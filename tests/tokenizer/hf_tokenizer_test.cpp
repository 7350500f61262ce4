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

// A tokenizer.json whose vocab holds "a", "b" and `extra` (its id), with `added` as its
// added_tokens and `pre` as its pre_tokenizer.
std::string tiny_json(const std::string& extra, const std::string& added = "[]",
                      const std::string& pre = "null") {
  return R"({"model": {"type": "BPE", "vocab": {"a": 0, "b": 1, )" + extra +
         R"(}, "merges": []}, "added_tokens": )" + added + R"(, "pre_tokenizer": )" + pre + "}";
}

void expect_error(const std::string& json, const std::string& fragment) {
  auto t = Tokenizer::from_hf_json(json, "");
  ASSERT_FALSE(t.is_ok()) << json;
  EXPECT_EQ(t.status().code(), StatusCode::kInvalidFile) << t.status().message();
  EXPECT_NE(t.status().message().find(fragment), std::string::npos) << t.status().message();
}

// The token table is sized by the largest id: an id far beyond the tokens the file defines
// is refused by name instead of allocating gigabytes (or throwing bad_alloc).
TEST(HfTokenizer, HugeIdsAreRefused) {
  expect_error(tiny_json(R"("zzz": 1000000000)"), "vocab entry 'zzz' has id 1000000000");
  expect_error(tiny_json(R"("zzz": 100000000)"), "ids must be numbered densely");
  expect_error(tiny_json(R"("c": 2)", R"([{"id": 1000000000, "content": "<x>"}])"),
               "added token '<x>' has id 1000000000");
  expect_error(tiny_json(R"("c": 2)", R"([{"id": -1, "content": "<x>"}])"), "bad id -1");
  expect_error(tiny_json(R"("c": "two")"), "vocab entry 'c' has a bad id");
  // A few holes (reserved slots) still load.
  auto t = Tokenizer::from_hf_json(tiny_json(R"("c": 40)"), "");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ((*t)->n_vocab(), 41);
}

TEST(HfTokenizer, MalformedStructureIsNamed) {
  expect_error("[]", "tokenizer.json is not a JSON object");
  expect_error("{\"model\": ", "tokenizer.json is not valid JSON");
  expect_error(tiny_json(R"("c": 2)", "[]", "5"), "pre_tokenizer must be an object");
  expect_error(tiny_json(R"("c": 2)", "[]", "[]"), "pre_tokenizer must be an object");
  expect_error(tiny_json(R"("c": 2)", "{}"), "added_tokens must be a list");
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  expect_error(tiny_json(R"("c": 2)", "[]", deep), "nests arrays and objects deeper than 128");
}

}  // namespace
}  // namespace loom
