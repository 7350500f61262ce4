// Helpers for the front-end tests: compile GBNF text against a byte-level vocabulary (one
// token per byte value, plus EOS) so that any string can be fed to the matcher.
#pragma once

#include <gtest/gtest.h>

#include <memory>
#include <random>
#include <string>
#include <vector>

#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::structured::test {

inline std::shared_ptr<const TokenVocab> byte_vocab() {
  static const std::shared_ptr<const TokenVocab> v = [] {
    std::vector<std::string> bytes;
    std::vector<bool> special;
    for (int i = 0; i < 256; ++i) {
      bytes.push_back(std::string(1, static_cast<char>(i)));
      special.push_back(false);
    }
    bytes.push_back("</s>");
    special.push_back(true);
    return TokenVocab::from_tokens(bytes, special, {256});
  }();
  return v;
}
constexpr int32_t kEos = 256;

// A compiled grammar for `gbnf`, or a test failure naming the parse error.
inline std::shared_ptr<const CompiledGrammar> compile(const std::string& gbnf) {
  auto g = parse_gbnf(gbnf);
  EXPECT_TRUE(g.is_ok()) << g.status().message() << "\n" << gbnf;
  if (!g) return nullptr;
  auto cg = CompiledGrammar::create(*g, byte_vocab());
  EXPECT_TRUE(cg.is_ok()) << cg.status().message() << "\n" << gbnf;
  if (!cg) return nullptr;
  return *cg;
}

// The whole of `text` is a sentence of the grammar.
inline bool accepts(const std::shared_ptr<const CompiledGrammar>& g, const std::string& text) {
  if (!g) return false;
  GrammarMatcher m(g);
  return m.accept_bytes(text) && m.can_end();
}

// A random sentence of the grammar: random allowed bytes, ending with probability p_end
// whenever it may end; also ends when only the end is allowed. Empty on a dead end (none
// can happen in a correct engine) or when max_bytes is hit.
inline bool random_sentence(const std::shared_ptr<const CompiledGrammar>& g, std::mt19937_64& rng,
                            std::string* out, double p_end = 0.1, size_t max_bytes = 20000) {
  GrammarMatcher m(g);
  std::vector<uint32_t> words(bitmask_words(byte_vocab()->size()));
  out->clear();
  while (out->size() < max_bytes) {
    m.fill_next_token_bitmask(words);
    std::vector<int32_t> allowed;
    for (int32_t i = 0; i < 256; ++i)
      if (words[i / 32] >> (i % 32) & 1) allowed.push_back(i);
    const bool can_end = m.can_end();
    if (allowed.empty()) return can_end;
    if (can_end && std::uniform_real_distribution<double>(0, 1)(rng) < p_end) return true;
    // Prefer printable ASCII a little so documents stay readable, but reach everything.
    const int32_t t = allowed[std::uniform_int_distribution<size_t>(0, allowed.size() - 1)(rng)];
    if (!m.accept_token(t)) return false;
    out->push_back(static_cast<char>(t));
  }
  return false;
}

}  // namespace loom::structured::test
