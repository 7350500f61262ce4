// A model's configuration and its weights bound to the file's tensors, before any backend
// copies them: cheap (the file is mapped, not read), so memory can be planned from it before
// loading, and the same binding then becomes the model (Model::from_bound).
#pragma once

#include <string>

#include "base/status.h"
#include "format/gguf.h"
#include "model/config.h"
#include "model/weights.h"

namespace loom {

struct BoundModel {
  ModelConfig config;
  Weights weights;  // views into the file; weights.keepalive holds its mapping
};

Result<BoundModel> bind_gguf(GgufFile file);
// A Hugging Face directory: config.json + model.safetensors (or its index).
Result<BoundModel> bind_hf_dir(const std::string& dir);

}  // namespace loom
