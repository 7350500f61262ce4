// `loom run`: generate text for one prompt, streamed to stdout, then report prompt and
// generation speed. Goes through the same Engine as the server (one request).
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "cli/demo_model.h"
#include "hub/hf_option.h"
#include "loom/engine.h"
#include "loom/tokenizer.h"
#include "model/model.h"
#include "spec/spec_flags.h"
#include "structured/frontends.h"
#include "structured/grammar.h"
#include "structured/matcher.h"
#include "tools/model_spec.h"

namespace loom::cli {
namespace {

bool read_file(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::stringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

// --json-schema FILE / --grammar FILE → the GBNF the output must follow ("" = free text).
Result<std::string> output_grammar(const std::string& schema_file,
                                   const std::string& grammar_file) {
  if (!schema_file.empty() && !grammar_file.empty())
    return invalid_argument("give --json-schema or --grammar, not both");
  std::string text;
  if (!grammar_file.empty()) {
    if (!read_file(grammar_file, &text))
      return invalid_argument("cannot read --grammar " + grammar_file);
    return text;
  }
  if (schema_file.empty()) return std::string();
  if (!read_file(schema_file, &text))
    return invalid_argument("cannot read --json-schema " + schema_file);
  structured::OrderedJson schema;
  try {
    schema = structured::OrderedJson::parse(text);
  } catch (const nlohmann::json::exception& e) {
    return invalid_argument("--json-schema " + schema_file + " is not valid JSON: " + e.what());
  }
  auto g = structured::json_schema_to_gbnf(schema);
  if (!g.is_ok())
    return invalid_argument("--json-schema " + schema_file + ": " + g.status().message());
  return g;
}

int cmd_run(int argc, char** argv) {
  CLI::App app{"Generate text from a prompt", "loom run"};
  std::string model;
  std::string prompt = "Once upon a time";
  int n_predict = 64;
  float temperature = 0.8f;
  int top_k = 40;
  float top_p = 0.95f;
  int64_t seed = -1;
  int threads = 0;
  std::string json_schema_file, grammar_file;
  app.add_option("-m,--model", model,
                 "GGUF file, Hugging Face directory or synth:PRESET[:TYPE] (optional; default: "
                 "the random-weight demo model " +
                     std::string(kDemoModel) + ")");
  std::string hf_repo;
  hub::add_hf_option(app, &hf_repo);
  app.add_option("-p,--prompt", prompt, "prompt text")->capture_default_str();
  app.add_option("-n,--n-predict", n_predict, "tokens to generate")
      ->check(CLI::Range(1, 1 << 20))
      ->capture_default_str();
  app.add_option("--temp", temperature, "temperature (0 = greedy)")
      ->check(CLI::Range(0.0, 100.0))
      ->capture_default_str();
  app.add_option("--top-k", top_k, "top-k (0 = off)")
      ->check(CLI::Range(0, 1 << 30))
      ->capture_default_str();
  app.add_option("--top-p", top_p, "top-p")->check(CLI::Range(0.0, 1.0))->capture_default_str();
  app.add_option("--seed", seed, "random seed (-1 = random)")->capture_default_str();
  app.add_option("-t,--threads", threads, "CPU threads (0 = physical cores)")
      ->check(CLI::Range(0, 1024))
      ->capture_default_str();
  app.add_option("--json-schema", json_schema_file,
                 "constrain the output to this JSON Schema (file)");
  app.add_option("--grammar", grammar_file,
                 "constrain the output to this GBNF grammar (file, llama.cpp syntax)");
  spec::SpeculativeFlags spec_flags;
  spec_flags.add_to(app);
  CLI11_PARSE(app, argc, argv);
  auto gbnf = output_grammar(json_schema_file, grammar_file);
  if (!gbnf.is_ok()) {
    std::fprintf(stderr, "loom run: %s\n", gbnf.status().message().c_str());
    return 1;
  }

  if (Status st = hub::resolve_hf_option(hf_repo, &model, false); !st.is_ok()) {
    std::fprintf(stderr, "loom run: %s\n", st.message().c_str());
    return 1;
  }
  const bool demo = use_demo_model_if_empty(model, "run");

  EngineConfig config;
  config.n_threads = threads;
  config.max_num_seqs = 1;
  if (Status st = spec_flags.apply(config.speculative); !st.is_ok()) {
    std::fprintf(stderr, "loom run: %s\n", st.message().c_str());
    return 1;
  }
  auto t_load = std::chrono::steady_clock::now();
  auto engine = Engine::load(model, config);
  if (!engine.is_ok()) {
    std::fprintf(stderr, "loom run: %s\n", engine.status().message().c_str());
    return 1;
  }
  Engine& e = **engine;
  double load_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t_load).count();
  const Tokenizer* tok = e.tokenizer();
  if (tok == nullptr) {
    // The engine runs on token ids without one; say why there is none (absent, or a
    // tokenizer the file has that does not load) in the tokenizer's own words.
    auto why = tools::load_tokenizer(model);
    std::fprintf(
        stderr,
        "loom run: the model's tokenizer cannot be used: %s; use `loom eval --tokens` instead\n",
        why.is_ok() ? "it did not load" : why.status().message().c_str());
    return 1;
  }
  std::fprintf(stderr, "loom: loaded %s (%s, %d layers, vocab %d) in %.2f s\n", model.c_str(),
               e.model().config().arch.c_str(), e.model().config().n_layer,
               e.model().config().n_vocab, load_s);

  GenerateRequest req;
  req.request_id = "run";
  req.prompt = tok->encode(prompt, /*add_special=*/true, /*parse_special=*/true);
  if (req.prompt.empty()) {
    std::fprintf(stderr, "loom run: the prompt is empty after tokenization\n");
    return 1;
  }
  req.params.max_tokens = n_predict;
  req.params.temperature = temperature;
  req.params.top_k = top_k;
  req.params.top_p = top_p;
  if (seed >= 0) req.params.seed = static_cast<uint64_t>(seed);
  if (!gbnf->empty()) {
    auto grammar = structured::parse_gbnf(*gbnf);
    std::shared_ptr<const structured::CompiledGrammar> compiled;
    if (grammar.is_ok()) {
      auto c = structured::CompiledGrammar::create(
          *grammar, structured::TokenVocab::from_tokenizer(*tok, e.model().config().n_vocab));
      if (c.is_ok())
        compiled = *c;
      else
        grammar = c.status();
    }
    if (!compiled) {
      std::fprintf(stderr, "loom run: grammar: %s\n", grammar.status().message().c_str());
      return 1;
    }
    req.params.grammar = compiled;
  } else if (demo) {
    req.params.ignore_eos = true;  // random weights: EOS would be a coin flip
  }
  if (Status st = e.add_request(req); !st.is_ok()) {
    std::fprintf(stderr, "loom run: %s\n", st.message().c_str());
    return 1;
  }

  // On a terminal, control bytes in the prompt or the model's text are shown escaped, not
  // obeyed; piped or redirected output stays byte-exact.
  const bool tty = isatty(STDOUT_FILENO) != 0;
  auto print = [&](const std::string& text) {
    std::fputs(tty ? escape_control_bytes(text).c_str() : text.c_str(), stdout);
  };
  print(prompt);
  std::fflush(stdout);
  using Clock = std::chrono::steady_clock;
  auto t0 = Clock::now();
  Clock::time_point t_first;
  int n_generated = 0;
  while (e.has_unfinished()) {
    auto outs = e.step();
    if (!outs.is_ok()) {
      std::fprintf(stderr, "\nloom run: %s\n", outs.status().message().c_str());
      return 1;
    }
    for (const RequestOutput& ro : *outs) {
      for (const CompletionOutput& co : ro.outputs) {
        if (n_generated == 0 && !co.token_ids.empty()) t_first = Clock::now();
        n_generated += static_cast<int>(co.token_ids.size());
        print(co.text);
      }
      std::fflush(stdout);
    }
  }
  auto t_end = Clock::now();
  std::fputc('\n', stdout);
  const double prefill_s = std::chrono::duration<double>(t_first - t0).count();
  const double decode_s = std::chrono::duration<double>(t_end - t_first).count();
  const size_t n_prompt = req.prompt.size();
  // The first token comes out of the prefill step; the rest are decode steps.
  std::fprintf(stderr,
               "\nprompt: %zu tokens, %.2f tokens/s | generation: %d tokens, %.2f tokens/s\n",
               n_prompt, prefill_s > 0 ? n_prompt / prefill_s : 0.0, n_generated,
               (n_generated > 1 && decode_s > 0) ? (n_generated - 1) / decode_s : 0.0);
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("run", "generate text from a prompt (streams to stdout)", cmd_run);

}  // namespace loom::cli
