// Model::load for the CPU backend: a GGUF file or a Hugging Face directory, bound to the
// architecture's tensor names and run by CpuModel. ("synth:" specs are tooling: see
// tools/model_spec.h.)
#include <filesystem>
#include <memory>

#include "backend/cpu/cpu_model.h"
#include "model/bind.h"
#include "model/model.h"

namespace loom {

Result<std::unique_ptr<Model>> Model::from_gguf(GgufFile file, const ModelLoadOptions& options) {
  LOOM_ASSIGN_OR_RETURN(BoundModel b, bind_gguf(std::move(file)));
  return from_bound(std::move(b), options);
}

Result<std::unique_ptr<Model>> Model::from_hf_dir(const std::string& dir,
                                                  const ModelLoadOptions& options) {
  LOOM_ASSIGN_OR_RETURN(BoundModel b, bind_hf_dir(dir));
  return from_bound(std::move(b), options);
}

Result<std::unique_ptr<Model>> Model::from_bound(BoundModel bound,
                                                 const ModelLoadOptions& options) {
  return std::unique_ptr<Model>(
      new CpuModel(std::move(bound.config), std::move(bound.weights), options));
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
