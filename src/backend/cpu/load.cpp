// Model::load for the CPU backend: a GGUF file or a Hugging Face directory, bound to the
// architecture's tensor names and run by CpuModel. ("synth:" specs are tooling: see
// tools/model_spec.h.)
#include <filesystem>
#include <memory>

#include "backend/cpu/cpu_model.h"
#include "model/arch.h"
#include "model/config_reader.h"
#include "model/hf_tensors.h"
#include "model/model.h"
#include "model/tensor_names.h"
#include "model/weights.h"

namespace loom {

Result<std::unique_ptr<Model>> Model::from_gguf(GgufFile file, const ModelLoadOptions& options) {
  auto holder = std::make_shared<GgufFile>(std::move(file));
  LOOM_ASSIGN_OR_RETURN(ModelConfig config, config_from_gguf(*holder));
  const ArchSpec* arch = find_arch(config.arch);
  TensorLookup find = [&](std::string_view name) -> const TensorView* {
    const GgufTensorInfo* t = holder->find_tensor(name);
    return t ? &t->view : nullptr;
  };
  LOOM_ASSIGN_OR_RETURN(Weights weights, Weights::bind(config, *arch, find));
  weights.keepalive = holder;
  return std::unique_ptr<Model>(new CpuModel(std::move(config), std::move(weights), options));
}

Result<std::unique_ptr<Model>> Model::from_hf_dir(const std::string& dir,
                                                  const ModelLoadOptions& options) {
  LOOM_ASSIGN_OR_RETURN(ModelConfig config, config_from_hf_dir(dir));
  const ArchSpec* arch = find_arch(config.arch);
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<HfTensors> holder, HfTensors::open(dir, *arch));
  TensorLookup find = [&](std::string_view name) { return holder->find(name); };
  LOOM_ASSIGN_OR_RETURN(Weights weights,
                        Weights::bind(config, *arch, find, arch->hf_norm_plus_one));
  weights.keepalive = holder;
  return std::unique_ptr<Model>(new CpuModel(std::move(config), std::move(weights), options));
}

Result<std::unique_ptr<Model>> Model::load(const std::string& spec,
                                           const ModelLoadOptions& options) {
  std::error_code ec;
  if (std::filesystem::is_directory(spec, ec)) return from_hf_dir(spec, options);
  if (!std::filesystem::exists(spec, ec)) return not_found("model not found: " + spec);
  LOOM_ASSIGN_OR_RETURN(GgufFile file, GgufFile::open(spec));
  return from_gguf(std::move(file), options);
}

}  // namespace loom
