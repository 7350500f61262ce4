// Fuzz target: a Hugging Face model directory from untrusted bytes. The input is config.json,
// optionally followed by "\n--safetensors--\n" and a model.safetensors file: the config alone
// goes through config_from_hf_json; with a checkpoint both are written to a scratch directory
// and bound as loading does (bind_hf_dir: hyperparameters, HF → GGUF tensor names, experts
// stacked, gpt-oss's fused tensors derived).
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>

#include "fuzz_target.h"
#include "model/bind.h"
#include "model/config_reader.h"

namespace {

// A directory of this process, removed at exit.
struct ScratchDir {
  ScratchDir() {
    path = (std::filesystem::temp_directory_path() / "loom_fuzz_hf_XXXXXX").string();
    if (!mkdtemp(path.data())) std::abort();
  }
  ~ScratchDir() {
    std::error_code ec;
    std::filesystem::remove_all(path, ec);
  }
  std::string path;
};

const std::string& scratch_dir() {
  static const ScratchDir dir;
  return dir.path;
}

void write(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

}  // namespace

LOOM_FUZZ_TARGET(hf_config) {
  loom::fuzz::Input in(data, size);
  auto [config, checkpoint] = in.split("\n--safetensors--\n");
  auto c = loom::config_from_hf_json(config, "config.json");
  if (c.is_ok()) {
    LOOM_FUZZ_CHECK(c->n_layer >= 0 && c->n_embd >= 0, "sizes are never negative");
  } else {
    LOOM_FUZZ_CHECK(!c.status().message().empty(), "an error names its problem");
  }
  if (checkpoint.empty() || !c.is_ok()) return;
  const std::string& dir = scratch_dir();
  write(dir + "/config.json", config);
  write(dir + "/model.safetensors", checkpoint);
  (void)loom::bind_hf_dir(dir);
}
