#include "format/tensor.h"

namespace loom {

std::string shape_string(const TensorView& t) {
  std::string s = "[";
  for (int i = 0; i < t.n_dims; ++i) {
    if (i) s += ", ";
    s += std::to_string(t.ne[i]);
  }
  return s + "]";
}

}  // namespace loom
