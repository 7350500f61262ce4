// `loom bench structured --tokenizer DIR|GGUF [-o json]`: the grammar engine's cost per token.
// For each grammar (a nested JSON schema, any JSON object, a regex, a hand-written GBNF) it
// compiles against the tokenizer's vocabulary (compile_ms: parse + the start positions'
// tables), then drives seeded random walks: each step fills the mask (the only timed call),
// picks an allowed token (biased towards closing characters so documents end), accepts it.
// Reports the median and p99 of the mask time on one pinned thread. Tables built lazily on
// first visits are part of the measured times, as they would be in serving; json_schema_fresh
// compiles a schema with new property names for every document (compile_ms: their median),
// what a server sees when each request brings its own schema. Token tables are shared by the
// whole process (table_store.h), so later rows find those of earlier ones, as in serving.
#include <sched.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <functional>
#include <nlohmann/json.hpp>
#include <random>
#include <string>
#include <tuple>
#include <vector>

#include "loom/tokenizer.h"
#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"

namespace loom::bench {
namespace {

using structured::CompiledGrammar;
using structured::GrammarMatcher;
using structured::TokenVocab;

constexpr const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "maxLength": 64},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "address": {
      "type": "object",
      "properties": {
        "street": {"type": "string"},
        "city": {"type": "string"},
        "zip": {"type": "string", "pattern": "^[0-9]{5}$"},
        "geo": {"type": "object", "properties": {"lat": {"type": "number"}, "lon": {"type": "number"}},
                "required": ["lat", "lon"], "additionalProperties": false}
      },
      "required": ["street", "city"],
      "additionalProperties": false
    },
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "orders": {
      "type": "array",
      "items": {
        "type": "object",
        "properties": {
          "id": {"type": "integer"},
          "status": {"enum": ["pending", "shipped", "delivered"]},
          "total": {"type": "number"},
          "gift": {"type": "boolean"}
        },
        "required": ["id", "status"],
        "additionalProperties": false
      }
    }
  },
  "required": ["name", "age", "address"],
  "additionalProperties": false
})";

constexpr const char* kRegex =
    R"([A-Z][a-z]{1,15}( [A-Z][a-z]{1,15})*, [0-9]{1,5} [A-Za-z ]{3,40}, \([0-9]{3}\) [0-9]{3}-[0-9]{4}( ext\. [0-9]{1,6})?)";

// Arithmetic with function calls and variables (recursive, ambiguous whitespace).
constexpr const char* kGbnf = R"gbnf(
root  ::= (stmt "\n")+
stmt  ::= ident ws "=" ws expr | expr
expr  ::= term (ws [-+] ws term)*
term  ::= factor (ws [*/%] ws factor)*
factor ::= number | ident | call | "(" ws expr ws ")" | "-" factor
call  ::= ident "(" ws (expr (ws "," ws expr)*)? ws ")"
ident ::= [a-zA-Z_] [a-zA-Z0-9_]{0,30}
number ::= [0-9]+ ("." [0-9]+)?
ws    ::= [ ]?
)gbnf";

struct Row {
  std::string grammar;
  double compile_ms = 0;
  double mask_us_median = 0;
  double mask_us_p99 = 0;
  int64_t steps = 0;
  int64_t documents_ended = 0;
};

bool has_closer(const std::string& s) {
  return s.find_first_of("\"}])\n") != std::string::npos;
}

// One document's grammar: the same text every time (compiled once), or a fresh schema each
// document (compiled each time, as when every request brings its own schema).
using GbnfFor = std::function<Result<std::string>(int doc)>;

double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

