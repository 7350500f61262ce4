// The property tests of issue 14 at engine level: seeded random JSON schemas (hundreds),
// random regexes, and random and hand-written GBNF grammars, each × the random-weight model
// behind Qwen3's real vocabulary. Whatever the weights prefer, an output that ends with "stop"
// must be a complete sentence per an independent checker: ajv for schemas, PCRE2 for regexes
// and for the random grammars (each generated together with an equivalent PCRE2 regex), and a
// recursive-descent recogniser written here for each hand-written recursive grammar. The only
// other ending allowed is "length", and then the tokens must still be a prefix the grammar
// accepts. All requests of a test run through one engine together (64 at a time) with short
// prompts, so that hundreds of documents fit in a few seconds on one core.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <string_view>

#include "structured/ajv_oracle.h"
#include "structured/frontends.h"
#include "structured/grammar_oracle.h"
#include "structured/random_regex.h"
#include "structured/random_schema.h"
#include "structured_engine_fixture.h"

namespace loom {
namespace {

using testing::make_engine;

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

TEST_F(StructuredEngineTest, RandomSchemasGiveAjvValidDocuments) {
  std::string skip;
  const std::string modules = structured::test::ajv_modules(&skip);
  if (modules.empty()) GTEST_SKIP() << skip;
  const auto t0 = std::chrono::steady_clock::now();
  auto e = make_engine(config(0, 0, 64), bytes_);
  ASSERT_TRUE(e);
  structured::JsonGrammarOptions caps;
  caps.max_string_length = 8;
  caps.max_array_items = 3;
  caps.max_number_digits = 6;
  caps.max_depth = 2;
  std::mt19937_64 rng(20261201);
  constexpr int kSchemas = 200;
  std::vector<nlohmann::ordered_json> schemas;
  std::vector<std::shared_ptr<const structured::CompiledGrammar>> gs;
  for (int i = 0; i < kSchemas; ++i) {
    schemas.push_back(structured::test::random_schema(rng));
    auto gbnf = structured::json_schema_to_gbnf(schemas.back(), caps);
    ASSERT_TRUE(gbnf.is_ok()) << gbnf.status().message() << "\n" << schemas.back().dump();
    gs.push_back(compile(*e, *gbnf));
    ASSERT_TRUE(gs.back());
  }
  const double compile_s = seconds_since(t0);
  const StructuredOutcome o = run_cases(*e, gs, 500, 160);
  std::vector<structured::test::AjvCase> cases;
  for (int i = 0; i < kSchemas; ++i)
    cases.push_back({schemas[i], o.stopped[i] ? std::vector<std::string>{o.finished[i]}
                                              : std::vector<std::string>{}});
  EXPECT_GE(o.n_stopped, kSchemas * 3 / 4) << "most documents should end within 160 tokens";
  auto verdicts = structured::test::ajv_validate(modules, cases);
  ASSERT_EQ(verdicts.size(), cases.size());
  for (size_t i = 0; i < cases.size(); ++i)
    for (size_t k = 0; k < cases[i].instances.size(); ++k)
      EXPECT_EQ(verdicts[i][k], 1)
          << "schema " << schemas[i].dump() << "\noutput " << cases[i].instances[k];
  std::printf("schemas %d: %d complete, %lld tokens; compile %.2f s, total %.2f s\n", kSchemas,
              o.n_stopped, static_cast<long long>(o.n_tokens), compile_s, seconds_since(t0));
}

TEST_F(StructuredEngineTest, RandomRegexesFullyMatchUnderPcre2) {
  const auto t0 = std::chrono::steady_clock::now();
  auto e = make_engine(config(0, 0, 64), bytes_);
  ASSERT_TRUE(e);
  std::mt19937_64 rng(77);
  constexpr int kRegexes = 100;
  std::vector<structured::test::Re> res;
  std::vector<std::shared_ptr<const structured::CompiledGrammar>> gs;
  for (int i = 0; i < kRegexes; ++i) {
    res.push_back(structured::test::random_regex(rng, 0));
    auto gbnf = structured::regex_to_gbnf(res.back().ecma);
    ASSERT_TRUE(gbnf.is_ok()) << res.back().ecma << ": " << gbnf.status().message();
    gs.push_back(compile(*e, *gbnf));
    ASSERT_TRUE(gs.back());
  }
  const double compile_s = seconds_since(t0);
  const StructuredOutcome o = run_cases(*e, gs, 9000, 48);
  for (int i = 0; i < kRegexes; ++i) {
    if (!o.stopped[i]) continue;
    structured::test::Pcre pcre(res[i].pcre);
    ASSERT_TRUE(pcre.ok()) << res[i].pcre;
    EXPECT_TRUE(pcre.full_match(o.finished[i]))
        << "regex " << res[i].ecma << " output '" << o.finished[i] << "'";
  }
  EXPECT_GE(o.n_stopped, kRegexes / 2);
  std::printf("regexes %d: %d complete, %lld tokens; compile %.2f s, total %.2f s\n", kRegexes,
              o.n_stopped, static_cast<long long>(o.n_tokens), compile_s, seconds_since(t0));
}

// Recognisers for the hand-written grammars below: plain recursive descent over the text,
// written from the grammars' definitions, sharing no code with the grammar engine.
class Descent {
 public:
  explicit Descent(std::string_view s) : s_(s) {}
  bool whole(const std::function<bool(Descent&)>& f) { return f(*this) && p_ == s_.size(); }
  bool eat(std::string_view lit) {
    if (s_.substr(p_, lit.size()) != lit) return false;
    p_ += lit.size();
    return true;
  }
  bool peek(char c) const { return p_ < s_.size() && s_[p_] == c; }
  // Between min and max characters satisfying `ok` (greedy: the grammars here never need to
  // give one back, their next symbol never starts with such a character).
  bool run(const std::function<bool(char)>& ok, int min, int max) {
    int n = 0;
    while (n < max && p_ < s_.size() && ok(s_[p_])) ++p_, ++n;
    return n >= min;
  }

