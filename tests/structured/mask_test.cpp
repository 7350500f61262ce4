// Token masks: every bit checked against an independent answer. Small vocabularies: bit set
// <=> PCRE2 says accepted-bytes + token bytes can still match (normal tokens), <=> the grammar
// can end (EOS). The Qwen3 vocabulary: bit set <=> a fresh matcher replaying the same tokens
// accepts the token (the direct byte walk, not the table/DFA path that fills masks).
#include <gtest/gtest.h>

#include <algorithm>

#include "grammar_oracle.h"
#include "loom/tokenizer.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::structured {
namespace {

using testing::Oracle;
using testing::RandomGrammar;

bool bit(const std::vector<uint32_t>& w, int32_t id) {
  return (w[id >> 5] >> (id & 31)) & 1;
}

std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf,
                                               std::shared_ptr<const TokenVocab> vocab) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
  if (!g.is_ok()) return nullptr;
  auto cg = CompiledGrammar::create(*g, std::move(vocab));
  EXPECT_TRUE(cg.is_ok());
  return cg.is_ok() ? *cg : nullptr;
}

// Alphabet characters, pairs, a long run, and UTF-8 fragments that split characters.
std::shared_ptr<const TokenVocab> small_vocab(std::mt19937& rng, int32_t* eos_id) {
  std::vector<std::string> toks;
  const auto& a = testing::alphabet();
  for (const std::string& c : a) toks.push_back(c);
  for (int i = 0; i < 40; ++i) toks.push_back(a[rng() % a.size()] + a[rng() % a.size()]);
  for (int i = 0; i < 10; ++i) {
    std::string s;
    for (int k = 0; k < 6; ++k) s += a[rng() % a.size()];
    toks.push_back(s);
  }
  for (const char* frag :
       {"\xC3", "\xA9", "\xE2\x82", "\xAC", "\xE2", "\x82\xAC", "\xF0\x9F", "\x98\x80",
        "\xA9"
        "a",
        "z"})
    toks.push_back(frag);
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  std::vector<bool> special(toks.size(), false);
  toks.push_back("<a>");  // a special token: only where a literal names "<a>"
  special.push_back(true);
  toks.push_back("</s>");
  special.push_back(true);
  *eos_id = static_cast<int32_t>(toks.size() - 1);
  return TokenVocab::from_tokens(std::move(toks), std::move(special), {*eos_id});
}

TEST(Mask, RandomGrammarsSmallVocabMatchPcre2) {
  std::mt19937 rng(77);
  int32_t eos = 0;
  auto vocab = small_vocab(rng, &eos);
  const int32_t n = vocab->size();
  std::vector<uint32_t> words(bitmask_words(n));
  int steps = 0, allowed_total = 0;
  for (uint32_t seed = 1000; seed < 1200; ++seed) {
    RandomGrammar rg(seed, 1 + seed % 4);
    Oracle oracle(rg.regex());
    auto cg = compile(rg.gbnf(), vocab);
    ASSERT_TRUE(cg);
    GrammarMatcher m(cg);
    std::string text;
    std::vector<int32_t> history;
    for (int step = 0; step < 12; ++step) {
      m.fill_next_token_bitmask(words);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < n; ++id) {
        const bool got = bit(words, id);
        if (id == eos) {
          ASSERT_EQ(got, oracle.full(text)) << rg.gbnf() << "text: " << text;
          ASSERT_EQ(got, m.can_end());
        } else if (vocab->is_special(id)) {
          GrammarMatcher replay(cg);
          for (int32_t t : history) ASSERT_TRUE(replay.accept_token(t));
          ASSERT_EQ(got, replay.accept_token(id)) << rg.gbnf() << "special after: " << text;
        } else {
          const bool want = oracle.prefix(text + vocab->bytes(id));
          if (oracle.gave_up()) break;
          ASSERT_EQ(got, want) << rg.gbnf() << "regex: " << rg.regex() << "\ntext: '" << text
                               << "' token: '" << vocab->bytes(id) << "'";
        }
        if (got && id != eos) allowed.push_back(id);
      }
      if (oracle.gave_up() || allowed.empty()) break;
      allowed_total += static_cast<int>(allowed.size());
      const int32_t pick = allowed[rng() % allowed.size()];
      ASSERT_TRUE(m.accept_token(pick));
      history.push_back(pick);
      text += vocab->bytes(pick);
      ++steps;
    }
  }
  EXPECT_GT(steps, 800);
  EXPECT_GT(allowed_total, 5000);
}

