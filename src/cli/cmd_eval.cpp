// `loom eval -m MODEL --tokens "ID ID ..."`: teacher-forced scoring of one token sequence.
// Prints the mean negative log-likelihood of tokens[1..] given their prefixes (and the
// perplexity), and optionally writes every position's logits as float32 little-endian
// [n_tokens][n_vocab]. Needs no tokenizer: it is how loom's numbers are compared with other
// implementations' logits.
#include <CLI/CLI.hpp>
#include <cmath>
#include <cstdio>
#include <sstream>
#include <string>
#include <vector>

#include "cli/commands.h"
#include "hub/hf_option.h"
#include "model/model.h"
#include "tools/model_spec.h"

namespace loom::cli {
namespace {

bool parse_tokens(const std::string& s, std::vector<int32_t>* out) {
  std::string norm = s;
  for (char& c : norm)
    if (c == ',') c = ' ';
  std::istringstream in(norm);
  std::string w;
  while (in >> w) {
    char* end = nullptr;
    long v = std::strtol(w.c_str(), &end, 10);
    if (*end != '\0' || v < 0 || v > INT32_MAX) return false;
    out->push_back(static_cast<int32_t>(v));
  }
  return true;
}

int cmd_eval(int argc, char** argv) {
  CLI::App app{"Score a token sequence: mean NLL of each token given its prefix.", "loom eval"};
  std::string model_spec, tokens_str, logits_out;
  int threads = 0;
  app.add_option("-m,--model", model_spec,
                 "GGUF file, Hugging Face directory or synth:PRESET[:TYPE]");
  std::string hf_repo;
  hub::add_hf_option(app, &hf_repo);
  app.add_option("--tokens", tokens_str, "token ids separated by spaces or commas")->required();
  app.add_option("--logits-out", logits_out, "write float32 LE logits [n_tokens][n_vocab] here");
  app.add_option("-t,--threads", threads, "CPU threads (0 = physical cores)");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  if (Status st = hub::resolve_hf_option(hf_repo, &model_spec, true); !st.is_ok()) {
    std::fprintf(stderr, "loom eval: %s\n", st.message().c_str());
    return 1;
  }
  std::vector<int32_t> tokens;
  if (!parse_tokens(tokens_str, &tokens) || tokens.empty()) {
    std::fprintf(stderr, "loom eval: --tokens must be one or more non-negative integers\n");
    return 1;
  }
  auto model = tools::load_model(model_spec, {threads});
  if (!model.is_ok()) {
    std::fprintf(stderr, "loom eval: %s\n", model.status().message().c_str());
    return 1;
  }
  Model& m = **model;
  const int32_t V = m.config().n_vocab;
  const int32_t n = static_cast<int32_t>(tokens.size());
  const int32_t block_size = 16;
  const int32_t n_blocks = (n + block_size - 1) / block_size;
  auto kv = KvCache::create(m.config(), n_blocks, block_size, Dtype::kF32);
  if (!kv.is_ok()) {
    std::fprintf(stderr, "loom eval: %s\n", kv.status().message().c_str());
    return 1;
  }
  std::vector<int32_t> table(n_blocks);
  for (int32_t i = 0; i < n_blocks; ++i) table[i] = i;
  Batch b;
  b.sequences.push_back({table.data(), n_blocks, 0, n, 0});
  if ((*kv)->num_state_slots() > 0) b.sequences[0].state_slot = 0;  // a hybrid's recurrent state
  for (int32_t i = 0; i < n; ++i) {
    b.tokens.push_back(tokens[i]);
    b.pos.push_back(i);
    b.seq.push_back(0);
    b.logits_rows.push_back(i);
  }
  std::vector<float> logits(static_cast<size_t>(n) * V);
  Status st = m.forward(b, **kv, logits.data());
  if (!st.is_ok()) {
    std::fprintf(stderr, "loom eval: %s\n", st.message().c_str());
    return 1;
  }
  double nll = 0;
  for (int32_t i = 1; i < n; ++i) {
    const float* row = &logits[static_cast<size_t>(i - 1) * V];
    double mx = row[0];
    for (int32_t v = 1; v < V; ++v) mx = std::max(mx, static_cast<double>(row[v]));
    double sum = 0;
    for (int32_t v = 0; v < V; ++v) sum += std::exp(row[v] - mx);
    nll += -(row[tokens[i]] - mx - std::log(sum));
  }
  std::printf("model: %s (%s)\n", model_spec.c_str(), m.config().arch.c_str());
  std::printf("tokens: %d\n", n);
  if (n >= 2) {
    nll /= (n - 1);
    std::printf("mean_nll: %.6f\nperplexity: %.6f\n", nll, std::exp(nll));
  } else {
    std::printf("mean_nll: n/a (needs at least 2 tokens)\n");
  }
  if (!logits_out.empty()) {
    FILE* f = std::fopen(logits_out.c_str(), "wb");
    if (!f || std::fwrite(logits.data(), sizeof(float), logits.size(), f) != logits.size()) {
      std::fprintf(stderr, "loom eval: cannot write %s\n", logits_out.c_str());
      if (f) std::fclose(f);
      return 1;
    }
    if (std::fclose(f) != 0) {
      std::fprintf(stderr, "loom eval: cannot write %s\n", logits_out.c_str());
      return 1;
    }
    std::printf("logits: %s [%d][%d] float32\n", logits_out.c_str(), n, V);
  }
  return 0;
}

LOOM_REGISTER_COMMAND("eval", "score a token sequence (mean NLL, logits dump)", cmd_eval);

}  // namespace
}  // namespace loom::cli
