// The grammar engine's runtime API (src/structured): a compiled grammar bound to a model's
// vocabulary, and one matcher per constrained sequence that yields the bitmask of tokens
// allowed next and advances as tokens are accepted.
//
//   auto vocab   = TokenVocab::from_tokenizer(tok, n_vocab);      // once per model
//   auto grammar = parse_gbnf(text);                               // or a front-end's GBNF
//   auto cg      = CompiledGrammar::create(grammar, vocab);        // cached by GrammarCache
//   GrammarMatcher m(cg);
//   m.fill_next_token_bitmask(words);  m.accept_token(id);  m.can_end();
//
// Guarantees (tests/structured):
// - A token is allowed iff its bytes extend the accepted prefix to a prefix of some sentence
//   of the grammar. Special (control) tokens are allowed only where a grammar literal names
//   their exact text; EOS tokens are allowed exactly when the grammar can end.
// - Masks depend only on the accepted bytes, never on timing or other requests.
// - Work that does not depend on the parser stack (which tokens a rule position accepts or
//   rejects on its own) is done once per (rule shape, vocabulary) and shared by all matchers
//   and all grammars: the JSON string body of every schema shares one table.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.h"

namespace loom {
class Tokenizer;
}

namespace loom::structured {

class Grammar;  // grammar.h: the compiled rule set (parse_gbnf)

// The vocabulary as the grammar engine sees it: each token's raw bytes, which tokens are
// special (control) tokens, and which end generation. Immutable; shared by every grammar
// compiled for the model.
class TokenVocab {
 public:
  // n_vocab: the model's logits width (may exceed the tokenizer's; extra ids are never allowed).
  // Also builds the token tables every JSON grammar shares (table_store.h; tens of ms, once).
  static std::shared_ptr<const TokenVocab> from_tokenizer(const Tokenizer& tokenizer,
                                                          int32_t n_vocab);
  // For tests: explicit bytes; special[i] marks control tokens; eos lists end-of-generation ids.
  static std::shared_ptr<const TokenVocab> from_tokens(std::vector<std::string> bytes,
                                                       std::vector<bool> special,
                                                       std::vector<int32_t> eos);
  ~TokenVocab();

  int32_t size() const;  // n_vocab (bits in a mask)
  const std::string& bytes(int32_t id) const;
  bool is_special(int32_t id) const;
  bool is_eos(int32_t id) const;
  const std::vector<int32_t>& eos_ids() const;
  uint64_t fingerprint() const;  // identifies the vocabulary in cache keys

  struct Impl;
  const Impl& impl() const { return *impl_; }

 private:
  TokenVocab() = default;
  std::unique_ptr<Impl> impl_;
};

// Words of a token bitmask for n_vocab tokens: bit (id % 32) of word (id / 32), 1 = allowed.
inline size_t bitmask_words(int32_t n_vocab) {
  return (static_cast<size_t>(n_vocab) + 31) / 32;
}

// A grammar bound to a vocabulary, with the per-position token caches. Thread-safe: many
// matchers on many threads share one.
class CompiledGrammar {
 public:
  static Result<std::shared_ptr<const CompiledGrammar>> create(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);
  // Tests: every table built from scratch for this grammar, sharing nothing (the reference
  // the shared store and near-bound derivation are checked against). Same masks, slower.
  static Result<std::shared_ptr<const CompiledGrammar>> create_uncached(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab);
  ~CompiledGrammar();
  const Grammar& grammar() const;
  const TokenVocab& vocab() const;

  struct Impl;
  Impl& impl() const { return *impl_; }

 private:
  CompiledGrammar() = default;
  static Result<std::shared_ptr<const CompiledGrammar>> create_impl(
      std::shared_ptr<const Grammar> grammar, std::shared_ptr<const TokenVocab> vocab, bool cached);
  std::unique_ptr<Impl> impl_;
};

// Compiles GBNF text for a vocabulary, or returns the cached result for the same (text, root,
// vocabulary): a repeated schema costs a hash lookup. Thread-safe; bounded (least recently
// used entries are dropped).
class GrammarCache {
 public:
  explicit GrammarCache(size_t capacity = 256);
  ~GrammarCache();
  Result<std::shared_ptr<const CompiledGrammar>> get(std::string_view gbnf,
                                                     std::shared_ptr<const TokenVocab> vocab);
  size_t size() const;
  // Lookups answered from the cache, and grammars compiled (failed compiles included).
  struct Stats {
    uint64_t hits = 0;
    uint64_t misses = 0;
  };
  Stats stats() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// One sequence's position in a grammar.
class GrammarMatcher {
 public:
  explicit GrammarMatcher(std::shared_ptr<const CompiledGrammar> grammar);
  ~GrammarMatcher();
  GrammarMatcher(GrammarMatcher&&) noexcept;
  GrammarMatcher& operator=(GrammarMatcher&&) noexcept;

  // Writes bitmask_words(vocab.size()) words: the tokens that may come next. EOS ids are set
  // iff can_end(). If the grammar is terminated (nothing but the end can follow) only EOS.
  void fill_next_token_bitmask(std::span<uint32_t> words);
  // Advances by one token. Returns false, leaving the state unchanged, if the token is not
  // allowed. An EOS token is accepted only when can_end() and then terminates the matcher.
  bool accept_token(int32_t id);
  // Advances by raw bytes (tests, prompts that end inside a constrained region).
  bool accept_bytes(std::string_view bytes);
  // The bytes accepted so far form a complete sentence of the grammar.
  bool can_end() const;
  // can_end() and no byte can follow: generation must stop here.
  bool is_terminated() const;
  // Undoes the last n accepted tokens (speculative decoding); n <= tokens accepted.
  void rollback(int32_t n_tokens);
  int32_t num_accepted_tokens() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace loom::structured