// The matcher rejects context-dependent tokens whose bytes at their exit offsets the stack
// below cannot take, without walking them; create_uncached() walks every one. Same masks on
// random grammars and on grammars whose tokens leave rules at one or many offsets (counted
// identifiers near their bound, nullable separators, recursion).
TEST(Mask, ExitPrefilterMatchesUncached) {
  std::mt19937 rng(91);
  // Tokens over the grammars' characters: every single one, and random runs of 2..7.
  const std::vector<std::string> chars = {"a", "b", "c",        "0",           " ",  "=",
                                          "+", "*", "(",        ")",           "\n", ",",
                                          "<", ">", "\xC3\xA9", "\xE2\x82\xAC"};
  std::vector<std::string> toks = chars;
  for (int i = 0; i < 400; ++i) {
    std::string t;
    for (int k = 0, len = 2 + static_cast<int>(rng() % 6); k < len; ++k)
      t += chars[rng() % chars.size()];
    toks.push_back(t);
  }
  // Leave `r` after 1, 2 or 3 bytes; only the exit after 2 can go on ("ab" "bc").
  for (const char* t : {"abbc", "abbc ", "aabbc", "abc", "(abbc"}) toks.push_back(t);
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  std::vector<bool> special(toks.size(), false);
  toks.push_back("</s>");
  special.push_back(true);
  const int32_t eos = static_cast<int32_t>(toks.size() - 1);
  auto vocab = TokenVocab::from_tokens(std::move(toks), std::move(special), {eos});
  const int32_t n = vocab->size();
  std::vector<std::string> grammars = {
      "root ::= (stmt \"\\n\")+\nstmt ::= id ws \"=\" ws expr | expr\n"
      "expr ::= id (ws [+*] ws id)* | \"(\" ws expr ws \")\"\n"
      "id ::= [a-c] [a-c0-9]{0,3}\nws ::= [ ]?\n",
      "root ::= item (\",\" item)*\nitem ::= [a-z]{1,4} | \"(\" root \")\"\n",
      "root ::= w+\nw ::= [ab]{0,2} x\nx ::= \"c\" | \"é\" [ ]?\n",
      "root ::= (mid \"bc\" [ ]?)+\nmid ::= r [x]? | \"(\" mid \"bc)\"\nr ::= [ab]{1,40}\n",
  };
  for (uint32_t seed = 3000; seed < 3150; ++seed)
    grammars.push_back(RandomGrammar(seed, 1 + seed % 4).gbnf());
  std::vector<uint32_t> a(bitmask_words(n)), b(bitmask_words(n));
  int steps = 0;
  for (const std::string& gbnf : grammars) {
    auto g = parse_gbnf(gbnf);
    ASSERT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
    auto cached = CompiledGrammar::create(*g, vocab);
    auto uncached = CompiledGrammar::create_uncached(*g, vocab);
    ASSERT_TRUE(cached.is_ok() && uncached.is_ok());
    for (int doc = 0; doc < 3; ++doc) {
      GrammarMatcher m(*cached), r(*uncached);
      for (int step = 0; step < 16; ++step) {
        m.fill_next_token_bitmask(a);
        r.fill_next_token_bitmask(b);
        ASSERT_EQ(a, b) << gbnf << "step " << step;
        std::vector<int32_t> allowed;
        for (int32_t id = 0; id < n; ++id)
          if (bit(a, id) && id != eos) allowed.push_back(id);
        if (allowed.empty()) break;
        const int32_t pick = allowed[rng() % allowed.size()];
        ASSERT_TRUE(m.accept_token(pick));
        ASSERT_TRUE(r.accept_token(pick));
        ++steps;
      }
    }
  }
  EXPECT_GT(steps, 1500);
}

TEST(Mask, SpecialTokensOnlyThroughLiterals) {
  auto vocab = TokenVocab::from_tokens({"<a>", "<", "a", ">", "</s>"},
                                       {true, false, false, false, true}, {4});
  std::vector<uint32_t> w(1);
  {
    // The class matches the bytes of "<a>" but never the special token.
    auto cg = compile("root ::= [<a>]* \"!\"?", vocab);
    GrammarMatcher m(cg);
    m.fill_next_token_bitmask(w);
    EXPECT_EQ(w[0], 0b11110u);
  }
  {
    auto cg = compile("root ::= \"x\"? \"<a>\" [a]*", vocab);
    GrammarMatcher m(cg);
    m.fill_next_token_bitmask(w);
    EXPECT_EQ(w[0], 0b00011u);  // the special token, or "<" spelled out
    ASSERT_TRUE(m.accept_token(0));
    m.fill_next_token_bitmask(w);
    EXPECT_EQ(w[0], 0b10100u);  // "a" or EOS
  }
  {
    // A literal split across rules still names the token's bytes entirely.
    auto cg = compile("root ::= \"<\" rest\nrest ::= \"a>\" | \"b\"", vocab);
    GrammarMatcher m(cg);
    m.fill_next_token_bitmask(w);
    EXPECT_EQ(w[0], 0b00011u);
  }
}

