// The end-of-generation set (src/tokenizer/end_of_generation.h) on real vocabularies (Phi-3 and
// Qwen3 GGUFs from llama.cpp, Qwen3's tokenizer.json) and on Gemma-shaped vocabularies that
// differ only in the type of <end_of_turn>.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "format/gguf.h"
#include "loom/tokenizer.h"

namespace loom {
namespace {

namespace fs = std::filesystem;

const std::string kData = LOOM_TEST_DATA;
constexpr int64_t kNormal = 1, kControl = 3, kUserDefined = 4;

std::vector<int32_t> eog(const Tokenizer& t) {
  return std::vector<int32_t>(t.eog_ids().begin(), t.eog_ids().end());
}

Result<std::unique_ptr<Tokenizer>> from_writer(const GgufWriter& w) {
  LOOM_ASSIGN_OR_RETURN(
      GgufFile f,
      GgufFile::parse_bytes(std::make_shared<const std::vector<uint8_t>>(w.to_bytes())));
  return Tokenizer::from_gguf(f);
}

// A vocabulary-only GGUF copied from a fixture, with `edit` applied to its metadata.
template <typename Edit>
std::unique_ptr<Tokenizer> edited_fixture(const std::string& name, Edit edit) {
  auto f = GgufFile::open(kData + "/vocab/ggml-vocab-" + name + ".gguf");
  EXPECT_TRUE(f.is_ok()) << f.status().message();
  if (!f.is_ok()) return nullptr;
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) w.set(key, value);
  edit(*f, w);
  auto t = from_writer(w);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

TEST(EndOfGeneration, Phi3EndsOnEndAndEndOfText) {
  // Phi-3's GGUF names <|endoftext|> (32000) as EOS; chat turns end with <|end|> (32007).
  auto t = Tokenizer::load(kData + "/vocab/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  const Tokenizer& tok = **t;
  ASSERT_EQ(tok.find_token("<|end|>"), 32007);
  EXPECT_EQ(tok.eos(), 32000);
  EXPECT_EQ(tok.eot(), 32007);
  EXPECT_EQ(eog(tok), (std::vector<int32_t>{32000, 32007}));
  EXPECT_TRUE(tok.is_eog(32007));
  EXPECT_FALSE(tok.is_eog(*tok.find_token("<|assistant|>")));  // control, not a terminator
  EXPECT_FALSE(tok.is_eog(*tok.find_token("<|user|>")));
  EXPECT_FALSE(tok.is_eog(*tok.find_token("</s>")));  // SentencePiece's EOS, unused by Phi-3
  EXPECT_FALSE(tok.is_eog(*tok.find_token("end")));
}

TEST(EndOfGeneration, Qwen3EndsOnImEndAndEndOfText) {
  auto g = Tokenizer::load(kData + "/vocab/ggml-vocab-qwen3.gguf");
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  EXPECT_EQ(eog(**g), (std::vector<int32_t>{151643, 151645}));  // <|endoftext|>, <|im_end|>
  auto h = Tokenizer::load(kData + "/hf_tokenizers/qwen3");
  ASSERT_TRUE(h.is_ok()) << h.status().message();
  EXPECT_EQ(eog(**h), eog(**g));
}

TEST(EndOfGeneration, PhiWithEndRetypedNormalIsNotAStop) {
  // The same vocabulary with <|end|> typed as a normal entry: its text no longer stops.
  auto t = edited_fixture("phi-3", [](const GgufFile& f, GgufWriter& w) {
    std::vector<int64_t> types = *f.find("tokenizer.ggml.token_type")->as_int_array();
    types[32007] = kNormal;
    w.set("tokenizer.ggml.token_type", GgufValue::of_int_array(GgufType::kI32, std::move(types)));
  });
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(eog(*t), (std::vector<int32_t>{32000}));
  EXPECT_EQ(t->eot(), -1);
}

TEST(EndOfGeneration, GgufEotAndEomKeysAreStops) {
  // tokenizer.ggml.eot_token_id / eom_token_id name ids whatever their text or type.
  auto t = edited_fixture("phi-3", [](const GgufFile&, GgufWriter& w) {
    w.set_u32("tokenizer.ggml.eot_token_id", 32001);  // <|assistant|>
    w.set_u32("tokenizer.ggml.eom_token_id", 400);
  });
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(t->eot(), 32001);
  EXPECT_EQ(eog(*t), (std::vector<int32_t>{400, 32000, 32001, 32007}));

  // An id outside the vocabulary is a bad file, not a silent non-stop.
  auto f = GgufFile::open(kData + "/vocab/ggml-vocab-phi-3.gguf");
  ASSERT_TRUE(f.is_ok());
  GgufWriter w;
  for (const auto& [key, value] : f->metadata()) w.set(key, value);
  w.set_u32("tokenizer.ggml.eom_token_id", 40000);  // the vocabulary has 32064 tokens
  auto r = from_writer(w);
  ASSERT_FALSE(r.is_ok());
  EXPECT_NE(r.status().message().find("eom_token_id"), std::string::npos) << r.status().message();
}

// Gemma's layout: <pad> <eos> <bos> <unk> ... <start_of_turn> <end_of_turn>; EOS is <eos>.
std::unique_ptr<Tokenizer> gemma_like(int64_t end_of_turn_type) {
  std::vector<std::string> tokens = {"<pad>",         "<eos>",  "<bos>", "<unk>", "<start_of_turn>",
                                     "<end_of_turn>", "▁hello", "a",     "b"};
  std::vector<int64_t> types = {kControl,         kControl, kControl, 2,      kControl,
                                end_of_turn_type, kNormal,  kNormal,  kNormal};
  GgufWriter w;
  w.set_string("tokenizer.ggml.model", "llama");
  w.set("tokenizer.ggml.tokens", GgufValue::of_string_array(tokens));
  w.set("tokenizer.ggml.scores",
        GgufValue::of_float_array(GgufType::kF32, std::vector<double>(tokens.size(), 0.0)));
  w.set("tokenizer.ggml.token_type", GgufValue::of_int_array(GgufType::kI32, types));
  w.set_u32("tokenizer.ggml.bos_token_id", 2);
  w.set_u32("tokenizer.ggml.eos_token_id", 1);
  w.set_u32("tokenizer.ggml.unknown_token_id", 3);
  w.set_u32("tokenizer.ggml.padding_token_id", 0);
  auto t = from_writer(w);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return t.is_ok() ? std::move(t).value() : nullptr;
}

// o200k_harmony's specials (gpt-oss): every message ends with <|end|>, the reply with
// <|return|>, a tool call with <|call|>. Generation must go on past the reasoning message's
// <|end|> even where the file names it as the end of turn; where <|return|> or <|call|> is
// missing (Phi-3's <|end|> above) the rule does not apply.
TEST(EndOfGeneration, HarmonyEndsOnReturnAndCallNotOnEnd) {
  auto harmony = [](bool with_call, int64_t eot) {
    std::vector<std::string> tokens = {"<|endoftext|>", "<|start|>",   "<|end|>",
                                       "<|message|>",   "<|channel|>", "<|return|>",
                                       "<|call|>",      "a",           "b"};
    std::vector<int64_t> types(tokens.size(), kControl);
    types[7] = types[8] = kNormal;
    if (!with_call) types[6] = kNormal;
    GgufWriter w;
    w.set_string("tokenizer.ggml.model", "gpt2");
    w.set_string("tokenizer.ggml.pre", "gpt-4o");
    w.set("tokenizer.ggml.tokens", GgufValue::of_string_array(tokens));
    w.set("tokenizer.ggml.token_type", GgufValue::of_int_array(GgufType::kI32, types));
    w.set("tokenizer.ggml.merges", GgufValue::of_string_array({}));
    w.set_u32("tokenizer.ggml.eos_token_id", 5);
    if (eot >= 0) w.set_u32("tokenizer.ggml.eot_token_id", static_cast<uint32_t>(eot));
    auto t = from_writer(w);
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    return t.is_ok() ? std::move(t).value() : nullptr;
  };
  auto t = harmony(true, -1);
  ASSERT_NE(t, nullptr);
  EXPECT_EQ(eog(*t), (std::vector<int32_t>{0, 5, 6}));  // <|endoftext|>, <|return|>, <|call|>
  EXPECT_FALSE(t->is_eog(2));
  EXPECT_NE(t->eot(), 2);
  auto named = harmony(true, 2);  // a file naming <|end|> as its end of turn
  ASSERT_NE(named, nullptr);
  EXPECT_FALSE(named->is_eog(2));
  auto no_call = harmony(false, -1);  // not harmony: <|end|> is Phi-3's end of turn
  ASSERT_NE(no_call, nullptr);
  EXPECT_EQ(eog(*no_call), (std::vector<int32_t>{0, 2, 5}));
}

TEST(EndOfGeneration, GemmaEndOfTurnCountsOnlyAsASpecialToken) {
  auto control = gemma_like(kControl);
  ASSERT_NE(control, nullptr);
  EXPECT_EQ(control->eos(), 1);
  EXPECT_EQ(eog(*control), (std::vector<int32_t>{1, 5}));
  EXPECT_EQ(control->eot(), 5);
  EXPECT_FALSE(control->is_eog(4));  // <start_of_turn>
  EXPECT_FALSE(control->is_eog(0));  // <pad>
  // Early Gemma GGUFs typed <end_of_turn> user_defined (an added token): still a stop.
  auto user = gemma_like(kUserDefined);
  ASSERT_NE(user, nullptr);
  EXPECT_EQ(eog(*user), (std::vector<int32_t>{1, 5}));
  // A plain vocabulary entry spelled "<end_of_turn>" is text.
  auto normal = gemma_like(kNormal);
  ASSERT_NE(normal, nullptr);
  EXPECT_EQ(eog(*normal), (std::vector<int32_t>{1}));
  EXPECT_EQ(normal->eot(), -1);
}

std::string read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

TEST(EndOfGeneration, HfGenerationConfigEosListIsStops) {
  const fs::path dir = fs::path(kData) / "hf_tokenizers/qwen3";
  const std::string tj = read(dir / "tokenizer.json"), tc = read(dir / "tokenizer_config.json");
  // 151644 (<|im_start|>) only to see the list read: no text rule would make it a stop.
  auto t = Tokenizer::from_hf_json(tj, tc, R"({"eos_token_id": [151643, 151645, 151644]})");
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(eog(**t), (std::vector<int32_t>{151643, 151644, 151645}));
  auto one = Tokenizer::from_hf_json(tj, tc, R"({"eos_token_id": 7, "bos_token_id": null})");
  ASSERT_TRUE(one.is_ok()) << one.status().message();
  EXPECT_EQ(eog(**one), (std::vector<int32_t>{7, 151643, 151645}));
  auto none = Tokenizer::from_hf_json(tj, tc, R"({"eos_token_id": null, "do_sample": true})");
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(eog(**none), (std::vector<int32_t>{151643, 151645}));
  auto far = Tokenizer::from_hf_json(tj, tc, R"({"eos_token_id": [-1, 999999]})");
  ASSERT_TRUE(far.is_ok());  // ids the vocabulary lacks are dropped
  EXPECT_EQ(eog(**far), (std::vector<int32_t>{151643, 151645}));
  auto bad = Tokenizer::from_hf_json(tj, tc, R"({"eos_token_id": "<|im_end|>"})");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("eos_token_id"), std::string::npos);
}

TEST(EndOfGeneration, HfDirReadsGenerationConfigElseConfig) {
  const fs::path src = fs::path(kData) / "hf_tokenizers/qwen3";
  const fs::path dir = fs::path(::testing::TempDir()) / "loom_eog_hf_dir";
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::copy_file(src / "tokenizer.json", dir / "tokenizer.json");
  fs::copy_file(src / "tokenizer_config.json", dir / "tokenizer_config.json");
  auto write = [&](const char* name, const char* text) { std::ofstream(dir / name) << text; };

  write("config.json", R"({"model_type": "qwen3", "eos_token_id": [151644, 151645]})");
  auto t = Tokenizer::from_hf_dir(dir.string());
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_TRUE((*t)->is_eog(151644));  // from config.json: no generation_config.json

  write("generation_config.json", R"({"eos_token_id": 151643})");
  t = Tokenizer::from_hf_dir(dir.string());
  ASSERT_TRUE(t.is_ok()) << t.status().message();
  EXPECT_EQ(eog(**t), (std::vector<int32_t>{151643, 151645}));  // generation config wins

  write("generation_config.json", "{not json");
  t = Tokenizer::from_hf_dir(dir.string());
  ASSERT_FALSE(t.is_ok());
  EXPECT_NE(t.status().message().find("generation_config.json"), std::string::npos)
      << t.status().message();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace loom
