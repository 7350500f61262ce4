#include "model/bind.h"

#include <memory>

#include "model/arch.h"
#include "model/config_reader.h"
#include "model/hf_tensors.h"

namespace loom {

Result<BoundModel> bind_gguf(GgufFile file) {
  auto holder = std::make_shared<GgufFile>(std::move(file));
  BoundModel b;
  LOOM_ASSIGN_OR_RETURN(b.config, config_from_gguf(*holder));
  const ArchSpec* arch = find_arch(b.config.arch);
  TensorLookup find = [&](std::string_view name) -> const TensorView* {
    const GgufTensorInfo* t = holder->find_tensor(name);
    return t ? &t->view : nullptr;
  };
  LOOM_ASSIGN_OR_RETURN(b.weights, Weights::bind(b.config, *arch, find));
  b.weights.keepalive = holder;
  return b;
}

Result<BoundModel> bind_hf_dir(const std::string& dir) {
  BoundModel b;
  LOOM_ASSIGN_OR_RETURN(b.config, config_from_hf_dir(dir));
  const ArchSpec* arch = find_arch(b.config.arch);
  LOOM_ASSIGN_OR_RETURN(std::shared_ptr<HfTensors> holder, HfTensors::open(dir, *arch, b.config));
  TensorLookup find = [&](std::string_view name) { return holder->find(name); };
  LOOM_ASSIGN_OR_RETURN(b.weights, Weights::bind(b.config, *arch, find, arch->hf_norm_plus_one));
  b.weights.keepalive = holder;
  return b;
}

}  // namespace loom
