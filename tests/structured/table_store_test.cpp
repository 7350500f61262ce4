// The shared token tables (table_store.h), near-bound derivation and refinement
// (token_table.h) and the mask cache (mask_cache.h) never change a mask: matchers on cached
// grammars and on create_uncached() grammars (every table built from scratch for that grammar
// alone) are walked in lockstep and their masks compared word for word, on random grammars, counted
// repetitions at and near their bounds, and two different JSON schemas over the Qwen3 vocabulary
// that share their string tables.
#include "structured/table_store.h"

#include <gtest/gtest.h>

#include <random>

#include "grammar_oracle.h"
#include "loom/tokenizer.h"
#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/mask_cache.h"
#include "structured/matcher.h"
#include "structured/vocab_index.h"

namespace loom::structured {
namespace {

struct Pair {
  std::shared_ptr<const CompiledGrammar> cached, reference;
};

Pair compile_both(const std::string& gbnf, const std::shared_ptr<const TokenVocab>& vocab) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
  if (!g.is_ok()) return {};
  auto a = CompiledGrammar::create(*g, vocab);
  auto b = CompiledGrammar::create_uncached(*g, vocab);
  EXPECT_TRUE(a.is_ok() && b.is_ok());
  return {*a, *b};
}

// Walks both matchers with the same random tokens (biased towards `prefer` bytes so walks
// reach counted bounds and rule ends); returns the steps taken.
int walk_lockstep(const Pair& p, const std::shared_ptr<const TokenVocab>& vocab, std::mt19937& rng,
                  int steps, const std::string& context, const std::string& prefer = "") {
  GrammarMatcher a(p.cached), b(p.reference);
  const size_t nw = bitmask_words(vocab->size());
  std::vector<uint32_t> wa(nw), wb(nw);
  int taken = 0;
  for (int step = 0; step < steps; ++step) {
    a.fill_next_token_bitmask(wa);
    b.fill_next_token_bitmask(wb);
    for (size_t w = 0; w < nw; ++w)
      if (wa[w] != wb[w]) {
        ADD_FAILURE() << context << " step " << step << " word " << w;
        return taken;
      }
    std::vector<int32_t> allowed, preferred;
    for (int32_t id = 0; id < vocab->size(); ++id) {
      if (!((wa[id >> 5] >> (id & 31)) & 1) || vocab->is_eos(id)) continue;
      allowed.push_back(id);
      if (!prefer.empty() && vocab->bytes(id).find_first_of(prefer) != std::string::npos)
        preferred.push_back(id);
    }
    if (allowed.empty()) break;
    const auto& from = !preferred.empty() && rng() % 4 == 0 ? preferred : allowed;
    const int32_t pick = from[rng() % from.size()];
    EXPECT_TRUE(a.accept_token(pick));
    EXPECT_TRUE(b.accept_token(pick));
    ++taken;
  }
  return taken;
}

std::shared_ptr<const TokenVocab> small_vocab(std::mt19937& rng) {
  std::vector<std::string> toks;
  const auto& a = testing::alphabet();
  for (const std::string& c : a) toks.push_back(c);
  for (int i = 0; i < 60; ++i) toks.push_back(a[rng() % a.size()] + a[rng() % a.size()]);
  for (int len : {3, 5, 8, 13}) {
    for (int i = 0; i < 8; ++i) {
      std::string s;
      for (int k = 0; k < len; ++k) s += a[rng() % a.size()];
      toks.push_back(s);
    }
  }
  for (const char* t : {"\xC3", "\xA9", "\xE2\x82", "\xAC", "aaaaaaaaaa", ">>", "a>", "<", ">"})
    toks.push_back(t);
  std::sort(toks.begin(), toks.end());
  toks.erase(std::unique(toks.begin(), toks.end()), toks.end());
  std::vector<bool> special(toks.size(), false);
  toks.push_back("<a>");
  special.push_back(true);
  toks.push_back("</s>");
  special.push_back(true);
  const int32_t eos = static_cast<int32_t>(toks.size() - 1);
  return TokenVocab::from_tokens(std::move(toks), std::move(special), {eos});
}

TEST(TableStore, RandomGrammarsSameMasksAsUncached) {
  std::mt19937 rng(91);
  auto vocab = small_vocab(rng);  // one store shared by all 150 grammars
  int steps = 0;
  for (uint32_t seed = 2000; seed < 2150; ++seed) {
    testing::RandomGrammar rg(seed, 1 + seed % 4);
    Pair p = compile_both(rg.gbnf(), vocab);
    ASSERT_TRUE(p.cached);
    steps += walk_lockstep(p, vocab, rng, 12, rg.gbnf());
  }
  EXPECT_GT(steps, 600);
  EXPECT_GT(vocab->impl().tables->stats().hits, 0);  // grammars did share tables
}

TEST(TableStore, CountedRulesNearBoundsSameMasksAsUncached) {
  std::mt19937 rng(7);
  auto vocab = small_vocab(rng);
  ASSERT_GT(vocab->impl().max_len, 12);  // so every count below is near its bound
  const char* grammars[] = {
      "root ::= \"a\" [^<]{0,30} \">\" root?",
      "root ::= ([a-z] [a-z0-9_]{0,12} \">\")+",
      "root ::= x{2,20} \">\" y{0,11}\nx ::= [a-c] | \"<a>\"\ny ::= [\\x80-\\U0010FFFF]",
      "root ::= (\"a\" | \"b\" root){0,25} \">\"",                 // calls inside a counted body
      "root ::= \"<\" ([^<>c] | \"c\" [<ab]){0,40} \">\" \"a\"?",  // a string with escapes
  };
  for (const char* gbnf : grammars) {
    Pair p = compile_both(gbnf, vocab);
    ASSERT_TRUE(p.cached) << gbnf;
    int steps = 0;
    for (int rep = 0; rep < 20; ++rep) steps += walk_lockstep(p, vocab, rng, 30, gbnf, ">\"");
    EXPECT_GT(steps, 50) << gbnf;
  }
}

TEST(TableStore, EvictsToBudgetAndKeepsHeldTables) {
  TableStore store(64 << 10);
  std::vector<std::shared_ptr<const TokenTable>> held;
  for (int i = 0; i < 20; ++i) {
    auto t = std::make_shared<TokenTable>();
    t->accepted.assign(4096, static_cast<uint32_t>(i));  // 16 KiB
    held.push_back(store.insert("shape" + std::to_string(i), t));
    EXPECT_EQ(held.back(), t);
  }
  const auto s = store.stats();
  EXPECT_LE(s.bytes, 64 << 10);
  EXPECT_LT(s.tables, 20);
  EXPECT_EQ(store.find("shape0"), nullptr);   // the oldest went first
  EXPECT_NE(store.find("shape19"), nullptr);  // the newest stays
  EXPECT_EQ(held[0]->accepted[7], 0u);        // dropped, but alive where held
  auto other = std::make_shared<TokenTable>();
  EXPECT_EQ(store.insert("shape19", other), held[19]);  // first insert wins
}

std::shared_ptr<const TokenVocab> qwen3_vocab() {
  static std::shared_ptr<const TokenVocab> vocab = [] {
    auto tok = Tokenizer::load(std::string(LOOM_TEST_DATA) + "/hf_tokenizers/qwen3");
    EXPECT_TRUE(tok.is_ok()) << tok.status().message();
    return TokenVocab::from_tokenizer(**tok, (*tok)->n_vocab());
  }();
  return vocab;
}

TEST(TableStore, Qwen3TwoSchemasShareStringTables) {
  auto vocab = qwen3_vocab();
  const auto before = vocab->impl().tables->stats();
  EXPECT_GT(before.tables, 10);  // from_tokenizer built the JSON tables
  auto schema = [](const char* a, const char* b) {
    OrderedJson s = {{"type", "object"},
                     {"properties",
                      {{a, {{"type", "string"}, {"maxLength", 20}}},
                       {b, {{"type", "array"}, {"items", {{"type", "string"}}}}},
                       {"n", {{"type", "number"}}}}},
                     {"required", {a, b, "n"}},
                     {"additionalProperties", false}};
    auto g = json_schema_to_gbnf(s);
    EXPECT_TRUE(g.is_ok());
    return *g;
  };
  std::mt19937 rng(3);
  int steps = 0;
  for (const auto& gbnf : {schema("title", "tags"), schema("name", "labels")}) {
    Pair p = compile_both(gbnf, vocab);
    ASSERT_TRUE(p.cached);
    for (int rep = 0; rep < 2; ++rep) steps += walk_lockstep(p, vocab, rng, 25, gbnf, "\"]}");
  }
  EXPECT_GT(steps, 40);
  const auto after = vocab->impl().tables->stats();
  EXPECT_GT(after.hits, before.hits);  // the second schema found the first one's tables
}

TEST(TableStore, Qwen3IdentifierCounterSameMasksAsUncached) {
  auto vocab = qwen3_vocab();
  // Identifiers near their bound leave thousands of tokens to the stack: their masks go to
  // the mask cache. The second walk retraces the first (same seed), so it reads them back.
  Pair p = compile_both("root ::= (ident \" \")+\nident ::= [a-zA-Z_] [a-zA-Z0-9_]{0,30}", vocab);
  ASSERT_TRUE(p.cached);
  for (int rep = 0; rep < 2; ++rep) {
    std::mt19937 rng(5);
    EXPECT_GT(walk_lockstep(p, vocab, rng, 40, "ident", " "), 20);
  }
}

TEST(MaskCache, LruReusesBuffers) {
  MaskCache cache(2);
  std::vector<uint32_t> a = {1, 2, 3}, b = {4, 5, 6}, c = {7, 8, 9}, out(3);
  cache.put("a", a);
  cache.put("b", b);
  ASSERT_TRUE(cache.get("a", out));  // "a" becomes the most recent
  EXPECT_EQ(out, a);
  cache.put("c", c);  // evicts "b"
  EXPECT_EQ(cache.size(), 2u);
  EXPECT_FALSE(cache.get("b", out));
  ASSERT_TRUE(cache.get("c", out));
  EXPECT_EQ(out, c);
  cache.put("c", a);  // first put wins: a state's mask never changes
  ASSERT_TRUE(cache.get("c", out));
  EXPECT_EQ(out, c);
}

}  // namespace
}  // namespace loom::structured
