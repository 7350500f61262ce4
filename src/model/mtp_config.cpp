#include "model/mtp_config.h"

namespace loom {

ModelConfig mtp_module_config(const ModelConfig& c, int index) {
  ModelConfig m = c;
  m.n_layer = 1;
  m.layers = {c.mtp_layers[index]};
  m.n_mtp_layers = 0;
  m.mtp_layers.clear();
  m.mtp_module = true;
  m.n_cls_out = 0;
  m.pooling = PoolingType::kUnspecified;
  return m;
}

}  // namespace loom