Result<Row> run_grammar(const std::string& name, const GbnfFor& gbnf_for, bool fresh_per_doc,
                        const std::shared_ptr<const TokenVocab>& vocab, int documents,
                        int max_steps, uint32_t seed) {
  Row row;
  row.grammar = name;
  std::vector<double> compile_ms;
  std::shared_ptr<const CompiledGrammar> cg;
  auto compile = [&](int doc) -> Status {
    LOOM_ASSIGN_OR_RETURN(std::string gbnf, gbnf_for(doc));
    const auto t0 = std::chrono::steady_clock::now();
    LOOM_ASSIGN_OR_RETURN(auto grammar, structured::parse_gbnf(gbnf));
    LOOM_ASSIGN_OR_RETURN(cg, CompiledGrammar::create(grammar, vocab));
    compile_ms.push_back(ms_since(t0));
    return Status::ok();
  };
  if (!fresh_per_doc) LOOM_RETURN_IF_ERROR(compile(0));

  const int32_t n = vocab->size();
  std::vector<uint32_t> words(structured::bitmask_words(n));
  std::vector<double> times;
  std::vector<int32_t> allowed, closers;
  std::mt19937 rng(seed);
  for (int doc = 0; doc < documents; ++doc) {
    if (fresh_per_doc) LOOM_RETURN_IF_ERROR(compile(doc));
    GrammarMatcher m(cg);
    for (int step = 0; step < max_steps; ++step) {
      const auto a = std::chrono::steady_clock::now();
      m.fill_next_token_bitmask(words);
      const auto b = std::chrono::steady_clock::now();
      times.push_back(std::chrono::duration<double, std::micro>(b - a).count());
      ++row.steps;
      allowed.clear();
      closers.clear();
      bool eos_ok = false;
      for (size_t w = 0; w < words.size(); ++w) {
        for (uint32_t bits = words[w]; bits; bits &= bits - 1) {
          const int32_t id = static_cast<int32_t>(w * 32 + __builtin_ctz(bits));
          if (vocab->is_eos(id)) {
            eos_ok = true;
            continue;
          }
          allowed.push_back(id);
          if (has_closer(vocab->bytes(id))) closers.push_back(id);
        }
      }
      // End the document once possible after a while; lean on closing tokens more and more.
      if (eos_ok && (allowed.empty() || step > max_steps / 4 || rng() % 8 == 0)) {
        ++row.documents_ended;
        break;
      }
      if (allowed.empty()) break;
      const bool close =
          !closers.empty() && (rng() % 100) < static_cast<uint32_t>(10 + 80 * step / max_steps);
      const std::vector<int32_t>& from = close ? closers : allowed;
      if (!m.accept_token(from[rng() % from.size()]))
        return internal_error("mask allowed a rejected token");
    }
  }
  auto pct = [](std::vector<double>& v, double p) {
    std::sort(v.begin(), v.end());
    return v.empty() ? 0.0 : v[std::min(v.size() - 1, static_cast<size_t>(p * v.size()))];
  };
  row.compile_ms = pct(compile_ms, 0.5);  // the median compile when fresh per document
  row.mask_us_median = pct(times, 0.5);
  row.mask_us_p99 = pct(times, 0.99);
  return row;
}

// The nested schema with every property name suffixed by the document number: a schema no
// earlier document compiled, with the same shapes (strings, numbers, enums, arrays).
structured::OrderedJson rename_properties(const structured::OrderedJson& s,
                                          const std::string& suffix) {
  if (s.is_array()) {
    structured::OrderedJson out = structured::OrderedJson::array();
    for (const auto& x : s) out.push_back(rename_properties(x, suffix));
    return out;
  }
  if (!s.is_object()) return s;
  structured::OrderedJson out = structured::OrderedJson::object();
  for (const auto& [k, v] : s.items()) {
    if (k == "properties" && v.is_object()) {
      structured::OrderedJson props = structured::OrderedJson::object();
      for (const auto& [pk, pv] : v.items()) props[pk + suffix] = rename_properties(pv, suffix);
      out[k] = props;
    } else if (k == "required" && v.is_array()) {
      structured::OrderedJson req = structured::OrderedJson::array();
      for (const auto& r : v) req.push_back(r.get<std::string>() + suffix);
      out[k] = req;
    } else {
      out[k] = rename_properties(v, suffix);
    }
  }
  return out;
}

