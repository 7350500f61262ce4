// The byte-level matcher against an independent oracle: random non-recursive grammars are
// also written as PCRE2 regexes; every prefix of random and sampled strings must be accepted
// exactly when PCRE2 says it can still match, and can_end exactly when it matches in full.
#include "structured/matcher.h"

#include <gtest/gtest.h>

#include "grammar_oracle.h"
#include "structured/grammar.h"

namespace loom::structured {
namespace {

using testing::Oracle;
using testing::RandomGrammar;

std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf,
                                               std::shared_ptr<const TokenVocab> vocab) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
  if (!g.is_ok()) return nullptr;
  auto cg = CompiledGrammar::create(*g, std::move(vocab));
  EXPECT_TRUE(cg.is_ok());
  return *cg;
}

std::shared_ptr<const TokenVocab> tiny_vocab() {
  return TokenVocab::from_tokens({"a", "b"}, {false, false}, {});
}

// Feeds `s` byte by byte, checking every prefix against the oracle.
void check_string(const std::shared_ptr<const CompiledGrammar>& cg, const Oracle& oracle,
                  const std::string& s, const std::string& context) {
  GrammarMatcher m(cg);
  ASSERT_EQ(m.can_end(), oracle.full("")) << context;
  for (size_t k = 1; k <= s.size(); ++k) {
    const std::string prefix = s.substr(0, k);
    const bool ok = m.accept_bytes(s.substr(k - 1, 1));
    const bool expect = oracle.prefix(prefix);
    if (oracle.gave_up()) return;
    ASSERT_EQ(ok, expect) << context << " prefix '" << prefix << "'";
    if (!ok) return;
    const bool full = oracle.full(prefix);
    if (oracle.gave_up()) return;
    ASSERT_EQ(m.can_end(), full) << context << " prefix '" << prefix << "'";
  }
}

TEST(Matcher, RandomGrammarsMatchPcre2) {
  std::mt19937 rng(1234);
  int checked = 0, full_matches = 0, gave_up = 0;
  for (uint32_t seed = 0; seed < 300; ++seed) {
    RandomGrammar rg(seed, 1 + seed % 4);
    const std::string gbnf = rg.gbnf();
    Oracle oracle(rg.regex());
    ASSERT_TRUE(oracle.ok()) << rg.regex();
    auto cg = compile(gbnf, tiny_vocab());
    ASSERT_TRUE(cg);
    for (int i = 0; i < 30; ++i) {
      std::string s;
      if (i % 2 == 0) {
        s = rg.sample(rng);
        if (i % 4 == 0 && !s.empty()) s[rng() % s.size()] = "ab<\xC3z"[rng() % 5];  // mutate
      } else {
        const int n = static_cast<int>(rng() % 8);
        for (int k = 0; k < n; ++k) s += testing::alphabet()[rng() % testing::alphabet().size()];
      }
      full_matches += oracle.full(s);
      check_string(cg, oracle, s, "grammar:\n" + gbnf + "regex: " + rg.regex() + "\nstring: " + s);
      if (HasFatalFailure()) return;
      ++checked;
      gave_up += oracle.gave_up();
    }
  }
  EXPECT_EQ(checked, 300 * 30);
  EXPECT_GT(full_matches, 2000);
  EXPECT_LT(gave_up, 300);  // strings where PCRE2 hit its backtracking limit (unchecked)  // the
                            // test must see real sentences, not only rejections
}

