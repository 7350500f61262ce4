// `loom convert HF_DIR OUT.gguf [--type f32|f16|bf16|q8_0|mxfp4]`: a Hugging Face checkpoint
// directory to one GGUF file (logic in tools/convert.h).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <string>

#include "cli/commands.h"
#include "tools/convert.h"

namespace loom::cli {
namespace {

int cmd_convert(int argc, char** argv) {
  CLI::App app{"Convert a Hugging Face model directory (config.json + safetensors) to GGUF.",
               "loom convert"};
  std::string in_dir, out_path, type = "f32";
  ConvertOptions opts;
  app.add_option("hf_dir", in_dir, "Hugging Face model directory")->required();
  app.add_option("out", out_path, "output GGUF file")->required();
  app.add_option("--type", type,
                 "weight-matrix type: f32, f16, bf16, q8_0, mxfp4 (experts; the rest q8_0)")
      ->capture_default_str();
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  auto dt = parse_dtype(type);
  if (!dt) {
    std::fprintf(stderr, "loom convert: unknown --type '%s' (f32, f16, bf16, q8_0, mxfp4)\n",
                 type.c_str());
    return 1;
  }
  opts.type = *dt;
  ConvertReport rep;
  Status st = convert_hf_to_gguf(in_dir, out_path, opts, &rep);
  if (!st.is_ok()) {
    std::fprintf(stderr, "loom convert: %s\n", st.message().c_str());
    return 1;
  }
  for (const auto& n : rep.notes) std::fprintf(stderr, "note: %s\n", n.c_str());
  std::printf("wrote %s: %s, %d tensors, %.2f MiB of weights (%s)\n", out_path.c_str(),
              rep.arch.c_str(), rep.n_tensors, rep.n_bytes / 1048576.0, type.c_str());
  return 0;
}

LOOM_REGISTER_COMMAND("convert", "convert a Hugging Face directory to GGUF", cmd_convert);

}  // namespace
}  // namespace loom::cli
