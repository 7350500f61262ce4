// FP8 checkpoints as DeepSeek-V3 and Qwen3's "-FP8" releases are published: linear weights
// stored as F8_E4M3 codes with a float scale per block of weight_block_size = [rows, cols]
// (128 x 128) in the sibling tensor `NAME_scale_inv` ([ceil(R / rows)][ceil(C / cols)]),
// config.json saying {"quantization_config": {"quant_method": "fp8", "weight_block_size":
// [128, 128], ...}}. Despite its name the scale multiplies: w = e4m3(code) * scale. loom
// dequantizes them to BF16 when a tensor is first read, as if the checkpoint were the BF16
// release (llama.cpp's converter dequantizes them the same way).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "base/status.h"
#include "format/safetensors.h"
#include "format/tensor.h"

namespace loom {

struct Fp8BlockSize {
  int64_t rows = 128;
  int64_t cols = 128;
};

// The checkpoint's quantization as config.json in `dir` declares it: nullopt for none (or
// gpt-oss's mxfp4, which model/hf_tensors.cpp reads from its tensors, or "fp8" over a
// checkpoint without F8_E4M3 tensors), the block size for "fp8" (128 x 128 unless
// weight_block_size says otherwise, as transformers); any other method is an error that names
// it, as is an F8_E4M3 tensor without "fp8". Every F8_E4M3 weight of `st` must have its scales
// with the shape the block size gives.
Result<std::optional<Fp8BlockSize>> read_fp8_quantization(const std::string& dir,
                                                          const SafetensorsModel& st);

// The value of an E4M3 code (OCP FP8: 1 sign, 4 exponent bits of bias 7, 3 mantissa bits; no
// infinities, S.1111.111 is NaN).
float e4m3_to_float(uint8_t code);

// Dequantizes `codes` (raw F8_E4M3, ggml order ne {C, R}) with `scales` (F32 or BF16, ne
// {ceil(C / cols), ceil(R / rows)}) to BF16: bytes in `bytes`, description in `view` (its data
// left for the caller to point at bytes).
void dequantize_fp8_blocks(const TensorView& codes, const TensorView& scales, Fp8BlockSize block,
                           std::vector<uint8_t>* bytes, TensorView* view);

}  // namespace loom