 private:
  std::string_view s_;
  size_t p_ = 0;
};

bool is_digit(char c) {
  return c >= '0' && c <= '9';
}
bool is_lower(char c) {
  return c >= 'a' && c <= 'z';
}

// expr ::= term (("+" | "-") term)*; term ::= factor (("*" | "/") factor)*;
// factor ::= [0-9]{1,3} | "(" expr ")" | "-" factor
bool arith_expr(Descent& d);
bool arith_factor(Descent& d) {
  if (d.eat("(")) return arith_expr(d) && d.eat(")");
  if (d.eat("-")) return arith_factor(d);
  return d.run(is_digit, 1, 3);
}
bool arith_term(Descent& d) {
  if (!arith_factor(d)) return false;
  while (d.peek('*') || d.peek('/')) {
    d.eat(d.peek('*') ? "*" : "/");
    if (!arith_factor(d)) return false;
  }
  return true;
}
bool arith_expr(Descent& d) {
  if (!arith_term(d)) return false;
  while (d.peek('+') || d.peek('-')) {
    d.eat(d.peek('+') ? "+" : "-");
    if (!arith_term(d)) return false;
  }
  return true;
}

// list ::= "[" (item (", " item)*)? "]"; item ::= [a-z]{1,4} | list
bool nested_list(Descent& d) {
  if (!d.eat("[")) return false;
  if (d.eat("]")) return true;
  for (;;) {
    if (d.peek('[')) {
      if (!nested_list(d)) return false;
    } else if (!d.run(is_lower, 1, 4)) {
      return false;
    }
    if (d.eat("]")) return true;
    if (!d.eat(", ")) return false;
  }
}

// sexp ::= atom | "(" sexp (" " sexp)* ")"; atom ::= [a-z] [a-z0-9]{0,5}
bool sexp(Descent& d) {
  if (d.eat("(")) {
    if (!sexp(d)) return false;
    while (d.eat(" "))
      if (!sexp(d)) return false;
    return d.eat(")");
  }
  return d.run(is_lower, 1, 1) && d.run([](char c) { return is_lower(c) || is_digit(c); }, 0, 5);
}

// root ::= line{1,4}; line ::= key " = " value "\n"; key ::= [a-z_]{1,8};
// value ::= [0-9]{1,4} | "\"" [a-z ]{0,10} "\"" | "[" value ("," value)* "]"
bool config_value(Descent& d) {
  if (d.eat("\""))
    return d.run([](char c) { return is_lower(c) || c == ' '; }, 0, 10) && d.eat("\"");
  if (d.eat("[")) {
    if (!config_value(d)) return false;
    while (d.eat(","))
      if (!config_value(d)) return false;
    return d.eat("]");
  }
  return d.run(is_digit, 1, 4);
}
bool config_file(Descent& d) {
  for (int line = 0; line < 4; ++line) {
    const bool key = d.run([](char c) { return is_lower(c) || c == '_'; }, 1, 8);
    if (!key) return line > 0;
    if (!d.eat(" = ") || !config_value(d) || !d.eat("\n")) return false;
  }
  return true;
}

struct HandWritten {
  const char* name;
  const char* gbnf;
  bool (*recognise)(Descent&);
};

const HandWritten kHandWritten[] = {
    {"arithmetic",
     "root ::= expr\nexpr ::= term ((\"+\" | \"-\") term)*\n"
     "term ::= factor ((\"*\" | \"/\") factor)*\n"
     "factor ::= [0-9]{1,3} | \"(\" expr \")\" | \"-\" factor\n",
     arith_expr},
    {"nested lists",
     "root ::= list\nlist ::= \"[\" (item (\", \" item)*)? \"]\"\n"
     "item ::= [a-z]{1,4} | list\n",
     nested_list},
    {"s-expressions",
     "root ::= sexp\nsexp ::= atom | \"(\" sexp (\" \" sexp)* \")\"\n"
     "atom ::= [a-z] [a-z0-9]{0,5}\n",
     sexp},
    {"config",
     "root ::= line{1,4}\nline ::= key \" = \" value \"\\n\"\nkey ::= [a-z_]{1,8}\n"
     "value ::= [0-9]{1,4} | \"\\\"\" [a-z ]{0,10} \"\\\"\" | \"[\" value (\",\" value)* \"]\"\n",
     config_file},
};

TEST_F(StructuredEngineTest, RandomAndHandWrittenGbnfGiveRecognisedSentences) {
  const auto t0 = std::chrono::steady_clock::now();
  auto e = make_engine(config(0, 0, 64), bytes_);
  ASSERT_TRUE(e);
  // Random regex-equivalent grammars (tests/structured/grammar_oracle.h: 1-4 rules, classes,
  // negated classes, repetitions, counted rules), then 10 requests per hand-written grammar.
  constexpr int kRandom = 100, kPerHandWritten = 10;
  std::vector<structured::testing::RandomGrammar> random;
  std::vector<std::shared_ptr<const structured::CompiledGrammar>> gs;
  for (uint32_t seed = 0; seed < kRandom; ++seed) {
    random.emplace_back(5000 + seed, 1 + seed % 4);
    gs.push_back(compile(*e, random.back().gbnf()));
    ASSERT_TRUE(gs.back()) << random.back().gbnf();
  }
  for (const HandWritten& h : kHandWritten) {
    auto g = compile(*e, h.gbnf);
    ASSERT_TRUE(g) << h.name;
    // The recogniser itself must be able to say no (a recogniser that accepts all is no check).
    EXPECT_FALSE(Descent("").whole(h.recognise)) << h.name;
    EXPECT_FALSE(Descent("[a,b]((1").whole(h.recognise)) << h.name;
    for (int k = 0; k < kPerHandWritten; ++k) gs.push_back(g);
  }
  const double compile_s = seconds_since(t0);
  const StructuredOutcome o = run_cases(*e, gs, 7000, 64);
  int random_stopped = 0, hand_stopped = 0, gave_up = 0;
  for (int i = 0; i < kRandom; ++i) {
    if (!o.stopped[i]) continue;
    ++random_stopped;
    structured::testing::Oracle oracle(random[i].regex());
    ASSERT_TRUE(oracle.ok()) << random[i].regex();
    const bool full = oracle.full(o.finished[i]);
    if (oracle.gave_up()) {
      ++gave_up;
      continue;
    }
    EXPECT_TRUE(full) << random[i].gbnf() << "regex " << random[i].regex() << "\noutput '"
                      << o.finished[i] << "'";
  }
  for (size_t i = kRandom; i < gs.size(); ++i) {
    if (!o.stopped[i]) continue;
    ++hand_stopped;
    const HandWritten& h = kHandWritten[(i - kRandom) / kPerHandWritten];
    EXPECT_TRUE(Descent(o.finished[i]).whole(h.recognise))
        << h.name << " output '" << o.finished[i] << "'";
  }
  EXPECT_GE(random_stopped, kRandom / 2);
  EXPECT_LE(gave_up, 2);
  EXPECT_GE(hand_stopped, kPerHandWritten * 4 / 2);
  std::printf(
      "gbnf: random %d complete of %d, hand-written %d of %d, %lld tokens; compile %.2f s, "
      "total %.2f s\n",
      random_stopped, kRandom, hand_stopped, kPerHandWritten * 4,
      static_cast<long long>(o.n_tokens), compile_s, seconds_since(t0));
}

}  // namespace
}  // namespace loom
