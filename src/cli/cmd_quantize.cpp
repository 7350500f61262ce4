// `loom quantize IN OUT TYPE`: rewrite a GGUF model with quantized weight matrices (one type,
// or the Q4_K_M / Q5_K_M mixes; see tools/quantize_model.h for the rule).
#include <CLI/CLI.hpp>
#include <chrono>
#include <cstdio>
#include <map>
#include <string>

#include "cli/commands.h"
#include "tools/quantize_model.h"

namespace loom::cli {
namespace {

int cmd_quantize(int argc, char** argv) {
  CLI::App app{"Quantize the weight matrices of a GGUF model (F32/F16/BF16 input).",
               "loom quantize"};
  std::string in, out, type;
  bool allow_requantize = false, verbose = false;
  int threads = 0;
  app.add_option("input", in, "input GGUF")->required();
  app.add_option("output", out, "output GGUF")->required();
  app.add_option("type", type, quantize_target_names())->required();
  app.add_flag("--allow-requantize", allow_requantize,
               "accept already-quantized inputs (dequantized first; errors add up)");
  app.add_option("-t,--threads", threads, "worker threads (0 = physical cores)");
  app.add_flag("-v,--verbose", verbose, "print every tensor's type");
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto target = parse_quantize_target(type);
  if (!target.is_ok()) {
    std::fprintf(stderr, "loom quantize: %s\n", target.status().message().c_str());
    return 1;
  }
  QuantizeOptions o;
  o.allow_requantize = allow_requantize;
  o.n_threads = threads;
  QuantizeReport report;
  const auto start = std::chrono::steady_clock::now();
  Status st = quantize_model_file(in, out, *target, o, &report);
  if (!st.is_ok()) {
    std::fprintf(stderr, "loom quantize: %s\n", st.message().c_str());
    return 1;
  }
  const double secs =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::map<std::string, int> counts;
  for (const auto& t : report.tensors) {
    ++counts[std::string(dtype_name(t.to))];
    if (verbose)
      std::printf("%-32s %6s -> %s\n", t.name.c_str(), std::string(dtype_name(t.from)).c_str(),
                  std::string(dtype_name(t.to)).c_str());
  }
  for (const auto& n : report.notes) std::printf("note: %s\n", n.c_str());
  std::string mix;
  for (const auto& [name, n] : counts)
    mix += (mix.empty() ? "" : ", ") + std::to_string(n) + " " + name;
  std::printf("wrote %s (%s): %zu tensors (%s), %.1f MiB -> %.1f MiB of tensor data, %.2f s\n",
              out.c_str(), target->name.c_str(), report.tensors.size(), mix.c_str(),
              report.bytes_in / 1048576.0, report.bytes_out / 1048576.0, secs);
  return 0;
}

LOOM_REGISTER_COMMAND("quantize", "quantize a GGUF model's weights (Q8_0, Q4_K_M, ...)",
                      cmd_quantize);

}  // namespace
}  // namespace loom::cli
