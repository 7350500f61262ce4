// The element types a GGUF file may hold, against llama.cpp's own table (gguf-py's
// GGML_QUANT_SIZES in gguf/constants.py, 2026: ggml type id -> elements and bytes per block):
// every type it lists reads, with its block geometry, so `loom inspect` and the reader take any
// file llama.cpp writes (i-quants too), and ids it does not list stay unknown.
#include <gtest/gtest.h>

#include <set>
#include <tuple>
#include <vector>

#include "format/dtype.h"

namespace loom {
namespace {

TEST(DtypeTable, EveryGgmlTypeHasLlamaCppsBlockGeometry) {
  constexpr int64_t K = 256;  // QK_K
  // {id, elements per block, bytes per block} as gguf-py writes them.
  const std::vector<std::tuple<uint32_t, int64_t, int64_t>> ggml = {
      {0, 1, 4},                                // F32
      {1, 1, 2},                                // F16
      {2, 32, 2 + 16},                          // Q4_0
      {3, 32, 2 + 2 + 16},                      // Q4_1
      {6, 32, 2 + 4 + 16},                      // Q5_0
      {7, 32, 2 + 2 + 4 + 16},                  // Q5_1
      {8, 32, 2 + 32},                          // Q8_0
      {9, 32, 2 + 2 + 32},                      // Q8_1
      {10, K, 2 + 2 + K / 16 + K / 4},          // Q2_K
      {11, K, 2 + K / 4 + K / 8 + 12},          // Q3_K
      {12, K, 2 + 2 + K / 2 + 12},              // Q4_K
      {13, K, 2 + 2 + K / 2 + K / 8 + 12},      // Q5_K
      {14, K, 2 + K / 2 + K / 4 + K / 16},      // Q6_K
      {15, K, 4 + K + K / 8},                   // Q8_K
      {16, K, 2 + K / 4},                       // IQ2_XXS
      {17, K, 2 + K / 4 + K / 32},              // IQ2_XS
      {18, K, 2 + K / 4 + K / 8},               // IQ3_XXS
      {19, K, 2 + K / 8 + K / 16},              // IQ1_S
      {20, 32, 2 + 16},                         // IQ4_NL
      {21, K, 2 + K / 4 + K / 8 + K / 32 + 4},  // IQ3_S
      {22, K, 2 + K / 4 + K / 16},              // IQ2_S
      {23, K, 2 + 2 + K / 2 + K / 64},          // IQ4_XS
      {24, 1, 1},                               // I8
      {25, 1, 2},                               // I16
      {26, 1, 4},                               // I32
      {27, 1, 8},                               // I64
      {28, 1, 8},                               // F64
      {29, K, K / 8 + K / 16 + K / 32},         // IQ1_M
      {30, 1, 2},                               // BF16
      {34, K, 2 + 4 * 13},                      // TQ1_0
      {35, K, 2 + 64},                          // TQ2_0
      {39, 32, 1 + 16},                         // MXFP4
      {40, 64, 4 + 32},                         // NVFP4
      {41, 128, 2 + 16},                        // Q1_0
      {42, 64, 2 + 16},                         // Q2_0
  };
  std::set<uint32_t> known;
  for (const auto& [id, elements, bytes] : ggml) {
    known.insert(id);
    const auto info = dtype_info(id);
    ASSERT_TRUE(info) << "ggml type id " << id;
    EXPECT_EQ(static_cast<uint32_t>(info->dtype), id);
    EXPECT_EQ(info->block_size, elements) << info->name;
    EXPECT_EQ(info->block_bytes, bytes) << info->name;
    EXPECT_EQ(info->quantized, elements > 1) << info->name;
    EXPECT_EQ(parse_dtype(info->name), info->dtype) << info->name;  // names round-trip
  }
  for (uint32_t id = 0; id < 64; ++id)
    if (!known.count(id)) {
      EXPECT_FALSE(dtype_info(id)) << "ggml type id " << id;
    }
}

}  // namespace
}  // namespace loom
