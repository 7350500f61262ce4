// HF tokenizer → GGUF metadata: the exported vocabulary, read back through the GGUF loader,
// encodes the HF fixture cases to the ids the `tokenizers` library produced, and its tokens,
// types and pre name agree with llama.cpp's own conversion of the same tokenizer.
#include <gtest/gtest.h>

#include <memory>

#include "format/gguf.h"
#include "loom/tokenizer.h"
#include "tokenizer/fixture_util.h"
#include "tokenizer/gguf_export.h"

namespace loom {
namespace {

const std::string kQwen3Dir = std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3";

// The exported metadata as a parsed in-memory GGUF file.
struct Exported {
  tok::GgufTokenizerExport info;
  GgufFile gguf;
};

const Exported& qwen3_exported() {
  static std::unique_ptr<Exported> e = []() -> std::unique_ptr<Exported> {
    GgufWriter w;
    w.set_string("general.architecture", "qwen3");
    auto info = tok::export_hf_tokenizer(kQwen3Dir, &w);
    EXPECT_TRUE(info.is_ok()) << info.status().message();
    if (!info.is_ok()) return nullptr;
    auto bytes = std::make_shared<const std::vector<uint8_t>>(w.to_bytes());
    auto f = GgufFile::parse_bytes(bytes);
    EXPECT_TRUE(f.is_ok()) << f.status().message();
    if (!f.is_ok()) return nullptr;
    return std::make_unique<Exported>(Exported{std::move(info).value(), std::move(f).value()});
  }();
  return *e;
}

TEST(GgufExport, Qwen3Metadata) {
  const Exported& e = qwen3_exported();
  EXPECT_EQ(e.info.model, "gpt2");
  EXPECT_EQ(e.info.pre, "qwen2");
  EXPECT_EQ(e.info.n_tokens, 151669);
  EXPECT_TRUE(e.info.chat_template);
  EXPECT_EQ(e.gguf.get_string("tokenizer.ggml.model").value_or(""), "gpt2");
  EXPECT_EQ(e.gguf.get_string("tokenizer.ggml.pre").value_or(""), "qwen2");
  EXPECT_EQ(e.gguf.get_int("tokenizer.ggml.eos_token_id").value_or(-2), 151645);      // <|im_end|>
  EXPECT_EQ(e.gguf.get_int("tokenizer.ggml.padding_token_id").value_or(-2), 151643);  // <|endoftext|>
  EXPECT_FALSE(e.gguf.get_int("tokenizer.ggml.bos_token_id").has_value());           // bos_token null
  EXPECT_EQ(e.gguf.get_bool("tokenizer.ggml.add_bos_token"), std::optional<bool>(false));
  EXPECT_FALSE(e.gguf.find("tokenizer.ggml.scores"));
  auto tmpl = e.gguf.get_string("tokenizer.chat_template");
  ASSERT_TRUE(tmpl.has_value());
  EXPECT_NE(tmpl->find("<|im_start|>"), std::string::npos);
  // The general.* key set before the export is still there, first.
  EXPECT_EQ(e.gguf.metadata().front().first, "general.architecture");
}

// llama.cpp's convert_hf_to_gguf output for the same tokenizer is an independent reference
// for the token strings, their types (special added → control, other added → user_defined)
// and the pre name.
TEST(GgufExport, Qwen3MatchesLlamaCppVocab) {
  const Exported& e = qwen3_exported();
  auto ref = GgufFile::open(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-qwen3.gguf");
  ASSERT_TRUE(ref.is_ok()) << ref.status().message();
  EXPECT_EQ(e.gguf.get_string("tokenizer.ggml.pre"), ref->get_string("tokenizer.ggml.pre"));
  const auto* tokens = e.gguf.find("tokenizer.ggml.tokens")->as_string_array();
  const auto* ref_tokens = ref->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_TRUE(tokens && ref_tokens);
  ASSERT_EQ(tokens->size(), ref_tokens->size());
  const auto* types = e.gguf.find("tokenizer.ggml.token_type")->as_int_array();
  const auto* ref_types = ref->find("tokenizer.ggml.token_type")->as_int_array();
  ASSERT_TRUE(types && ref_types);
  int n_diff = 0;
  for (size_t i = 0; i < tokens->size() && n_diff < 10; ++i) {
    if ((*tokens)[i] != (*ref_tokens)[i] || (*types)[i] != (*ref_types)[i]) {
      ++n_diff;
      ADD_FAILURE() << "token " << i << ": '" << (*tokens)[i] << "' type " << (*types)[i] << " vs llama.cpp '"
                    << (*ref_tokens)[i] << "' type " << (*ref_types)[i];
    }
  }
  EXPECT_EQ(e.gguf.get_int("tokenizer.ggml.eos_token_id"), ref->get_int("tokenizer.ggml.eos_token_id"));
}

TEST(GgufExport, Qwen3CasesThroughGguf) {
  const Exported& e = qwen3_exported();
  auto t = Tokenizer::from_gguf(e.gguf);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  auto cases = testing::read_cases(kQwen3Dir + "/cases.inp");
  auto ids = testing::read_ids(kQwen3Dir + "/cases.out");
  ASSERT_EQ(cases.size(), ids.size());
  ASSERT_GT(cases.size(), 40u);
  for (size_t i = 0; i < cases.size(); ++i) {
    EXPECT_EQ((*t)->encode(cases[i], false, false), ids[i]) << "case " << i << ": '" << cases[i] << "'";
    EXPECT_EQ((*t)->decode(ids[i]), cases[i]) << "case " << i;
  }
}

TEST(GgufExport, Qwen3SpecialTokensThroughGguf) {
  const Exported& e = qwen3_exported();
  auto gt = Tokenizer::from_gguf(e.gguf);
  ASSERT_TRUE(gt.is_ok()) << gt.status().message();
  auto ht = Tokenizer::from_hf_dir(kQwen3Dir);
  ASSERT_TRUE(ht.is_ok()) << ht.status().message();
  const Tokenizer& g = **gt;
  const Tokenizer& h = **ht;
  EXPECT_EQ(g.n_vocab(), h.n_vocab());
  for (const char* s : {"<|im_start|>", "<|im_end|>", "<|endoftext|>"}) {
    ASSERT_TRUE(g.find_token(s).has_value()) << s;
    EXPECT_EQ(g.find_token(s), h.find_token(s)) << s;
    EXPECT_TRUE(g.is_control(*g.find_token(s))) << s;
  }
  EXPECT_EQ(*g.find_token("<|im_start|>"), 151644);
  EXPECT_EQ(g.eos(), h.eos());
  EXPECT_EQ(g.eos(), *g.find_token("<|im_end|>"));
  EXPECT_EQ(g.bos(), h.bos());
  EXPECT_EQ(g.pad(), h.pad());
  EXPECT_EQ(g.add_bos(), h.add_bos());
  EXPECT_EQ(g.add_eos(), h.add_eos());
  // <think> is a non-special added token: user_defined, so it matches without parse_special.
  ASSERT_TRUE(g.find_token("<think>").has_value());
  EXPECT_FALSE(g.is_control(*g.find_token("<think>")));
  const std::string chat = "<|im_start|>user\nHi <think>x</think> 12345 don't<|im_end|>\n";
  for (bool parse_special : {false, true}) {
    EXPECT_EQ(g.encode(chat, true, parse_special), h.encode(chat, true, parse_special)) << parse_special;
  }
  for (int32_t id = 0; id < g.n_vocab(); id += 997) EXPECT_EQ(g.is_eog(id), h.is_eog(id)) << id;
  EXPECT_TRUE(g.is_eog(151643));
}

TEST(GgufExport, UnknownPreTokenizerIsUnsupportedAndWritesNothing) {
  // A tiny byte-level BPE with a Split regex loom has no GGUF name for.
  const std::string tj = R"({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": ["a b"]},
    "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
      {"type": "Split", "pattern": {"Regex": "[ab]{1,2}"}, "behavior": "Isolated", "invert": false},
      {"type": "ByteLevel", "add_prefix_space": false, "use_regex": false}]}
  })";
  GgufWriter w;
  auto r = tok::export_hf_tokenizer_json(tj, "", "", &w);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kUnsupported);
  EXPECT_NE(r.status().message().find("[ab]{1,2}"), std::string::npos) << r.status().message();
  auto f = GgufFile::parse_bytes(std::make_shared<const std::vector<uint8_t>>(w.to_bytes()));
  ASSERT_TRUE(f.is_ok());
  EXPECT_TRUE(f->metadata().empty());

  // The same vocabulary with GPT-2's built-in regex exports as "gpt-2" and round-trips.
  const std::string gpt2 = R"({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2, "Ġ": 3, "Ġab": 4}, "merges": [["a", "b"], ["Ġ", "ab"]]},
    "added_tokens": [{"id": 5, "content": "<eos>", "special": true}, {"id": 7, "content": "<x>", "special": false}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}
  })";
  GgufWriter w2;
  auto r2 = tok::export_hf_tokenizer_json(gpt2, R"({"eos_token": "<eos>", "chat_template": [
      {"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]})", "", &w2);
  ASSERT_TRUE(r2.is_ok()) << r2.status().message();
  EXPECT_EQ(r2->pre, "gpt-2");
  auto f2 = GgufFile::parse_bytes(std::make_shared<const std::vector<uint8_t>>(w2.to_bytes()));
  ASSERT_TRUE(f2.is_ok());
  EXPECT_EQ(f2->get_string("tokenizer.chat_template").value_or(""), "D");
  EXPECT_EQ(f2->get_string("tokenizer.chat_template.tool_use").value_or(""), "T");
  const auto* toks = f2->find("tokenizer.ggml.tokens")->as_string_array();
  ASSERT_EQ(toks->size(), 8u);
  EXPECT_EQ((*toks)[6], "[PAD6]");  // a hole in the HF ids
  const auto* types = f2->find("tokenizer.ggml.token_type")->as_int_array();
  EXPECT_EQ((*types)[5], 3);  // control
  EXPECT_EQ((*types)[7], 4);  // user_defined
  EXPECT_EQ((*types)[0], 1);  // normal
  auto t = Tokenizer::from_gguf(*f2);
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ((*t)->eos(), 5);
  EXPECT_EQ((*t)->encode("ab ab<x>", false, false), (std::vector<int32_t>{2, 4, 7}));
}

TEST(GgufExport, MissingDirectory) {
  GgufWriter w;
  auto r = tok::export_hf_tokenizer("/nonexistent/dir", &w);
  ASSERT_FALSE(r.is_ok());
  EXPECT_EQ(r.status().code(), StatusCode::kNotFound);
}

}  // namespace
}  // namespace loom
