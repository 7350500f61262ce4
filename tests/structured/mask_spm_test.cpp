// Masks with a SentencePiece vocabulary (llama's 32,000 pieces: "▁" for a space, <0xNN> byte
// tokens, <s> </s> <unk> control tokens). The bytes of each piece are derived here from the
// stored piece text, independently of the tokenizer's own decoding, and put in a second
// vocabulary; every mask bit of every token is compared with a replay of that token's bytes
// through a matcher on the second vocabulary (the direct byte walk, not the table path).
#include <gtest/gtest.h>

#include <random>

#include "loom/tokenizer.h"
#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::structured {
namespace {

bool bit(const std::vector<uint32_t>& w, int32_t id) {
  return (w[id >> 5] >> (id & 31)) & 1;
}

// SentencePiece's reading of a piece: "▁" is a space, "<0xNN>" is the byte NN.
std::string spm_piece_bytes(const std::string& piece) {
  if (piece.size() == 6 && piece.compare(0, 3, "<0x") == 0 && piece[5] == '>')
    return std::string(1, static_cast<char>(std::stoi(piece.substr(3, 2), nullptr, 16)));
  std::string out;
  for (size_t i = 0; i < piece.size(); ++i) {
    if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {
      out += ' ';
      i += 2;
    } else {
      out += piece[i];
    }
  }
  return out;
}

struct Vocabs {
  std::unique_ptr<Tokenizer> tok;
  std::shared_ptr<const TokenVocab> engine;  // TokenVocab::from_tokenizer: under test
  std::shared_ptr<const TokenVocab> replay;  // bytes derived above
};

const Vocabs& spm() {
  static const Vocabs v = [] {
    Vocabs v;
    auto t = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/vocab/ggml-vocab-llama-spm.gguf");
    EXPECT_TRUE(t.is_ok()) << t.status().message();
    if (!t.is_ok()) return v;
    v.tok = std::move(*t);
    const int32_t n = v.tok->n_vocab();
    v.engine = TokenVocab::from_tokenizer(*v.tok, n);
    std::vector<std::string> bytes(n);
    std::vector<bool> special(n);
    std::vector<int32_t> eos;
    for (int32_t id = 0; id < n; ++id) {
      special[id] = v.tok->is_control(id);
      bytes[id] = special[id] ? v.tok->token_text(id) : spm_piece_bytes(v.tok->token_text(id));
      if (v.tok->is_eog(id)) eos.push_back(id);
    }
    v.replay = TokenVocab::from_tokens(std::move(bytes), std::move(special), std::move(eos));
    return v;
  }();
  return v;
}

TEST(MaskSpm, PiecesDecodeAsSentencePieceSays) {
  const Vocabs& v = spm();
  ASSERT_TRUE(v.engine);
  ASSERT_EQ(v.engine->size(), 32000);
  int spaces = 0, byte_tokens = 0;
  for (int32_t id = 0; id < v.engine->size(); ++id) {
    ASSERT_EQ(v.engine->bytes(id), v.replay->bytes(id)) << id << " " << v.tok->token_text(id);
    spaces += v.tok->token_text(id).rfind("\xE2\x96\x81", 0) == 0;
    byte_tokens += v.tok->token_text(id).rfind("<0x", 0) == 0;
  }
  EXPECT_GT(spaces, 10000);  // most llama pieces start a word
  EXPECT_EQ(byte_tokens, 256);
  EXPECT_EQ(v.engine->bytes(v.tok->find_token("\xE2\x96\x81the").value()), " the");
  EXPECT_EQ(v.engine->bytes(v.tok->find_token("<0x0A>").value()), "\n");
}

// A walk through `gbnf`, checking every token's bit at every step.
void check_walk(const std::string& gbnf, uint32_t seed, int* space_tokens_taken, int* steps) {
  const Vocabs& v = spm();
  ASSERT_TRUE(v.engine);
  auto g = parse_gbnf(gbnf);
  ASSERT_TRUE(g.is_ok()) << g.status().message();
  auto under_test = CompiledGrammar::create(*g, v.engine);
  auto reference = CompiledGrammar::create_uncached(*g, v.replay);
  ASSERT_TRUE(under_test.is_ok() && reference.is_ok());
  const int32_t n = v.engine->size();
  GrammarMatcher m(*under_test), r(*reference);
  std::vector<uint32_t> w(bitmask_words(n));
  std::mt19937 rng(seed);
  for (int step = 0; step < 40; ++step) {
    m.fill_next_token_bitmask(w);
    std::vector<int32_t> allowed, allowed_space;
    for (int32_t id = 0; id < n; ++id) {
      bool want;
      if (v.replay->is_eos(id)) {
        want = r.can_end();
      } else {
        want = r.accept_token(id);
        if (want) r.rollback(1);
      }
      ASSERT_EQ(bit(w, id), want) << "step " << step << " token " << id << " '"
                                  << v.tok->token_text(id) << "'\n"
                                  << gbnf;
      if (want && !v.replay->is_eos(id)) {
        allowed.push_back(id);
        if (v.replay->bytes(id).size() > 1 && v.replay->bytes(id)[0] == ' ')
          allowed_space.push_back(id);
      }
    }
    if (allowed.empty()) break;
    // Take word-initial ("▁") pieces when there are some, so that they are really exercised.
    const bool space = !allowed_space.empty() && rng() % 2;
    const auto& from = space ? allowed_space : allowed;
    const int32_t pick = from[rng() % from.size()];
    *space_tokens_taken += space;
    ASSERT_TRUE(m.accept_token(pick));
    ASSERT_TRUE(r.accept_token(pick));
    ++*steps;
    if (m.is_terminated()) break;
  }
}

TEST(MaskSpm, EveryTokenMatchesReplay) {
  int space_tokens = 0, steps = 0;
  // Words separated by spaces: a leading-space piece is right exactly after a word.
  for (uint32_t seed : {5, 7, 8})
    check_walk("root ::= \"Hello\" (\" \" [a-zA-Z]+){1,6} [.!]\n", seed, &space_tokens, &steps);
  // JSON with up to one whitespace byte between tokens, strings with spaces and a pattern.
  JsonGrammarOptions o;
  o.max_whitespace = 1;
  auto schema = json_schema_to_gbnf(OrderedJson::parse(R"({"type":"object","properties":{
      "title":{"type":"string","maxLength":24},
      "words":{"type":"array","items":{"type":"string","pattern":"[a-z]+( [a-z]+)?"},"maxItems":3},
      "n":{"type":"integer"}},"required":["title","words","n"],"additionalProperties":false})"),
                                    o);
  ASSERT_TRUE(schema.is_ok()) << schema.status().message();
  for (uint32_t seed : {6, 9}) check_walk(*schema, seed, &space_tokens, &steps);
  EXPECT_GT(steps, 60);
  EXPECT_GT(space_tokens, 20);
  std::printf("steps %d, word-initial pieces taken %d\n", steps, space_tokens);
}

}  // namespace
}  // namespace loom::structured