TEST(Mask, RollbackRestoresMasks) {
  std::mt19937 rng(5);
  int32_t eos = 0;
  auto vocab = small_vocab(rng, &eos);
  auto cg = compile("root ::= (\"a\" [^<]{0,30} \">\" | \"b\" root \"c\")+", vocab);
  GrammarMatcher m(cg);
  const size_t nw = bitmask_words(vocab->size());
  std::vector<std::vector<uint32_t>> masks;
  std::vector<uint32_t> w(nw);
  for (int i = 0; i < 30; ++i) {
    m.fill_next_token_bitmask(w);
    masks.push_back(w);
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < vocab->size(); ++id)
      if (bit(w, id) && id != eos) allowed.push_back(id);
    if (allowed.empty()) break;
    ASSERT_TRUE(m.accept_token(allowed[rng() % allowed.size()]));
  }
  const int32_t n = m.num_accepted_tokens();
  ASSERT_GT(n, 10);
  for (int32_t k : {3, 2, 5}) {
    m.rollback(k);
    m.fill_next_token_bitmask(w);
    EXPECT_EQ(w, masks[m.num_accepted_tokens()]) << "after rollback to " << m.num_accepted_tokens();
  }
}

const char* kJsonGbnf = R"(
root   ::= object
value  ::= object | array | string | number | ("true" | "false" | "null") ws
object ::=
  "{" ws (
            string ":" ws value
    ("," ws string ":" ws value)*
  )? "}" ws
array  ::=
  "[" ws (
            value
    ("," ws value)*
  )? "]" ws
string ::=
  "\"" (
    [^"\\\x7F\x00-\x1F] |
    "\\" (["\\bfnrt] | "u" [0-9a-fA-F]{4}) # escapes
  )* "\"" ws
number ::= ("-"? ([0-9] | [1-9] [0-9]{0,15})) ("." [0-9]+)? ([eE] [-+]? [0-9] [1-9]{0,15})? ws
# Optional space: by convention, applied in this grammar after literal chars when allowed
ws ::= | " " | "\n" [ \t]{0,20}
)";

std::shared_ptr<const TokenVocab> qwen3_vocab() {
  static std::shared_ptr<const TokenVocab> vocab = [] {
    auto tok = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3");
    EXPECT_TRUE(tok.is_ok()) << tok.status().message();
    return TokenVocab::from_tokenizer(**tok, (*tok)->n_vocab() + 37);  // padded logits width
  }();
  return vocab;
}

TEST(Mask, Qwen3VocabJsonMatchesReplay) {
  auto vocab = qwen3_vocab();
  auto cg = compile(kJsonGbnf, vocab);
  ASSERT_TRUE(cg);
  const int32_t n = vocab->size();
  std::mt19937 rng(11);
  std::vector<int32_t> sample;
  for (int i = 0; i < 400; ++i) sample.push_back(static_cast<int32_t>(rng() % n));
  for (int32_t id = 0; id < n; ++id)
    if (vocab->is_special(id) || vocab->is_eos(id)) sample.push_back(id);
  std::vector<uint32_t> w(bitmask_words(n));
  GrammarMatcher m(cg);
  std::vector<int32_t> history;
  int special_allowed = 0;
  for (int step = 0; step < 25; ++step) {
    m.fill_next_token_bitmask(w);
    for (int32_t id = n - 37; id < n; ++id) ASSERT_FALSE(bit(w, id)) << "padding id " << id;
    std::vector<int32_t> allowed;
    for (int32_t id = 0; id < n; ++id)
      if (bit(w, id)) allowed.push_back(id);
    // Candidates: a fixed random sample, every special token, and some allowed tokens.
    std::vector<int32_t> cand = sample;
    for (int i = 0; i < 100 && !allowed.empty(); ++i)
      cand.push_back(allowed[rng() % allowed.size()]);
    for (int32_t id : cand) {
      GrammarMatcher replay(cg);
      for (int32_t t : history) ASSERT_TRUE(replay.accept_token(t));
      const bool want = replay.accept_token(id);
      ASSERT_EQ(bit(w, id), want) << "step " << step << " token " << id << " '" << vocab->bytes(id)
                                  << "'";
      if (vocab->is_eos(id)) {
        ASSERT_EQ(want, m.can_end());
      }
      if (vocab->is_special(id) && !vocab->is_eos(id)) special_allowed += want;
    }
    // Walk on: prefer tokens that are not whitespace so the document goes somewhere.
    std::erase_if(allowed, [&](int32_t id) { return vocab->is_eos(id); });
    if (allowed.empty()) break;
    const int32_t pick = allowed[rng() % allowed.size()];
    ASSERT_TRUE(m.accept_token(pick));
    history.push_back(pick);
  }
  EXPECT_EQ(special_allowed, 0);  // no literal in this grammar names a special token
  EXPECT_EQ(m.num_accepted_tokens(), static_cast<int32_t>(history.size()));
}

}  // namespace
}  // namespace loom::structured
