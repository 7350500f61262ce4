#include "format/dtype.h"

#include <array>
#include <cctype>
#include <string>

#include "base/checked.h"
#include "base/status.h"

namespace loom {
namespace {

// Block layouts from ggml's public headers (ggml-common.h; gguf-py's GGML_QUANT_SIZES):
// QK_K = 256 super-blocks.
constexpr std::array<DtypeInfo, 35> kInfos = {{
    {Dtype::kF32, "f32", 1, 4, false},
    {Dtype::kF16, "f16", 1, 2, false},
    {Dtype::kQ4_0, "q4_0", 32, 18, true},
    {Dtype::kQ4_1, "q4_1", 32, 20, true},
    {Dtype::kQ5_0, "q5_0", 32, 22, true},
    {Dtype::kQ5_1, "q5_1", 32, 24, true},
    {Dtype::kQ8_0, "q8_0", 32, 34, true},
    {Dtype::kQ8_1, "q8_1", 32, 36, true},
    {Dtype::kQ2_K, "q2_k", 256, 84, true},
    {Dtype::kQ3_K, "q3_k", 256, 110, true},
    {Dtype::kQ4_K, "q4_k", 256, 144, true},
    {Dtype::kQ5_K, "q5_k", 256, 176, true},
    {Dtype::kQ6_K, "q6_k", 256, 210, true},
    {Dtype::kQ8_K, "q8_k", 256, 292, true},
    {Dtype::kIQ2_XXS, "iq2_xxs", 256, 66, true},
    {Dtype::kIQ2_XS, "iq2_xs", 256, 74, true},
    {Dtype::kIQ3_XXS, "iq3_xxs", 256, 98, true},
    {Dtype::kIQ1_S, "iq1_s", 256, 50, true},
    {Dtype::kIQ4_NL, "iq4_nl", 32, 18, true},
    {Dtype::kIQ3_S, "iq3_s", 256, 110, true},
    {Dtype::kIQ2_S, "iq2_s", 256, 82, true},
    {Dtype::kIQ4_XS, "iq4_xs", 256, 136, true},
    {Dtype::kI8, "i8", 1, 1, false},
    {Dtype::kI16, "i16", 1, 2, false},
    {Dtype::kI32, "i32", 1, 4, false},
    {Dtype::kI64, "i64", 1, 8, false},
    {Dtype::kF64, "f64", 1, 8, false},
    {Dtype::kIQ1_M, "iq1_m", 256, 56, true},
    {Dtype::kBF16, "bf16", 1, 2, false},
    {Dtype::kTQ1_0, "tq1_0", 256, 54, true},
    {Dtype::kTQ2_0, "tq2_0", 256, 66, true},
    {Dtype::kMXFP4, "mxfp4", 32, 17, true},
    {Dtype::kNVFP4, "nvfp4", 64, 36, true},
    {Dtype::kQ1_0, "q1_0", 128, 18, true},
    {Dtype::kQ2_0, "q2_0", 64, 18, true},
}};

}  // namespace

std::optional<DtypeInfo> dtype_info(uint32_t id) {
  for (const auto& i : kInfos)
    if (static_cast<uint32_t>(i.dtype) == id) return i;
  return std::nullopt;
}

const DtypeInfo& dtype_info(Dtype t) {
  for (const auto& i : kInfos)
    if (i.dtype == t) return i;
  LOOM_CHECK(false && "unknown Dtype");
  return kInfos[0];
}

std::string_view dtype_name(Dtype t) {
  return dtype_info(t).name;
}

std::optional<Dtype> parse_dtype(std::string_view name) {
  std::string lower;
  for (char c : name) lower += static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  for (const auto& i : kInfos)
    if (i.name == lower) return i.dtype;
  return std::nullopt;
}

std::optional<uint64_t> row_bytes(Dtype t, int64_t n) {
  const DtypeInfo& i = dtype_info(t);
  if (n < 0 || n % i.block_size != 0) return std::nullopt;
  // Checked: n comes from file headers, and a wrapped size would pass every range check.
  return checked_mul(static_cast<uint64_t>(n / i.block_size), static_cast<uint64_t>(i.block_bytes));
}

}  // namespace loom
