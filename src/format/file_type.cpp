#include "format/file_type.h"

#include <array>

namespace loom {

namespace {

// Index = llama_ftype (llama.h); "" where the value is unused.
constexpr std::array<std::string_view, 39> kNames = {
    "F32",    "F16",    "Q4_0",  "Q4_1",    "",       "",       "",         "Q8_0",
    "Q5_0",   "Q5_1",   "Q2_K",  "Q3_K_S",  "Q3_K_M", "Q3_K_L", "Q4_K_S",   "Q4_K_M",
    "Q5_K_S", "Q5_K_M", "Q6_K",  "IQ2_XXS", "IQ2_XS", "Q2_K_S", "IQ3_XS",   "IQ3_XXS",
    "IQ1_S",  "IQ4_NL", "IQ3_S", "IQ3_M",   "IQ2_S",  "IQ2_M",  "IQ4_XS",   "IQ1_M",
    "BF16",   "",       "",      "",        "TQ1_0",  "TQ2_0",  "MXFP4_MOE"};

}  // namespace

std::optional<std::string_view> file_type_name(int64_t file_type) {
  if (file_type < 0 || file_type >= static_cast<int64_t>(kNames.size()) ||
      kNames[file_type].empty())
    return std::nullopt;
  return kNames[file_type];
}

std::optional<int64_t> file_type_value(std::string_view name) {
  for (size_t i = 0; i < kNames.size(); ++i)
    if (!name.empty() && kNames[i] == name) return static_cast<int64_t>(i);
  return std::nullopt;
}

}  // namespace loom
