// `loom synth`: write a random-weight GGUF model of an exact preset shape (for tests,
// benchmarks and demos without downloading a checkpoint).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "tools/synth.h"
#include "tools/synth_presets.h"

namespace loom::cli {
namespace {

std::string join(const std::vector<std::string_view>& v) {
  std::string s;
  for (auto x : v) s += (s.empty() ? "" : ", ") + std::string(x);
  return s;
}

int cmd_synth(int argc, char** argv) {
  CLI::App app{"Write a model with random weights of a preset shape as a GGUF file.", "loom synth"};
  std::string arch, preset = "tiny", vocab, type = "f32", out;
  uint64_t seed = 42;
  app.add_option("--arch", arch,
                 "llama | qwen2 | qwen3 | gemma2 | gemma3 | phi3 | granite | olmo2 | smollm3 "
                 "(default: the preset's family)");
  app.add_option("--preset", preset, "shape: " + join(synth_preset_names()))->capture_default_str();
  app.add_option("--vocab", vocab, "GGUF file whose tokenizer.* metadata the model gets");
  app.add_option("--type", type,
                 "weight matrix type: f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, iq4_nl, "
                 "iq4_xs, mxfp4 (experts; the rest q8_0)")
      ->capture_default_str();
  app.add_option("--seed", seed, "random seed (same seed, same bytes)")->capture_default_str();
  app.add_option("-o,--output", out, "output GGUF path")->required();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }

  SynthOptions o;
  o.preset = preset;
  const SynthPreset* ps = find_synth_preset(preset);
  if (!ps) {
    std::fprintf(stderr, "loom synth: unknown preset '%s' (choose one of: %s)\n", preset.c_str(),
                 join(synth_preset_names()).c_str());
    return 1;
  }
  o.arch = arch.empty() ? std::string(ps->default_arch) : arch;
  auto t = parse_dtype(type);
  if (!t || !is_synth_weight_type(*t)) {
    std::fprintf(
        stderr,
        "loom synth: bad --type '%s' (use f32, f16, bf16, q8_0, q4_0, q4_k, q5_k, q6_k, iq4_nl, "
        "iq4_xs or mxfp4)\n",
        type.c_str());
    return 1;
  }
  o.type = *t;
  o.seed = seed;
  o.vocab_path = vocab;

  const auto start = std::chrono::steady_clock::now();
  SynthReport report;
  Status st = synth_model_file(o, out, &report);
  if (!st.is_ok()) {
    std::fprintf(stderr, "loom synth: %s\n", st.message().c_str());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  for (const auto& n : report.notes) std::printf("note: %s\n", n.c_str());
  char params[32];
  if (report.n_params >= 1000000000ull)
    std::snprintf(params, sizeof params, "%.2f B", report.n_params / 1e9);
  else
    std::snprintf(params, sizeof params, "%.2f M", report.n_params / 1e6);
  std::printf("wrote %s: %s %s, %s weights, %llu params (%s), %.1f MiB, %.2f s\n", out.c_str(),
              o.arch.c_str(), o.preset.c_str(), std::string(dtype_name(o.type)).c_str(),
              static_cast<unsigned long long>(report.n_params), params, report.n_bytes / 1048576.0,
              secs);
  std::printf("vocabulary: %d tokens, %s\n", report.n_vocab, report.vocab_source.c_str());
  std::printf("the weights are random (seed %llu): this is not a trained model\n",
              static_cast<unsigned long long>(seed));
  return 0;
}

LOOM_REGISTER_COMMAND("synth", "write a random-weight model of a preset shape (GGUF)", cmd_synth);

}  // namespace
}  // namespace loom::cli
