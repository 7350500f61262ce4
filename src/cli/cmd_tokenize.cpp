// `loom tokenize`: print the token ids of a text (argument or file) for a GGUF file (full model
// or vocabulary only) or a directory holding tokenizer.json.
#include <CLI/CLI.hpp>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <string>

#include "cli/commands.h"
#include "hub/hf_option.h"
#include "loom/tokenizer.h"

namespace loom::cli {
namespace {

int cmd_tokenize(int argc, char** argv) {
  CLI::App app{"Print the token ids of a text", "loom tokenize"};
  std::string model, file, text;
  bool add_special = false, parse_special = false;
  std::string hf_repo;
  app.add_option("-m,--model", model, "GGUF file, or a directory with tokenizer.json");
  hub::add_hf_option(app, &hf_repo);
  auto* file_opt = app.add_option("-f,--file", file, "read the text from this file (exact bytes)");
  auto* text_opt = app.add_option("text", text, "the text to tokenize");
  file_opt->excludes(text_opt);
  app.add_flag("--add-special", add_special, "add BOS/EOS as the vocabulary asks");
  app.add_flag("--parse-special", parse_special,
               "turn special-token text (e.g. <|im_start|>) into tokens");
  CLI11_PARSE(app, argc, argv);

  if (Status st = hub::resolve_hf_option(hf_repo, &model, true); !st.is_ok()) {
    std::fprintf(stderr, "loom tokenize: %s\n", st.message().c_str());
    return 1;
  }
  if (file_opt->count() == 0 && text_opt->count() == 0) {
    std::fprintf(stderr, "loom tokenize: give the text as an argument or with --file PATH\n");
    return 1;
  }
  if (file_opt->count() > 0) {
    std::ifstream f(file, std::ios::binary);
    if (!f) {
      std::fprintf(stderr, "loom tokenize: cannot open %s\n", file.c_str());
      return 1;
    }
    std::ostringstream ss;
    ss << f.rdbuf();
    text = ss.str();
  }

  auto tok = Tokenizer::load(model);
  if (!tok.is_ok()) {
    std::fprintf(stderr, "loom tokenize: %s\n", tok.status().message().c_str());
    return 1;
  }
  std::vector<int32_t> ids = (*tok)->encode(text, add_special, parse_special);
  std::string out;
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i) out += ' ';
    out += std::to_string(ids[i]);
  }
  out += '\n';
  std::fwrite(out.data(), 1, out.size(), stdout);
  return 0;
}

}  // namespace

LOOM_REGISTER_COMMAND("tokenize", "print the token ids of a text", cmd_tokenize);

}  // namespace loom::cli
