// Text output: incremental detokenization and stop strings with hold-back (a stop string split
// across tokens is caught and never leaked), on a real GPT-2 vocabulary.
#include <gtest/gtest.h>

#include "engine/output_processor.h"
#include "format/gguf.h"
#include "test_engine_util.h"

namespace loom {
namespace {

const std::string kGpt2 = std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-gpt-2.gguf";

std::unique_ptr<Tokenizer> gpt2() {
  auto t = Tokenizer::load(kGpt2);
  EXPECT_TRUE(t.is_ok()) << t.status().message();
  return std::move(t).value();
}

// Feeds tokens one by one; returns every delta.
std::vector<std::string> feed(SeqTextState& s, const std::vector<int32_t>& ids,
                              std::optional<std::string>* stop) {
  std::vector<std::string> deltas;
  for (int32_t id : ids) {
    *stop = s.add_token(id, true);
    deltas.push_back(s.take_delta());
    if (*stop) return deltas;
  }
  s.flush();
  deltas.push_back(s.take_delta());
  return deltas;
}

std::string join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x;
  return s;
}

TEST(SeqTextState, StopStringAcrossTokensIsCutAndNeverLeaked) {
  auto tok = gpt2();
  const auto ids = tok->encode("The quick brown fox jumps over the lazy dog", false, false);
  ASSERT_GT(ids.size(), 5u);
  SamplingParams p;
  p.stop = {"k bro"};  // spans " quick" / " brown"
  SeqTextState s(tok.get(), p);
  std::optional<std::string> stop;
  auto deltas = feed(s, ids, &stop);
  ASSERT_TRUE(stop.has_value());
  EXPECT_EQ(*stop, "k bro");
  EXPECT_EQ(join(deltas), "The quic");
  for (const auto& d : deltas) EXPECT_EQ(d.find('k'), std::string::npos) << d;

  p.include_stop_str_in_output = true;
  SeqTextState s2(tok.get(), p);
  EXPECT_EQ(join(feed(s2, ids, &stop)), "The quick bro");
}

TEST(SeqTextState, HeldBackTextIsReleasedWhenItIsNotAStop) {
  auto tok = gpt2();
  const auto ids = tok->encode("The quick brown fox", false, false);
  SamplingParams p;
  p.stop = {"k brX", "fox!"};
  SeqTextState s(tok.get(), p);
  std::string emitted;
  for (size_t i = 0; i < ids.size(); ++i) {
    EXPECT_FALSE(s.add_token(ids[i], true).has_value());
    emitted += s.take_delta();
    // Whatever was emitted is a prefix of the text, and any held part could start a stop.
    EXPECT_EQ(s.text().compare(0, emitted.size(), emitted), 0);
  }
  EXPECT_EQ(emitted, "The quick brown ");  // "fox" could still become "fox!"
  s.flush();
  emitted += s.take_delta();
  EXPECT_EQ(emitted, "The quick brown fox");
}

TEST(EngineText, StopStringsThroughTheEngine) {
  auto bytes = testing::test_model_bytes({.vocab_path = kGpt2});
  EngineConfig c;
  c.max_num_seqs = 2;
  c.n_threads = 1;
  auto e = testing::make_engine(c, bytes);
  ASSERT_NE(e->tokenizer(), nullptr);
  const Tokenizer& tok = *e->tokenizer();
  GenerateRequest r;
  r.request_id = "t";
  r.prompt = tok.encode("Once upon a time", false, false);
  r.params.max_tokens = 40;
  r.params.temperature = 0.0f;
  r.params.ignore_eos = true;
  ASSERT_TRUE(e->add_request(r).is_ok());
  auto full = testing::run_all(*e).at("t");
  const auto& toks = full.tokens.at(0);
  ASSERT_EQ(toks.size(), 40u);
  EXPECT_EQ(full.text.at(0), tok.decode(toks, true));
  // A stop string made of the end of one token's text and the start of the next one's.
  std::string stop;
  for (size_t i = 10; i + 1 < toks.size() && stop.empty(); ++i) {
    std::string a = tok.decode(std::vector<int32_t>{toks[i]}),
                b = tok.decode(std::vector<int32_t>{toks[i + 1]});
    auto ascii = [](const std::string& s) {
      for (unsigned char ch : s)
        if (ch >= 0x80 || ch < 0x20) return false;
      return true;
    };
    if (a.size() >= 2 && b.size() >= 2 && ascii(a) && ascii(b))
      stop = a.substr(a.size() - 2) + b.substr(0, 2);
  }
  ASSERT_FALSE(stop.empty()) << "no two ASCII tokens in: " << full.text.at(0);
  const size_t at = full.text.at(0).find(stop);
  ASSERT_NE(at, std::string::npos);
  r.params.stop = {stop};
  ASSERT_TRUE(e->add_request(r).is_ok());
  auto cut = testing::run_all(*e).at("t");
  EXPECT_EQ(cut.text.at(0), full.text.at(0).substr(0, at));
  EXPECT_EQ(cut.finish.at(0), FinishReason::kStop);
  EXPECT_EQ(cut.stop_reason.at(0), stop);
  EXPECT_LT(cut.tokens.at(0).size(), toks.size());
  EXPECT_EQ(e->check_kv_drained(), "");
}

// skip_special_tokens drops control tokens' text, except the chat output parser's markers
// (kept_special_tokens), which some vocabularies make control tokens ([TOOL_CALLS] here).
TEST(SeqTextState, SkipSpecialKeepsOnlyTheParsersMarkers) {
  auto tok = Tokenizer::from_hf_json(R"({
    "model": {"type": "BPE", "vocab": {"a": 0, "b": 1, "ab": 2}, "merges": [["a", "b"]]},
    "added_tokens": [{"id": 3, "content": "[TOOL_CALLS]", "special": true},
                     {"id": 4, "content": "<|im_end|>", "special": true},
                     {"id": 5, "content": "<think>", "special": false}],
    "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false, "use_regex": true}
  })",
                                     "{}");
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  ASSERT_TRUE((*tok)->is_control(3));
  ASSERT_TRUE((*tok)->is_control(4));
  const std::vector<int32_t> ids = {0, 4, 3, 1, 5, 4};
  auto text = [&](bool skip, std::vector<std::string> kept) {
    SamplingParams p;
    p.skip_special_tokens = skip;
    p.kept_special_tokens = std::move(kept);
    SeqTextState s(tok->get(), p);
    std::optional<std::string> stop;
    return join(feed(s, ids, &stop));
  };
  EXPECT_EQ(text(true, {"[TOOL_CALLS]", "<think>"}), "a[TOOL_CALLS]b<think>");
  EXPECT_EQ(text(true, {}), "ab<think>");
  EXPECT_EQ(text(false, {}), "a<|im_end|>[TOOL_CALLS]b<think><|im_end|>");
  EXPECT_EQ(text(false, {"[TOOL_CALLS]"}), "a<|im_end|>[TOOL_CALLS]b<think><|im_end|>");
}

}  // namespace
}  // namespace loom
