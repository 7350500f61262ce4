// Growing a scratch vector to exactly what a step needs: std::vector::resize past the capacity
// may double it, so scratch grown step by step (longer contexts, larger chunks) could hold up
// to twice what the largest step used, and more than the memory plan says.
#pragma once

#include <cstddef>
#include <vector>

namespace loom {

template <class T>
void resize_exact(std::vector<T>& v, size_t n) {
  if (n > v.capacity()) v.reserve(n);  // allocates exactly n
  v.resize(n);
}

}  // namespace loom