TEST(Matcher, AmbiguousGrammars) {
  // x* x, overlapping alternatives, nullable recursion: sets of stacks, deduplicated.
  const char* grammars[] = {
      "root ::= \"a\"* \"a\"",
      "root ::= (\"ab\" | \"a\" \"b\" | [a-b]{2})+ \"c\"?",
      "root ::= x x\nx ::= \"a\"? \"a\"?",
      "root ::= \"(\" root \")\" root | ",
      "root ::= item*\nitem ::= \"a\" | \"a\" \"a\" | item2\nitem2 ::= \"b\"",
  };
  auto vocab = tiny_vocab();
  for (const char* gbnf : grammars) {
    auto cg = compile(gbnf, vocab);
    ASSERT_TRUE(cg);
    GrammarMatcher m(cg);
    std::string input = gbnf[10] == '(' ? "(()())()" : "aaaa";
    if (std::string(gbnf).find("item2") != std::string::npos) input = "aabab";
    if (std::string(gbnf).find("[a-b]{2}") != std::string::npos) input = "ababbac";
    if (std::string(gbnf).find("x x") != std::string::npos) input = "aaaa";
    EXPECT_TRUE(m.accept_bytes(input)) << gbnf;
    EXPECT_TRUE(m.can_end()) << gbnf;
  }
}

TEST(Matcher, BalancedParenthesesDeep) {
  auto cg = compile("root ::= \"(\" root \")\" root | ", tiny_vocab());
  GrammarMatcher m(cg);
  std::string s(500, '(');
  s += std::string(500, ')');
  EXPECT_TRUE(m.accept_bytes(s));
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.accept_bytes(")"));
}

TEST(Matcher, CountedRepetitionBounds) {
  auto cg = compile("root ::= \"x\" [a-z]{3,40} \"y\"", tiny_vocab());
  for (int n = 0; n <= 45; ++n) {
    GrammarMatcher m(cg);
    const bool ok = m.accept_bytes("x" + std::string(n, 'q') + "y");
    EXPECT_EQ(ok && m.can_end(), n >= 3 && n <= 40) << n;
  }
}

TEST(Matcher, Utf8SplitAcrossTokens) {
  auto cg = compile("root ::= [^a]+", tiny_vocab());
  GrammarMatcher m(cg);
  EXPECT_TRUE(m.accept_bytes("\xE2"));
  EXPECT_FALSE(m.can_end());  // inside a character
  EXPECT_TRUE(m.accept_bytes("\x82"));
  EXPECT_FALSE(m.accept_bytes("x"));  // not a continuation byte
  EXPECT_TRUE(m.accept_bytes("\xAC"));
  EXPECT_TRUE(m.can_end());
  GrammarMatcher bad(cg);
  EXPECT_FALSE(bad.accept_bytes("\xC0\x80"));      // overlong encoding
  EXPECT_FALSE(bad.accept_bytes("\xED\xA0\x80"));  // surrogate
  EXPECT_FALSE(bad.accept_bytes("a"));
}

TEST(Matcher, TerminationAndEos) {
  auto vocab =
      TokenVocab::from_tokens({"yes", "no", "</s>", "y"}, {false, false, true, false}, {2});
  auto cg = compile("root ::= \"yes\" | \"no\" | \"y\" \"es\"?", vocab);
  GrammarMatcher m(cg);
  EXPECT_FALSE(m.can_end());
  EXPECT_FALSE(m.accept_token(2));  // EOS before the grammar can end
  std::vector<uint32_t> w(1);
  m.fill_next_token_bitmask(w);
  EXPECT_EQ(w[0], 0b1011u);
  ASSERT_TRUE(m.accept_token(3));  // "y": can end, or continue with "es"
  EXPECT_TRUE(m.can_end());
  EXPECT_FALSE(m.is_terminated());
  m.fill_next_token_bitmask(w);
  EXPECT_EQ(w[0], 0b0100u);  // only EOS: no token spells "es"
  m.rollback(1);
  ASSERT_TRUE(m.accept_token(0));
  EXPECT_TRUE(m.is_terminated());
  m.fill_next_token_bitmask(w);
  EXPECT_EQ(w[0], 0b0100u);
  EXPECT_TRUE(m.accept_token(2));
  EXPECT_TRUE(m.is_terminated());
  EXPECT_FALSE(m.accept_token(0));
  EXPECT_EQ(m.num_accepted_tokens(), 2);
  m.rollback(2);
  EXPECT_EQ(m.num_accepted_tokens(), 0);
  EXPECT_FALSE(m.can_end());
}

}  // namespace
}  // namespace loom::structured
