// Count profiles (count_profile.h) give every count of a near-bound position the table a full
// build_token_table() walk gives it: for each counted position reachable in a grammar, every
// count from the bound down to max_len before it is filtered from the profile and compared
// with the exact table (accepted bits, context-dependent, special and popped_end tokens; the
// profile's exit offsets must cover the exact ones). Small vocabularies with long tokens and
// the Qwen3 vocabulary with the arithmetic benchmark's identifiers.
#include "structured/count_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <deque>
#include <random>
#include <set>
#include <string>
#include <unordered_map>
#include <unordered_set>

#include "grammar_oracle.h"
#include "loom/tokenizer.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "structured/stack_walker.h"
#include "structured/token_table.h"
#include "structured/vocab_index.h"

namespace loom::structured {
namespace {

std::vector<int32_t> sorted_ids(std::vector<int32_t> ids) {
  std::sort(ids.begin(), ids.end());
  return ids;
}

// Compares the profile's table with the exact one: the same accepted, popped_end and special
// context-dependent tokens; its context-dependent normal tokens (its own, or the profile's
// shared list) must include the exact table's, with exit offsets covering theirs (the others are
// walked with the real stack, which decides them as the exact table would).
bool same_table(const TokenVocab::Impl& v, const TokenTable& exact, const TokenTable& got,
                const std::string& context) {
  EXPECT_EQ(exact.accepted, got.accepted) << context;
  EXPECT_EQ(exact.n_accepted, got.n_accepted) << context;
  EXPECT_EQ(sorted_ids(exact.ctx_special), sorted_ids(got.ctx_special)) << context;
  EXPECT_EQ(sorted_ids(exact.popped_end), sorted_ids(got.popped_end)) << context;
  EXPECT_EQ(exact.accepted_ids, got.accepted_ids) << context;
  EXPECT_TRUE(got.ctx.empty() || !got.ctx_owner) << context;
  const TokenTable& shared = ctx_src(got);
  std::unordered_map<int32_t, size_t> at;
  for (size_t k = 0; k < shared.ctx.size(); ++k) at[shared.ctx[k]] = k;
  for (size_t k = 0; k < exact.ctx.size(); ++k) {
    auto it = at.find(exact.ctx[k]);
    if (it == at.end()) {
      ADD_FAILURE() << context << " context token " << exact.ctx[k] << " missing";
      return false;
    }
    const TokenTable::Exit e = exact.ctx_exit[k], p = shared.ctx_exit[it->second];
    EXPECT_TRUE(p.lo <= e.lo && p.hi >= e.hi)
        << context << " token " << exact.ctx[k] << " exact [" << e.lo << ", " << e.hi
        << "] profile [" << p.lo << ", " << p.hi << "]";
  }
  // The shared list's bytes, offsets and common prefixes are those of its tokens in order.
  std::string prev;
  for (size_t k = 0; k < shared.ctx.size(); ++k) {
    const std::string bytes =
        shared.ctx_blob.substr(shared.ctx_off[k], shared.ctx_off[k + 1] - shared.ctx_off[k]);
    size_t lcp = 0;
    while (lcp < bytes.size() && lcp < prev.size() && bytes[lcp] == prev[lcp]) ++lcp;
    EXPECT_EQ(bytes, v.bytes[shared.ctx[k]]) << context;
    EXPECT_EQ(shared.ctx_lcp[k], k == 0 ? 0 : lcp) << context;
    EXPECT_TRUE(k == 0 || prev < bytes) << context << " not in sort order";
    prev = bytes;
  }
  return !::testing::Test::HasFailure();
}

// Visits the frontiers reachable from the start by up to `max_frontiers` byte steps and checks
// every near-bound counted position among their nodes at every count; returns the families
// (profiles) checked.
int check_grammar(const std::string& gbnf, const TokenVocab::Impl& v, size_t max_frontiers) {
  auto parsed = parse_gbnf(gbnf);
  EXPECT_TRUE(parsed.is_ok()) << gbnf;
  if (!parsed.is_ok()) return 0;
  const Grammar& g = **parsed;
  StackArena arena;
  StackWalker walker(g, arena);
  Frontier f, next;
  walker.start(f);
  std::deque<Frontier> queue = {f};
  std::unordered_set<std::string> seen;
  std::unordered_set<TableKey, TableKeyHash> done;
  int families = 0;
  while (!queue.empty() && seen.size() < max_frontiers) {
    Frontier cur = std::move(queue.front());
    queue.pop_front();
    for (const int32_t node : cur.nodes) {
      const TableKey key = table_key(g, arena, node, v.max_len);
      const int32_t frame = near_bound_frame(g, key, v.max_len);
      TableKey base;
      int32_t remaining = 0;
      if (frame < 0 || !near_bound(g, key, v.max_len, &base, &remaining)) continue;
      if (!done.insert(base).second) continue;
      ++families;
      const auto profile = build_count_profile(g, v, base, frame);
      EXPECT_EQ(profile->frame, frame);
      const int32_t max_iter = g.rules[g.states[key.state[frame]].rule].max_iter;
      for (int32_t r = 0; r <= std::min(max_iter, v.max_len); ++r) {
        TableKey k = key;
        k.count[frame] = max_iter - r;
        const auto exact = build_token_table(g, v, k);
        const auto got = table_from_profile(*profile, v, r);
        if (!same_table(v, *exact, *got, gbnf + " iterations left " + std::to_string(r)))
          return families;
      }
    }
    for (int b = 0; b < 256; ++b) {
      walker.advance(cur, static_cast<uint8_t>(b), false, next);
      if (next.dead()) continue;
      const std::string fk(reinterpret_cast<const char*>(next.nodes.data()),
                           next.nodes.size() * sizeof(int32_t));
      if (seen.insert(fk).second) queue.push_back(next);
    }
  }
  return families;
}

// Tokens over the grammars' characters, up to 20 bytes, so that every count below is near its
// bound and many tokens run past it.
std::shared_ptr<const TokenVocab> long_token_vocab(std::mt19937& rng) {
  const std::vector<std::string> chars = {"a", "b", "c", "_",  "0", "1", " ",  "=",  "+",
                                          "(", ")", ",", "\n", ">", "<", "\"", "\\", "\xC3\xA9"};
  std::vector<std::string> toks = chars;
  for (int i = 0; i < 600; ++i) {
    std::string t;
    const int len = 2 + static_cast<int>(rng() % 19);
    // Mostly identifier runs with a few punctuation bytes, as real vocabularies have.
    for (int k = 0; k < len; ++k) t += chars[rng() % (rng() % 3 == 0 ? chars.size() : 6)];
    toks.push_back(t);
  }
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  std::vector<bool> special(toks.size(), false);
  for (const char* s : {"<a>", ">", "aaa"}) {  // special twins of normal texts too
    toks.push_back(s);
    special.push_back(true);
  }
  toks.push_back("</s>");
  special.push_back(true);
  const int32_t eos = static_cast<int32_t>(toks.size() - 1);
  return TokenVocab::from_tokens(std::move(toks), std::move(special), {eos});
}

TEST(CountProfile, EveryCountMatchesFullBuild) {
  std::mt19937 rng(17);
  auto vocab = long_token_vocab(rng);
  const TokenVocab::Impl& v = vocab->impl();
  ASSERT_GT(v.max_len, 16);
  const char* grammars[] = {
      // The benchmark's arithmetic grammar with a shorter identifier bound.
      "root  ::= (stmt \"\\n\")+\nstmt  ::= ident ws \"=\" ws expr | expr\n"
      "expr  ::= term (ws [-+] ws term)*\nterm  ::= factor (ws [*/%] ws factor)*\n"
      "factor ::= number | ident | call | \"(\" ws expr ws \")\" | \"-\" factor\n"
      "call  ::= ident \"(\" ws (expr (ws \",\" ws expr)*)? ws \")\"\n"
      "ident ::= [a-zA-Z_] [a-zA-Z0-9_]{0,12}\nnumber ::= [0-9]+ (\".\" [0-9]+)?\n"
      "ws    ::= [ ]?\n",
      "root ::= \"a\" [^<]{0,14} \">\" root?",
      "root ::= ([a-c] [a-c0-9_]{0,10} (\">\" | \"<a>\"))+",
      "root ::= \"\\\"\" ([^\"\\\\] | \"\\\\\" [\"\\\\n]){0,15} \"\\\"\" [ ]? root?",
      "root ::= x{2,12} \">\" y{0,11}\nx ::= [a-c] | \"<a>\"\ny ::= [\\x80-\\U0010FFFF]",
      "root ::= ([ab] [ab]? \" \"){0,9} \"c\"",  // iterations of one or two bytes
      "root ::= (\"a\" [0-1]{0,10} \"a\"?)+",    // a counted body that may end in its caller
  };
  int families = 0;
  for (const char* gbnf : grammars) {
    const int n = check_grammar(gbnf, v, 300);
    EXPECT_GT(n, 0) << gbnf;
    families += n;
  }
  EXPECT_GT(families, 8);
}

TEST(CountProfile, RandomGrammarsMatchFullBuild) {
  std::mt19937 rng(23);
  auto vocab = long_token_vocab(rng);
  int families = 0;
  for (uint32_t seed = 5000; seed < 5200; ++seed)
    families += check_grammar(testing::RandomGrammar(seed, 1 + seed % 4).gbnf(), vocab->impl(), 60);
  EXPECT_GT(families, 0);
}

TEST(CountProfile, Qwen3IdentifiersMatchFullBuild) {
  auto tok = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3");
  ASSERT_TRUE(tok.is_ok()) << tok.status().message();
  auto vocab = TokenVocab::from_tokenizer(**tok, (*tok)->n_vocab());
  // The benchmark's arithmetic grammar: three call sites of the identifier, 31 counts each.
  const char* gbnf =
      "root  ::= (stmt \"\\n\")+\nstmt  ::= ident ws \"=\" ws expr | expr\n"
      "expr  ::= term (ws [-+] ws term)*\nterm  ::= factor (ws [*/%] ws factor)*\n"
      "factor ::= number | ident | call | \"(\" ws expr ws \")\" | \"-\" factor\n"
      "call  ::= ident \"(\" ws (expr (ws \",\" ws expr)*)? ws \")\"\n"
      "ident ::= [a-zA-Z_] [a-zA-Z0-9_]{0,30}\nnumber ::= [0-9]+ (\".\" [0-9]+)?\n"
      "ws    ::= [ ]?\n";
  EXPECT_GE(check_grammar(gbnf, vocab->impl(), 40), 2);
}

}  // namespace
}  // namespace loom::structured