int structured_main(int argc, char** argv) {
  CLI::App app{"grammar engine: compile time and per-token mask time"};
  std::string tokenizer_path, output = "table";
  int documents = 8, max_steps = 300;
  uint32_t seed = 1;
  int cpu = -1;
  app.add_option("--tokenizer", tokenizer_path,
                 "tokenizer: GGUF file, tokenizer.json or its directory")
      ->required();
  app.add_option("-o,--output", output, "table or json");
  app.add_option("--documents", documents, "random documents per grammar");
  app.add_option("--max-steps", max_steps, "tokens per document at most");
  app.add_option("--seed", seed, "random walk seed");
  app.add_option("--cpu", cpu, "CPU to pin to (default: the current one)");
  CLI11_PARSE(app, argc, argv);

  cpu_set_t set;
  CPU_ZERO(&set);
  CPU_SET(cpu >= 0 ? cpu : sched_getcpu(), &set);
  sched_setaffinity(0, sizeof set, &set);

  auto tok = Tokenizer::load(tokenizer_path);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "error: %s\n", tok.status().message().c_str());
    return 1;
  }
  // Creating the vocabulary also builds the JSON tables every schema shares (as the server
  // does once at start), outside the timed rows; vocab_ms shows what that costs.
  const auto tv = std::chrono::steady_clock::now();
  auto vocab = TokenVocab::from_tokenizer(**tok, (*tok)->n_vocab());
  const double vocab_ms = ms_since(tv);

  const auto nested = nlohmann::ordered_json::parse(kNestedSchema);
  auto schema_gbnf = [](const nlohmann::ordered_json& s) -> Result<std::string> {
    auto g = structured::json_schema_to_gbnf(s);
    if (!g.is_ok()) return invalid_argument("schema: " + g.status().message());
    return *g;
  };
  auto fixed = [](Result<std::string> g) -> GbnfFor { return [g](int) { return g; }; };
  auto regex = structured::regex_to_gbnf(kRegex);
  const std::vector<std::tuple<std::string, GbnfFor, bool>> grammars = {
      {"json_schema_nested", fixed(schema_gbnf(nested)), false},
      {"json_object", fixed(structured::any_json_object_gbnf()), false},
      {"regex",
       fixed(regex.is_ok()
                 ? Result<std::string>(*regex)
                 : Result<std::string>(invalid_argument("regex: " + regex.status().message()))),
       false},
      {"gbnf_arithmetic", fixed(std::string(kGbnf)), false},
      // Serving: every request its own schema, never seen before, compiled on arrival.
      {"json_schema_fresh",
       [&](int doc) {
         return schema_gbnf(
             rename_properties(nested, "_d" + std::to_string(doc) + "_" + std::to_string(seed)));
       },
       true},
  };

  std::vector<Row> rows;
  for (const auto& [name, gbnf_for, fresh] : grammars) {
    auto row = run_grammar(name, gbnf_for, fresh, vocab, documents, max_steps, seed);
    if (!row.is_ok()) {
      std::fprintf(stderr, "error: %s: %s\n", name.c_str(), row.status().message().c_str());
      return 1;
    }
    rows.push_back(*row);
  }
  if (output == "json") {
    nlohmann::json j = nlohmann::json::array();
    for (const Row& r : rows)
      j.push_back({{"grammar", r.grammar},
                   {"compile_ms", r.compile_ms},
                   {"mask_us_median", r.mask_us_median},
                   {"mask_us_p99", r.mask_us_p99},
                   {"steps", r.steps},
                   {"documents_ended", r.documents_ended}});
    std::printf("%s\n", j.dump(2).c_str());
  } else {
    std::printf(
        "vocabulary: %d tokens (%.0f ms with its JSON tables); %d documents x <= %d tokens per "
        "grammar, "
        "seed %u, one pinned thread\n",
        vocab->size(), vocab_ms, documents, max_steps, seed);
    std::printf("%-20s %11s %15s %12s %7s %6s\n", "grammar", "compile_ms", "mask_us_median",
                "mask_us_p99", "steps", "ended");
    for (const Row& r : rows)
      std::printf("%-20s %11.2f %15.2f %12.2f %7lld %6lld\n", r.grammar.c_str(), r.compile_ms,
                  r.mask_us_median, r.mask_us_p99, static_cast<long long>(r.steps),
                  static_cast<long long>(r.documents_ended));
  }
  return 0;
}

}  // namespace

// Registered from src/cli/cmd_bench.cpp.
int structured_bench_main(int argc, char** argv) {
  return structured_main(argc, argv);
}

}  // namespace loom::bench
