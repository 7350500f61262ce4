// Gated DeltaNet checkpoints' tensors as llama.cpp's converter writes them (the derived names
// of names::kDeriveQkvzQkv and its neighbours, model/tensor_names.h), for HfTensors.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "format/tensor.h"
#include "model/config.h"

namespace loom {

// Applies the '#'-separated operations `ops` ("#neg_exp#tile") to `src`, in order: the result's
// bytes go to `bytes` and its description to `view` (data left for the caller to point at
// bytes). False when an operation does not apply to the tensor's shape or dtype.
bool derive_deltanet_tensor(const TensorView& src, std::string_view ops, const DeltaNetConfig& d,
                            std::vector<uint8_t>* bytes, TensorView* view);

// True for the operations derive_deltanet_tensor knows.
bool is_deltanet_derivation(std::string_view op);

}  // namespace loom
