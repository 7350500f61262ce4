// Model specs as the command line takes them: a GGUF file, a Hugging Face directory, or
// "synth:PRESET[:TYPE]" (random weights built in memory by the synth tool). Model loading
// itself (Model::load) knows nothing of synth; this is where the two meet.
#pragma once

#include <memory>
#include <string>

#include "base/status.h"
#include "loom/tokenizer.h"
#include "model/model.h"

namespace loom::tools {

bool is_synth_spec(const std::string& spec);

// Whether two specs name the same weights: one file or directory (through any path or link to
// it), or one synth spec (synth weights are a function of the spec alone).
bool same_model_spec(const std::string& a, const std::string& b);

Result<std::unique_ptr<Model>> load_model(const std::string& spec,
                                          const ModelLoadOptions& options = {});

// The tokenizer of a model spec, without its weights (a synth spec's from the metadata synth
// would write).
Result<std::unique_ptr<Tokenizer>> load_tokenizer(const std::string& spec);

}  // namespace loom::tools
