// The configuration of a multi-token prediction module run as a model of its own
// (Model::mtp_module): shared by the backend that builds it and the memory plan that sizes it.
#pragma once

#include "model/config.h"

namespace loom {

// Module `index` (< c.n_mtp_layers) of `c`: one block of its spec, no modules of its own,
// ModelConfig::mtp_module set, no classifier or pooling.
ModelConfig mtp_module_config(const ModelConfig& c, int index);

}  // namespace loom
