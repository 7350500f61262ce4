// Tensor element types. Values are ggml's type ids so GGUF files map one to one.
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>

namespace loom {

enum class Dtype : uint32_t {
  kF32 = 0,
  kF16 = 1,
  kQ4_0 = 2,
  kQ4_1 = 3,
  kQ5_0 = 6,
  kQ5_1 = 7,
  kQ8_0 = 8,
  kQ8_1 = 9,  // activation-side format; never stored in model files loom writes
  kQ2_K = 10,
  kQ3_K = 11,
  kQ4_K = 12,
  kQ5_K = 13,
  kQ6_K = 14,
  kQ8_K = 15,  // activation-side format for K-quant dot products
  // llama.cpp's importance-matrix ("i-quant") and ternary types: a file holding them reads
  // (inspect, tokenize, plan), but no kernel computes them (kernels::matmul_supported), so a
  // model with one as a weight is refused at load, naming it.
  kIQ2_XXS = 16,
  kIQ2_XS = 17,
  kIQ3_XXS = 18,
  kIQ1_S = 19,
  kIQ4_NL = 20,
  kIQ3_S = 21,
  kIQ2_S = 22,
  kIQ4_XS = 23,
  kI8 = 24,
  kI16 = 25,
  kI32 = 26,
  kI64 = 27,
  kF64 = 28,
  kIQ1_M = 29,
  kBF16 = 30,
  kTQ1_0 = 34,
  kTQ2_0 = 35,
  kMXFP4 = 39,  // OCP microscaling FP4: 32 E2M1 values sharing one E8M0 scale (gpt-oss experts)
  kNVFP4 = 40,  // read only, as the i-quants
  kQ1_0 = 41,
  kQ2_0 = 42,
};

struct DtypeInfo {
  Dtype dtype;
  std::string_view name;  // "f32", "q4_k", ... (lower case, as on loom's command line)
  int64_t block_size;     // elements per block (1 for plain types)
  int64_t block_bytes;    // bytes per block
  bool quantized;
};

// nullopt for ids loom does not know (an unknown type in a file is an error, not a crash).
std::optional<DtypeInfo> dtype_info(uint32_t ggml_type_id);
const DtypeInfo& dtype_info(Dtype t);
std::string_view dtype_name(Dtype t);
// Parses "f32", "F16", "q4_k", "Q8_0", ... (case-insensitive).
std::optional<Dtype> parse_dtype(std::string_view name);

// Bytes for one row of n elements; nullopt if n is not a multiple of the block size or the
// byte count overflows uint64.
std::optional<uint64_t> row_bytes(Dtype t, int64_t n);

}  // namespace loom
