// Fuzz target: the grammar compilers (JSON Schema, regex, GBNF, choice lists) on untrusted
// text, then the compiled grammar on a small vocabulary: masks and accepted bytes. Input: byte 0
// picks the compiler, the rest is its text, optionally followed by "\n--accept--\n" and bytes
// for the matcher to consume. A schema or pattern the compiler cannot take is an error; a
// grammar it produced must parse, compile and match without crashing.
#include <algorithm>
#include <memory>
#include <string>
#include <vector>

#include "fuzz_target.h"
#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace {

namespace st = loom::structured;

// Every single byte plus a few multi-byte pieces (JSON punctuation, words, UTF-8), token 0 an
// end-of-sequence control token: enough for masks to mean something, small enough for
// compiling a grammar per input to take milliseconds.
std::shared_ptr<const st::TokenVocab> vocab() {
  static const auto v = [] {
    std::vector<std::string> bytes = {"</s>"};
    for (int b = 0; b < 256; ++b) bytes.emplace_back(1, static_cast<char>(b));
    for (const char* piece : {"{\"",   "\":", "\",", "\"}",      "true",         "false",
                              "null",  "  ",  "\n",  "name",     "abc",          "123",
                              "-1",    ".5",  "e+",  "\xC3\xA9", "\xE2\x82\xAC", "\xF0\x9F\x98\x80",
                              "\\u00", "\\n", "[]",  "{}",       "<tool_call>"})
      bytes.emplace_back(piece);
    std::vector<bool> special(bytes.size(), false);
    special[0] = true;
    return st::TokenVocab::from_tokens(std::move(bytes), std::move(special), {0});
  }();
  return v;
}

loom::Result<std::string> to_gbnf(uint8_t mode, std::string_view text) {
  switch (mode % 4) {
    case 0: {
      auto schema = st::OrderedJson::parse(text, nullptr, /*allow_exceptions=*/false);
      if (schema.is_discarded()) return loom::invalid_argument("not JSON");
      st::JsonGrammarOptions o;
      o.max_whitespace = mode & 4 ? 2 : 0;
      return st::json_schema_to_gbnf(schema, o);
    }
    case 1:
      return st::regex_to_gbnf(text);
    case 2:
      return std::string(text);
    default: {
      std::vector<std::string> choices;
      size_t at = 0;
      while (at <= text.size() && choices.size() < 64) {
        size_t nl = text.find('\n', at);
        if (nl == std::string_view::npos) nl = text.size();
        choices.emplace_back(text.substr(at, nl - at));
        at = nl + 1;
      }
      return st::choice_to_gbnf(choices);
    }
  }
}

}  // namespace

LOOM_FUZZ_TARGET(structured) {
  loom::fuzz::Input in(data, size);
  const uint8_t mode = in.byte();
  auto [text, accept] = in.split("\n--accept--\n");
  auto gbnf = to_gbnf(mode, text);
  if (!gbnf.is_ok()) {
    LOOM_FUZZ_CHECK(!gbnf.status().message().empty(), "an error names its problem");
    return;
  }
  auto grammar = st::parse_gbnf(*gbnf);
  // What the JSON Schema / regex / choice compilers write must be a grammar; GBNF from the
  // input may be anything.
  if (mode % 4 != 2) LOOM_FUZZ_CHECK(grammar.is_ok(), "generated GBNF parses");
  if (!grammar.is_ok()) return;
  auto compiled = st::CompiledGrammar::create(*grammar, vocab());
  if (!compiled.is_ok()) return;
  st::GrammarMatcher m(*compiled);
  std::vector<uint32_t> mask(st::bitmask_words(vocab()->size()));
  m.fill_next_token_bitmask(mask);
  // Feed the accept bytes one token at a time where they match one, else as raw bytes.
  int32_t accepted = 0;
  for (size_t i = 0; i < accept.size() && i < 256; ++i) {
    const int32_t id = 1 + static_cast<uint8_t>(accept[i]);
    const bool allowed = (mask[id / 32] >> (id % 32)) & 1;
    const bool ok = m.accept_token(id);
    LOOM_FUZZ_CHECK(ok == allowed, "accept_token agrees with the mask");
    if (!ok) break;
    ++accepted;
    m.fill_next_token_bitmask(mask);
  }
  if (accepted > 0) {
    m.rollback(std::min(accepted, accepted / 2 + 1));
    m.fill_next_token_bitmask(mask);
  }
  (void)m.can_end();
  (void)m.is_terminated();
}
