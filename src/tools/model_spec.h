// Model specs as the command line takes them: a GGUF file, a Hugging Face directory, or
// "synth:PRESET[:TYPE]" (random weights built in memory by the synth tool). Model loading
// itself (Model::load) knows nothing of synth; this is where the two meet.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "model/model.h"

namespace loom::tools {

bool is_synth_spec(const std::string& spec);

Result<std::unique_ptr<Model>> load_model(const std::string& spec,
                                          const ModelLoadOptions& options = {});

}  // namespace loom::tools
