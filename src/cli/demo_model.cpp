#include "cli/demo_model.h"

#include <cstdio>

namespace loom::cli {

bool use_demo_model_if_empty(std::string& model, const char* command) {
  if (!model.empty()) return false;
  model = kDemoModel;
  std::fprintf(stderr,
               "loom %s: no model given (-m): using the built-in demo model '%s'.\n"
               "      Its weights are RANDOM, so its text is gibberish by design.\n"
               "      Point loom at a real model with -m: a GGUF file, a Hugging Face checkpoint\n"
               "      directory, or a synth preset such as synth:llama-0.5b:q8_0.\n\n",
               command, model.c_str());
  return true;
}

std::string escape_control_bytes(std::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (char ch : text) {
    const auto b = static_cast<unsigned char>(ch);
    if ((b < 0x20 && b != '\n' && b != '\t') || b == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", b);
      out += buf;
    } else {
      out += ch;
    }
  }
  return out;
}

}  // namespace loom::cli
